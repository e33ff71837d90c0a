"""Element types: the ECG's names, their NumPy dtypes, and the torch dtypes that map to them.
A leaf module (no torch import; torch dtypes are matched by name), shared by the ECG, the
front-ends and the compiled model."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import DTypeError

_NUMPY_DTYPES = {"f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8",
                 "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                 "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool"}


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of an ECG element type name (``"f32"`` -> ``float32``)."""
    return np.dtype(_NUMPY_DTYPES[dtype])


# torch dtype name -> ECG element type
TORCH_DTYPES: dict[str, str] = {
    "float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
    "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "bool": "bool"}


def ecg_dtype(dtype: Any) -> str:
    """The ECG element type of a torch dtype; DTypeError for the ones the ECG lacks."""
    name = str(dtype).replace("torch.", "")
    if name not in TORCH_DTYPES:
        raise DTypeError(f"torch dtype {name} is not supported; dnnfusion supports "
                         + " ".join(f"torch.{n}" for n in TORCH_DTYPES))
    return TORCH_DTYPES[name]
