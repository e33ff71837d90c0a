"""GridSample and AffineGrid (issue 17 part 3: operators ONNX Runtime runs that dnnfusion refused).

The NumPy oracle (``_ref_grid.grid_sample``) is checked against ONNX Runtime and PyTorch where
they run the case (4-D and 5-D inputs, cubic on 4-D only) and against the ONNX reference
where only it does (1-D inputs, cubic on 5-D); the generated kernels (every x86 dialect, run
or compiled only; the OpenCL target) against the oracle, every mode x padding x
align_corners x 1-3 spatial axes in one module, with NaN, infinite and huge grid values and
an epilogue fused into the kernel; a PyTorch module (a flow warp, as optical-flow and
deformable models use) through both front-ends against PyTorch; malformed nodes get
ShapeError, a float64 one a refusal that says what to do."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import reference

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

from codegen_runner import compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, params  # noqa: E402

# X and grid shapes by the number of spatial axes; the grid's points reach past [-1, 1] so
# that every padding mode is exercised
SHAPES = {1: ((2, 3, 9), (2, 11, 1)), 2: ((2, 3, 5, 7), (2, 6, 4, 2)), 3: ((2, 3, 4, 5, 6), (2, 3, 4, 2, 3))}
MODES, PADS = ("linear", "nearest", "cubic"), ("zeros", "border", "reflection")
ALL = [(nd, m, p, a) for nd in (1, 2, 3) for m in MODES for p in PADS for a in (0, 1)]
# ONNX Runtime 1.32 runs 4-D and 5-D inputs, cubic on 4-D only ("Only support GridSample
# Cubic mode in 4-D cases")
ORT_CASES = [c for c in ALL if c[0] > 1 and not (c[0] == 3 and c[1] == "cubic")]
# The ONNX reference clamps the coordinate before cubic's taps with border padding, which
# PyTorch and ONNX Runtime do not (they clamp the taps); dnnfusion follows those two
# (test_cubic_border_follows_pytorch_and_onnxruntime), so those cases are not compared with it.
ONNX_REF_CASES = [c for c in ALL if c not in ORT_CASES and not (c[1] == "cubic" and c[2] == "border")]


def _id(c):
    return f"{c[0]}d-{c[1]}-{c[2]}-align{c[3]}"


def _attrs(c):
    return {"mode": c[1], "padding_mode": c[2], "align_corners": c[3]}


def _data(nd, seed, specials=False):
    rng = np.random.default_rng(seed)
    xs, gs = SHAPES[nd]
    x = rng.standard_normal(xs).astype(np.float32)
    g = rng.uniform(-1.6, 1.6, gs).astype(np.float32)
    if specials:  # where ONNX does not say: NaN -> NaN, inf -> 0 / the edge / NaN by padding
        g.flat[0], g.flat[3], g.flat[5], g.flat[8] = np.nan, np.inf, -1e30, -np.inf
    return x, g


def _model(cases, opset=20):
    """One GridSample node per case, each on inputs of its own; a Relu after every third
    (an epilogue the kernel applies)."""
    nodes, inputs, outputs = [], [], []
    for k, c in enumerate(cases):
        xs, gs = SHAPES[c[0]]
        y = f"y{k}"
        inputs += [h.make_tensor_value_info(f"x{k}", T.FLOAT, xs), h.make_tensor_value_info(f"g{k}", T.FLOAT, gs)]
        nodes.append(h.make_node("GridSample", [f"x{k}", f"g{k}"], [f"t{k}" if k % 3 == 2 else y], **_attrs(c)))
        if k % 3 == 2:
            nodes.append(h.make_node("Relu", [f"t{k}"], [y]))
        outputs.append(h.make_tensor_value_info(y, T.FLOAT, xs[:2] + gs[1:-1]))
    return h.make_model(h.make_graph(nodes, "grid_sample", inputs, outputs), opset_imports=[h.make_opsetid("", opset)])


def _feeds(cases, specials):
    feeds = {}
    for k, c in enumerate(cases):
        feeds[f"x{k}"], feeds[f"g{k}"] = _data(c[0], k, specials)
    return feeds


def _oracle(cases, feeds):
    outs = []
    for k, c in enumerate(cases):
        y = reference.run_node("GridSample", [feeds[f"x{k}"], feeds[f"g{k}"]], _attrs(c))[0]
        outs.append(np.maximum(y, 0) if k % 3 == 2 else y)
    return outs


def _assert_close(got, want, what):
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=f"{what} {k}")


def _onnxruntime(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("case", ORT_CASES, ids=_id)
def test_oracle_matches_onnxruntime_and_pytorch(case):
    torch = pytest.importorskip("torch")
    x, g = _data(case[0], 7)
    want = _onnxruntime(_model([case]), {"x0": x, "g0": g})[0]
    got = reference.run_node("GridSample", [x, g], _attrs(case))[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
    mode = {"linear": "bilinear", "cubic": "bicubic"}.get(case[1], case[1])
    t = torch.nn.functional.grid_sample(torch.from_numpy(x), torch.from_numpy(g), mode=mode,
                                        padding_mode=case[2], align_corners=bool(case[3])).numpy()
    np.testing.assert_allclose(got, t, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ONNX_REF_CASES, ids=_id)
def test_oracle_matches_the_onnx_reference_where_onnxruntime_stops(case):
    from onnx.reference import ReferenceEvaluator

    x, g = _data(case[0], 11)
    want = ReferenceEvaluator(_model([case])).run(None, {"x0": x, "g0": g})[0]
    got = reference.run_node("GridSample", [x, g], _attrs(case))[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)


def test_cubic_border_follows_pytorch_and_onnxruntime():
    """Where the ONNX reference differs from both (see _ref_grid.grid_sample), the oracle sides
    with ONNX Runtime; the difference is real (not rounding), so the choice matters."""
    from onnx.reference import ReferenceEvaluator

    case = (2, "cubic", "border", 0)
    x, g = _data(2, 5)
    model = _model([case])
    got = reference.run_node("GridSample", [x, g], _attrs(case))[0]
    np.testing.assert_allclose(got, _onnxruntime(model, {"x0": x, "g0": g})[0], rtol=1e-5, atol=2e-6)
    assert np.abs(got - ReferenceEvaluator(model).run(None, {"x0": x, "g0": g})[0]).max() > 1e-2


@pytest.mark.parametrize("isa", params())
def test_generated_kernel_matches_the_oracle(isa):
    """All 54 cases in one module per dialect, the grids holding NaN, +-inf and -1e30."""
    ecg = df.load(_model(ALL).SerializeToString())
    if lacks_here(isa):
        compile_only(ecg, "dnnfusion", isa)
        return
    feeds = _feeds(ALL, specials=True)
    outs, gen = run(ecg, feeds, planner="dnnfusion", isa=isa)
    _assert_close(outs, _oracle(ALL, feeds), f"{isa} output")
    labels = [s for k in gen["kernels"] for s in k["stages"]]
    assert sum(s == "GridSample +epilogue" for s in labels) == len(ALL) // 3, labels  # the Relus fused


def test_the_compiled_model_matches_onnxruntime():
    """df.compile end to end (the planner, layout and memory plan around the kernel)."""
    feeds = _feeds(ORT_CASES, specials=False)
    model = _model(ORT_CASES)
    got = df.compile(model.SerializeToString())(**feeds)
    _assert_close(got, _onnxruntime(model, feeds), "output")


def test_opencl_kernel_matches_the_oracle(ocl_device):
    feeds = _feeds(ALL, specials=True)
    got = df.compile(_model(ALL).SerializeToString(), target="opencl")(**feeds)
    _assert_close(got, _oracle(ALL, feeds), "opencl output")


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_gridsample_16_mode_names(mode):
    """GridSample-16 (the TorchScript exporter's) names two modes as PyTorch does."""
    x, g = _data(2, 3)
    node = h.make_node("GridSample", ["x0", "g0"], ["y0"], mode=mode, padding_mode="reflection")
    model = h.make_model(h.make_graph([node], "g16", [h.make_tensor_value_info("x0", T.FLOAT, x.shape),
                                                      h.make_tensor_value_info("g0", T.FLOAT, g.shape)],
                                      [h.make_tensor_value_info("y0", T.FLOAT, (2, 3, 6, 4))]),
                         opset_imports=[h.make_opsetid("", 16)])
    got = df.compile(model.SerializeToString())(x0=x, g0=g)
    np.testing.assert_allclose(got, _onnxruntime(model, {"x0": x, "g0": g})[0], rtol=1e-5, atol=1e-5)


def _flow_warp(torch, mode, padding, align):
    class FlowWarp(torch.nn.Module):
        """Samples its input where a convolution says (the warp of optical-flow and
        deformable models), then a ReLU."""

        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 2, 3, padding=1)

        def forward(self, x):
            grid = 1.3 * torch.tanh(self.conv(x)).permute(0, 2, 3, 1)
            y = torch.nn.functional.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
            return torch.relu(y)

    torch.manual_seed(0)
    return FlowWarp().eval()


@pytest.mark.parametrize("mode,padding,align", [("bilinear", "border", True), ("bicubic", "zeros", False),
                                                ("nearest", "reflection", False)])
def test_a_pytorch_flow_warp_through_both_front_ends(mode, padding, align, tmp_path):
    torch = pytest.importorskip("torch")
    module = _flow_warp(torch, mode, padding, align)
    x = torch.randn(2, 3, 12, 10)
    with torch.no_grad():
        want = module(x).numpy()
    fx = df.compile(module, example_inputs=[x])  # torch.export -> aten.grid_sampler_2d
    np.testing.assert_allclose(fx(x.numpy()), want, rtol=1e-5, atol=1e-5)
    assert any("GridSample" in s for k in fx.kernels for s in k["stages"]), fx.kernels
    path = tmp_path / "warp.onnx"  # the TorchScript exporter's GridSample-16
    import warnings

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=16, input_names=["x"])
    got = df.compile(str(path))(x=x.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, sess.run(None, {"x": x.numpy()})[0], rtol=1e-5, atol=1e-5)


def _one(xs, gs, dtype=T.FLOAT, **attrs):
    node = h.make_node("GridSample", ["x", "g"], ["y"], **attrs)
    return h.make_model(h.make_graph([node], "bad", [h.make_tensor_value_info("x", dtype, xs),
                                                     h.make_tensor_value_info("g", dtype, gs)],
                                     [h.make_tensor_value_info("y", dtype, xs[:2] + gs[1:-1])]),
                        opset_imports=[h.make_opsetid("", 20)]).SerializeToString()


@pytest.mark.parametrize("xs,gs,attrs,match", [
    ((1, 2, 4, 5), (1, 3, 3, 3), {}, r"grid must have shape \[1, H_out, W_out, 2\]"),
    ((1, 2, 4, 5), (2, 3, 3, 2), {}, r"grid must have shape"),
    ((1, 2, 4, 5), (1, 3, 2), {}, r"grid must have shape"),
    ((1, 2, 3, 3, 3, 3), (1, 2, 2, 2, 2, 4), {}, r"1 to 3 spatial axes"),
    ((1, 2, 4, 5), (1, 3, 3, 2), {"mode": "area"}, r"mode must be linear, nearest or cubic"),
    ((1, 2, 4, 5), (1, 3, 3, 2), {"padding_mode": "wrap"}, r"padding_mode must be zeros, border or reflection"),
    ((1, 2, 4, 5), (1, 3, 3, 2), {"align_corners": 2}, r"align_corners must be 0 or 1"),
])
def test_malformed_nodes_are_shape_errors(xs, gs, attrs, match):
    with pytest.raises(df.ShapeError, match=match):
        df.load(_one(xs, gs, **attrs))


def test_float64_is_refused_by_code_generation_with_what_to_do():
    model = _one((1, 2, 4, 5), (1, 3, 3, 2), T.DOUBLE)
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 5))
    g = np.random.default_rng(1).uniform(-1, 1, (1, 3, 3, 2))
    ecg = df.load(model)  # the oracle computes it
    want = ecg.run_reference(x=x, g=g)[0]
    np.testing.assert_allclose(want, _onnxruntime_f32(x, g), rtol=1e-5, atol=1e-6)
    with pytest.raises(df.UnsupportedOperatorError, match=r"GridSample on f32 only.*reads f64.*Cast"):
        df.compile(model)


def _onnxruntime_f32(x, g):
    """ONNX Runtime's result for the float32 version of the model (it has no float64 kernel)."""
    m = onnx.load_from_string(_one(x.shape, g.shape))
    return _onnxruntime(m, {"x": x.astype(np.float32), "g": g.astype(np.float32)})[0]


def test_a_flow_warp_with_a_runtime_batch():
    """dynamic=True proves GridSample batch-separable (sample n reads sample n of X at sample
    n's points): one compile serves every batch size."""
    torch = pytest.importorskip("torch")
    module = _flow_warp(torch, "bilinear", "zeros", False)
    m = df.compile(module, [torch.randn(2, 3, 12, 10)], dynamic=True)
    for n in (1, 3, 5):
        x = torch.randn(n, 3, 12, 10)
        with torch.no_grad():
            torch.testing.assert_close(m(x), module(x), rtol=1e-5, atol=1e-5)
    assert m.stats["dynamic"]["calls"] == 3 and m.stats["dynamic"]["representative_batch"] == 2


# ---- AffineGrid (ONNX's body branches with If; onnx_functions.affine_grid writes it) ----------
def _affine_grid_model(theta_shape, size, align, const_size=True):
    node = h.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)
    nd = len(size) - 2
    inputs = [h.make_tensor_value_info("theta", T.FLOAT, theta_shape)]
    inits = [onnx.numpy_helper.from_array(np.array(size, np.int64), "size")]
    if not const_size:
        inputs.append(h.make_tensor_value_info("size", T.INT64, (len(size),)))
        inits = []
    g = h.make_graph([node], "affine_grid", inputs, [h.make_tensor_value_info("grid", T.FLOAT, [size[0], *size[2:], nd])],
                     inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 20)])


@pytest.mark.parametrize("size", [[2, 3, 5, 7], [2, 3, 1, 4], [2, 3, 4, 5, 6]], ids=["2d", "2d-one-row", "3d"])
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid_matches_onnxruntime(size, align):
    nd = len(size) - 2
    theta = np.random.default_rng(4).standard_normal((size[0], nd, nd + 1)).astype(np.float32)
    model = _affine_grid_model(theta.shape, size, align)
    got = df.compile(model.SerializeToString())(theta=theta)
    if align and 1 in size[2:]:
        # an axis of one pixel with align_corners: PyTorch puts it at 0, ONNX Runtime 1.32 at 1
        # and the ONNX reference at -1; dnnfusion follows PyTorch, where such models come from
        torch = pytest.importorskip("torch")
        want = torch.nn.functional.affine_grid(torch.from_numpy(theta), size, align_corners=True).numpy()
    else:
        want = _onnxruntime(model, {"theta": theta})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_affine_grid_needs_a_constant_size_and_a_fitting_theta():
    with pytest.raises(df.ShapeError, match=r"size \(input 1\) must be a constant"):
        df.load(_affine_grid_model((2, 2, 3), [2, 3, 5, 7], 0, const_size=False).SerializeToString())
    with pytest.raises(df.ShapeError, match=r"theta must have shape \[2, 2, 3\]"):
        df.load(_affine_grid_model((2, 3, 4), [2, 3, 5, 7], 0).SerializeToString())


def test_a_spatial_transformer_through_both_front_ends(tmp_path):
    """affine_grid + grid_sample (Jaderberg et al.'s spatial transformer): torch.export
    decomposes affine_grid itself; the TorchScript exporter writes AffineGrid at opset 20."""
    torch = pytest.importorskip("torch")

    class STN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.loc = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
                                           torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 6))

        def forward(self, x):
            theta = self.loc(x).view(-1, 2, 3) * 0.3 + torch.tensor([[1.0, 0, 0], [0, 1.0, 0]])
            grid = torch.nn.functional.affine_grid(theta, list(x.shape), align_corners=False)
            return torch.nn.functional.grid_sample(x, grid, align_corners=False)

    torch.manual_seed(0)
    module = STN().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        want = module(x).numpy()
    np.testing.assert_allclose(df.compile(module, example_inputs=[x])(x.numpy()), want, rtol=1e-5, atol=1e-5)
    path = tmp_path / "stn.onnx"
    import warnings

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=20, input_names=["x"])
    assert "AffineGrid" in {n.op_type for n in onnx.load(str(path)).graph.node}
    got = df.compile(str(path))(x=x.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, sess.run(None, {"x": x.numpy()})[0], rtol=1e-5, atol=1e-5)
