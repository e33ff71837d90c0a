"""What the tests of the NumPy reference interpreter (tests/test_reference_*.py) share: the
comparison of an output with its expected value, and seeded random float32 arrays."""

from __future__ import annotations

import numpy as np

RNG = np.random.default_rng(0)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _assert_same(name: str, got: np.ndarray, want: np.ndarray,
                 tolerance: tuple[float, float] = (1e-4, 1e-5)) -> None:
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    if want.dtype.kind == "f":
        rtol, atol = tolerance
        if want.dtype == np.float16:
            rtol = max(rtol, 1e-3)  # one float16 ulp is ~1e-3
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)
