"""TensorScatter (opset 24, the KV-cache update of LLM decoders) as a ScatterElements at
write_indices[b] + s along the sequence axis (frontends/onnx_index_forms.py): compiled
against ONNX Runtime and the ONNX reference, linear and circular, prefill (no indices) and
decode (one token per sample at its own position)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper as h  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402


def _model(cache, upd, mode, axis, with_idx):
    """new = TensorScatter(cache, tanh(update) * 2, write_indices): the update computed in the
    model, so the scatter reads a fused producer."""
    ins = [h.make_tensor_value_info("cache", T.FLOAT, cache), h.make_tensor_value_info("u", T.FLOAT, upd)]
    if with_idx:
        ins.append(h.make_tensor_value_info("w", T.INT64, [cache[0]]))
    nodes = [h.make_node("Tanh", ["u"], ["t"]), h.make_node("Add", ["t", "t"], ["t2"]),
             h.make_node("TensorScatter", ["cache", "t2"] + (["w"] if with_idx else []), ["y"], mode=mode, axis=axis)]
    g = h.make_graph(nodes, "kv", ins, [h.make_tensor_value_info("y", T.FLOAT, cache)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 24)])
    m.ir_version = 10
    return m


CASES = [  # cache, update, mode, axis, write_indices (None: prefill)
    ([2, 3, 8, 4], [2, 3, 1, 4], "linear", -2, [5, 0]),
    ([2, 3, 8, 4], [2, 3, 3, 4], "linear", 2, None),
    ([3, 6, 5], [3, 2, 5], "circular", 1, [5, 2, 4]),
    ([2, 4, 6], [2, 4, 6], "circular", -1, [3, 0]),
]


@pytest.mark.parametrize("cache,upd,mode,axis,w", CASES, ids=[f"{c[2]}-{c[3]}-{'decode' if c[4] else 'prefill'}"
                                                                for c in CASES])
def test_tensor_scatter_compiled(cache, upd, mode, axis, w):
    rng = np.random.default_rng(1)
    feeds = {"cache": rng.standard_normal(cache).astype(np.float32), "u": rng.standard_normal(upd).astype(np.float32)}
    if w is not None:
        feeds["w"] = np.array(w, np.int64)
    m = _model(cache, upd, mode, axis, w is not None)
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    try:
        ort_out = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_allclose(ort_out, want, rtol=1e-6)  # the two agree where ORT has the operator
    except Exception as e:  # noqa: BLE001 - an ORT without TensorScatter-24
        assert "TensorScatter" in str(e) or "opset" in str(e), e
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        cm = df.compile(m.SerializeToString())
    got = cm.run(*feeds.values())[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_tensor_scatter_refusals_name_the_node():
    m = _model([2, 3, 8, 4], [2, 3, 9, 4], "linear", -2, False)
    with pytest.raises(df.ShapeError, match=r"TensorScatter\): update \[2, 3, 9, 4\] must match past_cache"):
        df.load(m)
    m = _model([2, 3, 8, 4], [2, 3, 8, 4], "linear", 0, False)
    with pytest.raises(df.ShapeError, match=r"axis 0 must name a sequence axis after the batch"):
        df.load(m)
