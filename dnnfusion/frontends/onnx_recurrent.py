"""LSTM, GRU and RNN, imported unrolled over the (static) sequence: ONNX gives them no function
body; ONNX Runtime runs them. Per direction, the input projection of every time step is one
MatMul ([S, B, I] x W^T, plus the input biases); then each step is a MatMul of the hidden state
with R^T, the gates' arithmetic, and, with sequence_lens, Where-masks that keep the state past a
sequence's end and write zeros to Y there (so a reverse direction starts at each sequence's own
last step). The fusion planner puts each step's gate arithmetic in its MatMul's kernel (a
5-step nn.LSTM export compiles to 9 kernels).

Supported: directions forward, reverse and bidirectional; layout 0 and 1; biases; initial
states; LSTM peepholes; `clip`; GRU's linear_before_reset; activations Sigmoid, Tanh, Relu,
LeakyRelu, HardSigmoid, Elu, Softsign and Softplus (the ECG's). The sizes must be static at
import (input_shapes or example_inputs fix symbolic ones); refused with the reason otherwise:
LSTM input_forget=1, other activations, more than MAX_STEPS steps (a long sequence would be
thousands of operators)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import ShapeError, UnsupportedOperatorError
from dnnfusion.frontends.onnx_body import Body, function_proto

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
MAX_STEPS = 4096  # steps x directions unrolled into the ECG (each about 15 operators)
_DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
# activation (ONNX's spelling, case-insensitive) -> (ECG operator, its attributes from alpha/beta)
_ACTS = {"sigmoid": ("Sigmoid", ()), "tanh": ("Tanh", ()), "relu": ("Relu", ()), "leakyrelu": ("LeakyRelu", ("alpha",)),
         "hardsigmoid": ("HardSigmoid", ("alpha", "beta")), "elu": ("Elu", ("alpha",)), "softsign": ("Softsign", ()),
         "softplus": ("Softplus", ())}


def recurrent(imp: Any, node: Any) -> Any:
    """The FunctionProto an LSTM / GRU / RNN node is imported as (inputs in0.., outputs out0..)."""
    onnx, op, name = imp.onnx, node.op_type, node.name
    h = onnx.helper
    attrs = {a.name: h.get_attribute_value(a) for a in node.attribute}
    text = lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)  # noqa: E731
    direction = text(attrs.get("direction", b"forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ShapeError(f"node '{name}' ({op}): direction must be forward, reverse or bidirectional")
    if attrs.get("input_forget", 0):
        raise UnsupportedOperatorError(f"node '{name}' (LSTM): input_forget=1 (coupled input and forget gates) is "
                                       "not supported")
    layout = int(attrs.get("layout", 0))
    ins = list(node.input) + [""] * (8 - len(node.input))
    x, w, r = (imp.env[i] for i in ins[:3])
    dims = [*x.shape, *w.shape]
    if not all(isinstance(d, int) for d in dims):
        raise ShapeError(f"node '{name}' ({op}) needs static shapes at import (give input_shapes or example_inputs); "
                         f"X is {list(x.shape)}")
    S, B = (x.shape[1], x.shape[0]) if layout else (x.shape[0], x.shape[1])
    D, G = (2 if direction == "bidirectional" else 1), _GATES[op]
    H = int(attrs.get("hidden_size", w.shape[1] // G))
    if B * G * H > (1 << 24):  # the zero states and each step's gates: sizes no model has
        raise ShapeError(f"node '{name}' ({op}): batch {B} x {G} gates x hidden {H} is larger than dnnfusion "
                         "builds at import")
    if S * D > MAX_STEPS:
        raise UnsupportedOperatorError(f"node '{name}' ({op}): {S} steps x {D} directions; dnnfusion unrolls at most "
                                       f"{MAX_STEPS} steps at import")
    if w.shape[0] != D or w.shape[1] != G * H:
        raise ShapeError(f"node '{name}' ({op}): W is {list(w.shape)}, expected [{D}, {G * H}, input size]")
    acts = [text(a) for a in attrs.get("activations", [])] or _DEFAULT_ACTS[op] * D
    if len(acts) != len(_DEFAULT_ACTS[op]) * D:
        raise ShapeError(f"node '{name}' ({op}): {len(acts)} activations, expected {len(_DEFAULT_ACTS[op]) * D}")
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    from dnnfusion.dtypes import numpy_dtype

    b = Body(onnx, numpy_dtype(x.dtype))
    X = b.op("Transpose", ["in0"], perm=[1, 0, 2]) if layout else "in0"
    init_h = "in5" if ins[5] else None
    init_c = "in6" if ins[6] and op == "LSTM" else None
    if layout:  # initial states [B, D, H] -> [D, B, H]
        init_h = b.op("Transpose", [init_h], perm=[1, 0, 2]) if init_h else None
        init_c = b.op("Transpose", [init_c], perm=[1, 0, 2]) if init_c else None
    lens = b.op("Cast", ["in4"], to=7) if ins[4] else None
    ys, hs, cs = [], [], []
    clip = attrs.get("clip")
    n_act = len(_DEFAULT_ACTS[op])
    for d in range(D):
        f = [_activation(b, acts[d * n_act + k], alphas, betas, name, op) for k in range(n_act)]
        di = b.const(d, np.int64)
        wt = b.op("Transpose", [b.op("Gather", ["in1", di], axis=0)], perm=[1, 0])  # [I, G*H]
        rt = b.op("Transpose", [b.op("Gather", ["in2", di], axis=0)], perm=[1, 0])  # [H, G*H]
        xw = b.op("MatMul", [X, wt])                                                # [S, B, G*H]
        rb = None
        if ins[3]:
            bias = b.op("Gather", ["in3", di], axis=0)                              # [2*G*H]
            wb, rb = b.op("Split", [bias, b.const([G * H, G * H], np.int64)], n_out=2, axis=0)
            if op != "GRU":  # GRU's recurrent bias of the h gate sits inside the reset product
                xw = b.op("Add", [xw, b.op("Add", [wb, rb])])
                rb = None
            else:
                xw = b.op("Add", [xw, wb])
        hprev = b.op("Gather", [init_h, di], axis=0) if init_h else b.const(np.zeros((B, H)))
        cprev = (b.op("Gather", [init_c, di], axis=0) if init_c else b.const(np.zeros((B, H)))) if op == "LSTM" else None
        peep = None
        if op == "LSTM" and ins[7]:
            peep = b.op("Split", [b.op("Gather", ["in7", di], axis=0), b.const([H, H, H], np.int64)], n_out=3, axis=0)
        steps = range(S - 1, -1, -1) if (direction == "reverse" or d == 1) else range(S)
        ydir = [None] * S
        for t in steps:
            xt = b.op("Gather", [xw, b.const(t, np.int64)], axis=0)                 # [B, G*H]
            hr = b.op("MatMul", [hprev, rt])
            if op == "LSTM":
                hn, cn = _lstm_step(b, xt, hr, cprev, peep, f, H, clip)
            elif op == "GRU":
                hn, cn = _gru_step(b, xt, hr, hprev, rt, rb, f, H, clip, int(attrs.get("linear_before_reset", 0))), None
            else:
                hn, cn = f[0](_clip(b, b.op("Add", [xt, hr]), clip)), None
            yt = hn
            if lens:
                live = b.op("Unsqueeze", [b.op("Less", [b.const(t, np.int64), lens]), b.const([1], np.int64)])  # [B, 1]
                hn = b.op("Where", [live, hn, hprev])
                cn = b.op("Where", [live, cn, cprev]) if cn else None
                yt = b.op("Where", [live, yt, b.const(0.0)])
            ydir[t] = b.op("Unsqueeze", [yt, b.const([0, 1], np.int64)])              # [1, 1, B, H]
            hprev, cprev = hn, cn
        ys.append(b.op("Concat", ydir, axis=0) if S > 1 else ydir[0])               # [S, 1, B, H]
        hs.append(b.op("Unsqueeze", [hprev, b.const([0], np.int64)]))
        if op == "LSTM":
            cs.append(b.op("Unsqueeze", [cprev, b.const([0], np.int64)]))
    join = lambda vals, axis: b.op("Concat", vals, axis=axis) if len(vals) > 1 else vals[0]  # noqa: E731
    y, yh = join(ys, 1), join(hs, 0)
    outs = [b.op("Transpose", [y], perm=[2, 0, 1, 3]) if layout else y,
            b.op("Transpose", [yh], perm=[1, 0, 2]) if layout else yh]
    if op == "LSTM":
        yc = join(cs, 0)
        outs.append(b.op("Transpose", [yc], perm=[1, 0, 2]) if layout else yc)
    n_out = len(node.output)
    for k in range(n_out):
        b.nodes.append(h.make_node("Identity", [outs[k]], [f"out{k}"]))
    return function_proto(imp, op, len(node.input), b.nodes, n_out)


def _activation(b: Body, spelled: str, alphas: list, betas: list, name: str, op: str):
    key = spelled.lower()
    if key not in _ACTS:
        raise UnsupportedOperatorError(f"node '{name}' ({op}): activation '{spelled[:40]}' is not supported (supported: "
                                       "Sigmoid, Tanh, Relu, LeakyRelu, HardSigmoid, Elu, Softsign, Softplus)")
    ecg, params = _ACTS[key]
    kw = {}
    for p in params:  # alpha / beta of the parametric activations, in order
        src = alphas if p == "alpha" else betas
        if src:
            kw[p] = float(src.pop(0))
    return lambda v: b.op(ecg, [v], **kw)


def _clip(b: Body, v: str, clip: Any) -> str:
    if clip is None:
        return v
    return b.op("Clip", [v, b.const(-float(clip)), b.const(float(clip))])


def _lstm_step(b: Body, xt, hr, c, peep, f, H, clip):
    """(`clip` bounds each gate's input to its activation, peepholes included; not the cell's.)"""
    i, o, fg, cc = b.op("Split", [b.op("Add", [xt, hr]), b.const([H] * 4, np.int64)], n_out=4, axis=1)
    if peep:
        i = b.op("Add", [i, b.op("Mul", [peep[0], c])])
        fg = b.op("Add", [fg, b.op("Mul", [peep[2], c])])
    i, fg, cc = f[0](_clip(b, i, clip)), f[0](_clip(b, fg, clip)), f[1](_clip(b, cc, clip))
    cn = b.op("Add", [b.op("Mul", [fg, c]), b.op("Mul", [i, cc])])
    if peep:
        o = b.op("Add", [o, b.op("Mul", [peep[1], cn])])
    hn = b.op("Mul", [f[0](_clip(b, o, clip)), f[2](cn)])
    return hn, cn


def _gru_step(b: Body, xt, hr, hprev, rt, rb, f, H, clip, linear_before_reset):
    xz, xr, xh = b.op("Split", [xt, b.const([H] * 3, np.int64)], n_out=3, axis=1)
    if rb:
        hr = b.op("Add", [hr, rb])
    hz, hrr, hh = b.op("Split", [hr, b.const([H] * 3, np.int64)], n_out=3, axis=1)
    z = f[0](_clip(b, b.op("Add", [xz, hz]), clip))
    r = f[0](_clip(b, b.op("Add", [xr, hrr]), clip))
    if linear_before_reset:
        pre = b.op("Add", [xh, b.op("Mul", [r, hh])])
    else:  # (r * H) R_h^T (+ Rb_h): its own MatMul with the h block of R
        rh = b.op("Slice", [rt, b.const([2 * H], np.int64), b.const([3 * H], np.int64), b.const([1], np.int64)])
        pre = b.op("MatMul", [b.op("Mul", [r, hprev]), rh])
        if rb:
            pre = b.op("Add", [pre, b.op("Slice", [rb, b.const([2 * H], np.int64), b.const([3 * H], np.int64)])])
        pre = b.op("Add", [xh, pre])
    hc = f[1](_clip(b, pre, clip))
    one = b.const(1.0)
    return b.op("Add", [b.op("Mul", [b.op("Sub", [one, z]), hc]), b.op("Mul", [z, hprev])])
