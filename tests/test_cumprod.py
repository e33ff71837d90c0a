"""CumProd (ONNX 26, torch.cumprod) in generated code (issue 17 part 3): exclusive and reverse,
float and integer (products wrap like ONNX Runtime's integer arithmetic), between fused
neighbours, on every x86 dialect (compiled only where this CPU lacks one) and on OpenCL,
against NumPy's cumprod and PyTorch eager."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

from codegen_runner import run_or_compile  # noqa: E402
from dialects import params  # noqa: E402

SHAPE = (3, 5, 4)


def _model(dtype, axis, exclusive, reverse):
    """Abs -> CumProd -> Neg, so the scan sits between two fused loops."""
    nodes = [h.make_node("Abs", ["x"], ["a"]),
             h.make_node("CumProd", ["a", "axis"], ["c"], exclusive=exclusive, reverse=reverse),
             h.make_node("Neg", ["c"], ["y"])]
    g = h.make_graph(nodes, "cumprod", [h.make_tensor_value_info("x", dtype, SHAPE)],
                     [h.make_tensor_value_info("y", dtype, SHAPE)],
                     [onnx.numpy_helper.from_array(np.array(axis, np.int64), "axis")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 26)])


def _want(x, axis, exclusive, reverse):
    a = np.abs(x)
    if reverse:
        a = np.flip(a, axis)
    c = np.cumprod(a, axis=axis, dtype=a.dtype)
    if exclusive:
        c = np.concatenate([np.ones_like(np.take(c, [0], axis)), np.delete(c, -1, axis)], axis)
    return -(np.flip(c, axis) if reverse else c)


CASES = {  # name: (onnx type, numpy type, axis, exclusive, reverse)
    "f32_axis1": (T.FLOAT, np.float32, 1, 0, 0),
    "f32_axis_last_exclusive_reverse": (T.FLOAT, np.float32, -1, 1, 1),
    "f64_axis0_reverse": (T.DOUBLE, np.float64, 0, 0, 1),
    "i64_axis1_exclusive_wraps": (T.INT64, np.int64, 1, 1, 0),
    "i32_axis2_wraps": (T.INT32, np.int32, 2, 0, 0),
}


def _case(name):
    ot, nt, axis, excl, rev = CASES[name]
    rng = np.random.default_rng(2)
    if np.issubdtype(nt, np.floating):
        x = rng.uniform(0.5, 1.5, SHAPE).astype(nt)
    else:  # large enough that the products wrap
        x = rng.integers(-70000, 70000, SHAPE).astype(nt)
    with np.errstate(over="ignore"):
        want = _want(x, axis, excl, rev)
    return _model(ot, axis, excl, rev), x, want


def _check(got, want):
    assert got.dtype == want.dtype
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=2e-6)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", list(CASES))
def test_compiled(case):
    m, x, want = _case(case)
    _check(df.compile(m.SerializeToString())(x=x), want)


@pytest.mark.parametrize("isa", params())
def test_every_dialect(isa):
    for case in CASES:
        m, x, want = _case(case)
        outs = run_or_compile(m, {"x": x}, isa)
        if outs is not None:
            _check(outs[0], want)


@pytest.mark.parametrize("case", list(CASES))
def test_opencl(case, ocl_device):
    m, x, want = _case(case)
    _check(df.compile(m.SerializeToString(), target="opencl")(x=x), want)


def test_torch_cumprod_against_eager():
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, x, n):
            return torch.cumprod(torch.sigmoid(x) + 0.5, dim=1), torch.cumprod(n, dim=0)

    g = torch.Generator().manual_seed(5)
    args = (torch.randn(2, 9, 3, generator=g), torch.randint(-9, 9, (6, 4), generator=g))
    got = df.compile(M(), example_inputs=args)(*[a.numpy() for a in args])
    want = M()(*args)
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=2e-6)
    np.testing.assert_array_equal(got[1], want[1].numpy())
