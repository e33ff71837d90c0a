"""Generated kernels against the NumPy reference: one graph per lowering construct
(elementwise chains with broadcasts, composed Reorganize/Shuffle index maps, data-dependent
gathers, integer and bool code, GEMM anchors with fused epilogues incl. transposed stores,
row kernels), under every planner and every dialect this CPU runs, vector tails included
(odd sizes)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

from codegen_runner import assert_matches_reference, compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, planner_params  # noqa: E402

RNG = np.random.default_rng(7)
PLANNERS = ["dnnfusion", "none", "patterns", "tvm", "dp"]


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def model(nodes, inputs, outputs, inits=()):
    ins = [h.make_tensor_value_info(n, T.FLOAT if a.dtype == np.float32 else
                                    (T.INT64 if a.dtype == np.int64 else T.BOOL), a.shape)
           for n, a in inputs.items()]
    g = h.make_graph(nodes, "t", ins, [], [nh.from_array(v, k) for k, v in inits])
    m = onnx.shape_inference.infer_shapes(h.make_model(g, opset_imports=[h.make_opsetid("", 20)]))
    infos = {v.name: v for v in m.graph.value_info}
    m.graph.output.extend([infos[o] if isinstance(o, str) else
                           h.make_tensor_value_info(o[0], T.FLOAT, o[1]) for o in outputs])
    del m.graph.value_info[:]
    return df.load(m.SerializeToString()), dict(inputs)


def i64(*v):
    return np.array(v, dtype=np.int64)


def case_elementwise():
    # rows of 77: Tanh and Sigmoid make the loop interleave 4 vectors a step, in every dialect
    # (one wide step and a tail on AVX-512, two and a tail on AVX2, four on NEON)
    x, b = f32(3, 5, 77), f32(77)
    return model([h.make_node("Add", ["x", "b"], ["a"]), h.make_node("Tanh", ["a"], ["t"]),
                  h.make_node("Mul", ["t", "x"], ["m"]), h.make_node("Sigmoid", ["m"], ["y"])],
                 {"x": x}, ["y"], [("b", b)])


def case_layout_chain():
    x = f32(2, 6, 35)
    return model([h.make_node("Reshape", ["x", "s"], ["r"]),
                  h.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),
                  h.make_node("Relu", ["t"], ["u"]),
                  h.make_node("Slice", ["u", "st", "en", "ax"], ["v"]),
                  h.make_node("Exp", ["v"], ["y"])],
                 {"x": x}, ["y"], [("s", i64(2, 6, 5, 7)), ("st", i64(1)), ("en", i64(6)),
                                   ("ax", i64(3))])


def case_concat_pad_split():
    a, b = f32(2, 3, 9), f32(2, 4, 9)
    return model([h.make_node("Concat", ["a", "b"], ["c"], axis=1),
                  h.make_node("Pad", ["c", "p", "cv"], ["d"]),
                  h.make_node("Split", ["d", "sp"], ["y0", "y1"], axis=2)],
                 {"a": a, "b": b}, ["y0", "y1"],
                 [("p", i64(0, 1, 2, 0, 0, 3)), ("cv", np.array(0.5, np.float32)),
                  ("sp", i64(5, 9))])


def case_concat_inner():
    a, b = f32(3, 7), f32(3, 18)
    return model([h.make_node("Concat", ["a", "b"], ["c"], axis=1),
                  h.make_node("Neg", ["c"], ["y"])], {"a": a, "b": b}, ["y"])


def case_transposes():
    # Transposes that move the innermost dim (NCHW -> NHWC and back, rank 3 and 2, sizes off
    # the 32-element tiles of cg::transpose): a blocked copy when their input is in memory;
    # a dim of 2-4 moved last (3, 4 and 2 channels; chunks of 4096 pixels) is interleaved.
    x, z, w = f32(2, 3, 5, 37), f32(7, 45, 33), f32(45, 70)
    x4, v = f32(1, 4, 70, 80), f32(5, 2, 9)
    return model([h.make_node("Transpose", ["x"], ["y0"], perm=[0, 2, 3, 1]),
                  h.make_node("Transpose", ["y0"], ["y1"], perm=[0, 3, 1, 2]),
                  h.make_node("Transpose", ["z"], ["y2"], perm=[2, 0, 1]),
                  h.make_node("Transpose", ["w"], ["y3"]),
                  h.make_node("Transpose", ["x4"], ["y4"], perm=[0, 2, 3, 1]),
                  h.make_node("Transpose", ["v"], ["y5"], perm=[0, 2, 1])],
                 {"x": x, "z": z, "w": w, "x4": x4, "v": v}, ["y0", "y1", "y2", "y3", "y4", "y5"])


def case_gather_where_int():
    table = f32(50, 21)
    ids = RNG.integers(-50, 50, (2, 7)).astype(np.int64)
    mask = RNG.integers(0, 2, (2, 7)).astype(np.int64)
    return model([h.make_node("Gather", ["t", "ids"], ["e"]),
                  h.make_node("Cast", ["mask"], ["mb"], to=T.BOOL),
                  h.make_node("Unsqueeze", ["mb", "ax"], ["mu"]),
                  h.make_node("Where", ["mu", "e", "ninf"], ["w"]),
                  h.make_node("Mul", ["mask", "two"], ["mi"]),
                  h.make_node("Mod", ["mi", "three"], ["y1"])],
                 {"ids": ids, "mask": mask}, ["w", "y1"],
                 [("t", table), ("ax", i64(2)), ("ninf", np.array(-1e4, np.float32)),
                  ("two", i64(2)), ("three", i64(3))])


def case_expand_tile():
    x = f32(3, 1, 5)
    return model([h.make_node("Expand", ["x", "s"], ["e"]),
                  h.make_node("Tile", ["e", "r"], ["t"]),
                  h.make_node("Abs", ["t"], ["y"])],
                 {"x": x}, ["y"], [("s", i64(3, 4, 5)), ("r", i64(1, 2, 3))])


def case_attention():
    x = f32(1, 11, 32)
    wq, wk, wv = f32(32, 32), f32(32, 32), f32(32, 32)
    bq = f32(32)
    s = i64(1, 11, 4, 8)
    n = [h.make_node("MatMul", ["x", "wq"], ["q0"]), h.make_node("Add", ["q0", "bq"], ["q1"]),
         h.make_node("Reshape", ["q1", "s"], ["q2"]),
         h.make_node("Transpose", ["q2"], ["q"], perm=[0, 2, 1, 3]),
         h.make_node("MatMul", ["x", "wk"], ["k0"]), h.make_node("Reshape", ["k0", "s"], ["k1"]),
         h.make_node("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
         h.make_node("MatMul", ["q", "kt"], ["sc"]), h.make_node("Mul", ["sc", "scale"], ["sc2"]),
         h.make_node("Softmax", ["sc2"], ["p"], axis=-1),
         h.make_node("MatMul", ["x", "wv"], ["v0"]), h.make_node("Reshape", ["v0", "s"], ["v1"]),
         h.make_node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
         h.make_node("MatMul", ["p", "v"], ["o0"]),
         h.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
         h.make_node("Reshape", ["o1", "s2"], ["o2"]), h.make_node("Add", ["o2", "x"], ["r"]),
         h.make_node("LayerNormalization", ["r", "g", "be"], ["y"], axis=-1, epsilon=1e-5)]
    return model(n, {"x": x}, ["y"],
                 [("wq", wq), ("wk", wk), ("wv", wv), ("bq", bq), ("s", s),
                  ("scale", np.array(0.35, np.float32)), ("s2", i64(1, 11, 32)),
                  ("g", f32(32)), ("be", f32(32))])


def case_gemm_gelu():
    x = f32(13, 40)
    return model([h.make_node("Gemm", ["x", "w", "c"], ["g"], transB=1, alpha=0.5, beta=2.0),
                  h.make_node("Gelu", ["g"], ["y0"]), h.make_node("ReduceMean", ["y0", "ax"], ["y"],
                                                                   keepdims=1)],
                 {"x": x}, [("y", [13, 1]), ("y0", [13, 37])], [("w", f32(37, 40)), ("c", f32(37)), ("ax", i64(1))])


def case_matmul_computed_b():
    a, b = f32(2, 3, 9, 17), f32(3, 17, 21)
    return model([h.make_node("Relu", ["b"], ["rb"]), h.make_node("MatMul", ["a", "rb"], ["m"]),
                  h.make_node("Sqrt", ["m"], ["y"])], {"a": a, "b": b}, ["y"])


def case_conv_pools():
    x = f32(2, 4, 13, 11)
    return model([h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 1],
                              group=2),
                  h.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
                  h.make_node("Relu", ["n"], ["r"]),
                  h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                              ceil_mode=1),
                  h.make_node("Conv", ["p", "dw"], ["d"], group=6, kernel_shape=[3, 3],
                              auto_pad="SAME_UPPER"),
                  h.make_node("AveragePool", ["d"], ["a"], kernel_shape=[2, 2], pads=[1, 1, 0, 0],
                              count_include_pad=1),
                  h.make_node("GlobalAveragePool", ["a"], ["g"]),
                  h.make_node("Sigmoid", ["g"], ["y0"]),
                  h.make_node("Mul", ["d", "y0"], ["y"])],
                 {"x": x}, ["y", "a"],
                 [("w", f32(6, 2, 3, 3)), ("b", f32(6)), ("s", f32(6)), ("bb", f32(6)),
                  ("m", f32(6)), ("v", np.abs(f32(6)) + 0.5), ("dw", f32(6, 1, 3, 3))])


def case_window_epilogues():
    """Window-engine anchors whose epilogue runs once per output row: a strided depthwise
    conv + Relu6 stored through a transpose (a storing epilogue), a max pool + Relu."""
    x = f32(1, 8, 15, 13)
    return model([h.make_node("Conv", ["x", "dw", "b"], ["c"], group=8, kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 1, 1, 1]),
                  h.make_node("Clip", ["c", "lo", "hi"], ["r"]),
                  h.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 3, 1]),
                  h.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                  h.make_node("Relu", ["p"], ["y2"])],
                 {"x": x}, ["y", "y2"],
                 [("dw", f32(8, 1, 3, 3)), ("b", f32(8)), ("lo", np.float32(0)),
                  ("hi", np.float32(0.5))])


def _se_gate():
    """EfficientNet's squeeze-and-excitation block: a depthwise conv + Swish whose output the
    gate's global pool reduces, the gate's 1x1 convs on [N, C, 1, 1], the gate scaling the conv's
    output into a projection; two images, a channel tail."""
    x = f32(2, 19, 9, 11)
    ecg, feeds = model([h.make_node("Conv", ["x", "dw", "db"], ["c"], group=19, kernel_shape=[3, 3],
                                    pads=[1, 1, 1, 1]),
                        h.make_node("Sigmoid", ["c"], ["cs"]), h.make_node("Mul", ["c", "cs"], ["a"]),
                        h.make_node("GlobalAveragePool", ["a"], ["p"]),
                        h.make_node("Conv", ["p", "w1", "b1"], ["s1"]), h.make_node("Relu", ["s1"], ["r1"]),
                        h.make_node("Conv", ["r1", "w2", "b2"], ["s2"]), h.make_node("Sigmoid", ["s2"], ["gate"]),
                        h.make_node("Mul", ["a", "gate"], ["ag"]),
                        h.make_node("Conv", ["ag", "w3"], ["y"])],
                       {"x": x}, ["y"],
                       [("dw", f32(19, 1, 3, 3)), ("db", f32(19)), ("w1", f32(5, 19, 1, 1)), ("b1", f32(5)),
                        ("w2", f32(19, 5, 1, 1)), ("b2", f32(19)), ("w3", f32(8, 19, 1, 1))])
    return ecg, feeds


def case_se_gate_channels_last():
    """_se_gate channels last (NhwcConv): under the dnnfusion planner the depthwise kernel takes
    the gate's mean as it stores its rows."""
    ecg, feeds = _se_gate()
    return df.rewrite.select_layout(ecg, "nhwc")[0], feeds


def case_maxpool_indices():
    """MaxPool's Indices output (column-major, with padding) beside its values, whose Relu
    is fused as the epilogue; a second pool with row-major indices and dilation."""
    x = f32(2, 3, 9, 8)
    return model([h.make_node("MaxPool", ["x"], ["v", "i"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], storage_order=1),
                  h.make_node("Relu", ["v"], ["y"]),
                  h.make_node("MaxPool", ["x"], ["v2", "i2"], kernel_shape=[2, 3], dilations=[2, 1],
                              pads=[0, 1, 0, 1])],
                 {"x": x}, ["y", "i", "v2", "i2"])


def case_conv_transpose_3d():
    x, v = f32(1, 3, 5, 6), f32(1, 2, 4, 5, 6)
    return model([h.make_node("ConvTranspose", ["x", "w", "b"], ["t"], strides=[2, 2],
                              pads=[1, 0, 0, 1], output_padding=[1, 1]),
                  h.make_node("LeakyRelu", ["t"], ["y"], alpha=0.1),
                  h.make_node("Conv", ["v", "w3"], ["c3"], pads=[1, 1, 1, 1, 1, 1]),
                  h.make_node("MaxPool", ["c3"], ["y3"], kernel_shape=[2, 2, 2], strides=[2, 2, 2])],
                 {"x": x, "v": v}, ["y", "y3"],
                 [("w", f32(3, 4, 3, 3)), ("b", f32(4)), ("w3", f32(5, 2, 3, 3, 3))])


def case_scan_select_resize():
    # CumSum (inner == 1 with an epilogue; reverse exclusive along a middle axis), TopK,
    # ArgMax, InstanceNormalization with an epilogue, linear and nearest Resize.
    x, img = f32(2, 7, 19), f32(2, 3, 5, 6)
    return model([h.make_node("CumSum", ["x", "ax2"], ["c"]), h.make_node("Relu", ["c"], ["y1"]),
                  h.make_node("CumSum", ["x", "ax1"], ["y2"], exclusive=1, reverse=1),
                  h.make_node("TopK", ["x", "k"], ["tv", "ti"], axis=1),
                  h.make_node("ArgMax", ["x"], ["am"], axis=2, keepdims=0),
                  h.make_node("InstanceNormalization", ["img", "sc", "bi"], ["n"], epsilon=1e-3),
                  h.make_node("Sigmoid", ["n"], ["y3"]),
                  h.make_node("Resize", ["img", "", "scales"], ["r"], mode="linear"),
                  h.make_node("Add", ["r", "r"], ["y4"]),
                  h.make_node("Resize", ["img", "", "", "sizes"], ["y5"], mode="nearest",
                              coordinate_transformation_mode="asymmetric")],
                 {"x": x, "img": img}, ["y1", "y2", "tv", "ti", "am", "y3", "y4", "y5"],
                 [("ax2", np.array(-1, np.int64)), ("ax1", np.array(1, np.int64)), ("k", i64(3)),
                  ("sc", f32(3)), ("bi", f32(3)),
                  ("scales", np.array([1, 1, 2, 1.5], np.float32)), ("sizes", i64(2, 3, 9, 13))])


def case_nan_inf_tests():
    """IsNaN / IsInf (each detect_* form) of values computed in the block, into bool logic."""
    x = np.array([[1, np.nan, np.inf, -np.inf, 0, -2.5, 3e38] * 3] * 2, np.float32)
    return model([h.make_node("Mul", ["x", "k"], ["m"]),  # 3e38 * 2 overflows to inf
                  h.make_node("IsNaN", ["m"], ["a"]), h.make_node("IsInf", ["m"], ["b"]),
                  h.make_node("IsInf", ["m"], ["p"], detect_negative=0),
                  h.make_node("IsInf", ["m"], ["q"], detect_positive=0),
                  h.make_node("Or", ["a", "b"], ["y"]), h.make_node("Xor", ["p", "q"], ["z"])],
                 {"x": x}, ["y", "z"], [("k", np.array(2, np.float32))])


def case_where_row_mask():
    """Where with a per-row condition (the same for all lanes of a vector: computed once, a
    vector loop) into arithmetic, beside a Where whose condition varies along the vector
    (scalar), as a detector head's per-RoI level selection and an attention mask."""
    lv, a, b = f32(4, 1, 1), f32(4, 3, 21), f32(4, 3, 21)
    return model([h.make_node("Greater", ["lv", "t"], ["c"]), h.make_node("Tanh", ["a"], ["ta"]),
                  h.make_node("Where", ["c", "ta", "b"], ["w"]), h.make_node("Add", ["w", "bias"], ["y"]),
                  h.make_node("Less", ["a", "b"], ["c2"]), h.make_node("Where", ["c2", "a", "y"], ["z"])],
                 {"lv": lv, "a": a, "b": b}, ["y", "z"],
                 [("t", np.array(0, np.float32)), ("bias", f32(21))])


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}
# Cases run channels last (NhwcConv, the CPU's layout): the OpenCL target, which has no NhwcConv,
# runs the same graph before the layout pass.
CHANNELS_FIRST = {"se_gate_channels_last": _se_gate}


def _build(case):
    """The case's graph and inputs, drawn from a generator seeded by the case's name: the data
    must not depend on which cases this process built before (pytest-xdist spreads them)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(case.encode()))
    return CASES[case]()


@pytest.mark.parametrize("planner,isa", planner_params(PLANNERS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_matches_reference(case, planner, isa):
    ecg, feeds = _build(case)
    if lacks_here(isa):  # generated and compiled, not run
        gen = compile_only(ecg, planner, isa)
        assert len(gen["kernels"]) == len(df.plan.plan(ecg, planner=planner).blocks)
        return
    outs, gen = run(ecg, feeds, planner=planner, isa=isa)
    assert len(gen["kernels"]) == len(df.plan.plan(ecg, planner=planner).blocks)
    assert_matches_reference(ecg, feeds, outs)


def test_fused_epilogue_keeps_intermediates_in_registers():
    ecg, feeds = case_attention()
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    stages = [s for k in gen["kernels"] for s in k["stages"]]
    assert any("gemm" in s and "epilogue" in s for s in stages), stages
    # Reshape/Transpose around the Q projection are index maps, not copies: no pointwise
    # loop stage exists for them.
    assert sum("loop" in s for s in stages) < 4, stages
    assert_matches_reference(ecg, feeds, outs)


def test_where_with_a_per_row_condition_is_a_vector_loop():
    ecg, feeds = case_where_row_mask()
    feeds["a"][0, 0, :3] = np.nan  # Less is false on NaN, on vectors as in NumPy
    feeds["b"][1, 2, 5] = np.nan
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    stages = [s for k in gen["kernels"] for s in k["stages"]]
    # Greater, Tanh, the first Where and Add in one vector loop (the condition once per
    # row); Less and the second Where too, the condition varying along the vector: a lane
    # select on the comparison of two f32 vectors (expr.cc select_by_compare)
    assert stages == ["vector loop f32[252]", "vector loop f32[252]"], stages
    assert any("v_select(V::v_cmp_lt(" in line for line in gen["source"].splitlines()), "no lane select"
    assert_matches_reference(ecg, feeds, outs)


def test_a_transpose_of_a_value_in_memory_is_a_blocked_copy():
    ecg, feeds = case_transposes()
    outs, gen = run(ecg, feeds, planner="none")
    stages = [s for k in gen["kernels"] for s in k["stages"]]
    assert sorted(stages) == ["transpose f32[10395]", "transpose f32[1110]", "transpose f32[1110]",
                              "transpose f32[22400]", "transpose f32[3150]", "transpose f32[90]"], stages
    assert_matches_reference(ecg, feeds, outs)


def test_gather_index_out_of_range_is_an_error():
    ecg, feeds = case_gather_where_int()
    feeds["ids"] = feeds["ids"].copy()
    feeds["ids"][0, 0] = 50
    with pytest.raises(df.Error, match="Gather: index 50 is out of range"):
        run(ecg, feeds)


def test_model_strings_never_reach_the_source():
    x = f32(2, 3)
    nodes = [h.make_node("Relu", ["x\"; system(\"rm\")"], ["y*/"], name="n\n#include")]
    ins = [h.make_tensor_value_info("x\"; system(\"rm\")", T.FLOAT, [2, 3])]
    outs = [h.make_tensor_value_info("y*/", T.FLOAT, [2, 3])]
    m = h.make_model(h.make_graph(nodes, "evil\"", ins, outs), opset_imports=[h.make_opsetid("", 18)])
    ecg = df.load(m.SerializeToString())
    outs_, gen = run(ecg, {"x\"; system(\"rm\")": x})
    for s in ("system", "rm", "#include <", "evil", "y*/"):
        if s == "#include <":
            continue
        assert s not in gen["source"], s
    np.testing.assert_allclose(outs_[0], np.maximum(x, 0))


@pytest.mark.parametrize("name", ["tinybert", "distilbert", "gpt2"])
def test_zoo_transformer_matches_reference_and_torch(name):
    torch = pytest.importorskip("torch")
    from dnnfusion.zoo import registry
    z = registry.get(name, reduced=True)
    ecg = df.load(str(registry.export_onnx(name, reduced=True)))
    feeds = {v.name: a.numpy() for v, a in zip(ecg.inputs, z.example_inputs)}
    outs, _ = run(ecg, feeds)
    assert_matches_reference(ecg, feeds, outs, rtol=1e-3, atol=1e-4)
    with torch.no_grad():
        want = z.module(*z.example_inputs)
    want = [want] if isinstance(want, torch.Tensor) else [t for t in (want.values() if hasattr(want, "values") else want) if isinstance(t, torch.Tensor)]
    np.testing.assert_allclose(outs[0], want[0].numpy(), rtol=1e-3, atol=1e-4)
