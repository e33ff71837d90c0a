"""Structural fuzzing of the ONNX front door (issue 17 part 5): mutated ONNX models against
`load` and `compile`. Every case must end in a `dnnfusion.Error` or in a compiled model whose
result matches the NumPy reference; a Python exception of another type, a crash or a hang is
a bug.

Mutations are structural (dims negative, zero or huge; element types out of range; node
inputs renamed to nothing or to the node's own output; attributes of the wrong type or size;
initializers truncated or removed; opsets and domains changed; op types swapped; outputs
duplicated) and byte-level (truncation, flipped bytes), applied to small valid models.

    python -m dnnfusion.testing.proto_fuzz --cases 300 [--seed 1] [--compile-every 10]
    python -m dnnfusion.testing.proto_fuzz --atheris -max_total_time=60   # coverage-guided

The first runs seeded cases in this process and prints the case it is on before each, so a
crash or a hang names its case (tests/test_fuzz_structural.py runs it in a child process
with a time limit). The second hands the byte-level search to atheris when it is installed."""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import types

import numpy as np

_TYPES = list(range(0, 27))  # every TensorProto element type code and a few beyond


def seed_models() -> list[bytes]:
    """Small valid models: a conv net, an attention block, an elementwise diamond with
    integer arithmetic and a reduction, and operators imported as others (LSTM, Einsum,
    GroupNormalization, Celu, LpNormalization, OneHot)."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)

    def f(*s):
        return rng.standard_normal(s).astype(np.float32)

    out = []
    g = h.make_graph(
        [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
         h.make_node("Relu", ["c"], ["r"]),
         h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         h.make_node("Flatten", ["p"], ["fl"]),
         h.make_node("Gemm", ["fl", "fw", "fb"], ["y"], transB=1)],
        "conv", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 5])],
        [nh.from_array(f(4, 3, 3, 3), "w"), nh.from_array(f(4), "b"), nh.from_array(f(5, 64), "fw"),
         nh.from_array(f(5), "fb")])
    out.append(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
    g = h.make_graph(
        [h.make_node("MatMul", ["x", "wq"], ["q"]), h.make_node("MatMul", ["x", "wk"], ["k"]),
         h.make_node("Reshape", ["q", "s4"], ["q4"]), h.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
         h.make_node("Reshape", ["k", "s4"], ["k4"]), h.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
         h.make_node("MatMul", ["qt", "kt"], ["sc"]), h.make_node("Softmax", ["sc"], ["pr"], axis=-1),
         h.make_node("ReduceMean", ["pr", "ax"], ["m"], keepdims=0),
         h.make_node("LayerNormalization", ["x", "g", "bb"], ["ln"], axis=-1)],
        "attn", [h.make_tensor_value_info("x", T.FLOAT, [1, 6, 8])],
        [h.make_tensor_value_info("m", T.FLOAT, [1, 2, 6]), h.make_tensor_value_info("ln", T.FLOAT, [1, 6, 8])],
        [nh.from_array(f(8, 8), "wq"), nh.from_array(f(8, 8), "wk"),
         nh.from_array(np.array([1, 6, 2, 4], np.int64), "s4"), nh.from_array(np.array([3], np.int64), "ax"),
         nh.from_array(f(8), "g"), nh.from_array(f(8), "bb")])
    out.append(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))
    g = h.make_graph(
        [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Mul", ["x", "s"], ["m"]),
         h.make_node("Add", ["m", "s"], ["a"]), h.make_node("Cast", ["a"], ["i"], to=T.INT64),
         h.make_node("Mul", ["i", "two"], ["i2"]), h.make_node("ReduceSum", ["i2", "ax"], ["rs"], keepdims=1),
         h.make_node("Concat", ["a", "s"], ["cc"], axis=1), h.make_node("Slice", ["cc", "st", "en", "sa"], ["y"])],
        "diamond", [h.make_tensor_value_info("x", T.FLOAT, [2, 5])],
        [h.make_tensor_value_info("y", T.FLOAT, [2, 4]), h.make_tensor_value_info("rs", T.INT64, [2, 1])],
        [nh.from_array(np.array(2, np.int64), "two"), nh.from_array(np.array([1], np.int64), "ax"),
         nh.from_array(np.array([3], np.int64), "st"), nh.from_array(np.array([7], np.int64), "en"),
         nh.from_array(np.array([1], np.int64), "sa")])
    out.append(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))
    # operators imported as the operators they are made of (frontends/onnx_functions.py)
    g = h.make_graph(
        [h.make_node("LSTM", ["x", "lw", "lr", "lb"], ["ly", "lh"], hidden_size=3, direction="bidirectional"),
         h.make_node("Einsum", ["lh", "ew"], ["e"], equation="dbh,hk->bdk"),
         h.make_node("GroupNormalization", ["e", "gs", "gb"], ["gn"], num_groups=1, epsilon=1e-5),
         h.make_node("Celu", ["gn"], ["ce"], alpha=0.5), h.make_node("LpNormalization", ["ce"], ["y"], p=2),
         h.make_node("OneHot", ["oi", "od", "ov"], ["oh"], axis=-1)],
        "composite", [h.make_tensor_value_info("x", T.FLOAT, [3, 2, 4]), h.make_tensor_value_info("oi", T.INT64, [2])],
        [h.make_tensor_value_info("y", T.FLOAT, [2, 2, 5]), h.make_tensor_value_info("oh", T.FLOAT, [2, 3])],
        [nh.from_array(f(2, 12, 4), "lw"), nh.from_array(f(2, 12, 3), "lr"), nh.from_array(f(2, 24), "lb"),
         nh.from_array(f(3, 5), "ew"), nh.from_array(f(2), "gs"), nh.from_array(f(2), "gb"),
         nh.from_array(np.array(3, np.int64), "od"), nh.from_array(np.array([0.0, 1.0], np.float32), "ov")])
    out.append(h.make_model(g, opset_imports=[h.make_opsetid("", 21)]))
    for m in out:
        onnx.checker.check_model(m, full_check=True)
    return [m.SerializeToString() for m in out]


def mutate(data: bytes, rnd: random.Random) -> bytes:
    """One to three structural or byte-level mutations of a serialized model."""
    import onnx

    if rnd.random() < 0.15:  # byte level
        b = bytearray(data)
        if rnd.random() < 0.5:
            return bytes(b[: rnd.randrange(len(b))])
        for _ in range(rnd.randint(1, 8)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        return bytes(b)
    m = onnx.ModelProto()
    m.ParseFromString(data)
    for _ in range(rnd.randint(1, 3)):
        try:
            rnd.choice(_MUTATIONS)(m, rnd)
        except (IndexError, ValueError):  # a mutation that does not apply to this model
            pass
    return m.SerializeToString()


def _value_infos(m):
    g = m.graph
    return [*g.input, *g.output, *g.value_info]


def _m_dim(m, rnd):
    vis = [v for v in _value_infos(m) if v.type.tensor_type.shape.dim]
    if vis:
        d = rnd.choice(rnd.choice(vis).type.tensor_type.shape.dim)
        d.dim_value = rnd.choice([0, -1, -7, 1, 3, 2**31, 2**40, 2**62])


def _m_dim_param(m, rnd):
    vis = [v for v in _value_infos(m) if v.type.tensor_type.shape.dim]
    if vis:
        d = rnd.choice(rnd.choice(vis).type.tensor_type.shape.dim)
        d.dim_param = rnd.choice(["N", "", "batch size", "x'; system(\"rm -rf /\")", "\u00e9\u00e8"])


def _m_elem_type(m, rnd):
    vis = _value_infos(m)
    if vis:
        rnd.choice(vis).type.tensor_type.elem_type = rnd.choice(_TYPES)


def _m_rank(m, rnd):
    vis = [v for v in _value_infos(m) if v.type.tensor_type.HasField("shape")]
    if vis:
        v = rnd.choice(vis)
        if rnd.random() < 0.5 and v.type.tensor_type.shape.dim:
            del v.type.tensor_type.shape.dim[-1]
        else:
            v.type.tensor_type.shape.dim.add().dim_value = rnd.choice([1, 2, 5])


def _m_node_input(m, rnd):
    if not m.graph.node:
        return
    n = rnd.choice(m.graph.node)
    if n.input:
        i = rnd.randrange(len(n.input))
        n.input[i] = rnd.choice(["", "nowhere", n.output[0], m.graph.node[-1].output[0], m.graph.input[0].name])


def _m_drop_input(m, rnd):
    if not m.graph.node:
        return
    n = rnd.choice(m.graph.node)
    if n.input:
        del n.input[rnd.randrange(len(n.input))]
    elif rnd.random() < 0.5:
        n.input.append("x")


def _m_extra_input(m, rnd):
    if not m.graph.node:
        return
    n = rnd.choice(m.graph.node)
    n.input.append(rnd.choice([n.input[0] if n.input else "x", "", "ghost"]))


def _m_attr(m, rnd):
    if not m.graph.node:
        return
    from onnx import helper as h

    n = rnd.choice(m.graph.node)
    if n.attribute and rnd.random() < 0.6:
        a = rnd.choice(n.attribute)
        name = a.name
        n.attribute.remove(a)
    else:
        name = rnd.choice(["axis", "perm", "kernel_shape", "pads", "strides", "to", "keepdims", "group",
                           "transB", "alpha", "epsilon", "mode", "dilations", "value"])
    if rnd.random() < 0.2:
        return  # removed
    value = rnd.choice([0, 1, -1, 2**40, -(2**40), 7, 1.5, float("nan"), "garbage", b"\xff\xfe",
                        [], [0], [1, 1], [-1, 5, 2**33], [3, 3, 3, 3, 3, 3, 3, 3, 3], [0.5, 2.0]])
    try:
        n.attribute.append(h.make_attribute(name, value))
    except Exception:  # noqa: BLE001 - some values make no attribute
        pass


def _m_initializer(m, rnd):
    inits = m.graph.initializer
    if not inits:
        return
    t = rnd.choice(inits)
    r = rnd.random()
    if r < 0.3:
        inits.remove(t)
    elif r < 0.6 and t.raw_data:
        t.raw_data = t.raw_data[: rnd.randrange(len(t.raw_data))]
    elif r < 0.8:
        t.dims[:] = [rnd.choice([0, 1, 3, -2, 2**33]) for _ in range(rnd.randint(0, 4))]
    else:
        t.data_type = rnd.choice(_TYPES)


def _m_opset(m, rnd):
    if not m.opset_import:
        m.opset_import.add().version = rnd.choice([7, 18])
        return
    o = m.opset_import[0]
    r = rnd.random()
    if r < 0.6:
        o.version = rnd.choice([0, 1, 6, 9, 11, 13, 21, 23, 99, 10**6])
    elif r < 0.8:
        o.domain = rnd.choice(["ai.onnx.ml", "com.microsoft", "bogus"])
    else:
        del m.opset_import[:]


def _m_op_type(m, rnd):
    if not m.graph.node:
        return
    n = rnd.choice(m.graph.node)
    n.op_type = rnd.choice(["Relu", "Conv", "MatMul", "Softmax", "Gemm", "Reshape", "Loop", "If", "Scan",
                            "NonZero", "Unique", "StringNormalizer", "TfIdfVectorizer", "NoSuchOp", "",
                            "Add", "Transpose", "Concat", "Split", "Gather", "Pad", "TopK", "Resize",
                            "Einsum", "LSTM", "GRU", "RNN", "GroupNormalization", "Celu", "OneHot", "Hardmax",
                            "LRN", "EyeLike", "Attention", "CastLike", "LpNormalization", "Det", "DeformConv",
                            "TensorScatter", "SplitToSequence", "SequenceAt", "ConcatFromSequence",
                            "SequenceInsert", "SequenceEmpty", "Optional", "OptionalGetElement",
                            "OptionalHasElement", "Upsample", "Scatter"])


def _m_duplicate(m, rnd):
    g = m.graph
    if not g.node or not g.output:
        return
    r = rnd.random()
    if r < 0.4:
        g.output.add().CopyFrom(rnd.choice(g.output))
    elif r < 0.7:
        n = rnd.choice(g.node)
        n.output[0] = rnd.choice(g.node).output[0]
    else:
        g.node.add().CopyFrom(rnd.choice(g.node))


def _m_order(m, rnd):
    nodes = list(m.graph.node)
    rnd.shuffle(nodes)
    del m.graph.node[:]
    m.graph.node.extend(nodes)


def _m_names(m, rnd):
    g = m.graph
    if not [*g.input, *g.output]:
        return
    v = rnd.choice([*g.input, *g.output])
    v.name = rnd.choice(["", "a b", "x;y", "\"); abort(); //", "%weird", "\u0000nul", "x" * 5000])


_MUTATIONS = [_m_dim, _m_dim_param, _m_elem_type, _m_rank, _m_node_input, _m_drop_input, _m_extra_input,
              _m_attr, _m_attr, _m_initializer, _m_opset, _m_op_type, _m_duplicate, _m_order, _m_names]


def check(data: bytes, compile_it: bool) -> str:
    """Runs one case through load (and, with `compile_it`, compile and a call checked against
    the reference). Returns how it ended: "error" (a dnnfusion.Error), "loaded", "compiled"
    (inputs too large to make) or "matched". Anything else raises: that is the bug the fuzzer
    looks for."""
    import warnings

    import dnnfusion as df

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            g = df.load(data)
            if not compile_it:
                return "loaded"
            m = df.compile(data, threads=1)
        except df.Error:
            return "error"
    if sum(int(np.prod(v.shape, dtype=np.float64)) for v in g.inputs) > 1 << 26:
        return "compiled"  # inputs too large to make here (the call itself fails with an Error: a test below)
    rng = np.random.default_rng(0)
    feeds = {}
    for v in g.inputs:  # the model's own input types (a float16 model takes float16)
        dt = df.ecg.numpy_dtype(v.dtype)
        feeds[v.name] = (rng.integers(-3, 4, v.shape) if np.issubdtype(dt, np.integer) else
                         rng.standard_normal(v.shape)).astype(dt)
    got = m.run(**feeds)
    want = g.run_reference(**feeds)
    for a, b in zip(got, want):
        b = np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise AssertionError(f"{a.dtype}{list(a.shape)} != reference {b.dtype}{list(b.shape)}")
        if a.dtype == np.float16:  # computed in float32 (compile's float16="f32"), rounded once
            np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), rtol=1e-2, atol=1e-2)
        elif a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
        else:
            np.testing.assert_array_equal(a, b)
    return "matched"


def run_cases(n: int, seed: int, compile_every: int, out=sys.stdout) -> dict[str, int]:
    """n seeded cases; prints "case i" before each (flushed), then a summary line."""
    rnd = random.Random(seed)
    seeds = seed_models()
    tally: dict[str, int] = {}
    for i in range(n):
        data = mutate(rnd.choice(seeds), rnd)
        print(f"case {i} seed {seed}", file=out, flush=True)
        end = check(data, compile_it=compile_every > 0 and i % compile_every == 0)
        tally[end] = tally.get(end, 0) + 1
    print("tally " + " ".join(f"{k}={v}" for k, v in sorted(tally.items())), file=out, flush=True)
    return tally


def case_bytes(i: int, seed: int) -> bytes:
    """The bytes of case i of run_cases(seed), to reproduce a failure."""
    rnd = random.Random(seed)
    seeds = seed_models()
    data = b""
    for _ in range(i + 1):
        data = mutate(rnd.choice(seeds), rnd)
    return data


def _atheris(argv: list[str]) -> None:
    import atheris

    seeds = seed_models()

    def one(data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        base = seeds[fdp.ConsumeIntInRange(0, len(seeds) - 1)]
        rnd = random.Random(fdp.ConsumeInt(8))
        check(mutate(base, rnd) if fdp.ConsumeBool() else fdp.ConsumeBytes(fdp.remaining_bytes()),
              compile_it=False)

    import dnnfusion  # noqa: F401 - loaded before instrumenting, so its code gets coverage
    import dnnfusion.frontends.onnx  # noqa: F401
    import onnx  # noqa: F401

    # Python coverage of dnnfusion and onnx guides the search (the C++ core is not instrumented).
    # Only their functions: atheris.instrument_all() also patched NumPy's and the standard
    # library's ~7500 functions, a minute of a 2-vCPU machine's time before the first input.
    for fn in [o for o in gc.get_objects() if isinstance(o, types.FunctionType)]:
        if (fn.__module__ or "").split(".")[0] in ("dnnfusion", "onnx") and fn.__module__ in sys.modules:
            atheris.instrument_func(fn)
    atheris.Setup(argv, one)
    atheris.Fuzz()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--atheris" in argv:
        argv.remove("--atheris")
        _atheris([sys.argv[0], *argv])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compile-every", type=int, default=10,
                    help="compile, run and check every n-th case that loads (0: never)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    run_cases(args.cases, args.seed, args.compile_every)
    print(f"{args.cases} cases in {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
