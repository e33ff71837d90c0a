"""Anchors beyond float32 in generated code (issue 17 part 3, the element types ONNX Runtime's
CPU kernels have): MatMul on float64 and the 32/64-bit integers, summed in the type itself
(integers wrapping around as NumPy's and ONNX Runtime's do), MaxPool on float64, int8 and
uint8 with its Indices output, and Softmax / LogSoftmax on float64. Checked against ONNX Runtime and NumPy on every x86 dialect
(compiled only where this CPU lacks it) and NEON under qemu; the OpenCL target and the other
types refuse them and say what to do."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from codegen_runner import compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, params  # noqa: E402
from test_codegen_neon import _check_ran_neon, _run_neon, driver_obj  # noqa: E402,F401
from test_codegen_neon import _generate as _neon_generate  # noqa: E402

ONNX_TYPE = {np.float64: T.DOUBLE, np.int32: T.INT32, np.int64: T.INT64, np.uint32: T.UINT32, np.uint64: T.UINT64,
             np.int8: T.INT8, np.uint8: T.UINT8}
TYPES = [np.float64, np.int32, np.int64, np.uint32, np.uint64]
# a's shape, b's shape, b a constant, what reads the product in the same block, b given
# transposed (MatMul reads it through a Transpose view, by strides).
CASES = {
    "plain": ((3, 4), (4, 5), False, None, False),
    "batched_constant_b": ((2, 3, 7, 9), (9, 6), True, None, False),
    "vector_a_then_add": ((9,), (2, 9, 4), False, "Add", False),
    "broadcast_batches_then_mul": ((5, 1, 4, 3), (2, 3, 2), False, "Mul", False),
    "transposed_b": ((2, 6, 33), (2, 33, 17), False, None, True),
}


def _values(dtype, shape, rng, full_range=False):
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        lo, hi = (info.min, info.max) if full_range else (0 if info.min == 0 else -7, 7)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _model(dtype, case):
    ash, bsh, b_const, then, transposed = CASES[case]
    tp = ONNX_TYPE[dtype]
    rng = np.random.default_rng(1)
    nodes, inits = [], []
    ins = [h.make_tensor_value_info("a", tp, ash)]
    b_name = "b"
    if transposed:
        b_stored = bsh[:-2] + (bsh[-1], bsh[-2])
        ins.append(h.make_tensor_value_info("bt", tp, b_stored))
        nodes.append(h.make_node("Transpose", ["bt"], ["b"], perm=list(range(len(bsh) - 2)) + [len(bsh) - 1, len(bsh) - 2]))
    elif b_const:
        inits.append(nh.from_array(_values(dtype, bsh, rng), "b"))
    else:
        ins.append(h.make_tensor_value_info("b", tp, bsh))
    nodes.append(h.make_node("MatMul", ["a", b_name], ["t" if then else "y"]))
    if then:
        nodes.append(h.make_node(then, ["t", "t"], ["y"]))
    out_shape = np.matmul(np.zeros(ash), np.zeros(bsh)).shape
    g = h.make_graph(nodes, case, ins, [h.make_tensor_value_info("y", tp, out_shape)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _merge(models: dict):
    """The graphs of `models` side by side in one model (names prefixed with their key), so
    that one compile checks them all."""
    from onnx import compose

    parts = [compose.add_prefix(m, f"{k}_").graph for k, m in models.items()]
    g = h.make_graph([n for p in parts for n in p.node], "merged", [i for p in parts for i in p.input],
                     [o for p in parts for o in p.output], [t for p in parts for t in p.initializer])
    return h.make_model(g, opset_imports=list(next(iter(models.values())).opset_import))


def _feeds(m, seed=0, full_range=False):
    rng = np.random.default_rng(seed)
    out = {}
    for vi in m.graph.input:
        dtype = {v: k for k, v in ONNX_TYPE.items()}[vi.type.tensor_type.elem_type]
        out[vi.name] = _values(dtype, tuple(d.dim_value for d in vi.type.tensor_type.shape.dim), rng, full_range)
    return out


def _check_all(c, m, feeds):
    """The compiled model `c` of `m` against ONNX Runtime, output by output."""
    got = c(**feeds)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _check(a, b, b.dtype.type)


def _check(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if np.issubdtype(dtype, np.integer):
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: d.__name__)
def test_matmul_matches_onnxruntime(dtype):
    m = _merge({case: _model(dtype, case) for case in sorted(CASES)})
    c = df.compile(m.SerializeToString(), threads=2)
    _check_all(c, m, _feeds(m))
    stages = [s for k in c.kernels for s in k["stages"]]
    name = np.dtype(dtype).kind + str(8 * np.dtype(dtype).itemsize)
    assert sum(s.startswith(f"matmul {name} ") for s in stages) == len(CASES), stages


@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("planner", ["dnnfusion", "none"])
def test_every_dialect_wraps_integers_and_sums_doubles(planner, isa):
    """int32 products past 2^31 wrap (NumPy's rule), uint64 too, and a double sum keeps what
    float32 would lose; in every dialect, under both ends of the planners (one module)."""
    cases = {
        "i32": (np.int32, np.array([[2**30, 2**30, 7]], np.int32), np.array([[3], [3], [-1]], np.int32)),
        "u64": (np.uint64, np.array([[2**63, 3]], np.uint64), np.array([[2], [2**62]], np.uint64)),
        "f64": (np.float64, np.array([[1.0, 1e-12, -1.0]]), np.array([[1.0], [1.0], [1.0]])),
    }
    models, feeds = {}, {}
    for k, (dtype, a, b) in cases.items():
        g = h.make_graph([h.make_node("MatMul", ["a", "b"], ["y"])], k,
                         [h.make_tensor_value_info("a", ONNX_TYPE[dtype], a.shape),
                          h.make_tensor_value_info("b", ONNX_TYPE[dtype], b.shape)],
                         [h.make_tensor_value_info("y", ONNX_TYPE[dtype], (a.shape[0], b.shape[1]))])
        models[k] = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        feeds.update({f"{k}_a": a, f"{k}_b": b})
    ecg = df.load(_merge(models).SerializeToString())
    if lacks_here(isa):
        compile_only(ecg, planner, isa)
        return
    outs, _ = run(ecg, feeds, planner=planner, isa=isa)
    for out, (k, (_, a, b)) in zip(outs, cases.items()):
        np.testing.assert_array_equal(out, np.matmul(a, b))
    assert outs[2][0, 0] == (1.0 + 1e-12) - 1.0  # summed in k order in double (in float32: 0)


@pytest.mark.parametrize("dtype", [np.float64, np.int64], ids=lambda d: d.__name__)
def test_matmul_on_neon(dtype, driver_obj, tmp_path):
    m = _model(dtype, "broadcast_batches_then_mul")
    g = df.load(m.SerializeToString())
    feeds = _feeds(m, seed=2)
    r, outs = _run_neon(tmp_path, driver_obj, g, feeds, _neon_generate(g, "dnnfusion"))
    _check_ran_neon(r)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    _check(outs[0], want, dtype)


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: d.__name__)
def test_matmul_on_opencl(dtype, ocl_device):
    m = _merge({case: _model(dtype, case) for case in ("batched_constant_b", "transposed_b", "vector_a_then_add")})
    _check_all(df.compile(m.SerializeToString(), target="opencl"), m, _feeds(m, seed=7))
    if dtype == np.int32:  # products past 2^31 wrap there too
        a, b = np.array([[2**30, 2**30, 7]], np.int32), np.array([[3], [3], [-1]], np.int32)
        g = h.make_graph([h.make_node("MatMul", ["a", "b"], ["y"])], "wrap",
                         [h.make_tensor_value_info("a", T.INT32, a.shape), h.make_tensor_value_info("b", T.INT32, b.shape)],
                         [h.make_tensor_value_info("y", T.INT32, (1, 1))])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        np.testing.assert_array_equal(df.compile(m.SerializeToString(), target="opencl")(a=a, b=b), np.matmul(a, b))


def test_what_stays_refused_says_what_to_do():
    m = _model(np.int8, "plain")
    with pytest.raises(df.UnsupportedOperatorError, match=r"MatMul on float32, float64, int32, int64, uint32 and "
                                                          r"uint64.*reads i8.*Cast"):
        df.compile(m.SerializeToString())


# ---- MaxPool ------------------------------------------------------------------------------
POOL_TYPES = [np.float64, np.int8, np.uint8]
# input shape, attributes, whether the Indices output is asked for
POOLS = {
    "k3s2_padded": ((1, 3, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), False),
    "ceil_mode_indices": ((2, 2, 9, 8), dict(kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1), True),
    "1d_dilated_indices": ((1, 2, 10), dict(kernel_shape=[3], dilations=[2]), True),
    "column_major_indices": ((1, 2, 5, 6), dict(kernel_shape=[2, 2], storage_order=1), True),
}


def _pool_model(dtype, case):
    shape, attrs, indices = POOLS[case]
    outs = [h.make_tensor_value_info("y", ONNX_TYPE[dtype], None)]
    if indices:
        outs.append(h.make_tensor_value_info("i", T.INT64, None))
    g = h.make_graph([h.make_node("MaxPool", ["x"], [o.name for o in outs], **attrs)], case,
                     [h.make_tensor_value_info("x", ONNX_TYPE[dtype], shape)], outs)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


@pytest.mark.filterwarnings("ignore::dnnfusion.ModelWarning")  # outputs without a shape field
@pytest.mark.parametrize("dtype", POOL_TYPES, ids=lambda d: d.__name__)
def test_max_pool_matches_onnxruntime(dtype):
    m = _merge({case: _pool_model(dtype, case) for case in sorted(POOLS)})
    c = df.compile(m.SerializeToString(), threads=2)
    _check_all(c, m, _feeds(m, seed=3, full_range=True))  # the type's bounds in the data too
    stages = [s for k in c.kernels for s in k["stages"]]
    assert sum(s.startswith(f"MaxPool {np.dtype(dtype).kind}") for s in stages) == len(POOLS), stages


@pytest.mark.filterwarnings("ignore::dnnfusion.ModelWarning")
@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("planner", ["dnnfusion", "none"])
def test_every_dialect_pools_int8_with_indices(planner, isa):
    """int8 MaxPool, then an Add in the same block (a loop, not an epilogue), Indices too."""
    shape, attrs, _ = POOLS["ceil_mode_indices"]
    g = h.make_graph([h.make_node("MaxPool", ["x"], ["p", "i"], **attrs), h.make_node("Add", ["p", "p"], ["y"])],
                     "pool_add", [h.make_tensor_value_info("x", T.INT8, shape)],
                     [h.make_tensor_value_info("y", T.INT8, None), h.make_tensor_value_info("i", T.INT64, None)])
    ecg = df.load(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString())
    x = _values(np.int8, shape, np.random.default_rng(4), full_range=True)
    if lacks_here(isa):
        compile_only(ecg, planner, isa)
        return
    outs, _ = run(ecg, {"x": x}, planner=planner, isa=isa)
    sess = ort.InferenceSession(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString(),
                               providers=["CPUExecutionProvider"])
    for a, b in zip(outs, sess.run(None, {"x": x})):
        np.testing.assert_array_equal(a, b)


@pytest.mark.filterwarnings("ignore::dnnfusion.ModelWarning")
def test_max_pool_on_neon(driver_obj, tmp_path):
    m = _pool_model(np.uint8, "ceil_mode_indices")
    g = df.load(m.SerializeToString())
    x = _values(np.uint8, POOLS["ceil_mode_indices"][0], np.random.default_rng(5), full_range=True)
    r, outs = _run_neon(tmp_path, driver_obj, g, {"x": x}, _neon_generate(g, "dnnfusion"))
    _check_ran_neon(r)
    for a, b in zip(outs, ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": x})):
        np.testing.assert_array_equal(a, b)


@pytest.mark.filterwarnings("ignore::dnnfusion.ModelWarning")
@pytest.mark.parametrize("dtype", POOL_TYPES, ids=lambda d: d.__name__)
def test_max_pool_on_opencl(dtype, ocl_device):
    m = _merge({case: _pool_model(dtype, case) for case in ("k3s2_padded", "column_major_indices")})
    _check_all(df.compile(m.SerializeToString(), target="opencl"), m, _feeds(m, seed=6, full_range=True))


def test_average_pool_beyond_float32_says_what_to_do():
    g = h.make_graph([h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2])], "avg",
                     [h.make_tensor_value_info("x", T.DOUBLE, (1, 1, 4, 4))],
                     [h.make_tensor_value_info("y", T.DOUBLE, (1, 1, 3, 3))])
    with pytest.raises(df.UnsupportedOperatorError, match="AveragePool on f32 only.*f64.*Cast"):
        df.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString())


# ---- Softmax, LogSoftmax --------------------------------------------------------------------
def _softmax_model(op, shape, axis):
    g = h.make_graph([h.make_node(op, ["x"], ["y"], axis=axis)], "sm", [h.make_tensor_value_info("x", T.DOUBLE, shape)],
                     [h.make_tensor_value_info("y", T.DOUBLE, shape)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


@pytest.mark.parametrize("target", ["cpu", "opencl"])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_float64_softmax_matches_onnxruntime(op, target, request):
    if target == "opencl":
        request.getfixturevalue("ocl_device")
    m = _merge({f"s{i}": _softmax_model(op, shape, axis)
                for i, (shape, axis) in enumerate([((3, 700), -1), ((2, 5, 6), 1), ((4, 3, 2), 0)])})
    feeds = {k: v * 30 for k, v in _feeds(m, seed=8).items()}  # a float32 exp would lose digits
    _check_all(df.compile(m.SerializeToString(), target=target), m, feeds)
