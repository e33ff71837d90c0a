"""Operators written with index arithmetic (ReverseSequence, Col2Im, ...): bodies of
ECG gathers and scatters."""

from __future__ import annotations

from typing import Any

# op type -> fn(imp, node) -> FunctionProto (see onnx_functions.hand_forms)
HAND_FORMS: dict[str, Any] = {}
