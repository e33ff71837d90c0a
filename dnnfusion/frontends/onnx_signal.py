"""Signal-processing operators ONNX gives no function body (DFT, STFT, MelWeightMatrix),
written as bodies of ECG operators."""

from __future__ import annotations

from typing import Any

# op type -> fn(imp, node) -> FunctionProto (see onnx_functions.hand_forms)
HAND_FORMS: dict[str, Any] = {}
