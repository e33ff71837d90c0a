"""Views (issue 13 part 2, paper §4.3 index composition): an anchor input that Reshape,
Flatten, Squeeze, Unsqueeze or Transpose make from a value in memory is read in place, through
strides (GEMM operands) or as the same bytes (any anchor), instead of being copied to block
scratch first; a part of a tensor (a Split output, a constant Slice with positive steps) is read
in place too, at an offset, by MatMul; RoiAlign samples a transposed feature map in place. Each case is checked against the NumPy reference under every planner and
dialect, and under the dnnfusion planner its block has no copy stage and no scratch."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
from onnx import helper as h  # noqa: E402

from codegen_runner import assert_matches_reference, compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, planner_params  # noqa: E402
from test_codegen import PLANNERS, f32, i64, model  # noqa: E402


def matches_reference(ecg, feeds, planner, isa, **tol):
    """The plan's module for `isa` run against the NumPy reference, or, in a dialect this CPU
    lacks, generated and compiled only; the generated module (a dict) either way."""
    if lacks_here(isa):
        return compile_only(ecg, planner, isa)
    outs, gen = run(ecg, feeds, planner=planner, isa=isa)
    assert_matches_reference(ecg, feeds, outs, **tol)
    return gen


def case_kt_4d():
    """Attention's scores: K [B, S, H, D] -> Transpose(0, 2, 3, 1) -> [B, H, D, S] as MatMul's B
    (batch dims permuted too)."""
    q, k = f32(2, 3, 5, 4), f32(2, 5, 3, 4)
    return model([h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]),
                  h.make_node("MatMul", ["q", "kt"], ["y"])], {"q": q, "k": k}, ["y"])


def case_transposed_a():
    a, b = f32(3, 7, 6), f32(3, 7, 5)
    return model([h.make_node("Transpose", ["a"], ["at"], perm=[0, 2, 1]),
                  h.make_node("MatMul", ["at", "b"], ["y"])], {"a": a, "b": b}, ["y"])


def case_reshape_of_pointwise():
    """Relu -> Reshape -> MatMul: the GEMM computes the Relu of x while it packs A, through the
    reshape's index map (test_prologues.py): neither value is written."""
    x, w = f32(2, 6, 8), f32(8, 5)
    return model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Reshape", ["r", "s"], ["rs"]),
                  h.make_node("MatMul", ["rs", "w"], ["y"])], {"x": x}, ["y"],
                 [("s", i64(12, 8)), ("w", w)])


def case_gemm_flatten_and_transposed_b():
    """Gemm(Flatten(x), Transpose(w2), transB=1): A is x's bytes; B' = w2 read through strides."""
    x, w2 = f32(3, 2, 2, 5), f32(20, 6)
    return model([h.make_node("Flatten", ["x"], ["f"], axis=1),
                  h.make_node("Transpose", ["w2"], ["wt"], perm=[1, 0]),
                  h.make_node("Gemm", ["f", "wt", "c"], ["y"], transB=1, alpha=0.5)],
                 {"x": x, "w2": w2}, ["y"], [("c", f32(6))])


def case_split_heads():
    """GPT-2's head split: [S, 3*E] -> Reshape [S, H, D] -> Transpose [H, S, D] (A) and
    [H, D, S] (B) of the same projection."""
    x = f32(6, 24)
    return model([h.make_node("Reshape", ["x", "s"], ["r"]),
                  h.make_node("Transpose", ["r"], ["qa"], perm=[1, 0, 2]),
                  h.make_node("Transpose", ["r"], ["kb"], perm=[1, 2, 0]),
                  h.make_node("MatMul", ["qa", "kb"], ["y"])], {"x": x}, ["y"], [("s", i64(6, 3, 8))])


def case_split_qkv():
    """GPT-2's attention scores from one projection [S, 3E]: Split into q, k, v, heads split
    and transposed; q is MatMul's A, k^T its B, both read in place at their part's offset."""
    x = f32(6, 24)
    return model([h.make_node("Split", ["x", "sizes"], ["q", "k", "v"], axis=1),
                  h.make_node("Reshape", ["q", "s"], ["qr"]), h.make_node("Reshape", ["k", "s"], ["kr"]),
                  h.make_node("Transpose", ["qr"], ["qa"], perm=[1, 0, 2]),
                  h.make_node("Transpose", ["kr"], ["kb"], perm=[1, 2, 0]),
                  h.make_node("MatMul", ["qa", "kb"], ["y"])], {"x": x}, ["y"],
                 [("sizes", i64(8, 8, 8)), ("s", i64(6, 2, 4))])


def case_strided_slices():
    """A = x[1:7, 2:18:2] (a strided part of x), B = w[3:11, :5]: both read in place."""
    x, w = f32(9, 20), f32(12, 7)
    return model([h.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["a"]),
                  h.make_node("Slice", ["w", "st2", "en2"], ["b"]),
                  h.make_node("MatMul", ["a", "b"], ["y"])], {"x": x, "w": w}, ["y"],
                 [("st", i64(1, 2)), ("en", i64(7, 18)), ("ax", i64(0, 1)), ("sp", i64(1, 2)),
                  ("st2", i64(3, 0)), ("en2", i64(11, 5))])


def case_split_of_computed():
    """The projection computed in the block (x * 2 + b) and split: q and k^T are views of
    that one buffer, which must stay (it once became q's prologue and k^T read a buffer the
    kernel never declared)."""
    x = f32(6, 24)
    return model([h.make_node("Mul", ["x", "two"], ["m"]), h.make_node("Add", ["m", "b"], ["p"]),
                  h.make_node("Split", ["p", "sizes"], ["q", "k", "v"], axis=1),
                  h.make_node("Reshape", ["q", "s"], ["qr"]), h.make_node("Reshape", ["k", "s"], ["kr"]),
                  h.make_node("Transpose", ["qr"], ["qa"], perm=[1, 0, 2]),
                  h.make_node("Transpose", ["kr"], ["kb"], perm=[1, 2, 0]),
                  h.make_node("MatMul", ["qa", "kb"], ["y"])], {"x": x}, ["y"],
                 [("two", np.array(2.0, np.float32)), ("b", f32(24)), ("sizes", i64(8, 8, 8)),
                  ("s", i64(6, 2, 4))])


def case_roi_align_of_channels_last():
    """RoiAlign of a channels-last map given as Transpose(0, 3, 1, 2): the kernel samples the
    map in place through strides, each bin's taps as vectors over the channels."""
    x = f32(1, 12, 10, 37)
    xy = RNG_ROIS.uniform(0, 18, (5, 2))
    rois = np.concatenate([xy, xy + RNG_ROIS.uniform(3, 12, (5, 2))], axis=1).astype(np.float32)
    return model([h.make_node("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2]),
                  h.make_node("RoiAlign", ["xt", "rois", "bi"], ["y"], output_height=3, output_width=4,
                              sampling_ratio=2, spatial_scale=0.5)],
                 {"x": x, "rois": rois}, ["y"], [("bi", np.zeros(5, np.int64))])


RNG_ROIS = np.random.default_rng(11)
CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}


def case_parts_that_are_copied():
    """Parts a view cannot express stay copies and compute the same: a Slice with a negative
    step (B), a Split part read by a Gemm (its call has no operand offset), and a Split part
    the graph also outputs."""
    x, w = f32(6, 16), f32(10, 4)
    return model([h.make_node("Split", ["x", "sizes"], ["p0", "p1"], axis=1),
                  h.make_node("Gemm", ["p1", "g"], ["z"]),
                  h.make_node("Slice", ["w", "st", "en", "ax", "sp"], ["wr"]),
                  h.make_node("MatMul", ["p0", "wr"], ["y"])], {"x": x, "w": w}, ["y", "z", "p1"],
                 [("sizes", i64(8, 8)), ("g", f32(8, 3)), ("st", i64(-2)), ("en", i64(-10)),
                  ("ax", i64(0)), ("sp", i64(-1))])


@pytest.mark.parametrize("planner,isa", planner_params(PLANNERS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_views_match_reference(case, planner, isa):
    ecg, feeds = CASES[case]()
    matches_reference(ecg, feeds, planner, isa)


@pytest.mark.parametrize("case", sorted(CASES))
def test_views_are_not_copied(case):
    ecg, feeds = CASES[case]()
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs)
    anchor = ("gemm", "RoiAlign")
    (k,) = [k for k in gen["kernels"] if any(s.startswith(anchor) for s in k["stages"])]
    copies = [s for s in k["stages"] if not s.startswith(anchor)]
    if case == "split_of_computed":  # one loop computes the projection; q and k^T are views of it
        assert len(copies) == 1 and copies[0].startswith("vector loop"), k
        assert "+prologue" not in k["stages"][-1], k
        return
    assert copies == [] and k["scratch_bytes"] == 0, k
    if case == "reshape_of_pointwise":  # the Relu runs in the GEMM's prologue
        assert "+prologue(1 ops)" in k["stages"][0], k
    else:
        assert "+prologue" not in k["stages"][0], k  # strides, not an index-composing copy


@pytest.mark.parametrize("planner,isa", planner_params(PLANNERS))
def test_parts_that_are_copied_match_reference(planner, isa):
    ecg, feeds = case_parts_that_are_copied()
    matches_reference(ecg, feeds, planner, isa)


@pytest.mark.parametrize("case", ["split_qkv", "strided_slices", "parts_that_are_copied"])
def test_parts_on_opencl(ocl_device, case):
    """The OpenCL GEMM takes the same operand offsets."""
    ecg, feeds = (CASES.get(case) or case_parts_that_are_copied)()
    gen = df._core.generate_opencl(ecg, df.plan.plan(ecg, planner="dnnfusion", target="opencl"))
    outs = df._core.OpenclExecutable(gen).run([feeds[v.name] for v in ecg.inputs])
    assert_matches_reference(ecg, feeds, outs, atol=1e-4)


def test_a_view_that_is_a_block_output_is_still_written():
    """A reshaped value the graph also outputs must exist in its own buffer."""
    x, w = f32(4, 6), f32(3, 5)
    ecg, feeds = model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Reshape", ["r", "s"], ["rs"]),
                        h.make_node("MatMul", ["rs", "w"], ["y"])], {"x": x}, ["y", "rs"],
                       [("s", i64(8, 3)), ("w", w)])
    outs, _ = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs)


# ---- Concat along the channels read in place by a channels-last convolution --------------
def _concat_conv(k, pad, stride, relu_a):
    """Channels-last inputs a, b (transposed to NCHW in the graph; the NHWC layout cancels the
    transposes) [Relu(a)] -> Concat -> Conv(k) -> Relu: the convolution reads the Concat's
    inputs in place, one pointer each (a computed input is materialised by its own loop)."""
    a, b = f32(2, 9, 11, 5), f32(2, 9, 11, 6)
    nodes = [h.make_node("Transpose", ["a"], ["at"], perm=[0, 3, 1, 2]),
             h.make_node("Transpose", ["b"], ["bt"], perm=[0, 3, 1, 2])]
    if relu_a:
        nodes.append(h.make_node("Relu", ["at"], ["ar"]))
    nodes += [h.make_node("Concat", ["ar" if relu_a else "at", "bt"], ["c"], axis=1),
              h.make_node("Conv", ["c", "wc", "bc"], ["z"], pads=[pad] * 4, strides=[stride] * 2),
              h.make_node("Relu", ["z"], ["out"])]
    ecg, feeds = model(nodes, {"a": a, "b": b}, ["out"], [("wc", f32(12, 11, k, k)), ("bc", f32(12))])
    return df.rewrite.select_layout(ecg, "nhwc")[0], feeds


CONCAT_CASES = {
    "k3": dict(k=3, pad=1, stride=1, relu_a=False),
    "k1": dict(k=1, pad=0, stride=1, relu_a=False),
    "k3s2_one_computed": dict(k=3, pad=1, stride=2, relu_a=True),
}


@pytest.mark.parametrize("planner,isa", planner_params(PLANNERS))
@pytest.mark.parametrize("case", sorted(CONCAT_CASES))
def test_concat_read_by_conv_matches_reference(case, planner, isa):
    ecg, feeds = _concat_conv(**CONCAT_CASES[case])
    gen = matches_reference(ecg, feeds, planner, isa, rtol=1e-4, atol=1e-4)
    if planner == "dnnfusion":  # the Concat and the conv share a block: no concatenated copy
        (k,) = [k for k in gen["kernels"] if any("NhwcConv" in s for s in k["stages"])]
        assert "concat(2)" in k["stages"][-1], k
        relu = ["vector loop f32[990]"] if CONCAT_CASES[case]["relu_a"] else []
        assert k["stages"][:-1] == relu, k


# ---- A batch-1 Concat whose inputs are made in its block: assembled in place -----------
def _assembled(batch, c_a, c_b, hw, a_made=True):
    """[Sigmoid(a)], Conv1x1(b) -> Concat (channels) -> Conv 3x3: where the Concat ends its
    block, the Sigmoid's loop and the first convolution write their results straight into the
    Concat's buffer (batch 1; on the CPU a run may start at any element), and no loop copies
    them there."""
    a, b = f32(batch, c_a, *hw), f32(batch, 8, *hw)
    nodes = [h.make_node("Sigmoid", ["a"], ["sa"])] if a_made else []
    nodes += [h.make_node("Conv", ["b", "w1", "b1"], ["cb"]),
              h.make_node("Concat", ["sa" if a_made else "a", "cb"], ["cat"], axis=1),
              h.make_node("Conv", ["cat", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
    return model(nodes, {"a": a, "b": b}, ["y"], [("w1", f32(c_b, 8, 1, 1)), ("b1", f32(c_b)),
                                                  ("w2", f32(6, c_a + c_b, 3, 3)), ("b2", f32(6))])


ASSEMBLED = {  # case: (arguments, assembled in place)
    "batch1": (dict(batch=1, c_a=4, c_b=12, hw=(8, 8)), True),
    "batch1_input_from_memory": (dict(batch=1, c_a=4, c_b=12, hw=(8, 8), a_made=False), False),
    "batch2": (dict(batch=2, c_a=4, c_b=12, hw=(8, 8)), False),  # runs not contiguous
    # 3 x 25 floats: the second run starts 300 bytes in, off the arena's 64-byte alignment,
    # which the CPU's kernels do not need (unaligned loads and stores)
    "unaligned_run": (dict(batch=1, c_a=3, c_b=5, hw=(5, 5)), True),
}


@pytest.mark.parametrize("planner,isa", planner_params(PLANNERS))
@pytest.mark.parametrize("case", sorted(ASSEMBLED))
def test_concat_assembled_in_place_matches_reference(case, planner, isa):
    ecg, feeds = _assembled(**ASSEMBLED[case][0])
    matches_reference(ecg, feeds, planner, isa, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", sorted(ASSEMBLED))
def test_concat_assembled_in_place_writes_each_byte_once(case):
    """The Concat's block: with the Concat assembled, its stages are the Sigmoid's loop and the
    convolution, writing the Concat's bytes once (not the inputs, then the Concat again)."""
    args, assembled = ASSEMBLED[case]
    ecg, feeds = _assembled(**args)
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs, rtol=1e-4, atol=1e-4)
    cat_bytes = 4 * args["batch"] * (args["c_a"] + args["c_b"]) * args["hw"][0] * args["hw"][1]
    written = sum(k["intermediate_bytes_written"] for k in gen["kernels"])
    if assembled:
        (k,) = [k for k in gen["kernels"] if any(s.startswith("Conv k1") for s in k["stages"])]
        sigmoid = args["batch"] * args["c_a"] * args["hw"][0] * args["hw"][1]
        assert [s for s in k["stages"] if "loop" in s] == [f"vector loop f32[{sigmoid}]"], k  # the Sigmoid's
        assert k["scratch_bytes"] == 0 and written == cat_bytes, gen["kernels"]
    else:
        assert written > cat_bytes, gen["kernels"]  # the inputs, then the Concat's copy


# ---- A channels-last Concat whose inputs convolutions write: rows of its bytes ---------
def _inception(batch=1, hw=10):
    """An Inception module (S3D's, 2-D) in channels last: 1x1 (the GEMM path), 1x1 -> 3x3 with
    32 channels (Winograd), 3x3 with 5 (the direct kernel), MaxPool -> 1x1, each + Relu, Concat
    along the channels, then a 1x1 convolution. Each branch's last convolution stores its
    Relu'd output straight into its channels of the Concat (ConvShape::ldy: output pixels 50
    floats apart): no loop copies the Concat."""
    x = f32(batch, 8, hw, hw)

    def conv(name, src, cin, cout, k, relu=True):
        pads = [k // 2] * 4
        nodes = [h.make_node("Conv", [src, f"w{name}", f"b{name}"], [f"c{name}"], pads=pads)]
        inits = [(f"w{name}", f32(cout, cin, k, k)), (f"b{name}", f32(cout))]
        if relu:
            nodes.append(h.make_node("Relu", [f"c{name}"], [f"r{name}"]))
        return nodes, inits

    nodes, inits = [], []
    for args in [("0", "x", 8, 6, 1), ("1a", "x", 8, 32, 1), ("1b", "r1a", 32, 32, 3), ("2", "x", 8, 5, 3)]:
        n, i = conv(*args)
        nodes += n
        inits += i
    nodes.append(h.make_node("MaxPool", ["x"], ["p3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    n, i = conv("3", "p3", 8, 7, 1)
    nodes += n
    inits += i
    nodes.append(h.make_node("Concat", ["r0", "r1b", "r2", "r3"], ["cat"], axis=1))
    n, i = conv("y", "cat", 50, 4, 1, relu=False)
    nodes += n
    inits += i
    ecg, feeds = model(nodes, {"x": x}, ["cy"], inits)
    return df.rewrite.select_layout(ecg, "nhwc")[0], feeds


# The 3x3 branch takes Winograd F(4x4) where its 4x4 tiles fill every thread's GEMM rows
# (batch 2 on a 2-thread AVX2 machine): its outputs, up to ~250, carry rounding of a few 1e-7
# of that size into the final 1x1 sums (2.6e-4 seen on a value of 0.95), so the tolerance
# follows the output's scale; a misplaced channel segment is off by the values themselves.
INCEPTION_TOL = dict(rtol=1e-4, atol=1e-4, of_scale=1e-5)


@pytest.mark.parametrize("planner,isa", planner_params(PLANNERS))
@pytest.mark.parametrize("batch", [1, 2])
def test_inception_concat_in_rows_matches_reference(batch, planner, isa):
    ecg, feeds = _inception(batch)
    gen = matches_reference(ecg, feeds, planner, isa, **INCEPTION_TOL)
    if planner == "dnnfusion":  # each branch's Relu is its convolution's epilogue; no copy loop
        assert not any("loop" in s for k in gen["kernels"] for s in k["stages"]), gen["kernels"]


def test_inception_concat_in_rows_writes_each_byte_once(monkeypatch):
    """Counted from the generated code: with the convolutions writing rows of the Concat, the
    Concat's bytes are written once and there is no pass for it; DNNF_CONCAT_ROWS=0 (each branch
    dense, then the Concat copied) costs one pass and the Concat's bytes more."""
    ecg, feeds = _inception(1)
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs, **INCEPTION_TOL)
    monkeypatch.setenv("DNNF_CONCAT_ROWS", "0")
    outs0, gen0 = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs0, **INCEPTION_TOL)
    cat_bytes = 4 * 50 * 10 * 10
    assert gen0["counts"]["passes"] == gen["counts"]["passes"] + 1, (gen["kernels"], gen0["kernels"])
    assert gen0["counts"]["intermediate_bytes_written"] == gen["counts"]["intermediate_bytes_written"] + cat_bytes


# ---- A stem reads the model's channels-first input in place ------------------------------
def _stem(c, k, stride, pad, spatial):
    """x [1, c, spatial...] (channels first, the model's input) -> Conv (channels last, the
    layout's region) -> Relu -> a 1x1 Conv. The layout transposes x into the region; where the
    direct kernel's fixed-stride path serves the stem, the convolution gathers its windows from
    x's planes instead and no transposed copy is made."""
    nd = len(spatial)
    x = f32(1, c, *spatial)
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["s"], kernel_shape=list(k), strides=[*[1] * (nd - 1), stride],
                         pads=list(pad) * 2),
             h.make_node("Relu", ["s"], ["r"]),
             h.make_node("Conv", ["r", "w2"], ["y"])]
    ecg, feeds = model(nodes, {"x": x}, ["y"], [("w", f32(8, c, *k)), ("b", f32(8)), ("w2", f32(4, 8, *[1] * nd))])
    return df.rewrite.select_layout(ecg, "nhwc")[0], feeds


STEMS = {  # case: (arguments, read in place)
    "k7s2": (dict(c=3, k=(7, 7), stride=2, pad=(3, 3), spatial=(19, 17)), True),
    "k3s1": (dict(c=3, k=(3, 3), stride=1, pad=(1, 1), spatial=(9, 11)), True),
    "k333": (dict(c=3, k=(3, 3, 3), stride=1, pad=(1, 1, 1), spatial=(4, 7, 6)), True),
    "k177s2": (dict(c=3, k=(1, 7, 7), stride=2, pad=(0, 3, 3), spatial=(3, 9, 10)), True),
    "c1": (dict(c=1, k=(3, 3), stride=1, pad=(1, 1), spatial=(6, 7)), True),
    "k3s4": (dict(c=3, k=(3, 3), stride=4, pad=(1, 1), spatial=(9, 11)), False),  # 12 floats a step
    "c5": (dict(c=5, k=(3, 3), stride=1, pad=(1, 1), spatial=(6, 7)), False),
}


# The fusing planner (whose stem reads x in place) and one kernel per operator (a transposed
# copy): the other planners' stems are one of the two.
@pytest.mark.parametrize("planner,isa", planner_params(["dnnfusion", "none"]))
@pytest.mark.parametrize("case", sorted(STEMS))
def test_a_stem_reads_the_channels_first_input_in_place(case, planner, isa):
    args, in_place = STEMS[case]
    ecg, feeds = _stem(**args)
    gen = matches_reference(ecg, feeds, planner, isa, rtol=1e-4, atol=1e-4)
    if planner == "dnnfusion":  # the stem's kernel: the transpose and the convolution, or the convolution
        k = gen["kernels"][0]
        assert k["stages"][-1].startswith("NhwcConv"), gen["kernels"]
        assert [s.split(" ")[0] for s in k["stages"][:-1]] == ([] if in_place else ["transpose"]), k


# ---- A nearest integer upsampling is an index map ----------------------------------------
def _upsample(ctm="asymmetric", nm="floor", scales=(1.0, 1.0, 2.0, 2.0), sizes=None, then="concat"):
    """x [1, 4, 3, 5] -> Resize (nearest) -> `then`: "concat" with y along the channels, then a
    3x3 convolution (YOLOv4's upsample into its route Concat); "add": + z (FPN's top-down
    path), then the convolution."""
    x = f32(1, 4, 3, 5)
    inits = [("w", f32(6, 7 if then == "concat" else 4, 3, 3))]
    if sizes is None:
        inits.append(("sc", np.array(scales, np.float32)))
        rs = h.make_node("Resize", ["x", "", "sc"], ["u"], mode="nearest", coordinate_transformation_mode=ctm,
                         nearest_mode=nm)
    else:
        inits.append(("sz", np.array(sizes, np.int64)))
        rs = h.make_node("Resize", ["x", "", "", "sz"], ["u"], mode="nearest", coordinate_transformation_mode=ctm,
                         nearest_mode=nm)
    out = [int(d * s) for d, s in zip((3, 5), scales[2:])] if sizes is None else list(sizes[2:])
    other = f32(1, 3 if then == "concat" else 4, *out)
    mid = (h.make_node("Concat", ["u", "y"], ["m"], axis=1) if then == "concat" else
           h.make_node("Add", ["u", "y"], ["m"]))
    return model([rs, mid, h.make_node("Conv", ["m", "w"], ["o"], pads=[1, 1, 1, 1])], {"x": x, "y": other},
                 [("o", [1, 6, *out])], inits)


UPSAMPLES = {  # case: (arguments, an index map: no Resize kernel)
    "asymmetric_floor": (dict(), True),  # PyTorch's nearest interpolate
    "half_pixel_round": (dict(ctm="half_pixel", nm="round_prefer_floor", scales=(1.0, 1.0, 3.0, 2.0)), True),
    "sizes_pytorch_half_pixel": (dict(ctm="pytorch_half_pixel", nm="round_prefer_ceil", sizes=(1, 4, 6, 15)), True),
    "half_pixel_floor": (dict(ctm="half_pixel", nm="floor"), False),  # reads o / k - 1/4: not floor(o / k)
    "align_corners": (dict(ctm="align_corners", nm="round_prefer_floor"), False),
    "fractional": (dict(scales=(1.0, 1.0, 2.0, 1.5)), False),
    "read_by_an_add": (dict(then="add"), False),  # the kernel runs, the Add its epilogue
}


# The index maps in every dialect (the kernel's cases are the ONNX node suite's); the fusing
# planner and one kernel per operator, the two ends of what a plan asks of the code.
@pytest.mark.parametrize("planner,isa", planner_params(["dnnfusion", "none"]))
@pytest.mark.parametrize("case", sorted(c for c, (_, index_map) in UPSAMPLES.items() if index_map))
def test_upsample_matches_reference(case, planner, isa):
    ecg, feeds = _upsample(**UPSAMPLES[case][0])
    matches_reference(ecg, feeds, planner, isa, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", sorted(UPSAMPLES))
def test_integer_nearest_upsampling_runs_no_kernel(case):
    """An integer nearest upsampling whose coordinates read floor(o / k) is composed into its
    reader's loads (here the Concat's, written once, straight from x); any other Resize, or one
    an elementwise op of its block reads, runs the Resize kernel."""
    args, index_map = UPSAMPLES[case]
    ecg, feeds = _upsample(**args)
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs, rtol=1e-4, atol=1e-4)
    stages = [s for k in gen["kernels"] for s in k["stages"]]
    assert any(s.startswith("Resize") for s in stages) != index_map, stages


def case_two_concats_cut_alike():
    """Two Concats in one loop nest cut axis 0 at the same place (3) into parts of different
    lengths (2 and 4); the second part is a Tile, read at (i - 3) % 2. The part's index is a
    var of its own with the part's length as its range: shared between the two parts, the
    first one's range (2) would let the algebra drop the modulus the second one needs."""
    a, b, f = f32(3, 4), f32(2, 4), f32(3, 4)
    c, s, g = f32(3, 4), f32(2, 4), f32(1, 4)
    return model([h.make_node("Concat", ["a", "b", "f"], ["p"], axis=0),
                  h.make_node("Tile", ["s", "reps"], ["t"]),
                  h.make_node("Concat", ["c", "t", "g"], ["q"], axis=0),
                  h.make_node("Add", ["p", "q"], ["y"])],
                 {"a": a, "b": b, "f": f, "c": c, "s": s, "g": g}, ["y"], [("reps", i64(2, 1))])


@pytest.mark.parametrize("planner,isa", planner_params(["dnnfusion"], everywhere=("dnnfusion",)))
def test_two_concats_cut_alike_match_reference(planner, isa):
    ecg, feeds = case_two_concats_cut_alike()
    gen = matches_reference(ecg, feeds, planner, isa)
    assert len(gen["kernels"]) == 1, gen["kernels"]  # one loop nest reads both Concats
