"""The ONNX checker as the importer (onnx.py) runs it: what ONNX Runtime tolerates becomes a
ModelWarning after a repaired copy passes, everything else a ModelFormatError; models over
protobuf's 2 GB checked as files with external data; and the same bytes checked once per
process (``dynamic=True`` imports one model at four shapes, and the checker took 2.3 s of
each for BERT-base's 440 MB)."""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from typing import Any

from dnnfusion.errors import ModelFormatError, ModelWarning

_CHECKER_LIMIT = 2**31 - 1  # protobuf cannot serialize more; check such models by path

# Checker complaints ONNX Runtime does not share (it runs such models): imported with a
# ModelWarning after checking a copy with the complaint repaired, so nothing else slips by.
TOLERATED = {
    # A graph output or value_info whose type has no shape: ORT infers it (so does dnnfusion).
    "Field 'shape' of 'type' is required but missing": "a value's type has no shape field",
}

# Digests of model bytes the checker passed cleanly (oldest first, at most 16; a warning is
# not remembered: each import warns again).
_CHECKED_BYTES: dict[bytes, None] = {}


def short(e: BaseException) -> str:
    """An exception's message on one line, at most 300 characters."""
    msg = " ".join(str(e).split())
    return msg if len(msg) <= 300 else msg[:297] + "..."


def _repair_missing_shapes(onnx: Any, proto: Any) -> Any:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    g = copy.graph
    for vi in list(g.output) + list(g.value_info):
        if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape"):
            vi.type.tensor_type.shape.SetInParent()
    return copy


def _run_checker(onnx: Any, proto: Any) -> None:
    try:
        size = proto.ByteSize()
    except Exception:  # noqa: BLE001 - protobuf refuses to size messages over 2 GB
        size = _CHECKER_LIMIT + 1
    if size <= _CHECKER_LIMIT:
        onnx.checker.check_model(proto)
        return
    # Too large to hand to the C++ checker in one piece: check it the way it will be
    # stored, as a file with external data, without touching the caller's proto.
    with tempfile.TemporaryDirectory(prefix="dnnfusion-check-") as d:
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)
        path = os.path.join(d, "model.onnx")
        onnx.save_model(copy, path, save_as_external_data=True, location="model.data")
        onnx.checker.check_model(path)


def _check(onnx: Any, proto: Any, what: str) -> bool:
    try:
        _run_checker(onnx, proto)
        return True
    except Exception as e:  # noqa: BLE001
        first = e
    tolerated = [why for text, why in TOLERATED.items() if text in str(first)]
    if not tolerated:
        raise ModelFormatError(f"{what} fails the ONNX checker: {short(first)}") from None
    try:
        _run_checker(onnx, _repair_missing_shapes(onnx, proto))
    except Exception as e:  # noqa: BLE001 - something else is wrong too
        raise ModelFormatError(f"{what} fails the ONNX checker: {short(e)}") from None
    warnings.warn(ModelWarning(
        f"{what} fails the ONNX checker ({short(first)}: {tolerated[0]}); ONNX Runtime runs such "
        "models, so dnnfusion imports it and infers what is missing"), stacklevel=3)
    return False


def check_proto(onnx: Any, proto: Any, what: str, data: bytes | None = None) -> None:
    """ModelFormatError unless the checker passes `proto` (`what` names it in messages); a
    complaint ONNX Runtime tolerates is a ModelWarning. `data`: the bytes `proto` was parsed
    from, whose clean pass is remembered (the checker reads nothing but them)."""
    digest = hashlib.sha256(data).digest() if data is not None else None
    if digest is not None and digest in _CHECKED_BYTES:
        return
    if _check(onnx, proto, what) and digest is not None:
        _CHECKED_BYTES[digest] = None
        while len(_CHECKED_BYTES) > 16:
            _CHECKED_BYTES.pop(next(iter(_CHECKED_BYTES)))


__all__ = ["TOLERATED", "check_proto", "short"]
