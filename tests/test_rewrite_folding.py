"""The folding passes of paper §4.2: constant folding (with the NumPy reference or a given
evaluator, which may decline; outputs much larger than their inputs are kept), and Conv/Gemm
+ BatchNormalization folding, the per-channel Mul/Add/Div/Sub chains after it included, each
checked against the unfolded graph's values and, for Conv and Gemm, against PyTorch in eval
mode."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

from rewrite_helpers import feeds, graph, rw


# ---- constant folding ----------------------------------------------------------------------
def test_fold_constants_folds_constant_subgraphs_and_shapes():
    g = graph("%a: f32[2] = const [1.0, 4.0]\n%s: f32[2] = Sqrt(%a)\n%t: f32[2] = Neg(%s)\n"
              "%shape: i64[2] = Shape(%x)\n%n: i64[] = Size(%x)\n"
              "%u: f32[4,8] = Add(%x, %x)\nreturn %u, %t, %shape, %n", "%x: f32[4,8]")
    out = rw.fold_constants(g)
    out.verify()
    assert [n.op for n in out.nodes] == ["Add"]
    consts = {c.name: c.numpy() for c in out.constants}
    np.testing.assert_array_equal(consts["t"], [-1.0, -2.0])
    np.testing.assert_array_equal(consts["shape"], [4, 8])
    assert consts["n"] == 32 and consts["n"].shape == ()
    x = feeds(g, False)
    for a, b in zip(g.run_reference(*x), out.run_reference(*x)):
        np.testing.assert_array_equal(a, b)


def test_fold_constants_keeps_outputs_much_larger_than_inputs():
    g = graph("%s: i64[2] = const [512, 512]\n%e: f32[] = const [1.0]\n"
              "%big: f32[512,512] = Expand(%e, %s)\n%r: f32[512,512] = Add(%big, %x)\nreturn %r",
              "%x: f32[512,512]")
    out = rw.fold_constants(g)
    assert [n.op for n in out.nodes] == ["Expand", "Add"]   # 1 MiB from 8 bytes: kept
    small = graph("%s: i64[2] = const [4, 8]\n%e: f32[] = const [1.0]\n"
                  "%big: f32[4,8] = Expand(%e, %s)\n%r: f32[4,8] = Add(%big, %x)\nreturn %r",
                  "%x: f32[4,8]")
    assert [n.op for n in rw.fold_constants(small).nodes] == ["Add"]


def test_fold_constants_uses_the_given_evaluator_and_respects_declines():
    calls = []

    def evaluator(op, inputs, attrs, num_outputs):
        calls.append(op)
        if op == "Exp":
            raise NotImplementedError("not here")
        return [np.asarray(-inputs[0])]

    g = graph("%a: f32[2] = const [1.0, 4.0]\n%n: f32[2] = Neg(%a)\n%e: f32[2] = Exp(%n)\n"
              "return %e", "%x: f32[4,8]")
    out = rw.fold_constants(g, evaluator)
    assert calls == ["Neg", "Exp"]
    assert [n.op for n in out.nodes] == ["Exp"]
    np.testing.assert_array_equal(out.nodes[0].inputs[0].numpy(), [-1.0, -4.0])


def test_fold_constants_rejects_a_wrong_evaluator():
    g = graph("%a: f32[2] = const [1.0, 4.0]\n%n: f32[2] = Neg(%a)\nreturn %n", "%x: f32[4,8]")
    with pytest.raises(df.InternalError, match="evaluated 'n' to f64"):
        rw.fold_constants(g, lambda op, ins, attrs, n: [np.zeros(2)])


# ---- BatchNormalization folding ------------------------------------------------------------
def _conv_bn_graph(dims: int, groups: int, bias: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    cin, cout, n = 4, 8, 2
    spatial = [7, 6, 5][:dims]
    kernel = [3, 2, 3][:dims]
    g = _core.Graph("convbn")
    x = g.add_input("x", "f32", [n, cin, *spatial])
    w = g.add_constant("w", rng.standard_normal((cout, cin // groups, *kernel)).astype(np.float32))
    ins = [x, w]
    if bias:
        ins.append(g.add_constant("b", rng.standard_normal(cout).astype(np.float32)))
    (y,) = g.add_node("Conv", ins, {"group": groups, "pads": [1] * (2 * dims)}, 1, "conv")
    params = [rng.uniform(0.5, 2, cout), rng.standard_normal(cout), rng.standard_normal(cout),
              rng.uniform(0.5, 2, cout)]
    consts = [g.add_constant("bn." + nm, p.astype(np.float32))
              for nm, p in zip(["scale", "bias", "mean", "var"], params)]
    (z,) = g.add_node("BatchNormalization", [y, *consts], {"epsilon": 1e-3}, 1, "bn")
    (r,) = g.add_node("Relu", [z], {}, 1, "relu")
    g.set_outputs([r])
    return df.ECG(g), params


@pytest.mark.parametrize("dims,groups,bias", [(1, 1, True), (2, 1, False), (2, 2, True),
                                              (2, 4, False), (3, 1, True), (3, 2, False)])
def test_fold_batch_norm_into_conv(dims, groups, bias):
    g, _ = _conv_bn_graph(dims, groups, bias)
    out = rw.fold_batch_norm(g)
    out.verify()
    assert [n.op for n in out.nodes] == ["Conv", "Relu"]
    assert out.nodes[0].attrs["group"] == groups
    x = np.random.default_rng(1).standard_normal(g.inputs[0].shape).astype(np.float32)
    np.testing.assert_allclose(out.run_reference(x)[0], g.run_reference(x)[0], rtol=1e-4, atol=1e-5)


def _randomize_torch_bn(bn) -> None:
    """Non-trivial scale, shift and running statistics for a torch BatchNorm."""
    import torch

    with torch.no_grad():
        bn.weight.uniform_(0.5, 2)
        bn.bias.normal_()
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2)


def _add_torch_bn(g, y, bn, attrs: dict):
    """A BatchNormalization of y in g with the parameters of the torch BatchNorm `bn`."""
    ps = [bn.weight, bn.bias, bn.running_mean, bn.running_var]
    (z,) = g.add_node("BatchNormalization",
                      [y, *[g.add_constant(f"p{i}", p.detach().numpy()) for i, p in enumerate(ps)]],
                      attrs, 1)
    return z


@pytest.mark.parametrize("dims,groups,bias", [(1, 1, False), (2, 2, True), (3, 1, True)])
def test_fold_batch_norm_matches_torch_eval(dims, groups, bias):
    torch = pytest.importorskip("torch")
    conv_cls = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[dims]
    bn_cls = {1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm2d, 3: torch.nn.BatchNorm3d}[dims]
    torch.manual_seed(0)
    conv = conv_cls(4, 6, 3, padding=1, groups=groups, bias=bias)
    bn = bn_cls(6, eps=1e-3)
    _randomize_torch_bn(bn)
    model = torch.nn.Sequential(conv, bn).eval()
    g = _core.Graph("t")
    shape = [2, 4, *[5] * dims]
    x = g.add_input("x", "f32", shape)
    ins = [x, g.add_constant("w", conv.weight.detach().numpy())]
    if bias:
        ins.append(g.add_constant("b", conv.bias.detach().numpy()))
    (y,) = g.add_node("Conv", ins, {"group": groups, "pads": [1] * (2 * dims)}, 1)
    z = _add_torch_bn(g, y, bn, {"epsilon": 1e-3})
    g.set_outputs([z])
    out = rw.fold_batch_norm(df.ECG(g))
    assert [n.op for n in out.nodes] == ["Conv"]
    xv = torch.randn(*shape)
    with torch.no_grad():
        want = model(xv).numpy()
    np.testing.assert_allclose(out.run_reference(xv.numpy())[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("c_shape", [None, (6,), (1, 6), (3, 1), ()])
def test_fold_batch_norm_into_gemm(trans_b, c_shape):
    rng = np.random.default_rng(2)
    g = _core.Graph("gemmbn")
    a = g.add_input("a", "f32", [3, 5])
    b = g.add_constant("B", rng.standard_normal((6, 5) if trans_b else (5, 6)).astype(np.float32))
    ins = [a, b]
    if c_shape is not None:
        ins.append(g.add_constant("C", np.asarray(rng.standard_normal(c_shape), np.float32)))
    (y,) = g.add_node("Gemm", ins, {"transB": trans_b, "alpha": 0.5, "beta": 2.0}, 1)
    ps = [rng.uniform(0.5, 2, 6), rng.standard_normal(6), rng.standard_normal(6), rng.uniform(0.5, 2, 6)]
    (z,) = g.add_node("BatchNormalization",
                      [y, *[g.add_constant(f"p{i}", p.astype(np.float32)) for i, p in enumerate(ps)]], {}, 1)
    g.set_outputs([z])
    before = df.ECG(g)
    out = rw.fold_batch_norm(before)
    out.verify()
    assert [n.op for n in out.nodes] == ["Gemm"]
    x = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(out.run_reference(x)[0], before.run_reference(x)[0], rtol=1e-4, atol=1e-5)


def test_fold_batch_norm_into_gemm_matches_torch_linear_bn_eval():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    lin, bn = torch.nn.Linear(5, 6), torch.nn.BatchNorm1d(6)
    _randomize_torch_bn(bn)
    model = torch.nn.Sequential(lin, bn).eval()
    g = _core.Graph("t")
    a = g.add_input("a", "f32", [3, 5])
    (y,) = g.add_node("Gemm", [a, g.add_constant("W", lin.weight.detach().numpy()),
                               g.add_constant("b", lin.bias.detach().numpy())], {"transB": 1}, 1)
    z = _add_torch_bn(g, y, bn, {})
    g.set_outputs([z])
    out = rw.fold_batch_norm(df.ECG(g))
    assert [n.op for n in out.nodes] == ["Gemm"]
    x = torch.randn(3, 5)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(out.run_reference(x.numpy())[0], want, rtol=1e-4, atol=1e-5)


def test_fold_batch_norm_absorbs_per_channel_mul_add_chains():
    # conv -> bn -> *k -> +d -> /e -> -f -> relu, the constants broadcasting per channel
    g, _ = _conv_bn_graph(2, 1, True)
    src = g.graph
    g2 = _core.Graph("chain")
    x = g2.add_input("x", "f32", src.inputs[0].shape)
    conv_node = src.nodes[0]
    cins = [x] + [g2.add_constant(v.name, v.numpy()) for v in conv_node.inputs[1:]]
    (y,) = g2.add_node("Conv", cins, conv_node.attrs, 1, "conv")
    bn = src.nodes[1]
    (z,) = g2.add_node("BatchNormalization",
                       [y] + [g2.add_constant(v.name, v.numpy()) for v in bn.inputs[1:]], bn.attrs, 1)
    rng = np.random.default_rng(3)
    k = g2.add_constant("k", rng.uniform(0.5, 2, (8, 1, 1)).astype(np.float32))
    d = g2.add_constant("d", rng.standard_normal((1, 8, 1, 1)).astype(np.float32))
    e = g2.add_constant("e", np.float32(2.0).reshape(()))
    f = g2.add_constant("f", rng.standard_normal((8, 1, 1)).astype(np.float32))
    (m,) = g2.add_node("Mul", [k, z], {}, 1)
    (a,) = g2.add_node("Add", [m, d], {}, 1)
    (q,) = g2.add_node("Div", [a, e], {}, 1)
    (s,) = g2.add_node("Sub", [q, f], {}, 1)
    (r,) = g2.add_node("Relu", [s], {}, 1)
    g2.set_outputs([r])
    before = df.ECG(g2)
    out = rw.fold_batch_norm(before)
    assert [n.op for n in out.nodes] == ["Conv", "Relu"]
    xv = np.random.default_rng(4).standard_normal(before.inputs[0].shape).astype(np.float32)
    np.testing.assert_allclose(out.run_reference(xv)[0], before.run_reference(xv)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["second_consumer", "per_spatial", "not_constant", "graph_output"])
def test_fold_batch_norm_does_not_apply(case):
    rng = np.random.default_rng(5)
    g = _core.Graph("no")
    x = g.add_input("x", "f32", [1, 3, 4, 4])
    w = g.add_constant("w", rng.standard_normal((2, 3, 1, 1)).astype(np.float32))
    (y,) = g.add_node("Conv", [x, w], {}, 1, "conv")
    if case == "per_spatial":   # varies along W: not a per-channel map
        c = g.add_constant("c", rng.standard_normal((1, 1, 4)).astype(np.float32))
        (z,) = g.add_node("Mul", [y, c], {}, 1)
    elif case == "not_constant":
        s = g.add_input("s", "f32", [2, 1, 1])
        (z,) = g.add_node("Mul", [y, s], {}, 1)
    else:
        c = g.add_constant("c", rng.standard_normal((2, 1, 1)).astype(np.float32))
        (z,) = g.add_node("Add", [y, c], {}, 1)
    outs = [z]
    if case == "second_consumer":
        (r,) = g.add_node("Relu", [y], {}, 1)
        outs.append(r)
    if case == "graph_output":
        outs.append(y)
    g.set_outputs(outs)
    out = rw.fold_batch_norm(df.ECG(g))
    assert len(out.nodes) == len(g.nodes)
