"""Element types: the ECG's names, their NumPy dtypes, and the torch dtypes that map to them.
A leaf module (no torch import; torch dtypes are matched by name), shared by the ECG, the
front-ends and the compiled model."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import DTypeError

_NUMPY_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "i8": "int8",
                 "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                 "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
                 "i4": "int4", "u4": "uint4", "i2": "int2", "u2": "uint2",
                 "f8e4m3fn": "float8_e4m3fn", "f8e4m3fnuz": "float8_e4m3fnuz", "f8e5m2": "float8_e5m2",
                 "f8e5m2fnuz": "float8_e5m2fnuz", "f4e2m1": "float4_e2m1fn", "f8e8m0": "float8_e8m0fnu",
                 "f6e2m3": "float6_e2m3fn", "f6e3m2": "float6_e3m2fn"}

# float8, float6 and float4 (ONNX FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ,
# FLOAT6E2M3, FLOAT6E3M2, FLOAT4E2M1; ml_dtypes' types, one element a byte), which compile()
# computes in float32: ECG name -> (mantissa bits, the smallest normal exponent, the largest
# finite value, what a non-saturating conversion gives beyond it: "nan", "inf", or "max" for
# float6 and float4, which always saturate). float8e8m0 (a power of two, MX scales) rounds by
# its own rules (rewrite.narrow_to_wide); it is among the SMALL_FLOAT_NAMES.
SMALL_FLOATS: dict[str, tuple[int, int, float, str]] = {
    "f8e4m3fn": (3, -6, 448.0, "nan"), "f8e4m3fnuz": (3, -7, 240.0, "nan"),
    "f8e5m2": (2, -14, 57344.0, "inf"), "f8e5m2fnuz": (2, -15, 57344.0, "nan"), "f4e2m1": (1, 0, 6.0, "max"),
    "f6e2m3": (3, 0, 7.5, "max"), "f6e3m2": (2, -2, 28.0, "max")}
SMALL_FLOAT_NAMES = (*SMALL_FLOATS, "f8e8m0")
# their NumPy (ml_dtypes) names; match by name, never by prefix: "float64".startswith("float6")
SMALL_FLOAT_NUMPY = frozenset(_NUMPY_DTYPES[t] for t in SMALL_FLOAT_NAMES)

# ECG element type -> ONNX TensorProto code (cpp/ir/types.h holds the same pairs): the one
# table the ONNX front-end, the written bodies and the rewrites read.
ONNX_CODES: dict[str, int] = {
    "f32": 1, "u8": 2, "i8": 3, "u16": 4, "i16": 5, "i32": 6, "i64": 7, "bool": 9, "f16": 10, "f64": 11,
    "u32": 12, "u64": 13, "bf16": 16, "f8e4m3fn": 17, "f8e4m3fnuz": 18, "f8e5m2": 19, "f8e5m2fnuz": 20,
    "u4": 21, "i4": 22, "f4e2m1": 23, "f8e8m0": 24, "u2": 25, "i2": 26, "f6e2m3": 27, "f6e3m2": 28}

# The narrow integers (ONNX INT4, UINT4, INT2, UINT2; ml_dtypes' int4, uint4, int2, uint2, one
# element a byte): ECG name -> (the type compile() computes them in, lowest, highest value).
NARROW_DTYPES: dict[str, tuple[str, int, int]] = {
    "i4": ("i8", -8, 7), "u4": ("u8", 0, 15), "i2": ("i8", -2, 1), "u2": ("u8", 0, 3)}
NARROW_NUMPY = frozenset(_NUMPY_DTYPES[t] for t in NARROW_DTYPES)


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of an ECG element type name (``"f32"`` -> ``float32``); bfloat16 is
    ml_dtypes' (the package ONNX and JAX use for it; NumPy has none)."""
    if dtype == "bf16":
        return bfloat16()
    if dtype in NARROW_DTYPES or dtype in SMALL_FLOAT_NAMES:  # by object: NumPy reads "int4" as int32
        try:
            import ml_dtypes
        except ImportError as e:
            raise DTypeError(f"{dtype} tensors need the 'ml_dtypes' package: pip install ml_dtypes") from e
        return np.dtype(getattr(ml_dtypes, _NUMPY_DTYPES[dtype]))
    return np.dtype(_NUMPY_DTYPES[dtype])


def bfloat16() -> np.dtype:
    """ml_dtypes' bfloat16, imported on first use (only bfloat16 models need it)."""
    try:
        import ml_dtypes
    except ImportError as e:
        raise DTypeError("bfloat16 tensors need the 'ml_dtypes' package: pip install ml_dtypes") from e
    return np.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dtype: Any) -> bool:
    """Whether a NumPy dtype is ml_dtypes' bfloat16 (its kind is 'V', not 'f')."""
    return np.dtype(dtype).name == "bfloat16"


def is_float_dtype(dtype: Any) -> bool:
    """Whether a NumPy dtype is a floating-point one, ml_dtypes' bfloat16, float8 and float4
    included (their kind is 'V', but float8_e5m2's 'f')."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16" or dtype.name in SMALL_FLOAT_NUMPY


def torch_numpy(t: Any) -> np.ndarray:
    """A CPU tensor's data as NumPy (a view where torch gives one); bfloat16 and the float8
    types, which NumPy lacks, as ml_dtypes' types over the same bits."""
    name = str(t.dtype).replace("torch.", "")
    if name == "bfloat16":
        import torch

        return t.contiguous().view(torch.int16).numpy().view(bfloat16())
    if name in TORCH_FLOAT8:
        import torch

        return t.contiguous().view(torch.uint8).numpy().view(numpy_dtype(TORCH_DTYPES[name]))
    return t.numpy()


def to_torch(a: np.ndarray) -> Any:
    """A NumPy array as a CPU tensor over the same memory; ml_dtypes' bfloat16 and float8
    arrays as torch's types."""
    import torch

    if is_bfloat16(a.dtype):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    name = next((n for n in TORCH_FLOAT8 if _NUMPY_DTYPES[TORCH_DTYPES[n]] == a.dtype.name), None)
    if name is not None:
        return torch.from_numpy(a.view(np.uint8)).view(getattr(torch, name))
    return torch.from_numpy(a)


# The 16-bit float types compile() computes in float32 (float16="f32"), by ECG name.
HALF_DTYPES = ("f16", "bf16")


# torch dtype name -> ECG element type
TORCH_DTYPES: dict[str, str] = {
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
    "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "bool": "bool",
    "float8_e4m3fn": "f8e4m3fn", "float8_e4m3fnuz": "f8e4m3fnuz", "float8_e5m2": "f8e5m2",
    "float8_e5m2fnuz": "f8e5m2fnuz", "float8_e8m0fnu": "f8e8m0"}

# torch's float8 types, with whether its conversion from a wider float saturates (ONNX Cast's
# `saturate`): float8_e4m3fn saturates (infinity too, to 448), the others give infinity or
# NaN beyond their range (measured on torch 2.13's CPU conversion, which otherwise rounds to
# nearest even, bit for bit as ml_dtypes). Its conversion to float8_e8m0fnu drops the sign
# (-1000 gives 1024) where ONNX gives NaN, so it has no ONNX form: None.
TORCH_FLOAT8: dict[str, bool | None] = {
    "float8_e4m3fn": True, "float8_e4m3fnuz": False, "float8_e5m2": False, "float8_e5m2fnuz": False,
    "float8_e8m0fnu": None}


def ecg_dtype(dtype: Any) -> str:
    """The ECG element type of a torch dtype; DTypeError for the ones the ECG lacks."""
    name = str(dtype).replace("torch.", "")
    if name not in TORCH_DTYPES:
        raise DTypeError(f"torch dtype {name} is not supported; dnnfusion supports "
                         + " ".join(f"torch.{n}" for n in TORCH_DTYPES))
    return TORCH_DTYPES[name]
