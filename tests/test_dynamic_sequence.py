"""compile(..., dynamic=True) with a runtime sequence length (issue 17, dnnfusion/sequence.py):
one program compiled for the longest sequence runs every shorter one padded, the padded
positions masked where an operator mixes positions; a model whose padding cannot be proven
compiles a specialization per length instead, saying why. Every call is checked against ONNX
Runtime on the same dynamic file, at the call's own length."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import dnnfusion as df  # noqa: E402
from dnnfusion import padded, sequence  # noqa: E402
from dnnfusion.errors import ShapeError  # noqa: E402
from dnnfusion.zoo import dynamic_check  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript-based ONNX export"),
              pytest.mark.filterwarnings("ignore:The feature will be removed")]

D = 16


@pytest.fixture(autouse=True)
def _poisoned_arena(monkeypatch):
    """Every program here runs with its arena and outputs filled with NaN first
    (DNNF_POISON_ARENA): the padded rows the kernels leave uncomputed (seq_extents) must not
    reach a valid output, and stale memory from an earlier, longer call must not hide it."""
    monkeypatch.setenv("DNNF_POISON_ARENA", "1")


def export(module, example, path):
    """`module` as ONNX with axis 0 of its input "batch" and axis 1 "seq", output likewise
    where it has them."""
    torch.manual_seed(0)
    with torch.no_grad():
        out = module(example)
    axes = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", **({1: "seq"} if out.dim() >= 3 else {})}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (example,), str(path), input_names=["x"], output_names=["y"],
                          dynamic_axes=axes, dynamo=False, opset_version=17)
    return str(path)


class Attention(torch.nn.Module):
    """Self-attention with no mask input: without the runtime mask the padded keys would take
    part in every softmax and every weighted sum."""

    def __init__(self, heads=2):
        super().__init__()
        self.qkv, self.o, self.h = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D), heads

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) / (D // self.h) ** 0.5, dim=-1)
        return self.o((a @ v).transpose(1, 2).reshape(b, s, D)) + x


class Pooling(torch.nn.Module):
    """Reductions over the sequence: mean pooling (a masked sum over the runtime count, also
    over the sequence and D together), max, min and sum."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(D, D)

    def forward(self, x):
        h = torch.tanh(self.l(x)) + 1.5  # nonzero at padded positions
        both = h.mean((1, 2), keepdim=True).squeeze(1)  # over the sequence and D: count S * D
        return torch.cat([h.mean(1), h.amax(1), h.sum(1), (-h).amin(1), h.mean(1) * both], dim=-1)


class Shift(torch.nn.Module):
    """MobileBERT's trigram embedding: each position joined with its neighbours, the one past
    the end padded with zeros; the padding must see zeros, not the next padded position."""

    def forward(self, x):
        h = x + 1.0
        nxt = torch.nn.functional.pad(h[:, 1:], (0, 0, 0, 1))
        prev = torch.nn.functional.pad(h[:, :-1], (0, 0, 1, 0))
        return torch.cat([nxt, h, prev], dim=2)


class LastToken(torch.nn.Module):
    def forward(self, x):
        return x[:, -1] * 2.0


class ScaledByLength(torch.nn.Module):
    def forward(self, x):
        return x * x.shape[1]


def _ort(path, x):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def _x(b, s, seed=0):
    return np.random.default_rng(seed + 7 * s + b).standard_normal((b, s, D)).astype(np.float32)


@pytest.mark.parametrize("module", [Attention(), Pooling(), Shift()], ids=lambda m: type(m).__name__)
def test_one_program_serves_every_shorter_sequence(tmp_path, module):
    path = export(module, torch.randn(1, 12, D), tmp_path / "m.onnx")
    m = df.compile(path, [_x(1, 12)], dynamic=True, threads=1)
    seq = m.stats["dynamic"]["sequence"]
    assert seq["runtime"] is True and seq["maximum"] == 12 and seq["masked_operands"] >= 1, seq
    for b, s in [(1, 12), (2, 7), (1, 1), (3, 11), (1, 2)]:
        x = _x(b, s)
        np.testing.assert_allclose(m(x), _ort(path, x), rtol=2e-5, atol=2e-5, err_msg=f"batch {b}, seq {s}")
    assert seq["compiles"] == 1 and seq["calls"] >= 5
    assert "specializations" not in m.stats and m.stats["dynamic"]["specialized"] == []


def test_the_masks_are_what_makes_it_right(tmp_path):
    """The same padded program without its masks gives other numbers on a short sequence:
    the masks are not decoration."""
    path = export(Attention(), torch.randn(1, 12, D), tmp_path / "m.onnx")

    def load_at(s):
        return df.load(path, input_shapes={"x": [1, s, D]})

    ga, t = sequence.analyse(load_at, 12, {"x": {1: 0}})
    assert len(t.masks) == 3  # Softmax's input, and both operands of the weighted sum
    x = _x(1, 5)
    xpad = np.concatenate([x, np.zeros((1, 7, D), np.float32)], axis=1)
    want = _ort(path, x)
    masked, _ = padded.masked_graph(ga, t)
    np.testing.assert_allclose(df.compile(masked)(xpad, np.array(5, np.float32))[:, :5], want, rtol=2e-5, atol=2e-5)
    t.masks.clear()
    bare, _ = padded.masked_graph(ga, t)
    assert np.abs(df.compile(bare)(xpad, np.array(5, np.float32))[:, :5] - want).max() > 1e-3


def test_a_longer_sequence_compiles_again_for_its_length(tmp_path):
    path = export(Attention(), torch.randn(1, 6, D), tmp_path / "m.onnx")
    m = df.compile(path, [_x(1, 6)], dynamic=True, threads=1)
    x = _x(2, 9)
    np.testing.assert_allclose(m(x), _ort(path, x), rtol=2e-5, atol=2e-5)
    seq = m.stats["dynamic"]["sequence"]
    assert seq["compiles"] == 2 and seq["maximum"] == 9
    x = _x(1, 4)  # shorter ones now run padded to 9
    np.testing.assert_allclose(m(x), _ort(path, x), rtol=2e-5, atol=2e-5)
    assert seq["compiles"] == 2


@pytest.mark.parametrize("module,why", [(LastToken(), "counted from its end"),
                                         (ScaledByLength(), "uses the length as a value")],
                         ids=["LastToken", "ScaledByLength"])
def test_a_model_that_reads_the_length_is_specialized_instead(tmp_path, module, why):
    """x[:, -1] reads a position counted from the end, x * x.shape[1] the length itself: padding
    would change their numbers, so each length compiles its own program, and stats say why."""
    path = export(module, torch.randn(1, 8, D), tmp_path / "m.onnx")
    m = df.compile(path, [_x(1, 8)], dynamic=True, threads=1)
    seq = m.stats["dynamic"]["sequence"]
    assert seq["runtime"] is False and why in seq["why"], seq
    for b, s in [(1, 8), (2, 5), (1, 3)]:
        x = _x(b, s)
        np.testing.assert_allclose(m(x), _ort(path, x), rtol=1e-5, atol=1e-5)
    assert len(m.stats["specializations"]) == 2


def test_a_wrong_call_names_what_the_model_takes(tmp_path):
    """Errors describe the call and the model (its sequence axis any length), not the padded
    arrays the program runs."""
    path = export(Attention(), torch.randn(1, 8, D), tmp_path / "m.onnx")
    m = df.compile(path, [_x(1, 8)], dynamic=True, threads=1)
    with pytest.raises(df.DTypeError, match=r"expected f32\[B,S,16\] \(S: any sequence length, B: any batch\), "
                                            r"got float64 \[2, 4, 16\]"):
        m(_x(2, 4).astype(np.float64))
    with pytest.raises(ShapeError, match=r"expected f32\[B,S,16\] .*got \[1, 4, 17\]"):
        m(np.zeros((1, 4, D + 1), np.float32))
    with pytest.raises(ShapeError, match=r"expected f32\[B,S,16\] .*got \[4, 16\]"):
        m(np.zeros((4, D), np.float32))
    with pytest.raises(ShapeError, match="at least 1; got 0"):
        m(np.zeros((1, 0, D), np.float32))


def test_inputs_whose_lengths_disagree_are_refused(tmp_path):
    class Two(torch.nn.Module):
        def forward(self, a, b):
            return torch.softmax(a, dim=1) + b

    path = str(tmp_path / "two.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Two(), (torch.randn(1, 6, D), torch.randn(1, 6, D)), path, input_names=["a", "b"],
                          dynamic_axes={"a": {0: "batch", 1: "seq"}, "b": {0: "batch", 1: "seq"}},
                          dynamo=False)
    m = df.compile(path, [_x(1, 6), _x(1, 6, 1)], dynamic=True)
    assert m.stats["dynamic"]["sequence"]["runtime"] is True
    with pytest.raises(ShapeError, match="sequence axes must agree"):
        m(_x(1, 4), _x(1, 5))
    a, b = _x(1, 4), _x(1, 4, 1)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})[0]
    np.testing.assert_allclose(m(a, b), want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", ["gpt2", "mobilebert"])
def test_zoo_transformers_run_every_shorter_sequence_through_one_program(name):
    """GPT-2 (causal mask from a folded Trilu, Split of the fused QKV) and MobileBERT (the
    trigram embedding's shifts): the example's length and shorter ones through the first
    program, the longer one compiled again once."""
    rows = dynamic_check.check(name, reduced=True, threads=1, dynamic_batch=True)
    for r in rows:
        assert r["ok"], dynamic_check.fmt(r)
    sizes = dynamic_check.sizes_for(name, dynamic_batch=True)
    longest = sizes[0][1]
    want, n = [], 1
    for _, s in sizes:
        if s > longest:
            longest, n = s, n + 1
        want.append(n)
    assert [r["compiled"] for r in rows] == want


class TokenModel(torch.nn.Module):
    """Token ids in, a causal self-attention over their embeddings, mean-pooled out."""

    def __init__(self):
        super().__init__()
        self.emb, self.att = torch.nn.Embedding(50, D), Attention()

    def forward(self, ids):
        h = self.emb(ids)
        s = ids.shape[1]
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        a = torch.softmax((h @ h.transpose(1, 2)).masked_fill(~causal, float("-inf")), dim=-1)
        return self.att(a @ h).mean(1)


def test_a_module_torch_cannot_export_is_a_clear_error():
    """nn.TransformerEncoderLayer in eval mode runs PyTorch's fused fast path, which the
    TorchScript ONNX exporter refuses: a dnnfusion.Error naming the module and what to do, not
    torch's exception."""
    layer = torch.nn.TransformerEncoderLayer(D, 2, 32, batch_first=True, dropout=0.0).eval()
    with pytest.raises(df.ModelFormatError, match="could not export TransformerEncoderLayer.*dynamic_axes"):
        df.compile(layer, [torch.randn(1, 8, D)], dynamic=True)


def test_a_torch_module_with_token_inputs_gets_a_runtime_sequence_too():
    module = TokenModel().eval()
    gen = torch.Generator().manual_seed(3)
    m = df.compile(module, [torch.randint(0, 50, (1, 10), generator=gen)], dynamic=True, threads=1)
    seq = m.stats["dynamic"]["sequence"]
    assert seq["runtime"] is True and seq["maximum"] == 10, seq
    for b, s in [(1, 10), (2, 4), (3, 9), (1, 1)]:
        ids = torch.randint(0, 50, (b, s), generator=gen)
        with torch.no_grad():
            torch.testing.assert_close(m(ids), module(ids), rtol=2e-5, atol=2e-5)
    assert seq["compiles"] == 1 and seq["calls"] >= 4


@pytest.mark.parametrize("case", range(10))
def test_random_graphs_match_ort_at_every_length(case):
    """dnnfusion/testing/sequence_fuzz.py: a random graph of the operators the proof decides
    on, compiled once with dynamic=True, every call against ONNX Runtime (a longer run:
    python -m dnnfusion.testing.sequence_fuzz --cases 300 --seed 3)."""
    from dnnfusion.testing import sequence_fuzz

    r = sequence_fuzz.run_case(case, seed=11)
    assert r["worst"] <= sequence_fuzz.TOL, r


def test_sequence_buckets_compile_a_shorter_program_once_per_halving(tmp_path):
    """sequence_buckets=True: a call runs padded to the shortest of 12, 6, 3, 2 that holds it,
    each compiled on its first call; the numbers are ORT's at the call's own length."""
    path = export(Attention(), torch.randn(1, 12, D), tmp_path / "m.onnx")
    m = df.compile(path, [_x(1, 12)], dynamic=True, sequence_buckets=True, threads=1)
    seq = m.stats["dynamic"]["sequence"]
    assert m._padder.bucket(12) == 12 and m._padder.bucket(7) == 12 and m._padder.bucket(6) == 6
    assert m._padder.bucket(4) == 6 and m._padder.bucket(3) == 3 and m._padder.bucket(1) == 2
    for b, s, compiles in [(1, 12, 1), (2, 5, 2), (1, 6, 2), (1, 1, 3), (3, 2, 3), (1, 9, 3)]:
        x = _x(b, s)
        np.testing.assert_allclose(m(x), _ort(path, x), rtol=2e-5, atol=2e-5, err_msg=f"batch {b}, seq {s}")
        assert seq["compiles"] == compiles, (s, seq)
    assert seq["buckets"] == [2, 6, 12]
    with pytest.raises(df.Error, match="option of dynamic=True"):
        df.compile(path, [_x(1, 12)], sequence_buckets=True)


def test_a_torch_export_dynamic_dim_is_a_runtime_length_too():
    """The dynamo exporter (torch.export with dynamic_shapes) writes other shape arithmetic than
    the TorchScript one; the same proof takes it."""
    module = TokenModel().eval()
    ex = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(5))
    dims = ({0: torch.export.Dim("batch", max=64), 1: torch.export.Dim("seq", min=2, max=512)},)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = torch.onnx.export(module, (ex,), dynamo=True, dynamic_shapes=dims, input_names=["x"]
                                 ).model_proto.SerializeToString()
    m = df.compile(data, [ex.numpy()], dynamic=True, threads=1)
    seq = m.stats["dynamic"]["sequence"]
    assert seq["runtime"] is True and seq["dimension"] == "seq", seq
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for b, s in [(1, 12), (2, 5), (3, 3)]:
        ids = np.random.default_rng(b * s).integers(0, 50, (b, s))
        np.testing.assert_allclose(m(ids), sess.run(None, {"x": ids})[0], rtol=2e-5, atol=2e-5)
    assert seq["compiles"] == 1


def test_set_num_threads_reaches_the_programs_compiled_later(tmp_path):
    path = export(Attention(), torch.randn(1, 8, D), tmp_path / "m.onnx")
    m = df.compile(path, [_x(1, 8)], dynamic=True, sequence_buckets=True, threads=1)
    m(_x(1, 3))  # compiles the bucket of 4 at one thread
    m.set_num_threads(2)
    x = _x(1, 3)
    np.testing.assert_allclose(m(x), _ort(path, x), rtol=2e-5, atol=2e-5)
    m(_x(1, 11))  # grows: compiled again, then run at the caller's threads
    assert {p.stats["threads"] for p in m._padder.programs.values()} == {2}
