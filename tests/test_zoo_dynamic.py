"""Zoo models exported with dynamic axes (issue 17): compiled once from the example inputs,
then called at other batch and sequence sizes, each checked against ONNX Runtime running the
same dynamic file (dnnfusion/zoo/dynamic_check.py; `python -m dnnfusion.zoo.dynamic_check`
runs every model)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from dnnfusion.zoo import dynamic_check, registry  # noqa: E402


def test_dynamic_axes_are_batch_and_sequence():
    assert registry.dynamic_axes("mobilenetv2") == {"input": {0: "batch"}, "logits": {0: "batch"}}
    axes = registry.dynamic_axes("distilbert")
    assert axes["input_ids"] == {0: "batch", 1: "sequence"}
    assert axes["attention_mask"] == {0: "batch", 1: "sequence"}
    assert axes["last_hidden_state"] == {0: "batch", 1: "sequence"}


@pytest.mark.parametrize("name", ["mobilenetv2", "gpt2"])
def test_dynamic_zoo_model_matches_ort_at_every_size(name):
    rows = dynamic_check.check(name, reduced=True, threads=1)
    assert [r["sizes"] for r in rows] == [
        f"batch {b}" if s is None else f"batch {b}, seq {s}" for b, s in dynamic_check.sizes_for(name)]
    for r in rows:
        assert r["ok"], dynamic_check.fmt(r)
    # Each new size compiled one specialization; the example's own size none.
    assert [r["specializations"] for r in rows] == list(range(len(rows)))
    # The outputs have the sizes asked for.
    b, s = dynamic_check.sizes_for(name)[-1]
    assert rows[-1]["shapes"].split()[0].startswith(f"{b}x" + (f"{s}x" if s else ""))
