"""Shape rules of the nn, layout and indexing operators (cpp/ir/shape_nn.cc,
shape_tensor.cc, shape_index.cc): the inferred output shapes and dtypes equal what
onnxruntime actually produces when the same one-node ONNX model runs on real arrays (and,
for a few ops, numpy and torch); user mistakes raise ShapeError with a message that says
what was expected; symbolic dims pass through where the op does not need their value."""

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

ort.set_default_logger_severity(4)  # the runs that are meant to fail stay quiet

OPSET = 21
SYM = {"N": 2, "B": 3, "S": 5, "H": 8, "W": 6}  # values symbolic dims take when run
NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
      "i32": np.int32, "i64": np.int64, "u8": np.uint8, "bool": np.bool_}
DT = {np.dtype(v): k for k, v in NP.items()}
I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


class In:
    """A graph input (not a constant). `shape` may hold symbols from SYM; `data` fixes the
    values used when the model runs (indices must be in range, for instance)."""

    def __init__(self, shape, dtype="f32", data=None):
        self.shape, self.dtype, self.data = tuple(shape), dtype, data

    def concrete(self):
        return tuple(SYM.get(d, d) for d in self.shape)

    def array(self, rng):
        if self.data is not None:
            return np.asarray(self.data, NP[self.dtype]).reshape(self.concrete())
        t = NP[self.dtype]
        if np.issubdtype(t, np.floating):
            return rng.standard_normal(self.concrete()).astype(t)
        if t == np.bool_:
            return rng.random(self.concrete()) > 0.5
        return rng.integers(0, 3, self.concrete()).astype(t)


def i64(*v):
    return np.array(v, np.int64)


def f32(*v):
    return np.array(v, np.float32)


def infer(op, inputs, attrs=None, n_out=1):
    """dnnfusion's inferred (shape, dtype) per output."""
    g = _core.Graph("t")
    vals = []
    for i, a in enumerate(inputs):
        if a is None:
            vals.append(None)
        elif isinstance(a, In):
            vals.append(g.add_input(f"in{i}", a.dtype, list(a.shape)))
        else:
            vals.append(g.add_constant(f"c{i}", np.asarray(a, order="C")))
    outs = g.add_node(op, vals, dict(attrs or {}), n_out)
    return [(tuple(o.shape), o.dtype) for o in outs]


def run(op, inputs, attrs=None, n_out=1, opset=OPSET, seed=0):
    """(shape, dtype) per output of the one-node ONNX model run by onnxruntime."""
    rng = np.random.default_rng(seed)
    names, inits, graph_inputs, feeds = [], [], [], {}
    for i, a in enumerate(inputs):
        if a is None:
            names.append("")
        elif isinstance(a, In):
            arr = a.array(rng)
            names.append(f"in{i}")
            feeds[f"in{i}"] = arr
            graph_inputs.append(helper.make_tensor_value_info(
                f"in{i}", helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
        else:
            names.append(f"c{i}")
            inits.append(numpy_helper.from_array(np.asarray(a), f"c{i}"))
    onnx_attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v
                  for k, v in (attrs or {}).items()}
    while names and not names[-1]:  # trailing absent inputs are left out
        names.pop()
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **onnx_attrs)
    graph = helper.make_graph([node], "t", graph_inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return [(tuple(r.shape), DT[r.dtype]) for r in sess.run(None, feeds)]


def concrete(result):
    return [(tuple(SYM.get(d, d) for d in s), t) for s, t in result]


def check(op, inputs, attrs=None, n_out=1, opset=OPSET):
    """Inferred shapes (symbols replaced by their run values) equal onnxruntime's."""
    got = infer(op, inputs, attrs, n_out)
    assert concrete(got) == run(op, inputs, attrs, n_out, opset), (op, attrs, got)
    return got


def onnx_infer(op, inputs, attrs=None, n_out=1):
    """(shape, dtype) per output from onnx.shape_inference (strict), all inputs typed."""
    names, inits, graph_inputs = [], [], []
    for i, a in enumerate(inputs):
        if a is None:
            names.append("")
        elif isinstance(a, In):
            names.append(f"in{i}")
            graph_inputs.append(helper.make_tensor_value_info(
                f"in{i}", helper.np_dtype_to_tensor_dtype(np.dtype(NP[a.dtype])), a.concrete()))
        else:
            names.append(f"c{i}")
            inits.append(numpy_helper.from_array(np.asarray(a), f"c{i}"))
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph([node], "t", graph_inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    result = []
    for o in inferred.graph.output:
        t = o.type.tensor_type
        result.append((tuple(d.dim_value for d in t.shape.dim),
                       DT[np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type))]))
    return result


def fails(op, inputs, attrs, match, n_out=1):
    with pytest.raises(df.ShapeError, match=match):
        infer(op, inputs, attrs, n_out)


W = np.zeros  # weights: only the shape matters


# ---------------------------------------------------------------- Conv / ConvTranspose

CONV = [
    ((1, 3, 10, 12), (4, 3, 3, 3), {}),
    ((2, 3, 10, 12), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 11, 9), (4, 3, 3, 2), {"strides": [3, 2], "pads": [0, 1, 2, 0], "dilations": [2, 3]}),
    ((1, 4, 9, 9), (6, 2, 3, 3), {"group": 2}),
    ((1, 4, 9, 9), (4, 1, 3, 3), {"group": 4, "strides": [2, 2]}),  # depthwise
    ((1, 3, 10, 7), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 10, 7), (4, 3, 4, 4), {"auto_pad": "SAME_LOWER", "strides": [3, 2]}),
    ((1, 3, 10, 7), (4, 3, 3, 2), {"auto_pad": "VALID", "strides": [2, 3]}),
    ((1, 3, 10, 7), (4, 3, 3, 3), {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2]}),
    ((1, 3, 17), (5, 3, 4), {"strides": [3], "pads": [1, 2]}),  # 1-D
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 3), {"strides": [1, 2, 2], "pads": [0, 1, 1, 1, 0, 1]}),  # 3-D
]


@pytest.mark.parametrize("x,w,attrs", CONV)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_matches_onnxruntime(x, w, attrs, bias):
    check("Conv", [In(x), W(w, np.float32), W(w[0], np.float32) if bias else None], attrs)


def test_conv_matches_torch():
    torch = pytest.importorskip("torch")
    x = torch.zeros(2, 6, 15, 13)
    for stride, pad, dil, groups in [(1, 0, 1, 1), (2, 3, 1, 2), (3, 2, 2, 3), (2, 1, 3, 6)]:
        w = torch.zeros(12, 6 // groups, 3, 5)
        y = torch.nn.functional.conv2d(x, w, None, stride, pad, dil, groups)
        got = infer("Conv", [In(tuple(x.shape)), w.numpy(), None],
                    {"strides": [stride] * 2, "pads": [pad] * 4, "dilations": [dil] * 2, "group": groups})
        assert got == [(tuple(y.shape), "f32")]


CONV_T = [
    ((1, 3, 5, 6), (3, 4, 3, 3), {}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 3], "output_padding": [1, 2]}),
    ((1, 3, 5, 6), (3, 4, 2, 3), {"strides": [2, 2], "dilations": [2, 1], "pads": [0, 1, 1, 0]}),
    ((1, 4, 5, 6), (4, 2, 3, 3), {"group": 2, "strides": [2, 2]}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 2], "output_shape": [10, 12]}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 5, 6), (3, 4, 4, 4), {"strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 2], "auto_pad": "VALID"}),
    ((1, 3, 7), (3, 2, 4), {"strides": [3], "pads": [1, 2], "output_padding": [2]}),
    ((1, 2, 3, 4, 5), (2, 3, 2, 2, 2), {"strides": [2, 1, 2]}),
]


@pytest.mark.parametrize("x,w,attrs", CONV_T)
def test_conv_transpose_matches_onnxruntime(x, w, attrs):
    check("ConvTranspose", [In(x), W(w, np.float32), W(w[1] * attrs.get("group", 1), np.float32)], attrs)


def test_conv_transpose_matches_torch():
    torch = pytest.importorskip("torch")
    x = torch.zeros(1, 4, 7, 5)
    w = torch.zeros(4, 3, 3, 2)
    y = torch.nn.functional.conv_transpose2d(x, w, None, (2, 3), (1, 0), (1, 2), 2, (2, 1))
    got = infer("ConvTranspose", [In((1, 4, 7, 5)), w.numpy()],
                {"strides": [2, 3], "pads": [1, 0, 1, 0], "output_padding": [1, 2], "group": 2,
                 "dilations": [2, 1]})
    assert got == [(tuple(y.shape), "f32")]


def test_conv_errors():
    x = In((1, 3, 8, 8))
    fails("Conv", [x, W((4, 2, 3, 3), np.float32)], {}, r"input channels 3 must equal weight dim 1 \(2\) x group \(1\)")
    fails("Conv", [In((1, 4, 8, 8)), W((6, 2, 3, 3), np.float32)], {"group": 4}, "not divisible by group 4")
    fails("Conv", [In((1, 3, 8)), W((4, 3, 3, 3), np.float32)], {}, "weight must have the input's rank 3")
    fails("Conv", [In((3, 8)), W((4, 3, 3), np.float32)], {}, r"rank >= 3 \(N, C, spatial...\), got f32\[3,8\]")
    fails("Conv", [x, W((4, 3, 9, 3), np.float32)], {}, r"kernel extent 9 .* larger than the padded input 8")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"dilations": [4, 1]}, r"kernel extent 9 \(kernel 3, dilation 4\)")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"strides": [1]}, r"'strides' must have 2 values, got \[1\]")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"strides": [0, 1]}, r"'strides' values must be in \[1, 2\^31\], got \[0,1\]")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"pads": [1, 1, 1]}, "'pads' must have 4 values")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"kernel_shape": [2, 2]}, "does not match the weight")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"auto_pad": "SAME"}, "auto_pad must be NOTSET")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"auto_pad": "VALID", "pads": [1, 1, 1, 1]},
          "cannot be combined with auto_pad=VALID")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32), W((5,), np.float32)], {}, r"bias must have shape \[4\], got f32\[5\]")
    fails("Conv", [In((1, 3, 8, 8), "i32"), W((4, 3, 3, 3), np.int32)], {}, "X must be a float tensor")
    fails("Conv", [x, W((4, 3, 3, 3), np.float64)], {}, "W must have the element type of input 0")
    fails("ConvTranspose", [x, W((4, 3, 3, 3), np.float32)], {}, "input channels 3 must equal weight dim 0")
    fails("ConvTranspose", [x, W((3, 3, 3, 3), np.float32)], {"output_shape": [16]}, "output_shape must have 2 values")
    fails("ConvTranspose", [x, W((3, 3, 3, 3), np.float32)], {"pads": [9, 9, 9, 9]}, "exceed the transposed output")


def test_conv_symbolic_dims():
    # batch passes through; size-preserving windows keep symbolic spatial dims
    assert infer("Conv", [In(("N", 3, "H", "W")), W((4, 3, 3, 3), np.float32)],
                 {"pads": [1, 1, 1, 1]}) == [(("N", 4, "H", "W"), "f32")]
    check("Conv", [In(("N", 3, "H", "W")), W((4, 3, 3, 3), np.float32)], {"auto_pad": "SAME_UPPER"})
    check("Conv", [In(("N", 3, 8, 8)), W((4, 3, 3, 3), np.float32)], {"strides": [2, 2]})
    fails("Conv", [In(("N", 3, "H", 8)), W((4, 3, 3, 3), np.float32)], {"strides": [2, 2]},
          r"spatial axis 0 has the symbolic size 'H' .* input_shapes=")
    assert infer("ConvTranspose", [In(("N", 3, 4, 4)), W((3, 2, 3, 3), np.float32)],
                 {"strides": [2, 2]})[0][0][0] == "N"


# ---------------------------------------------------------------- Gemm / MatMul

@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c", [None, (5,), (1, 5), (4, 1), (4, 5), ()])
def test_gemm_matches_onnxruntime(ta, tb, c):
    a = (3, 4) if ta else (4, 3)
    b = (5, 3) if tb else (3, 5)
    check("Gemm", [In(a), In(b), None if c is None else In(c)], {"transA": ta, "transB": tb, "alpha": 0.5})


MATMUL = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
          ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 1)), ((1, 2, 3), (6, 3, 4)), ((4,), (2, 5, 4, 3)),
          ((2, 1, 4, 3), (3,)), ((0, 2, 3), (3, 0))]


@pytest.mark.parametrize("a,b", MATMUL)
def test_matmul_matches_numpy_and_onnxruntime(a, b):
    got = check("MatMul", [In(a), In(b)])
    assert got == [(np.matmul(np.zeros(a, np.float32), np.zeros(b, np.float32)).shape, "f32")]


def test_gemm_matmul_errors_and_symbols():
    fails("Gemm", [In((4, 3)), In((4, 5))], {}, r"inner dimensions differ: A is \[4,3\], B is \[4,5\]")
    fails("Gemm", [In((4, 3)), In((3, 5)), In((3, 5))], {}, r"C f32\[3,5\] does not broadcast to \[M,N\] = \[4,5\]")
    fails("Gemm", [In((4, 3, 1)), In((3, 5))], {}, "A and B must be matrices")
    fails("Gemm", [In((4, 3)), In((3, 5))], {"transA": 2}, "'transA' must be 0 or 1")
    fails("MatMul", [In((2, 3)), In((4, 5))], {}, r"inner dimensions differ: f32\[2,3\] @ f32\[4,5\]")
    fails("MatMul", [In((2, 2, 3)), In((3, 3, 4))], {}, r"batch dimensions \[2\] and \[3\] do not broadcast")
    fails("MatMul", [In(()), In((3,))], {}, "rank >= 1")
    fails("MatMul", [In((2, 3)), In((3, 4), "f64")], {}, "element type")
    check("Gemm", [In(("N", 3)), In((3, 5)), W((5,), np.float32)])
    assert infer("MatMul", [In(("B", "S", 8)), In((8, 16))]) == [(("B", "S", 16), "f32")]
    check("MatMul", [In(("B", 1, "S", 8)), In((4, 8, "S"))])


# ---------------------------------------------------------------- normalization

@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 4, 5)])
def test_instance_norm_matches_onnxruntime(shape):
    c = shape[1]
    check("InstanceNormalization", [In(shape), In((c,)), In((c,))], {"epsilon": 1e-3})


@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
@pytest.mark.parametrize("n_out", [1, 3])
def test_layer_norm_matches_onnxruntime(axis, n_out):
    shape = (2, 3, 4)
    norm = shape[axis:]
    check("LayerNormalization", [In(shape), In(norm), In(norm)], {"axis": axis}, n_out)


def test_layer_norm_stats_shape_dtype_and_errors():
    got = infer("LayerNormalization", [In(("B", "S", 8), "f64"), In((8,), "f64")], {}, 3)
    assert got == [(("B", "S", 8), "f64"), (("B", "S", 1), "f32"), (("B", "S", 1), "f32")]
    got = infer("LayerNormalization", [In((2, 3, 8), "f16"), In((3, 8), "f16")], {"axis": 1, "stash_type": 11}, 3)
    assert got[1] == ((2, 1, 1), "f64")
    check("LayerNormalization", [In((2, 3, 8)), In((1, 8))], {"axis": 1}, 3)  # Scale broadcasts
    fails("LayerNormalization", [In((2, 8)), In((4,))], {}, r"Scale f32\[4\] must broadcast to the normalized shape \[8\]")
    fails("LayerNormalization", [In((2, 8)), In((8,))], {"axis": 2}, "axis 2 is out of range for rank 2")
    fails("LayerNormalization", [In((2, 8))], {}, r"Scale \(input 1\) is required")
    fails("InstanceNormalization", [In((2, 3, 5)), In((4,)), In((3,))], {}, r"scale must have shape \[3\], got f32\[4\]")
    fails("InstanceNormalization", [In((2, 3)), In((3,)), In((3,))], {}, "rank >= 3")
    check("InstanceNormalization", [In(("N", 3, "H", "W")), In((3,)), In((3,))])


# ---------------------------------------------------------------- pooling

POOL = [
    ((1, 2, 9, 9), {"kernel_shape": [3, 3]}),
    ((1, 2, 9, 10), {"kernel_shape": [3, 2], "strides": [2, 2]}),
    ((1, 2, 9, 10), {"kernel_shape": [3, 3], "strides": [2, 3], "pads": [1, 1, 1, 0]}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 4, 7), {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ((1, 2, 11, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 11, 8), {"kernel_shape": [4, 2], "strides": [3, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 11, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "auto_pad": "VALID"}),
    ((1, 2, 12, 12), {"kernel_shape": [2, 3], "dilations": [2, 2], "strides": [2, 1]}),
    ((1, 2, 12, 12), {"kernel_shape": [2, 2], "dilations": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((2, 3, 17), {"kernel_shape": [4], "strides": [3], "pads": [1, 2]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 3], "ceil_mode": 1}),
]


@pytest.mark.parametrize("x,attrs", POOL)
def test_max_pool_matches_onnxruntime(x, attrs):
    check("MaxPool", [In(x)], attrs)
    if len(x) == 4:  # Indices (i64) output
        check("MaxPool", [In(x)], {**attrs, "storage_order": 1}, 2)


@pytest.mark.parametrize("x,attrs", POOL)
def test_average_pool_matches_onnxruntime(x, attrs):
    check("AveragePool", [In(x)], {**attrs, "count_include_pad": 1})


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("n,k,s,p", [(4, 2, 3, 1), (7, 3, 2, 1), (10, 3, 3, 0), (5, 2, 2, 1), (6, 3, 4, 1)])
def test_max_pool_matches_torch(ceil_mode, n, k, s, p):
    torch = pytest.importorskip("torch")
    y = torch.nn.functional.max_pool1d(torch.zeros(1, 2, n), k, s, p, ceil_mode=ceil_mode)
    got = infer("MaxPool", [In((1, 2, n))], {"kernel_shape": [k], "strides": [s], "pads": [p, p],
                                             "ceil_mode": int(ceil_mode)})
    assert got == [(tuple(y.shape), "f32")]


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("x", [(2, 3, 5), (1, 3, 4, 5), (1, 2, 3, 4, 5), ("N", 3, "H", "W")])
def test_global_pool_matches_onnxruntime(op, x):
    got = check(op, [In(x)])
    assert got[0][0][:2] == x[:2]


def test_pool_errors_and_symbols():
    fails("MaxPool", [In((1, 2, 8, 8))], {}, "attribute 'kernel_shape' is required")
    fails("MaxPool", [In((1, 2, 8, 8))], {"kernel_shape": [3]}, "'kernel_shape' must have 2 values")
    fails("MaxPool", [In((1, 2, 2, 8))], {"kernel_shape": [3, 3]}, r"kernel extent 3 .* padded input 2")
    fails("MaxPool", [In((8, 8))], {"kernel_shape": [3, 3]}, "rank >= 3")
    fails("MaxPool", [In((1, 2, 8, 8))], {"kernel_shape": [3, 3], "storage_order": 2}, "'storage_order' must be 0 or 1")
    fails("AveragePool", [In((1, 2, 8, 8), "i32")], {"kernel_shape": [3, 3]}, "X must be a float tensor")
    fails("GlobalAveragePool", [In((3, 8))], {}, "rank >= 3")
    assert infer("MaxPool", [In(("N", 2, 8, 8))], {"kernel_shape": [2, 2], "strides": [2, 2]}, 2) == [
        (("N", 2, 4, 4), "f32"), (("N", 2, 4, 4), "i64")]
    check("MaxPool", [In(("N", 2, "H", "W"))], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
    check("AveragePool", [In(("N", 2, 9, "W"))], {"kernel_shape": [3, 1], "strides": [2, 1]})


# ---------------------------------------------------------------- reductions, Softmax, TopK

REDUCE_OPS = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"]
REDUCE = [(None, {}), (i64(1), {}), (i64(-1, 0), {"keepdims": 0}), (i64(2), {"keepdims": 0}),
          (None, {"keepdims": 0}), (i64(), {}), (i64(), {"noop_with_empty_axes": 1}),
          (None, {"noop_with_empty_axes": 1, "keepdims": 0}), (i64(0, 1, 2), {"keepdims": 1})]


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes,attrs", REDUCE)
def test_reductions_match_onnxruntime(op, axes, attrs):
    check(op, [In((2, 3, 4)), axes], attrs)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": 1}, {"axis": -1, "keepdims": 0}, {"axis": 0, "keepdims": 0},
                                   {"select_last_index": 1}])
def test_argmax_matches_onnxruntime(op, attrs):
    got = check(op, [In((2, 3, 4))], attrs)
    assert got[0][1] == "i64"


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -2])
def test_softmax_matches_onnxruntime(op, axis):
    check(op, [In((2, 3, 4))], {} if axis is None else {"axis": axis})


@pytest.mark.parametrize("axis,exclusive,reverse", [(0, 0, 0), (-1, 1, 0), (1, 1, 1)])
def test_cumsum_matches_onnxruntime(axis, exclusive, reverse):
    check("CumSum", [In((2, 3, 4)), np.array(axis, np.int64)], {"exclusive": exclusive, "reverse": reverse})
    check("CumSum", [In((2, 3, 4)), In((), "i32", data=[0])])  # a computed axis is fine too


@pytest.mark.parametrize("k,attrs", [(2, {}), (1, {"axis": 0}), (4, {"axis": 1, "largest": 0}),
                                     (0, {}), (5, {"axis": -1, "sorted": 0})])
def test_topk_matches_onnxruntime(k, attrs):
    got = check("TopK", [In((2, 4, 5)), i64(k)], attrs, 2)
    assert [t for _, t in got] == ["f32", "i64"]


def test_reduction_softmax_topk_errors_and_symbols():
    fails("ReduceSum", [In((2, 3)), i64(2)], {}, "axes value 2 is out of range for rank 2")
    check("ReduceSum", [In((2, 3)), i64(1, -1)], {"keepdims": 0})  # a repeated axis counts once
    fails("Softmax", [In(())], {"axis": 0}, "rank >= 1")
    fails("ReduceSum", [In((2, 3)), In((1,), "i64")], {}, r"axes \(input 1\) must be a constant")
    fails("ReduceMean", [In((2, 3), "bool")], {}, "cannot reduce a bool tensor")
    fails("ArgMax", [In((2, 3))], {"axis": 3}, "axis 3 is out of range for rank 2")
    fails("Softmax", [In((2, 3))], {"axis": -3}, "axis -3 is out of range for rank 2")
    fails("Softmax", [In((2, 3), "i32")], {}, "must be a float tensor")
    fails("CumSum", [In((2, 3)), np.array(2, np.int64)], {}, "axis 2 is out of range")
    fails("CumSum", [In((2, 3)), np.array(1.0, np.float32)], {}, "axis must be an i32 or i64 tensor")
    fails("TopK", [In((2, 3)), i64(4)], {}, r"K = 4 exceeds the size 3 of axis 1 of f32\[2,3\]", 2)
    fails("TopK", [In((2, 3)), In((1,), "i64")], {}, r"K \(input 1\) must be a constant", 2)
    fails("TopK", [In((2, 3)), i64(1, 2)], {}, "K must be a constant holding a single value", 2)
    assert infer("ReduceMean", [In(("B", "S", 8)), i64(-1)]) == [(("B", "S", 1), "f32")]
    assert infer("ReduceSum", [In(("B", "S", 8)), i64(1)], {"keepdims": 0}) == [(("B", 8), "f32")]
    assert infer("ReduceMax", [In(("B", "S"))], {"keepdims": 0}) == [((), "f32")]
    assert infer("ArgMax", [In(("B", "S", 8))], {"axis": 2}) == [(("B", "S", 1), "i64")]
    assert infer("Softmax", [In(("B", "S", "S"))]) == [(("B", "S", "S"), "f32")]
    assert infer("CumSum", [In(("B", "S")), np.array(-1, np.int64)]) == [(("B", "S"), "f32")]
    assert infer("TopK", [In(("B", 10)), i64(3)], {}, 2) == [(("B", 3), "f32"), (("B", 3), "i64")]
    assert infer("TopK", [In((4, "S")), i64(3)], {}, 2)[1] == ((4, 3), "i64")


# ---------------------------------------------------------------- NonMaxSuppression, RoiAlign

def test_non_max_suppression():
    boxes = In((1, 6, 4), data=[[0, 0, 1, 1], [0, .1, 1, 1.1], [0, -.1, 1, .9], [0, 10, 1, 11],
                                [0, 10.1, 1, 11.1], [0, 100, 1, 101]])
    scores = In((1, 1, 6), data=[.9, .75, .6, .95, .5, .3])
    inputs = [boxes, scores, i64(3), f32(0.5), f32(0.0)]
    got = infer("NonMaxSuppression", inputs)
    assert got == [(("nms_selected", 3), "i64")]  # the count depends on the data
    (actual,) = run("NonMaxSuppression", inputs)
    assert actual[0][1] == 3 and actual[1] == "i64"
    assert infer("NonMaxSuppression", [In(("N", 6, 4)), In(("N", 2, 6))]) == [((0, 3), "i64")]
    fails("NonMaxSuppression", [In((1, 6, 5)), In((1, 1, 6))], {}, r"boxes must have shape \[num_batches, spatial_dimension, 4\]")
    fails("NonMaxSuppression", [In((1, 6, 4)), In((1, 1, 7))], {}, "disagree on num_batches or spatial_dimension")
    fails("NonMaxSuppression", [In((1, 6, 4)), In((1, 1, 6)), i64(3), f32(0.5, 0.2)], {}, "iou_threshold must be a scalar")


@pytest.mark.parametrize("attrs", [{}, {"output_height": 3, "output_width": 2, "sampling_ratio": 2},
                                   {"mode": "max", "coordinate_transformation_mode": "output_half_pixel"}])
def test_roi_align_matches_onnxruntime(attrs):
    rois = In((3, 4), data=[[0, 0, 4, 4], [1, 1, 3, 5], [2, 0, 6, 3]])
    idx = In((3,), "i64", data=[0, 1, 0])
    check("RoiAlign", [In((2, 5, 8, 8)), rois, idx], attrs)
    assert infer("RoiAlign", [In(("N", 5, "H", "W")), In(("R", 4)), In(("R",), "i64")], attrs)[0][0][:2] == ("R", 5)
    fails("RoiAlign", [In((2, 5, 8, 8)), In((3, 5)), idx], attrs, r"rois must have shape \[num_rois, 4\]")
    fails("RoiAlign", [In((2, 5, 8, 8)), rois, In((4,), "i64")], attrs, r"batch_indices must have shape \[3\]")
    fails("RoiAlign", [In((2, 5, 8)), rois, idx], attrs, r"X must have shape \[N, C, H, W\]")


# ---------------------------------------------------------------- Reshape, Flatten, Squeeze, Unsqueeze

RESHAPE = [((2, 3, 4), i64(6, 4), {}), ((2, 3, 4), i64(-1), {}), ((2, 3, 4), i64(0, -1), {}),
           ((2, 3, 4), i64(4, 0, -1), {}), ((2, 3, 4), i64(0, 0, 2, 2), {}), ((2, 3, 4), i64(1, -1, 1, 2), {}),
           ((2, 0, 4), i64(0, 0, 4), {}), ((2, 0, 4), i64(0, -1), {}), ((2, 0, 4), i64(0, 4, 0), {"allowzero": 1}),
           ((0, 3), i64(3, 0), {"allowzero": 1}), ((), i64(1, 1), {}), ((1, 1), i64(), {})]


@pytest.mark.parametrize("x,shape,attrs", RESHAPE)
def test_reshape_matches_onnxruntime(x, shape, attrs):
    check("Reshape", [In(x), shape], attrs)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten_matches_onnxruntime(axis):
    check("Flatten", [In((2, 3, 4))], {"axis": axis})


@pytest.mark.parametrize("x,axes", [((1, 3, 1, 2), None), ((1, 3, 1, 2), i64(0)), ((1, 3, 1, 2), i64(-2, 0)),
                                    ((1,), None), ((3, 1), i64(1))])
def test_squeeze_matches_onnxruntime(x, axes):
    check("Squeeze", [In(x), axes])


@pytest.mark.parametrize("x,axes", [((3, 4), i64(0)), ((3, 4), i64(-1)), ((3, 4), i64(0, 3)),
                                    ((3, 4), i64(1, -1, 0)), ((), i64(0, 1))])
def test_unsqueeze_matches_onnxruntime(x, axes):
    check("Unsqueeze", [In(x), axes])


def test_reshape_family_errors_and_symbols():
    fails("Reshape", [In((2, 3, 4)), i64(5, -1)], {}, r"cannot reshape f32\[2,3,4\] to \[5,-1\]: 24 elements do not divide into 5")
    fails("Reshape", [In((2, 3, 4)), i64(5, 5)], {}, "24 elements vs 25")
    fails("Reshape", [In((2, 3, 4)), i64(-1, -1)], {}, "more than one -1")
    fails("Reshape", [In((2, 3, 4)), i64(0, -2)], {}, "invalid entry -2")
    fails("Reshape", [In((6,)), i64(0, 0)], {}, "copies input dim 1 .* has rank 1")
    fails("Reshape", [In((0, 3)), i64(0, -1)], {"allowzero": 1}, "both 0 and -1")
    fails("Reshape", [In((2, 3)), In((2,), "i64")], {}, r"shape \(input 1\) must be a constant")
    fails("Reshape", [In((2, 3)), np.array([[6]], np.int64)], {}, "shape must be a 1-D tensor")
    fails("Reshape", [In(("B", "S", 4)), i64(-1, 4)], {}, "product involving symbolic dims")
    fails("Reshape", [In(("B", 4)), i64(2, 4)], {}, "symbolic dims are not carried over")
    assert infer("Reshape", [In(("B", "S", 768)), i64(0, 0, 12, 64)]) == [(("B", "S", 12, 64), "f32")]
    assert infer("Reshape", [In(("B", 3, 4)), i64(-1, 12)]) == [(("B", 12), "f32")]
    check("Reshape", [In(("B", 3, 4)), i64(0, -1)])
    check("Reshape", [In(("B", 2, 6)), i64(-1, 3, 4)])
    fails("Flatten", [In((2, 3))], {"axis": 3}, r"axis 3 is out of range \[-2, 2\]")
    assert infer("Flatten", [In(("N", 512, 1, 1))]) == [(("N", 512), "f32")]
    fails("Flatten", [In(("N", "S", 4))], {"axis": 2}, r"merging dims \[N,S\] needs a static size")
    fails("Squeeze", [In((1, 3)), i64(1)], {}, r"cannot squeeze axis 1 of f32\[1,3\]: its size is not 1")
    fails("Squeeze", [In(("N", 1))], {}, "cannot tell whether the symbolic dim 'N'")
    fails("Squeeze", [In((1, 3)), i64(2)], {}, "axes value 2 is out of range")
    assert infer("Squeeze", [In(("N", 1, "S")), i64(1)]) == [(("N", "S"), "f32")]
    fails("Unsqueeze", [In((3, 4)), i64(0, 0)], {}, r"axes \[0,0\] name axis 0 twice")
    fails("Unsqueeze", [In((3, 4)), i64(3)], {}, "axes value 3 is out of range for rank 3")
    assert infer("Unsqueeze", [In(("B", "S")), i64(1, -1)]) == [(("B", 1, "S", 1), "f32")]


# ---------------------------------------------------------------- Concat, Split

@pytest.mark.parametrize("shapes,axis", [([(2, 3), (2, 5)], 1), ([(2, 3), (4, 3), (1, 3)], 0),
                                          ([(2, 3, 4)], -1), ([(2, 0, 4), (2, 3, 4)], -2)])
def test_concat_matches_onnxruntime(shapes, axis):
    check("Concat", [In(s) for s in shapes], {"axis": axis})


SPLIT = [((6, 4), None, {}, 3), ((6, 4), i64(1, 2, 3), {}, 3), ((6, 4), i64(4, 0), {"axis": -1}, 2),
         ((7, 4), None, {"num_outputs": 3}, 3), ((6, 5), None, {"num_outputs": 2, "axis": 1}, 2),
         ((5, 2), None, {"num_outputs": 3}, 3), ((6, 4), None, {"num_outputs": 1}, 1),
         ((10,), None, {"num_outputs": 4}, 4)]


@pytest.mark.parametrize("x,split,attrs,n", SPLIT)
def test_split_matches_onnxruntime(x, split, attrs, n):
    # opset 18+ needs split or num_outputs; the equal split into the outputs is opset 13's
    check("Split", [In(x), split], attrs, n, opset=13 if split is None and not attrs else OPSET)


def test_concat_split_errors_and_symbols():
    fails("Concat", [In((2, 3)), In((3, 3))], {"axis": 1}, r"input 1 f32\[3,3\] differs from f32\[2,3\] on axis 0")
    fails("Concat", [In((2, 3)), In((2, 3, 1))], {"axis": 0}, "inputs must have one rank")
    fails("Concat", [In((2, 3)), In((2, 3), "i32")], {"axis": 0}, "inputs must have one element type")
    fails("Concat", [In((2, 3))], {}, "attribute 'axis' is required")
    fails("Concat", [In((2, 3))], {"axis": 2}, "axis 2 is out of range for rank 2")
    fails("Concat", [In(("N", 3)), In(("N", 3))], {"axis": 0}, "sum involving symbolic dims")
    assert infer("Concat", [In(("B", "S", 4)), In(("B", "S", 8))], {"axis": -1}) == [(("B", "S", 12), "f32")]
    assert infer("Concat", [In(("B", 4)), In((3, 4))], {"axis": 1}) == [((3, 8), "f32")]
    fails("Split", [In((6, 4)), i64(1, 2)], {}, r"split \[1,2\] sums to 3 but axis 0 of f32\[6,4\] has size 6", 2)
    fails("Split", [In((6, 4)), i64(1, 2)], {}, "has 2 entries but the node has 3 outputs", 3)
    fails("Split", [In((6, 4)), i64(3, 3)], {"num_outputs": 2}, "not both", 2)
    fails("Split", [In((6, 4))], {"num_outputs": 3}, "num_outputs is 3 but the node has 2 outputs", 2)
    fails("Split", [In((5, 4))], {"num_outputs": 4}, r"size 5 cannot be split into 4 chunks of 2 \(the last would be negative\)", 4)
    fails("Split", [In((7,))], {}, "size 7 is not evenly splittable into 3 outputs", 3)
    fails("Split", [In(("N", 4))], {}, "cannot split the symbolic axis 'N' into 2 parts", 2)
    assert infer("Split", [In(("B", 6))], {"axis": 1}, 2) == [(("B", 3), "f32")] * 2
    assert infer("Split", [In(("B", 6)), i64(2, 4)], {"axis": 1}, 2) == [(("B", 2), "f32"), (("B", 4), "f32")]


# ---------------------------------------------------------------- Slice, Pad

SLICE = [
    (i64(1), i64(3), None, None), (i64(0, 1), i64(-1, 100), None, None),
    (i64(1), i64(I64_MAX), i64(-1), None), (i64(-1), i64(I64_MIN), i64(1), i64(-1)),
    (i64(5, 0), i64(0, 3), i64(0, 2), i64(-2, 2)), (i64(-100), i64(100), i64(2), i64(3)),
    (i64(3), i64(1), i64(0), i64(1)), (i64(10), i64(0), i64(0), i64(-1)), (i64(-2), i64(-1), None, None),
    (np.array([1], np.int32), np.array([4], np.int32), np.array([1], np.int32), np.array([2], np.int32)),
    (i64(0), i64(5), i64(1), i64(I64_MAX)), (i64(4), i64(0), i64(2), i64(I64_MIN)),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICE)
def test_slice_matches_onnxruntime_and_numpy(starts, ends, axes, steps):
    x = np.zeros((6, 5, 7), np.float32)
    got = check("Slice", [In(x.shape), starts, ends, axes, steps])
    idx = [slice(None)] * 3
    ax = axes if axes is not None else range(len(starts))
    st = steps if steps is not None else [1] * len(starts)
    for a, s, e, k in zip(ax, starts, ends, st):
        idx[a] = slice(int(s), int(e), int(max(min(k, 2**62), -2**62)))
    assert got[0][0] == x[tuple(idx)].shape


PAD = [(i64(1, 2, 3, 4), None, None, {}), (i64(0, 1, 0, 2), f32(1.5), None, {"mode": "constant"}),
       (i64(1, 0, 2, 0), None, None, {"mode": "reflect"}), (i64(2, 2, 2, 2), None, None, {"mode": "edge"}),
       (i64(3, 1), None, i64(1), {"mode": "wrap"}), (i64(-1, 1, 0, -2), None, None, {}),
       (i64(2, 1), None, i64(-2), {})]


@pytest.mark.parametrize("pads,value,axes,attrs", PAD)
def test_pad_matches_onnxruntime(pads, value, axes, attrs):
    check("Pad", [In((4, 5)), pads, value, axes], attrs)


def test_pad_matches_numpy():
    x = np.zeros((2, 3, 4), np.float32)
    got = infer("Pad", [In(x.shape), i64(0, 1, 2, 3, 0, 1), None, i64(0, 1, 2)])
    assert got[0][0] == np.pad(x, [(0, 3), (1, 0), (2, 1)]).shape


def test_slice_pad_errors_and_symbols():
    x = In((6, 5))
    fails("Slice", [x, i64(0), i64(3), i64(0), i64(0)], {}, r"steps \[0\] contain a 0")
    fails("Slice", [x, i64(0, 1), i64(3), None, None], {}, "must have one length")
    fails("Slice", [x, i64(0, 0), i64(3, 3), i64(1, -1), None], {}, "name axis 1 twice")
    fails("Slice", [x, i64(0), i64(3), i64(2), None], {}, "axes value 2 is out of range for rank 2")
    fails("Slice", [x, In((1,), "i64"), i64(3)], {}, r"starts \(input 1\) must be a constant")
    assert infer("Slice", [In(("B", "S", 8)), i64(2), i64(6), i64(-1)]) == [(("B", "S", 4), "f32")]
    assert infer("Slice", [In(("B", "S")), i64(0), i64(I64_MAX), i64(1)]) == [(("B", "S"), "f32")]
    assert infer("Slice", [In(("B", "S")), i64(-1), i64(I64_MIN), i64(1), i64(-1)]) == [(("B", "S"), "f32")]
    fails("Slice", [In(("B", "S")), i64(1), i64(I64_MAX), i64(1)], {}, "symbolic size 'S' and the slice")
    fails("Pad", [x, i64(1, 1, 1)], {}, r"pads \[1,1,1\] must have 2 x 2 values")
    fails("Pad", [x, i64(-4, 0, -4, 0)], {}, "remove more than the size 6 of axis 0")
    fails("Pad", [x, i64(1, 1, 1, 1)], {"mode": "mirror"}, "mode must be constant, reflect, edge or wrap")
    fails("Pad", [x, i64(1, 1, 1, 1), np.array(0, np.int32)], {}, "constant_value .* must have the element type")
    fails("Pad", [x, i64(1, 1), None, i64(1, 1)], {}, "name axis 1 twice")
    assert infer("Pad", [In(("B", 5)), i64(0, 1, 0, 2)]) == [(("B", 8), "f32")]
    fails("Pad", [In(("B", 5)), i64(1, 0, 0, 0)], {}, "symbolic size 'B' and pads change it")


# ---------------------------------------------------------------- Shape, Size, Transpose

@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 10},
                                   {"start": 3, "end": 1}, {"start": -10}])
def test_shape_matches_onnxruntime(attrs):
    got = check("Shape", [In((2, 3, 4))], attrs)
    assert got[0][1] == "i64"
    assert infer("Shape", [In(("B", "S", 4))], attrs) == got  # only the rank matters


def test_size_matches_onnxruntime():
    assert check("Size", [In((2, 3, 4))]) == [((), "i64")]
    assert infer("Size", [In(("B", "S"), "bool")]) == [((), "i64")]


@pytest.mark.parametrize("x,perm", [((2, 3, 4), None), ((2, 3, 4), [0, 2, 1]), ((2, 3, 4, 5), [3, 0, 2, 1]),
                                    ((7,), [0]), ((), None)])
def test_transpose_matches_onnxruntime(x, perm):
    check("Transpose", [In(x)], {} if perm is None else {"perm": perm})


def test_transpose_errors_and_symbols():
    fails("Transpose", [In((2, 3, 4))], {"perm": [0, 1]}, r"perm \[0,1\] is not a permutation of 0..2")
    fails("Transpose", [In((2, 3, 4))], {"perm": [0, 1, 1]}, "is not a permutation")
    fails("Transpose", [In((2, 3, 4))], {"perm": [0, 1, 3]}, "is not a permutation")
    assert infer("Transpose", [In(("B", "S", 12, 64))], {"perm": [0, 2, 1, 3]}) == [(("B", 12, "S", 64), "f32")]


# ---------------------------------------------------------------- DepthToSpace, SpaceToDepth

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("b", [1, 2, 3])
def test_depth_space_match_onnxruntime(mode, b):
    check("DepthToSpace", [In((1, 36, 2, 3))], {"blocksize": b, "mode": mode})
    check("SpaceToDepth", [In((1, 2, 6, 12))], {"blocksize": b})


def test_depth_space_errors_and_symbols():
    fails("DepthToSpace", [In((1, 8, 2, 3))], {"blocksize": 3}, r"channels 8 of f32\[1,8,2,3\] are not divisible by blocksize\^2 = 9")
    fails("DepthToSpace", [In((1, 8, 2, 3))], {}, "attribute 'blocksize' is required")
    fails("DepthToSpace", [In((1, 8, 2, 3))], {"blocksize": 2, "mode": "XYZ"}, "mode must be DCR or CRD")
    fails("SpaceToDepth", [In((1, 2, 6, 5))], {"blocksize": 2}, "width 5 .* is not divisible by blocksize 2")
    fails("SpaceToDepth", [In((2, 6, 5))], {"blocksize": 2}, r"input must have shape \[N, C, H, W\]")
    assert infer("DepthToSpace", [In(("N", 8, 2, 3))], {"blocksize": 2}) == [(("N", 2, 4, 6), "f32")]
    fails("DepthToSpace", [In(("N", 8, "H", 3))], {"blocksize": 2}, "height is the symbolic size 'H'")
    assert infer("SpaceToDepth", [In(("N", 3, 4, 4))], {"blocksize": 2}) == [(("N", 12, 2, 2), "f32")]


# ---------------------------------------------------------------- Expand, Tile

@pytest.mark.parametrize("x,shape", [((3, 1), i64(2, 3, 4)), ((3, 1), i64(1, 1)), ((1, 4), i64(3, 1)),
                                     ((2, 1, 3), i64(5, 1)), ((), i64(2, 2)), ((3,), i64()), ((1, 3), i64(0, 1))])
def test_expand_matches_onnxruntime(x, shape):
    check("Expand", [In(x), shape])


@pytest.mark.parametrize("x,reps", [((2, 3), i64(1, 1)), ((2, 3), i64(2, 3)), ((2, 3, 1), i64(1, 0, 4))])
def test_tile_matches_onnxruntime_and_numpy(x, reps):
    got = check("Tile", [In(x), reps])
    assert got[0][0] == np.tile(np.zeros(x), reps).shape


def test_expand_tile_errors_and_symbols():
    fails("Expand", [In((3, 2)), i64(4, 3)], {}, r"input f32\[3,2\] does not broadcast with shape \[4,3\]")
    fails("Expand", [In((3, 2)), i64(-1, 2)], {}, "negative entry")
    fails("Expand", [In((3, 2)), In((2,), "i64")], {}, r"shape \(input 1\) must be a constant")
    assert infer("Expand", [In(("B", 1, 4)), i64(1, 5, 1)]) == [(("B", 5, 4), "f32")]
    check("Expand", [In(("B", 1, 4)), i64(3, 1, 5, 1)])
    fails("Tile", [In((3, 2)), i64(2)], {}, r"repeats \[2\] must have one entry per axis of f32\[3,2\]")
    fails("Tile", [In((3, 2)), i64(2, -1)], {}, "negative entry")
    assert infer("Tile", [In(("B", 2)), i64(1, 3)]) == [(("B", 6), "f32")]
    fails("Tile", [In(("B", 2)), i64(2, 3)], {}, "'B' and is repeated 2 times")


# ---------------------------------------------------------------- Resize

RESIZE = [
    (f32(1, 1, 2, 2), None, {}), (f32(1, 1, 0.5, 1.5), None, {"mode": "linear"}),
    (f32(1, 1, 0.7, 1.3), None, {}), (f32(1, 1, 0.333, 2.6), None, {"mode": "cubic"}),
    (f32(2, 3), None, {"axes": [2, 3]}), (f32(0.6, 1.9), None, {"axes": [-1, 2]}),
    (None, i64(1, 3, 7, 20), {}), (None, i64(7, 20), {"axes": [2, 3]}),
    (None, i64(7, 20), {"axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}),
    (None, i64(7, 20), {"axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller"}),
    (None, i64(1, 3, 5, 9), {"keep_aspect_ratio_policy": "not_smaller"}),
]


@pytest.mark.parametrize("scales,sizes,attrs", RESIZE)
def test_resize_matches_onnxruntime(scales, sizes, attrs):
    check("Resize", [In((1, 3, 10, 9)), None, scales, sizes], attrs)


def test_resize_matches_onnx_shape_inference_for_old_style_empty_scales():
    # opset-11 exports pass an empty scales tensor next to sizes
    check("Resize", [In((1, 3, 4, 4)), f32(), f32(), i64(1, 3, 8, 8)])


def test_resize_errors_and_symbols():
    x = In((1, 3, 10, 9))
    fails("Resize", [x], {}, "give exactly one of scales .* got neither")
    fails("Resize", [x, None, f32(1, 1, 2, 2), i64(1, 3, 20, 18)], {}, "got both")
    fails("Resize", [x, None, f32(1, 2)], {}, "scales has 2 values but 4 axes are resized")
    fails("Resize", [x, None, f32(1, 1, 0, 2)], {}, "scales must be positive and finite")
    fails("Resize", [x, None, f32(2, 2)], {"axes": [2, 2]}, "name axis 2 twice")
    fails("Resize", [x, None, None, i64(5, 5)], {"axes": [2, 3], "keep_aspect_ratio_policy": "fit"},
          "keep_aspect_ratio_policy must be stretch")
    fails("Resize", [x, None, f32(1, 1, 2, 2)], {"keep_aspect_ratio_policy": "not_larger"}, "cannot be combined")
    fails("Resize", [x, None, In((4,))], {}, r"scales \(input 2\) must be a constant")
    fails("Resize", [x, None, None, i64(1, 3, 5, 5)], {"mode": "bilinear"}, "mode must be nearest, linear or cubic")
    assert infer("Resize", [In(("N", 3, 10, 9)), None, f32(1, 1, 2, 2)]) == [(("N", 3, 20, 18), "f32")]
    assert infer("Resize", [In(("N", 3, "H", "W")), None, None, i64(32, 32)], {"axes": [2, 3]}) == [
        (("N", 3, 32, 32), "f32")]
    check("Resize", [In(("N", 3, 10, 9)), None, None, i64(5, 4)], {"axes": [2, 3]})
    fails("Resize", [In(("N", 3, "H", 9)), None, f32(1, 1, 2, 2)], {}, "axis 2 has the symbolic size 'H' and is resized")


# ---------------------------------------------------------------- Gather, GatherElements

GATHER = [((5, 4), In((), "i64", data=[2]), 0), ((5, 4), In((3,), "i64", data=[0, -1, 3]), 1),
          ((5, 4, 3), In((2, 2), "i32", data=[0, 1, 2, -2]), 1), ((5, 4, 3), In((2, 3), "i64", data=[0] * 6), -1),
          ((5,), In((0,), "i64", data=[]), 0), ((5, 4), i64(4, 0), 0)]


@pytest.mark.parametrize("x,idx,axis", GATHER)
def test_gather_matches_onnxruntime_and_numpy(x, idx, axis):
    got = check("Gather", [In(x), idx], {"axis": axis})
    ind = idx if isinstance(idx, np.ndarray) else idx.array(None)
    assert got[0][0] == np.take(np.zeros(x), ind, axis=axis).shape


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_matches_onnxruntime(axis):
    check("GatherElements", [In((4, 5)), In((2, 3), "i64", data=[0, 1, 1, 0, 1, 0])], {"axis": axis})


def test_gather_errors_and_symbols():
    fails("Gather", [In((5, 4)), i64(5)], {}, "index 5 is out of range for axis 0 of size 5")
    fails("Gather", [In((5, 4)), i64(-5)], {"axis": 1}, "index -5 is out of range for axis 1 of size 4")
    fails("Gather", [In((5, 4)), In((2,), "f32")], {}, "indices must be i32 or i64")
    fails("Gather", [In((5, 4)), In((2,), "i64")], {"axis": 2}, "axis 2 is out of range for rank 2")
    fails("Gather", [In(()), In((2,), "i64")], {}, "data must have rank >= 1")
    assert infer("Gather", [In((30000, 768)), In(("B", "S"), "i64")]) == [(("B", "S", 768), "f32")]
    assert infer("Gather", [In(("B", "S", 768)), i64(0)], {"axis": 1}) == [(("B", 1, 768), "f32")]
    assert infer("Gather", [In(("B", "S", 768)), np.array(0, np.int64)], {"axis": 1}) == [(("B", 768), "f32")]
    fails("GatherElements", [In((4, 5)), In((4,), "i64")], {}, "indices must have the rank of data")
    fails("GatherElements", [In((4, 5)), In((2, 6), "i64")], {}, "larger than data .* on axis 1")
    assert infer("GatherElements", [In(("B", 5)), In(("B", 2), "i64")], {"axis": 1}) == [(("B", 2), "f32")]


# ---------------------------------------------------------------- ConstantOfShape, Range

@pytest.mark.parametrize("shape", [i64(2, 3), i64(), i64(0, 4)])
@pytest.mark.parametrize("value", [None, np.array([7], np.int32), np.array([1.5], np.float64),
                                   np.array([True]), np.array([3], np.int64)])
def test_constant_of_shape_matches_onnxruntime(shape, value):
    check("ConstantOfShape", [shape], {} if value is None else {"value": value})


RANGE_INT = [(0, 10, 3), (10, 0, -3), (5, 5, 1), (5, 0, 1), (-7, 8, 4), (3, -100, -7)]
RANGE_FLOAT = [(0.0, 1.0, 0.3), (1.0, -1.0, -0.25), (0.5, 10.0, 0.1), (2.5, 2.5, 1.0)]


@pytest.mark.parametrize("start,limit,delta,dtype",
                         [(*r, t) for r in RANGE_INT for t in ["i16", "i32", "i64", "f32", "f64"]] +
                         [(*r, t) for r in RANGE_FLOAT for t in ["f32", "f64"]])
def test_range_matches_onnxruntime_and_numpy(start, limit, delta, dtype):
    args = [np.array(v, NP[dtype]) for v in (start, limit, delta)]
    if dtype == "i16":
        got = infer("Range", args)  # onnxruntime has no i16 Range kernel
    else:
        got = check("Range", args)
    assert got == [(np.arange(*args).shape, dtype)]


def test_range_counts_in_the_operand_type_like_numpy():
    # onnxruntime computes these counts in double, ONNX shape inference half in float;
    # numpy.arange, the ONNX reference and dnnfusion's reference kernel use the operand type
    for v in [(-1.2, -6.0, -0.2), (0.2, -0.3, -0.25), (0.1, 0.7, 0.2), (0.0, 1.0, 0.1), (-3.3, 7.1, 0.7)]:
        for dtype in ["f16", "f32", "f64"]:
            args = [np.array(x, NP[dtype]) for x in v]
            count = max(int(np.ceil((args[1] - args[0]) / args[2])), 0)  # numpy in the dtype
            assert infer("Range", args) == [((count,), dtype)], (v, dtype)


def test_constant_of_shape_range_errors():
    fails("ConstantOfShape", [i64(2, -1)], {}, r"shape \[2,-1\] has a negative entry")
    fails("ConstantOfShape", [In((2,), "i64")], {}, r"shape \(input 0\) must be a constant")
    fails("ConstantOfShape", [i64(2)], {"value": np.array([1, 2], np.float32)}, r"must hold one element, got f32\[2\]")
    fails("Range", [np.array(0, np.int64), np.array(5, np.int64), np.array(0, np.int64)], {}, "delta must not be 0")
    fails("Range", [np.array(0, np.int64), np.array(5, np.int32), np.array(1, np.int64)], {}, "limit must have the element type of start")
    fails("Range", [np.array(0, np.int64), In((), "i64"), np.array(1, np.int64)], {}, r"limit \(input 1\) must be a constant")
    fails("Range", [i64(0, 1), np.array(5, np.int64), np.array(1, np.int64)], {}, "start must be a scalar")
    fails("Range", [np.array(0, np.float32), np.array(np.inf, np.float32), np.array(1, np.float32)], {},
          "no finite element count")
    fails("Range", [np.array(0, np.uint8), np.array(5, np.uint8), np.array(1, np.uint8)], {}, "start must be f16, f32, f64, i16, i32 or i64, got u8")


def test_every_rule_fails_cleanly_on_missing_required_inputs():
    """Absent (None) required inputs give ShapeError, never a crash."""
    cases = {"TopK": (2, 2), "Reshape": (2, 1), "Unsqueeze": (2, 1), "Slice": (3, 1), "Pad": (2, 1),
             "Expand": (2, 1), "Tile": (2, 1), "Gather": (2, 1), "GatherElements": (2, 1),
             "Conv": (2, 1), "MatMul": (2, 1), "CumSum": (2, 1), "RoiAlign": (3, 1), "Range": (3, 1)}
    for op, (n_in, n_out) in cases.items():
        for missing in range(1, n_in):
            inputs = [In((2, 3, 4, 4))] + [i64(1)] * (n_in - 1)
            inputs[missing] = None
            with pytest.raises(df.ShapeError):
                infer(op, inputs, {}, n_out)


# ---------------------------------------------------------------- where onnxruntime is not the spec

def test_rules_follow_onnx_where_onnxruntime_deviates():
    """Cases where onnxruntime's kernels disagree with the ONNX spec, ONNX shape inference
    and the ONNX reference implementation; the rules follow the latter."""
    # SAME pooling with dilation: output ceil(in / stride) (onnxruntime shrinks it)
    for attrs in [{"kernel_shape": [3], "dilations": [2], "auto_pad": "SAME_LOWER"},
                  {"kernel_shape": [2], "strides": [2], "dilations": [3], "auto_pad": "SAME_UPPER"}]:
        for op in ["MaxPool", "AveragePool"]:
            assert infer(op, [In((1, 2, 7))], attrs) == onnx_infer(op, [In((1, 2, 7))], attrs) == [((1, 2, -(-7 // attrs.get("strides", [1])[0])), "f32")]
    # Slice ending at INT64_MAX with a negative step is empty from the clamped start (numpy
    # semantics); onnxruntime reads INT_MAX as "to the beginning" there
    x = np.zeros((7,), np.float32)
    args = [In((7,)), i64(5), i64(I64_MAX), i64(0), i64(-2)]
    assert infer("Slice", args) == onnx_infer("Slice", args) == [(x[5:I64_MAX:-2].shape, "f32")]
    # Split into num_outputs: the last chunk may be empty (onnxruntime rejects it)
    for n, d in [(4, 6), (3, 2)]:
        got = infer("Split", [In((d, 3))], {"num_outputs": n}, n)
        assert got == onnx_infer("Split", [In((d, 3))], {"num_outputs": n}, n)
        assert sum(s[0] for s, _ in got) == d


def test_stricter_checks_than_onnx_shape_inference():
    fails("MaxPool", [In((1, 2, 8))], {"kernel_shape": [2], "pads": [2, 0]}, r"pads \[2,0\] must be smaller than kernel_shape \[2\]")
    fails("ConvTranspose", [In((1, 1, 5)), W((1, 1, 3), np.float32)], {"output_padding": [1]},
          r"output_padding \[1\] must be smaller than the stride or the dilation")
    check("ConvTranspose", [In((1, 1, 5)), W((1, 1, 3), np.float32)], {"output_padding": [1], "strides": [2]})
    fails("ConvTranspose", [In((1, 1, 5)), W((1, 1, 3), np.float32)], {"strides": [2], "output_shape": [13]},
          r"output_shape \[13\] is not reachable on spatial axis 0: the transposed output is at most 12")
    check("ConvTranspose", [In((1, 1, 5)), W((1, 1, 3), np.float32)], {"strides": [2], "output_shape": [12]})
    check("ConvTranspose", [In((1, 1, 5)), W((1, 1, 3), np.float32)], {"strides": [2], "output_shape": [7]})
    fails("Pad", [In((3, 4)), i64(3, 0, 0, 0)], {"mode": "reflect"}, "reflect pads must be smaller than the size")
    check("Pad", [In((3, 4)), i64(3, 0, 0, 0)], {"mode": "edge"})
    check("Pad", [In((3, 4)), i64(2, 3, 0, 0)], {"mode": "reflect"})
    fails("Pad", [In((3, 0)), i64(0, 1, 0, 0)], {"mode": "edge"}, "mode edge cannot pad axis 1 of size 0")
    check("Squeeze", [In((1, 3, 1)), i64(0, -3)])  # a repeated axis is allowed, as onnxruntime does


# ---------------------------------------------------------------- randomized agreement with onnxruntime

def _random_case(rng):
    """One random node: (op, inputs, attrs, n_out)."""
    ri = lambda a, b: int(rng.integers(a, b + 1))  # noqa: E731
    kind = ri(0, 7)
    if kind <= 1:  # Conv / ConvTranspose
        n, g = ri(1, 3), [1, 1, 2, 3][ri(0, 3)]
        cin, cout = g * ri(1, 2), g * ri(1, 2)
        k = [ri(1, 4) for _ in range(n)]
        attrs = {"strides": [ri(1, 3) for _ in range(n)], "group": g}
        auto_pad = ["NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"][ri(0, 4)]
        if auto_pad == "NOTSET":
            attrs["pads"] = [ri(0, 2) for _ in range(2 * n)]
        else:
            attrs["auto_pad"] = auto_pad
        if auto_pad[:4] != "SAME":  # onnxruntime's Conv has no dilated SAME
            attrs["dilations"] = [ri(1, 2) for _ in range(n)]
        x = In([1, cin] + [ri(1, 9) for _ in range(n)])
        if kind == 0:
            return "Conv", [x, W([cout, cin // g] + k, np.float32)], attrs, 1
        attrs["output_padding"] = [ri(0, 1) if s > 1 else 0 for s in attrs["strides"]]
        return "ConvTranspose", [x, W([cin, cout // g] + k, np.float32)], attrs, 1
    if kind == 2:  # pools
        n = ri(1, 3)
        attrs = {"kernel_shape": [ri(1, 4) for _ in range(n)], "strides": [ri(1, 3) for _ in range(n)],
                 "ceil_mode": ri(0, 1)}
        attrs["pads"] = [ri(0, k - 1) for k in attrs["kernel_shape"] * 2]
        if ri(0, 1):
            attrs["dilations"] = [ri(1, 2) for _ in range(n)]
        return ["MaxPool", "AveragePool"][ri(0, 1)], [In([1, 2] + [ri(1, 9) for _ in range(n)])], attrs, 1
    if kind == 3:  # Slice
        r = ri(1, 3)
        shape = [ri(0, 7) for _ in range(r)]
        axes = list(rng.permutation(r)[:ri(1, r)])
        big = [I64_MAX, I64_MIN, 2**31 - 1, -2**31]
        pick = lambda: int(big[ri(0, 3)]) if ri(0, 3) == 0 else ri(-9, 9)  # noqa: E731
        steps = [[1, 2, 3, -1, -2, -3, 10][ri(0, 6)] for _ in axes]
        ends = [pick() for _ in axes]
        ends = [e if k > 0 or e < 2**31 - 1 else -2**31 for e, k in zip(ends, steps)]
        return "Slice", [In(shape), i64(*[pick() for _ in axes]), i64(*ends), i64(*axes), i64(*steps)], {}, 1
    if kind == 4:  # Reshape
        shape = [ri(0, 4) for _ in range(ri(0, 4))]
        spec = [[-1, 0, 1, 2, 3, 4, 6][ri(0, 6)] for _ in range(ri(0, 4))]
        return "Reshape", [In(shape), i64(*spec)], {"allowzero": ri(0, 1)}, 1
    if kind == 5:  # Pad
        r = ri(1, 3)
        return "Pad", [In([ri(1, 5) for _ in range(r)]), i64(*[ri(-2, 3) for _ in range(2 * r)])], \
            {"mode": ["constant", "reflect", "edge"][ri(0, 2)]}, 1
    if kind == 6:  # Resize
        r = ri(1, 4)
        shape = [ri(1, 12) for _ in range(r)]
        if ri(0, 1):
            return "Resize", [In(shape), None, np.array([[0.5, 0.7, 1.3, 2.0, 1.0, 0.333][ri(0, 5)] for _ in shape], np.float32)], {}, 1
        policy = ["stretch", "not_larger", "not_smaller"][ri(0, 2)]
        return "Resize", [In(shape), None, None, i64(*[ri(1, 20) for _ in shape])], {"keep_aspect_ratio_policy": policy}, 1
    a = [[1, 2, 3][ri(0, 2)] for _ in range(ri(1, 4))]  # MatMul
    b = [[1, 2, 3][ri(0, 2)] for _ in range(ri(1, 4))]
    return "MatMul", [In(a), In(b)], {}, 1


def test_random_nodes_agree_with_onnxruntime():
    """Whenever onnxruntime runs a random node, dnnfusion infers its output shapes, except
    for the documented stricter checks (a kernel larger than the padded input)."""
    rng = np.random.default_rng(1234)
    both = 0
    for _ in range(600):
        op, inputs, attrs, n_out = _random_case(rng)
        try:
            actual = run(op, inputs, attrs, n_out)
        except Exception:  # onnxruntime rejects it: not compared (it has extra limits)
            continue
        try:
            got = infer(op, inputs, attrs, n_out)
        except df.ShapeError as e:
            assert "kernel extent" in str(e), (op, attrs, str(e), actual)
            continue
        assert got == actual, (op, [getattr(i, "shape", i) for i in inputs], attrs)
        both += 1
        # The same node with one input dim symbolic: the rule either cannot decide without
        # that dim's value (ShapeError) or infers the same shapes with the symbol in them.
        x = inputs[0]
        if not x.shape:
            continue
        axis = int(rng.integers(0, len(x.shape)))
        SYM["Z"] = x.shape[axis]
        sym = [In(x.shape[:axis] + ("Z",) + x.shape[axis + 1:])] + list(inputs[1:])
        try:
            got_sym = infer(op, sym, attrs, n_out)
        except df.ShapeError as e:  # the batch dim of a convolution never matters
            assert not (axis == 0 and op in ("Conv", "ConvTranspose", "MaxPool", "AveragePool")), str(e)
            continue
        assert concrete(got_sym) == actual, (op, sym[0].shape, attrs, got_sym)
    assert both > 300
