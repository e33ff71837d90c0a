"""Models declaring default-domain opsets 7 to 12 (older than the ECG's 13): the front-end
converts them with onnx.version_converter (frontends/onnx_versions.upgrade) and reads the
result. Each case is an operator whose form or meaning changed before opset 13 (attributes
that became inputs, Softmax's 2-D coercion, Upsample and Scatter renamed, Clip's bounds),
checked against ONNX Runtime running the *original* model; whole models exported from
PyTorch at opsets 11 and 12 go through generated code. What cannot be read is refused with
the opset named: opsets below 7, and a conversion that would change the graph's inputs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import reference

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

RNG = np.random.default_rng(7)


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _type(a):
    return {np.float32: T.FLOAT, np.int64: T.INT64, np.int32: T.INT32, np.bool_: T.BOOL}[a.dtype.type]


def _model(nodes, inputs, consts=None, opset=11, outputs=None):
    """Nodes over graph inputs {name: array} (the data fed) and initializers {name: array};
    the graph's outputs are `outputs` (default: the last node's), typed by onnx's inference."""
    nodes = nodes if isinstance(nodes, list) else [nodes]
    outs = outputs or list(nodes[-1].output)
    g = h.make_graph(nodes, "old", [h.make_tensor_value_info(k, _type(a), a.shape) for k, a in inputs.items()],
                     [onnx.ValueInfoProto(name=o) for o in outs],
                     [nh.from_array(a, k) for k, a in (consts or {}).items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 6
    return onnx.shape_inference.infer_shapes(m, strict_mode=True)  # the outputs typed, as exporters write them


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _load(model, **kw):
    with warnings.catch_warnings():  # outputs typed by inference (the checker says so)
        warnings.simplefilter("ignore", df.ModelWarning)
        return df.load(model, **kw)


def _compile(model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        return df.compile(model, **kw)


def _close(got, want, tol=1e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(g, w)


x34 = _f(2, 3, 4)
img = _f(1, 2, 3, 4)
N = h.make_node

# (id, opset, nodes, graph inputs, initializers)
CASES = [
    # Softmax and LogSoftmax before 13 flatten to 2-D at `axis`: over axes 1.. here, not axis 1.
    ("softmax_axis1", 11, N("Softmax", ["x"], ["y"], axis=1), {"x": x34}, None),
    ("softmax_default", 9, N("Softmax", ["x"], ["y"]), {"x": x34}, None),
    ("logsoftmax_axis0", 12, N("LogSoftmax", ["x"], ["y"], axis=0), {"x": x34}, None),
    # Clip's bounds: attributes (6), inputs from 11.
    ("clip_attrs", 9, N("Clip", ["x"], ["y"], min=-0.5, max=0.25), {"x": x34}, None),
    ("clip_inputs", 11, N("Clip", ["x", "lo", "hi"], ["y"]), {"x": x34},
     {"lo": np.array(-0.3, np.float32), "hi": np.array(0.6, np.float32)}),
    # Upsample (removed at 10: Resize): scales an attribute at 7, an input at 9.
    ("upsample7_nearest", 7, N("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0], mode="nearest"),
     {"x": img}, None),
    ("upsample9_linear", 9, N("Upsample", ["x", "s"], ["y"], mode="linear"), {"x": img},
     {"s": np.array([1, 1, 2, 2], np.float32)}),
    # ... mapping output pixel i to input i / scale (asymmetric), nearest by floor when
    # enlarging and by ceil when shrinking (ONNX Runtime); onnx's converter says half_pixel.
    ("upsample9_nearest_frac", 9, N("Upsample", ["x", "s"], ["y"]), {"x": _f(1, 1, 7, 9)},
     {"s": np.array([1, 1, 1.5, 2.5], np.float32)}),
    ("resize10_nearest", 10, N("Resize", ["x", "s"], ["y"], mode="nearest"), {"x": _f(1, 2, 7, 9)},
     {"s": np.array([1, 1, 1.5, 2.5], np.float32)}),
    ("resize10_nearest_shrink", 10, N("Resize", ["x", "s"], ["y"], mode="nearest"), {"x": _f(1, 2, 7, 9)},
     {"s": np.array([1, 1, 0.6, 0.45], np.float32)}),
    ("resize10_linear_shrink", 10, N("Resize", ["x", "s"], ["y"], mode="linear"), {"x": _f(1, 2, 7, 9)},
     {"s": np.array([1, 1, 0.6, 0.45], np.float32)}),
    # Attributes that became inputs at 13: Split's split, Squeeze/Unsqueeze's axes,
    # ReduceSum's axes; Pad's pads (11), Slice's bounds (10), TopK's k (10).
    ("split_attr", 11, N("Split", ["x"], ["a", "b"], axis=2, split=[1, 3]), {"x": x34}, None),
    ("squeeze_axes", 11, [N("Unsqueeze", ["x"], ["u"], axes=[0, 3]), N("Squeeze", ["u"], ["y"], axes=[0])],
     {"x": x34}, None),
    ("reducesum_axes", 11, N("ReduceSum", ["x"], ["y"], axes=[0, 2], keepdims=0), {"x": x34}, None),
    ("reducemean_axes", 12, N("ReduceMean", ["x"], ["y"], axes=[-1]), {"x": x34}, None),
    ("pad_attrs", 10, N("Pad", ["x"], ["y"], pads=[0, 1, 2, 0, 2, 1], mode="constant", value=1.5), {"x": x34}, None),
    ("pad_reflect", 9, N("Pad", ["x"], ["y"], pads=[0, 0, 1, 0, 0, 2], mode="reflect"), {"x": x34}, None),
    ("slice_attrs", 9, N("Slice", ["x"], ["y"], starts=[1, -3], ends=[3, 100], axes=[1, 2]), {"x": x34}, None),
    ("topk_attr", 9, N("TopK", ["x"], ["v", "i"], k=2, axis=-1), {"x": x34}, None),
    ("topk_input", 10, N("TopK", ["x", "k"], ["v", "i"], axis=1), {"x": x34}, {"k": np.array([2], np.int64)}),
    # Scatter (removed at 11: ScatterElements).
    ("scatter", 10, N("Scatter", ["x", "idx", "upd"], ["y"], axis=1), {"x": _f(3, 4)},
     {"idx": np.array([[1, 0], [3, 2], [0, 0]], np.int64), "upd": _f(3, 2)}),
    # BatchNormalization-7 (spatial), Dropout-10 (ratio, inference), Gemm-7 (C required).
    ("batchnorm7", 7, N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3), {"x": img},
     {"s": _f(2), "b": _f(2), "m": _f(2), "v": np.abs(_f(2)) + 0.5}),
    ("dropout10", 10, [N("Dropout", ["x"], ["d"], ratio=0.3), N("Relu", ["d"], ["y"])], {"x": x34}, None),
    ("gemm7", 7, N("Gemm", ["a", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0), {"a": _f(3, 5)},
     {"w": _f(4, 5), "c": _f(4)}),
    # Pools and convolutions of older forms.
    ("maxpool8_ceil", 10, N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
     {"x": _f(1, 2, 5, 5)}, None),
    ("avgpool_pads", 9, N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                          count_include_pad=1), {"x": _f(1, 2, 5, 5)}, None),
    ("conv_same", 9, N("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2]), {"x": _f(1, 3, 7, 7)},
     {"w": _f(4, 3, 3, 3)}),
    # Indexing, comparison and arithmetic with older schemas.
    ("gather_neg", 11, N("Gather", ["x", "i"], ["y"], axis=1), {"x": x34}, {"i": np.array([-1, 0], np.int64)}),
    ("argmax11", 11, N("ArgMax", ["x"], ["y"], axis=1, keepdims=0), {"x": x34}, None),
    ("cast_where", 9, [N("Greater", ["x", "z"], ["g"]), N("Where", ["g", "x", "z"], ["w"]),
                       N("Cast", ["g"], ["c"], to=T.INT32)], {"x": x34}, {"z": np.zeros(4, np.float32)}),
    ("expand_tile", 8, [N("Expand", ["x", "s"], ["e"]), N("Tile", ["e", "r"], ["y"])], {"x": _f(3, 1)},
     {"s": np.array([2, 3, 4], np.int64), "r": np.array([1, 2, 1], np.int64)}),
    ("flatten_matmul", 9, [N("Flatten", ["x"], ["f"], axis=1), N("MatMul", ["f", "w"], ["y"])], {"x": x34},
     {"w": _f(12, 5)}),
    ("depth_to_space", 11, N("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD"), {"x": _f(1, 8, 2, 3)}, None),
    ("cumsum_reverse", 11, N("CumSum", ["x", "a"], ["y"], reverse=1), {"x": x34}, {"a": np.array(2, np.int64)}),
]


@pytest.mark.parametrize("name,opset,nodes,inputs,consts", CASES, ids=[c[0] for c in CASES])
def test_old_form_against_ort(name, opset, nodes, inputs, consts):
    m = _model(nodes, inputs, consts, opset)
    want = _ort(m, inputs)
    g = _load(m)
    got = reference.run(g.graph, inputs)
    _close(got, want)


def test_every_case_opset_is_older_than_the_ecgs():
    from dnnfusion.frontends.onnx import MIN_OPSET, OLDEST_CONVERTED

    assert all(OLDEST_CONVERTED <= c[1] < MIN_OPSET for c in CASES)


def test_legacy_cnn_compiled():
    """One opset-9 network through generated code: Conv, BatchNormalization-7, Clip-6 (ReLU6),
    MaxPool, Upsample-9, Concat, Pad-2, Softmax-1 over the flattened channels, Flatten, Gemm."""
    consts = {"w1": _f(8, 3, 3, 3) * 0.3, "s": _f(8), "b": _f(8), "m": _f(8) * 0.1, "v": np.abs(_f(8)) + 0.5,
              "w2": _f(8, 8, 1, 1) * 0.3, "up": np.array([1, 1, 2, 2], np.float32), "fc": _f(10, 16 * 8 * 9) * 0.05,
              "fb": _f(10)}
    nodes = [N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             N("BatchNormalization", ["c1", "s", "b", "m", "v"], ["bn"]),
             N("Clip", ["bn"], ["r6"], min=0.0, max=6.0),
             N("MaxPool", ["r6"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             N("Conv", ["p", "w2"], ["c2"]),
             N("Upsample", ["c2", "up"], ["u"], mode="nearest"),
             N("Concat", ["u", "r6"], ["cat"], axis=1),
             N("Pad", ["cat"], ["pd"], pads=[0, 0, 0, 1, 0, 0, 0, 0], mode="constant"),
             N("MaxPool", ["pd"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1]),
             N("Flatten", ["p2"], ["fl"], axis=1),
             N("Gemm", ["fl", "fc", "fb"], ["logits"], transB=1),
             N("Softmax", ["p2"], ["sm"], axis=1)]
    x = {"x": _f(1, 3, 16, 16)}
    m = _model(nodes, x, consts, opset=9, outputs=["logits", "sm"])
    want = _ort(m, x)
    cm = _compile(m)
    _close(cm(x["x"]), want, tol=1e-4)
    assert cm.stats["kernels"] < len(nodes)


def _torch_export(module, x, opset):
    import io

    import torch

    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), buf, dynamo=False, opset_version=opset, input_names=["x"],
                          output_names=["y"], do_constant_folding=True)
    return onnx.load_from_string(buf.getvalue())


def test_torch_transformer_block_opset11():
    """An encoder block (attention written out, LayerNorm, GELU) exported from PyTorch at
    opset 11 (LayerNorm as ReduceMean with attribute axes, Softmax-11 over the last axis,
    Unsqueeze with attribute axes), compiled, against ONNX Runtime and PyTorch."""
    torch = pytest.importorskip("torch")

    class Block(torch.nn.Module):
        def __init__(self, d=32, heads=4):
            super().__init__()
            self.h, self.qkv, self.proj = heads, torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.n1, self.n2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.ff = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d))

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(self.n1(x)).reshape(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.h) ** 0.5, dim=-1) @ v
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
            return x + self.ff(self.n2(x))

    torch.manual_seed(0)
    block = Block().eval()
    x = torch.randn(2, 10, 32)
    m = _torch_export(block, x, 11)
    assert m.opset_import[0].version == 11
    want = _ort(m, {"x": x.numpy()})
    with torch.no_grad():
        eager = block(x).numpy()
    got = _compile(m)(x.numpy())
    got = got if isinstance(got, (list, tuple)) else [got]
    _close(got, want, tol=1e-4)
    np.testing.assert_allclose(np.asarray(got[0]), eager, rtol=1e-4, atol=1e-4)


def test_torch_cnn_opset12_with_file_and_cache(tmp_path, monkeypatch):
    """A small residual CNN exported at opset 12 and loaded by path twice: the second load
    comes from the import cache (which holds the converted graph) and reads the same."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path / "cache"))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(16)
            self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1)
            self.fc = torch.nn.Linear(16, 5)

        def forward(self, x):
            a = torch.relu(self.bn(self.c1(x)))
            a = torch.nn.functional.hardtanh(a + self.c2(a), 0.0, 6.0)
            a = torch.nn.functional.adaptive_avg_pool2d(a, 1).flatten(1)
            return torch.softmax(self.fc(a), dim=1)

    torch.manual_seed(1)
    net = Net().eval()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-0.2, 0.2)
        net.bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 3, 20, 20)
    m = _torch_export(net, x, 12)
    path = tmp_path / "net12.onnx"
    onnx.save(m, str(path))
    want = _ort(m, {"x": x.numpy()})
    first = _load(str(path))
    second = _load(str(path))
    assert str(first) == str(second)
    got = _compile(str(path))(x.numpy())
    _close(got if isinstance(got, (list, tuple)) else [got], want, tol=1e-5)


def test_resize10_mixed_scales_refused():
    m = _model(N("Resize", ["x", "s"], ["y"], mode="nearest", name="rz"), {"x": img},
               {"s": np.array([1, 1, 2, 0.5], np.float32)}, opset=10)
    with pytest.raises(df.UnsupportedOperatorError, match=r"node 'rz' \(Resize-10, mode nearest\) enlarges some axes"):
        _load(m)


def test_opset_below_7_refused():
    m = _model(N("Relu", ["x"], ["y"]), {"x": x34}, opset=6)
    with pytest.raises(df.UnsupportedOperatorError, match=r"opset 6; dnnfusion supports opsets 13\.\.\d+ and "
                                                          r"converts 7\.\.12 to 13"):
        _load(m)


def test_conversion_that_changes_the_inputs_refused():
    """Scan-8 scans a batch axis that onnx.version_converter drops from the graph's inputs."""
    body = h.make_graph([N("Add", ["s_in", "nx"], ["s_out"]), N("Identity", ["s_out"], ["o"])], "body",
                        [h.make_tensor_value_info("s_in", T.FLOAT, [2]), h.make_tensor_value_info("nx", T.FLOAT, [2])],
                        [h.make_tensor_value_info("s_out", T.FLOAT, [2]), h.make_tensor_value_info("o", T.FLOAT, [2])])
    node = N("Scan", ["", "init", "xs"], ["y", "z"], body=body, num_scan_inputs=1)
    g = h.make_graph([node], "scan8", [h.make_tensor_value_info("init", T.FLOAT, [1, 2]),
                                       h.make_tensor_value_info("xs", T.FLOAT, [1, 3, 2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 2]), h.make_tensor_value_info("z", T.FLOAT, [1, 3, 2])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 8)])
    with pytest.raises(df.UnsupportedOperatorError,
                       match=r"opset 8; onnx.version_converter's conversion to opset 13 changes the graph's "
                             r"interface \('init': float\[1,2\] becomes float\[2\]\)"):
        _load(m)


def test_unsupported_operator_at_old_opset_named():
    """An operator outside the ECG is refused by name before any conversion is tried."""
    m = _model(N("MaxRoiPool", ["x", "r"], ["y"], pooled_shape=[2, 2]), {"x": img},
               {"r": np.array([[0, 0, 0, 2, 2]], np.float32)}, opset=9)
    with pytest.raises(df.UnsupportedOperatorError, match=r"operator 'MaxRoiPool' \(domain '', opset 9\)"):
        _load(m)
