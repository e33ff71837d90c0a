"""ScatterElements and ScatterND (reductions none, add, mul, max, min) in generated code (issue 17
part 3): fused between producers and consumers, on every x86 dialect (compiled only where this
CPU lacks one) and on OpenCL, against ONNX Runtime (and ONNX's reference evaluator where ONNX
Runtime's result is unspecified: duplicate indices without a reduction); from PyTorch's
scatter, scatter_add, scatter_reduce and index_put; an index out of range at run time is a
clear error."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from codegen_runner import run_or_compile  # noqa: E402
from dialects import params  # noqa: E402

NP = {T.FLOAT: np.float32, T.DOUBLE: np.float64, T.INT32: np.int32, T.INT64: np.int64, T.UINT8: np.uint8}


def _case_model(op, dtype, data_shape, idx_shape, upd_shape, idx_type=T.INT64, **attrs):
    """Relu (or Abs on integers) of data -> the scatter -> + 1: the scatter between a producer
    and a consumer, so its input and output pass through the blocks around it."""
    pre = "Relu" if dtype in (T.FLOAT, T.DOUBLE) else "Abs"
    one = onnx.numpy_helper.from_array(np.array(1, NP[dtype]), "one")
    nodes = [h.make_node(pre, ["x"], ["d"]), h.make_node(op, ["d", "i", "u"], ["s"], **attrs),
             h.make_node("Add", ["s", "one"], ["y"])]
    g = h.make_graph(nodes, op, [h.make_tensor_value_info("x", dtype, data_shape),
                                 h.make_tensor_value_info("i", idx_type, idx_shape),
                                 h.make_tensor_value_info("u", dtype, upd_shape)],
                     [h.make_tensor_value_info("y", dtype, data_shape)], [one])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


def _feeds(dtype, data_shape, indices, upd_shape, idx_type=T.INT64, seed=0):
    rng = np.random.default_rng(seed)
    t = NP[dtype]
    if np.issubdtype(t, np.floating):
        x, u = rng.standard_normal(data_shape), rng.standard_normal(upd_shape)
    else:
        x, u = rng.integers(-50, 50, data_shape), rng.integers(0, 9, upd_shape)
    return {"x": x.astype(t), "i": np.array(indices, NP[idx_type]), "u": u.astype(t)}


# name: (op, dtype, data shape, indices, updates shape, attributes, oracle)
CASES = {
    "nd_rows_none": ("ScatterND", T.FLOAT, (5, 4, 3), [[3], [-5], [1]], (3, 4, 3), {}, "ort"),
    "nd_elements_add_dup": ("ScatterND", T.FLOAT, (4, 6), [[0, 1], [3, -1], [0, 1]], (3,), {"reduction": "add"}, "ort"),
    "nd_mul_i64": ("ScatterND", T.INT64, (3, 2, 5), [[[2, 1]], [[0, 0]]], (2, 1, 5), {"reduction": "mul"}, "ort"),
    "nd_max_f64": ("ScatterND", T.DOUBLE, (6, 3), [[1], [4], [1]], (3, 3), {"reduction": "max"}, "onnx"),
    "nd_dup_none_last_wins": ("ScatterND", T.INT32, (4, 3), [[2], [0], [2]], (3, 3), {}, "onnx"),
    "el_axis1_none": ("ScatterElements", T.FLOAT, (3, 7), [[1, 0, 6], [-1, 2, 3]], (2, 3), {"axis": 1}, "ort"),
    "el_axis0_add_dup": ("ScatterElements", T.FLOAT, (4, 5), [[1, 1, 0, 3, 2], [1, 2, 0, 3, 2]], (2, 5),
                         {"axis": 0, "reduction": "add"}, "ort"),
    "el_3d_min_i32": ("ScatterElements", T.INT32, (2, 4, 3), [[[0, 3, 1], [3, 3, 2]]], (1, 2, 3),
                      {"axis": -2, "reduction": "min"}, "ort"),
    "el_u8_mul_dup": ("ScatterElements", T.UINT8, (3, 4), [[0, 0, 2, 2], [0, 1, 2, 1]], (2, 4),
                      {"axis": 0, "reduction": "mul"}, "onnx"),
}


def _one(case, seed=0):
    op, dt, ds, idx, us, attrs, oracle = CASES[case]
    ishape = np.array(idx).shape
    m = _case_model(op, dt, ds, ishape, us, **attrs)
    feeds = _feeds(dt, ds, idx, us, seed=seed)
    if oracle == "ort":
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    else:
        with np.errstate(over="ignore"):  # uint8 products wrap, as in the kernels
            want = ReferenceEvaluator(m).run(None, feeds)[0]
    return m, feeds, want


def _check(got, want, case):
    assert got.dtype == want.dtype, case
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=case)
    else:
        np.testing.assert_array_equal(got, want, err_msg=case)


@pytest.mark.parametrize("case", list(CASES))
def test_compiled_against_the_oracle(case):
    m, feeds, want = _one(case)
    compiled = df.compile(m.SerializeToString())
    _check(compiled(**feeds), want, case)
    m2, feeds2, want2 = _one(case, seed=1)  # new data and updates through the same compile
    _check(compiled(**feeds2), want2, case)


@pytest.mark.parametrize("isa", params())
def test_every_dialect(isa):
    for case in CASES:
        m, feeds, want = _one(case)
        outs = run_or_compile(m, feeds, isa)
        if outs is not None:
            _check(outs[0], want, case)


@pytest.mark.parametrize("case", list(CASES))
def test_opencl(case, ocl_device):
    m, feeds, want = _one(case)
    _check(df.compile(m.SerializeToString(), target="opencl")(**feeds), want, case)


@pytest.mark.parametrize("target", ["cpu", "opencl"])
def test_an_index_out_of_range_at_run_time_is_a_clear_error(target, request):
    if target == "opencl":
        request.getfixturevalue("ocl_device")
    m, feeds, _ = _one("nd_rows_none")
    compiled = df.compile(m.SerializeToString(), target=target)
    feeds["i"][1, 0] = 5  # axis 0 has 5 rows
    with pytest.raises(df.Error, match=r"out of range|index computed from the data"):
        compiled(**feeds)
    m, feeds, _ = _one("el_axis1_none")
    compiled = df.compile(m.SerializeToString(), target=target)
    feeds["i"][0, 1] = -8  # axis 1 has 7
    with pytest.raises(df.Error, match=r"out of range|index computed from the data"):
        compiled(**feeds)


@pytest.mark.parametrize("op,shapes,attrs,match", [
    ("ScatterND", [(4, 3), (2, 1), (2,)], {}, "updates"),
    ("ScatterND", [(4, 3), (2, 1), (2, 3)], {"reduction": "avg"}, "reduction"),
    ("ScatterElements", [(4, 3), (2, 3), (2, 2)], {}, "shape of indices"),
    ("ScatterElements", [(4, 3), (2, 4), (2, 4)], {"axis": 0}, "larger than data"),
])
def test_malformed_nodes_are_refused(op, shapes, attrs, match):
    ins = [h.make_tensor_value_info(n, t, s) for n, t, s in zip("xiu", (T.FLOAT, T.INT64, T.FLOAT), shapes)]
    g = h.make_graph([h.make_node(op, ["x", "i", "u"], ["y"], **attrs)], "bad", ins,
                     [h.make_tensor_value_info("y", T.FLOAT, shapes[0])])
    with pytest.raises(df.Error, match=match):
        df.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString())


def test_torch_scatter_and_index_put_against_eager():
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, x, idx, src, rows, vals):
            a = torch.relu(x).scatter(1, idx, src)
            b = x.scatter_add(1, idx, src * 2)
            c = x.scatter_reduce(1, idx, src, reduce="amax")
            d = x.scatter(1, idx, 0.5)
            e = x.index_put((rows,), vals, accumulate=True)
            f = x.clone()
            f[rows] = vals
            return a + 1, b, c, d, e, f

    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 6, generator=g)
    idx = torch.tensor([[0, 5, 2], [1, 1, 4], [3, 0, 5], [2, 2, 2], [4, 0, 1]])
    src = torch.randn(5, 4, generator=g)  # wider than idx: torch reads its first 3 columns
    rows = torch.tensor([4, 0, 2])
    vals = torch.randn(3, 6, generator=g)
    args = (x, idx, src, rows, vals)
    compiled = df.compile(M(), example_inputs=args)
    got = compiled(*[t.numpy() for t in args])
    for k, (gv, wv) in enumerate(zip(got, M()(*args))):
        np.testing.assert_allclose(gv, wv.numpy(), rtol=1e-6, atol=1e-6, err_msg=f"output {k}")


@pytest.mark.parametrize("in_place", [True, False])
def test_counts_say_what_the_scatter_writes(in_place, monkeypatch):
    """Relu -> ScatterND -> Add, one block of three stages: the Relu loop, the scatter and the
    Add loop. Relu's output dies at the scatter, so the scatter updates it in place: its output
    takes the same scratch bytes and the kernel writes the updates only (one pass). With
    DNNF_SCATTER_IN_PLACE=0 it copies the data first (a pass of its own), then writes the
    updates again."""
    if not in_place:
        monkeypatch.setenv("DNNF_SCATTER_IN_PLACE", "0")
    m, feeds, want = _one("nd_rows_none")
    compiled = df.compile(m.SerializeToString())
    _check(compiled(**feeds), want, "nd_rows_none")
    data, upd = 5 * 4 * 3 * 4, 3 * 4 * 3 * 4
    assert compiled.stats["kernels"] == 1
    assert compiled.stats["passes"] == (3 if in_place else 4)
    assert compiled.stats["intermediate_bytes_written"] == data + upd + (0 if in_place else data)


def test_data_read_after_the_scatter_in_its_block_is_not_updated_in_place():
    """Relu -> ScatterND -> Add(scatter, Relu's output): one block, and Relu's output is read
    again after the scatter, so the scatter must copy it (4 passes) and the sum be right."""
    nodes = [h.make_node("Relu", ["x"], ["d"]), h.make_node("ScatterND", ["d", "i", "u"], ["s"]),
             h.make_node("Add", ["s", "d"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [5, 4]),
                                  h.make_tensor_value_info("i", T.INT64, [2, 1]),
                                  h.make_tensor_value_info("u", T.FLOAT, [2, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [5, 4])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((5, 4)).astype(np.float32), "i": np.array([[1], [3]], np.int64),
             "u": rng.standard_normal((2, 4)).astype(np.float32)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    compiled = df.compile(m.SerializeToString())
    assert [k["stages"] for k in compiled.kernels] == [["vector loop f32[20]", "ScatterND", "vector loop f32[20]"]]
    assert compiled.stats["passes"] == 4
    np.testing.assert_allclose(compiled(**feeds), want, rtol=1e-6)


def _matmul_scatter_model(read_after: bool):
    """MatMul -> ScatterND -> MatMul: the scatter a block of its own between two GEMMs, its data
    in the arena; `read_after`: the first MatMul's output is also added to the scatter's, so it
    is still read after the scatter and must not be updated in place."""
    rng = np.random.default_rng(0)
    w = onnx.numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w")
    wt = onnx.numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "wt")
    nodes = [h.make_node("MatMul", ["x", "w"], ["d"]), h.make_node("ScatterND", ["d", "i", "u"], ["s"])]
    if read_after:
        nodes += [h.make_node("Add", ["s", "d"], ["s2"]), h.make_node("MatMul", ["s2", "wt"], ["y"])]
    else:
        nodes += [h.make_node("MatMul", ["s", "wt"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [64, 16]),
                                  h.make_tensor_value_info("i", T.INT64, [3, 1]),
                                  h.make_tensor_value_info("u", T.FLOAT, [3, 32])],
                     [h.make_tensor_value_info("y", T.FLOAT, [64, 8])], [w, wt])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    feeds = {"x": rng.standard_normal((64, 16)).astype(np.float32), "i": np.array([[3], [60], [-1]], np.int64),
             "u": rng.standard_normal((3, 32)).astype(np.float32)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    return m, feeds, want


@pytest.mark.parametrize("read_after", [False, True])
def test_a_scatter_updates_arena_data_in_place_only_where_it_dies(read_after):
    """Data made by another block (in the arena): where it dies at the scatter, the memory plan
    gives the scatter's output its bytes and the 8 KiB copy goes (passes and bytes say so);
    where a later operator still reads it, the scatter copies it and both values are right."""
    m, feeds, want = _matmul_scatter_model(read_after)
    compiled = df.compile(m.SerializeToString())
    for _ in range(2):  # the second call starts from the first one's arena
        np.testing.assert_allclose(compiled(**feeds), want, rtol=1e-4, atol=1e-4)
    data, upd = 64 * 32 * 4, 3 * 32 * 4
    scatter = [k for k in compiled.kernels if "ScatterND" in k["stages"]]
    assert len(scatter) == 1
    if read_after:  # the Add fused after it: the copy, the updates, the Add's loop
        assert scatter[0]["stages"] == ["ScatterND", "vector loop f32[2048]"]
        assert scatter[0]["passes"] == 3 and scatter[0]["intermediate_bytes_written"] == data + upd + data
    else:  # the updates only
        assert scatter[0]["stages"] == ["ScatterND"]
        assert scatter[0]["passes"] == 1 and scatter[0]["intermediate_bytes_written"] == upd


def test_torch_slice_assignment_against_eager():
    """y[a:b] = v, y[i] = w and y[::k] += u export as slice_scatter and select_scatter: a
    step-1 slice is a Where of a padded source (fused, no kernel of its own), other steps a
    ScatterElements with constant indices."""
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, x, v, w, u, z):
            y = x * 2
            y[:, 1:3] = v
            y[-1] = w
            y[:, ::2] = y[:, ::2] + u
            y[:, :, -2:] = z  # a negative start; the end clamps to the size
            return y + 1

    class Fused(torch.nn.Module):
        def forward(self, x, v):
            y = torch.relu(x)
            y[:, 2:5] = v
            return y * 3

    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 6, 5, generator=g)
    args = (x, torch.randn(3, 2, 5, generator=g), torch.randn(6, 5, generator=g),
            torch.randn(3, 3, 5, generator=g), torch.randn(3, 6, 2, generator=g))
    compiled = df.compile(M(), example_inputs=args)
    np.testing.assert_allclose(compiled(*[t.numpy() for t in args]), M()(*args).numpy(), rtol=1e-6, atol=1e-6)
    fargs = (x, torch.randn(3, 3, 5, generator=g))
    fused = df.compile(Fused(), example_inputs=fargs)
    np.testing.assert_allclose(fused(*[t.numpy() for t in fargs]), Fused()(*fargs).numpy(), rtol=1e-6, atol=1e-6)
    assert fused.stats["kernels"] == 1 and fused.stats["intermediate_bytes_written"] == 0
