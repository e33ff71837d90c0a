"""dynamic=True's kernels stop at the call's sequence length (issue 17, dnnfusion/seq_extents.py,
cpp/codegen/seq_rows.cc): the stages that write a value no valid output reads past S + c
compute its first S + c positions only (GEMM rows, loop rows, LayerNorm / Softmax rows), S read
from the length input at run time. Every program here runs with its arena and outputs set to
NaN first (DNNF_POISON_ARENA), so an uncomputed row that reached a valid output would show;
every call is checked against ONNX Runtime at its own length."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import dnnfusion as df  # noqa: E402
from dnnfusion import _core, padded, seq_extents, sequence  # noqa: E402
from test_dynamic_sequence import D, Attention, _ort, _x, export  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript-based ONNX export"),
              pytest.mark.filterwarnings("ignore:The feature will be removed")]

CALLS = [(1, 12), (2, 7), (1, 1), (3, 11), (1, 4), (1, 12)]


@pytest.fixture(autouse=True)
def _poisoned_arena(monkeypatch):
    monkeypatch.setenv("DNNF_POISON_ARENA", "1")


class IntPath(torch.nn.Module):
    """A float value rounded to integers that an integer product reads: stale bits at padded
    rows could reach integer arithmetic, so nothing is left uncomputed."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(D, D)

    def forward(self, x):
        h = self.l(x)
        q = (h * 4).round().to(torch.int64)
        return (q * 3).to(torch.float32) + torch.softmax(h, dim=1)


def _rows(m):
    return m.stats["dynamic"]["sequence"]["runtime_rows"]


def test_the_kernels_stop_at_the_calls_length(tmp_path):
    path = export(Attention(), torch.randn(1, 12, D), tmp_path / "m.onnx")
    m = df.compile(path, [_x(1, 12)], dynamic=True, threads=1)
    rows = _rows(m)
    assert rows["why"] is None and rows["values"] > 0 and 0 < rows["stages"] <= rows["of"], rows
    limited = [s for k in m.kernels for s in k["stages"] if s.endswith("(rows: runtime length)")]
    assert len(limited) == rows["stages"]
    assert any(s.startswith("gemm") for s in limited), limited  # the projections' rows
    assert "seq_len" in m.source()
    for b, s in CALLS:
        x = _x(b, s)
        np.testing.assert_allclose(m(x), _ort(path, x), rtol=2e-5, atol=2e-5, err_msg=f"batch {b}, seq {s}")


def test_a_mask_left_uncomputed_would_show(monkeypatch):
    """The values a mixing operator reads masked (the Where and the copies after it) are
    computed in full: leaving them uncomputed too gives NaN (the poisoned arena) at a short
    length in TinyBERT, whose masked scores and values are stored by stages of their own. The
    check is not vacuous."""
    from dnnfusion.zoo import registry

    zm = registry.get("tinybert", reduced=True)
    ex = [t.numpy() for t in zm.example_inputs]
    short = [np.ascontiguousarray(a[:, :5]) for a in ex]
    right = df.compile(zm.module, list(zm.example_inputs), dynamic=True, threads=1)
    assert _rows(right)["stages"] > 0
    want = right(*short)
    plain = seq_extents.runtime_rows

    def too_many(fa, la, fb, lb, length_name, inputs):
        rows, why = plain(fa, la, fb, lb, length_name, inputs)
        t = seq_extents._Checked(fa, la, fb, lb, length_name)
        t.run({**inputs, length_name: {}})
        made = {o.id for n in t.nodes for o in n.outputs}
        extra = {v: a for v, a in t.pos.items() if a and v in made and t.need_clean.get(v)}
        assert extra, "the masked operands are values of the planned graph"
        return {**rows, **extra}, why

    monkeypatch.setattr(seq_extents, "runtime_rows", too_many)
    wrong = df.compile(zm.module, list(zm.example_inputs), dynamic=True, threads=1)
    assert _rows(wrong)["stages"] > _rows(right)["stages"]
    got = wrong(*short)
    assert any(np.isnan(g).any() for g in got), [np.abs(g - w).max() for g, w in zip(got, want)]
    assert not any(np.isnan(w).any() for w in want)


def test_off_computes_every_position(tmp_path, monkeypatch):
    monkeypatch.setenv("DNNF_SEQ_ROWS", "0")
    path = export(Attention(), torch.randn(1, 12, D), tmp_path / "m.onnx")
    m = df.compile(path, [_x(1, 12)], dynamic=True, threads=1)
    assert _rows(m)["stages"] == 0 and "DNNF_SEQ_ROWS" in _rows(m)["why"]
    assert "seq_len" not in m.source()
    x = _x(2, 5)
    np.testing.assert_allclose(m(x), _ort(path, x), rtol=2e-5, atol=2e-5)


def test_integer_arithmetic_on_stale_rows_is_refused(tmp_path):
    path = export(IntPath(), torch.randn(1, 12, D), tmp_path / "m.onnx")
    m = df.compile(path, [_x(1, 12)], dynamic=True, threads=1)
    seq = m.stats["dynamic"]["sequence"]
    assert seq["runtime"] is True, seq
    assert _rows(m)["stages"] == 0 and "i64" in _rows(m)["why"], _rows(m)
    for b, s in [(1, 12), (2, 5), (1, 1)]:
        x = _x(b, s)
        np.testing.assert_allclose(m(x), _ort(path, x), rtol=2e-5, atol=2e-5)


def test_the_planned_graph_is_proven_again(tmp_path):
    """The proof is made again on the graph the kernels come from: the padded graph without
    its masks (the length input still there) is refused, naming the unmasked operand."""
    path = export(Attention(), torch.randn(1, 12, D), tmp_path / "m.onnx")

    def load_at(s):
        return df.load(path, input_shapes={"x": [1, s, D]})

    ga, t = sequence.analyse(load_at, 12, {"x": {1: 0}})
    good_a, name = padded.masked_graph(ga, t)
    good_b, _ = padded.masked_graph(t.gb, t)
    rows, why = seq_extents.runtime_rows(good_a, 12, good_b, 11, name, {"x": {1: 0}})
    assert why is None and rows
    t.masks.clear()
    bare_a, name = padded.masked_graph(ga, t)
    bare_b, _ = padded.masked_graph(t.gb, t)
    rows, why = seq_extents.runtime_rows(bare_a, 12, bare_b, 11, name, {"x": {1: 0}})
    assert rows == {} and "unmasked" in why, why


def test_generate_cpu_checks_what_it_is_given(tmp_path):
    path = export(Attention(), torch.randn(1, 12, D), tmp_path / "m.onnx")
    ga, t = sequence.analyse(lambda s: df.load(path, input_shapes={"x": [1, s, D]}), 12, {"x": {1: 0}})
    ecg, _ = padded.masked_graph(ga, t)
    plan = df.plan.plan(ecg)
    some = next(v.id for n in ecg.nodes for v in n.outputs)
    with pytest.raises(df.Error, match="is not an input"):
        _core.generate_cpu(ecg.graph, plan, "scalar", seq_rows={some: {1: 0}}, length_input=7)
    with pytest.raises(df.Error, match="float32 scalar"):
        _core.generate_cpu(ecg.graph, plan, "scalar", seq_rows={some: {1: 0}}, length_input=0)
    with pytest.raises(df.Error, match="lacks"):
        _core.generate_cpu(ecg.graph, plan, "scalar", seq_rows={10 ** 6: {0: 0}}, length_input=1)
    with pytest.raises(df.Error, match="axis 9"):
        _core.generate_cpu(ecg.graph, plan, "scalar", seq_rows={some: {9: 0}}, length_input=1)
