"""The OpenCL target's local-memory GEMM tiles (issue 15): GEMMs and convolutions (as implicit
GEMMs) big enough run in tiles of 128 x 128 (GPUs only), 64 x 64 or 32 x 32 outputs (the side and
K split choose_tile picks for the device: cpp/codegen/opencl/renderer.h), in work-groups of
16 x 16 items. Each case runs with each size forced (DNNF_OPENCL_TILING=128, 64, 32; the device's own
choice is one of them, test_tile_side_follows_the_grid) and untiled
(DNNF_OPENCL_TILING=0) on the OpenCL device: all match the NumPy reference, and give the same
bits, since every output accumulates the same fmas in the same order. Sizes are chosen off the
tile (partial tiles in M, N and K), batched, with prologues and epilogues. The tile's features
(vector reads from local memory, the next step prefetched into registers, B loaded along K
where K is contiguous, convolutions' K tap-major) each keep those properties alone and
together (DNNF_OPENCL_TILE_FEATURES)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

onnx = pytest.importorskip("onnx")
from onnx import helper as h  # noqa: E402

from test_codegen import f32, model  # noqa: E402
from test_opencl import device  # noqa: E402,F401  (the fixture: the selected device, or skip)


def matmul(m, k, n, batch=()):
    return model([h.make_node("MatMul", ["x", "w"], ["y"])], {"x": f32(*batch, m, k)}, ["y"],
                 [("w", f32(*batch, k, n))])


def matmul_two_inputs(m, k, n):  # B is a graph input, not a constant
    return model([h.make_node("MatMul", ["x", "w"], ["y"])], {"x": f32(2, m, k), "w": f32(2, k, n)}, ["y"])


def gemm_epilogue(m, k, n):  # Gemm with transB, then bias + Relu fused after it
    return model([h.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1), h.make_node("Relu", ["g"], ["y"])],
                 {"x": f32(m, k)}, ["y"], [("w", f32(n, k)), ("b", f32(n))])


def transposed_a(m, k, n):  # A read through a Transpose (the 0-op prologue)
    return model([h.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), h.make_node("MatMul", ["t", "w"], ["m"]),
                  h.make_node("Add", ["m", "c"], ["y"])],
                 {"x": f32(k, m)}, ["y"], [("w", f32(k, n)), ("c", f32(m, n))])


def conv(c, m, hw, kernel, group=1, **attrs):
    nd = len(hw)
    return model([h.make_node("Conv", ["x", "w", "b"], ["c"], group=group, **attrs),
                  h.make_node("Sigmoid", ["c"], ["y"])],
                 {"x": f32(2, c, *hw)}, ["y"], [("w", f32(m, c // group, *kernel[:nd])), ("b", f32(m))])


def conv_transpose(c, m, hw, kernel, group=1, **attrs):  # + bias, then Relu fused after it
    return model([h.make_node("ConvTranspose", ["x", "w", "b"], ["c"], group=group, **attrs),
                  h.make_node("Relu", ["c"], ["y"])],
                 {"x": f32(2, c, *hw)}, ["y"], [("w", f32(c, m // group, *kernel)), ("b", f32(m))])


CASES = {
    "matmul_exact_tile": lambda: matmul(64, 16, 64),
    "matmul_partial_tiles": lambda: matmul(33, 17, 70),
    "matmul_tall": lambda: matmul(257, 5, 40),
    "matmul_long_k": lambda: matmul(40, 300, 45),
    "matmul_empty_k": lambda: matmul(40, 0, 48),  # an empty inner axis: zeros, one group per tile
    "matmul_batched": lambda: matmul(50, 24, 36, batch=(3,)),
    "matmul_batched_inputs": lambda: matmul_two_inputs(48, 20, 65),
    "gemm_transb_epilogue": lambda: gemm_epilogue(70, 33, 96),
    "transposed_a_prologue": lambda: transposed_a(45, 31, 64),
    "conv2d_3x3_pad": lambda: conv(8, 40, (9, 11), (3, 3), pads=[1, 1, 1, 1]),
    "conv2d_stride_dilation": lambda: conv(6, 36, (15, 14), (3, 2), strides=[2, 1], dilations=[2, 1], pads=[2, 0, 1, 1]),
    "conv2d_groups": lambda: conv(8, 64, (8, 8), (3, 3), group=2, pads=[1, 1, 1, 1]),
    "conv2d_1x1": lambda: conv(16, 48, (7, 9), (1, 1)),
    "conv1d": lambda: conv(5, 33, (70,), (5,), pads=[2, 2]),
    "conv3d": lambda: conv(3, 32, (4, 6, 5), (3, 3, 3), pads=[1, 1, 1, 1, 1, 1]),
    # Channels per group a multiple of the tile's K step: K runs tap-major.
    "conv2d_tap_major": lambda: conv(16, 40, (9, 11), (3, 3), pads=[1, 1, 1, 1]),
    "conv2d_tap_major_strided_groups": lambda: conv(64, 72, (15, 14), (3, 2), group=2, strides=[2, 1],
                                                    dilations=[2, 1], pads=[2, 0, 1, 1]),
    "conv2d_1x1_aligned": lambda: conv(32, 48, (7, 9), (1, 1)),
    # ConvTranspose with stride == kernel (U-Net's up-convolution): a GEMM whose rows are
    # (output channel, tap), scattered to the output.
    "conv_transpose_2x2_s2": lambda: conv_transpose(24, 20, (9, 7), (2, 2), strides=[2, 2]),
    "conv_transpose_groups_3x2": lambda: conv_transpose(12, 32, (6, 11), (3, 2), group=2, strides=[3, 2]),
}
FEATURES = ("vec", "prefetch", "kfast_b", "tap_major")
# The cases also run with 128-wide tiles: partial tiles, batched graph inputs, B along K, a
# tap-major grouped strided dilated convolution, a ConvTranspose's A along M.
CASES_128 = ("matmul_partial_tiles", "matmul_batched_inputs", "gemm_transb_epilogue",
             "conv2d_tap_major_strided_groups", "conv_transpose_2x2_s2")


def row(side: int) -> int:
    """The floats of a local tile's row with every feature on: 16-byte aligned for float4 reads."""
    return side + 4


def run(ecg, feeds, tiling: str, monkeypatch):
    return run_model(ecg, feeds, tiling, monkeypatch)[1:]


def run_model(ecg, feeds, tiling: str, monkeypatch):
    """The compiled model, its outputs on the feeds and its source."""
    monkeypatch.setenv("DNNF_OPENCL_TILING", tiling)
    m = df.compile(ecg, target="opencl")
    # Each launch declares the local memory its kernel's __local arrays take (the runtime refuses
    # a module whose kernels need more than its device has).
    src = m.source()
    # (every __local array holds 4-byte floats or uints)
    want = sum(4 * int(n) for line in re.findall(r"^\s*__local (?:float|uint) (.*);$", src, re.M)
               for n in re.findall(r"\w+\[(\d+)\]", line))
    assert sum(l["local_bytes"] for l in m.generated.launches) == want
    return m, m.run(*[feeds[v.name] for v in ecg.inputs]), src


@pytest.mark.parametrize("case", sorted(CASES))
def test_tiled_matches_reference_and_untiled_bits(device, case, monkeypatch):
    fits = {t: device["max_work_group"] >= 256 and device["local_mem_bytes"] >= 2 * 16 * row(t) * 4
            for t in (32, 64, 128)}
    ecg, feeds = CASES[case]()
    want = ecg.run_reference(**feeds)
    plain, src_plain = run(ecg, feeds, "0", monkeypatch)
    assert "__local" not in src_plain
    # The 128-wide tile is a GPU's; on PoCL's CPU device it takes ~25 s to build and run per
    # case, so a few cases that cover its paths run it (test_each_tile_feature_... covers 64 and 32).
    sides = ("128", "64", "32") if case in CASES_128 else ("64", "32")
    for tiling in sides:  # (the device's own choice is one of them: test_tile_side_follows_the_grid)
        tiled, src_tiled = run(ecg, feeds, tiling, monkeypatch)
        # A device without room for the tile keeps one work-item per output element.
        has = "__local float dn_As" in src_tiled and "barrier(CLK_LOCAL_MEM_FENCE)" in src_tiled
        side = int(tiling)
        assert has == fits[side]
        if has:
            assert f"dn_As[{16 * row(side)}]" in src_tiled  # kTileK rows of side + 4 floats
        split = "_part(" in src_tiled  # K split across groups (a GPU's few-group GEMMs): other sums
        for got, ref, other in zip(tiled, want, plain):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
            assert split or np.array_equal(got, other), f"tiled ({tiling}) and untiled results differ"


def test_tile_side_follows_the_grid(device, monkeypatch):
    """On a CPU device, the widest tile that gives the device as many work-groups as it has
    compute units (CL_DEVICE_MAX_COMPUTE_UNITS decides): 64 x 64, else 32 x 32 (four times as
    many groups). On a GPU, the widest the GEMM fills: 64 x 64 for GEMMs of 64 rows and
    columns or more (128 x 128 is for convolutions), else 32 x 32."""
    cu = device["compute_units"]
    gpu = device["type"] == "gpu"

    def fits(t):
        return device["max_work_group"] >= 256 and device["local_mem_bytes"] >= 2 * 16 * row(t) * 4

    def expected(m, n):
        if gpu:
            return next((t for t in (64, 32) if t <= (64 if min(m, n) >= 64 else 32) and fits(t)), 0)
        groups = math.ceil(m / 64) * math.ceil(n / 64)
        return 64 if fits(64) and groups >= cu else 32 if fits(32) else 0

    root = math.ceil(math.sqrt(cu))
    sides = set()
    for m in (40, 64, root * 64, root * 128):  # (CPU) too few groups for 64 (cu > 1); enough for 64
        want = expected(m, m)
        sides.add(want)
        ecg, feeds = matmul(m, 24, m)
        out, src = run(ecg, feeds, "1", monkeypatch)
        if want:
            assert f"dn_As[{16 * row(want)}]" in src and src.count("__local float dn_As") == 1, (m, cu, want)
        else:
            assert "__local" not in src
        np.testing.assert_allclose(out[0], ecg.run_reference(**feeds)[0], rtol=1e-4, atol=1e-4)
    if fits(64) and (cu > 1 or gpu):
        assert {32, 64} <= sides


def computed_a(m, k, n):  # A = tanh(x * c + d), made in the GEMM's block
    return model([h.make_node("Mul", ["x", "c"], ["s"]), h.make_node("Add", ["s", "d"], ["t"]),
                  h.make_node("Tanh", ["t"], ["a"]), h.make_node("MatMul", ["a", "w"], ["y"])],
                 {"x": f32(m, k)}, ["y"], [("c", f32(k)), ("d", f32(k)), ("w", f32(k, n))])


@pytest.mark.parametrize("m,n,tiling", [(64, 96, "1"), (64, 96, "0"), (8, 96, "1")])
def test_arithmetic_prologue_only_where_recomputation_is_cheap(device, monkeypatch, m, n, tiling):
    """An A made by arithmetic in the GEMM's block is computed in the GEMM's loads only where
    the kernel evaluates each A element a few times (once per tile column: 96 / 64 or 96 / 32
    here); one work-item per output element would recompute it 96 times, so there a loop
    kernel writes A once. The results match the reference either way."""
    ecg, feeds = computed_a(m, 40, n)
    monkeypatch.setenv("DNNF_OPENCL_TILING", tiling)
    c = df.compile(ecg, target="opencl")
    stages = " ".join(s for k in c.kernels for s in k["stages"])
    tiled = tiling == "1" and m >= 32 and device["max_work_group"] >= 256
    assert ("+prologue(3 ops)" in stages) == tiled, stages
    assert len(c.generated.launches) == (1 if tiled else 2)
    np.testing.assert_allclose(c.run(feeds["x"])[0], ecg.run_reference(**feeds)[0], rtol=1e-4, atol=1e-4)


def test_small_gemm_is_not_tiled(device, monkeypatch):
    ecg, feeds = matmul(8, 40, 100)  # 8 rows: a 64-row tile would idle most of its work-items
    out, src = run(ecg, feeds, "1", monkeypatch)
    assert "__local" not in src
    np.testing.assert_allclose(out[0], ecg.run_reference(**feeds)[0], rtol=1e-4, atol=1e-4)


# Row kernels with a work-group per row (Softmax, LogSoftmax, LayerNorm, float reductions and
# global pools over 64 elements or more): the group's partial sums are combined in another
# order than one item's loop, so they match the reference and the one-item kernel to
# rounding, not to the bit; a NaN anywhere in a Max/Min row is the result, as on the CPU.
def softmax(shape, axis, op="Softmax"):
    return model([h.make_node(op, ["x"], ["s"], axis=axis), h.make_node("Mul", ["s", "c"], ["y"])],
                 {"x": f32(*shape) * 4}, ["y"], [("c", f32(shape[-1]))])


def layer_norm(rows, norm, stats=False):
    outs = ["y", "mean", "inv"] if stats else ["y"]
    return model([h.make_node("LayerNormalization", ["x", "g", "b"], outs, axis=-1, epsilon=1e-5)],
                 {"x": f32(rows, norm) * 3 + 1}, outs, [("g", f32(norm)), ("b", f32(norm))])


def reduce(op, shape, axes, nan=False, **attrs):
    x = f32(*shape) * 2
    if nan:
        x.reshape(-1)[[5, 777]] = np.nan
    return model([h.make_node(op, ["x", "a"], ["r"], **attrs), h.make_node("Relu", ["r"], ["y"])],
                 {"x": x}, ["y"], [("a", np.array(axes, np.int64))])


def global_pool(op, shape, nan=False):
    x = f32(*shape)
    if nan:
        x[1, 2, 3, 4] = np.nan
    return model([h.make_node(op, ["x"], ["y"])], {"x": x}, ["y"])


ROW_CASES = {
    "reduce_mean_long": lambda: reduce("ReduceMean", (6, 300), [1]),
    "reduce_sum_two_axes": lambda: reduce("ReduceSum", (8, 20, 9), [0, 2], keepdims=0),
    "reduce_max_nan": lambda: reduce("ReduceMax", (3, 500), [1], nan=True),
    "reduce_min_inner_axis": lambda: reduce("ReduceMin", (2, 130, 5), [1]),
    "reduce_l2": lambda: reduce("ReduceL2", (5, 200), [1]),
    "reduce_prod": lambda: reduce("ReduceProd", (3, 70), [1]),
    "global_average_pool": lambda: global_pool("GlobalAveragePool", (2, 8, 14, 14)),
    "global_max_pool_nan": lambda: global_pool("GlobalMaxPool", (2, 8, 9, 9), nan=True),
    "softmax_long_rows": lambda: softmax((6, 300), -1),
    "softmax_rows_of_64": lambda: softmax((5, 64), -1),
    "softmax_inner_axis": lambda: softmax((2, 130, 7), 1),
    "logsoftmax_long_rows": lambda: softmax((4, 1000), -1, "LogSoftmax"),
    "layer_norm_rows": lambda: layer_norm(9, 768),
    "layer_norm_mean_and_inverse": lambda: layer_norm(3, 200, stats=True),
}


@pytest.mark.parametrize("case", sorted(ROW_CASES))
def test_row_groups_match_reference(device, case, monkeypatch):
    fits = device["max_work_group"] >= 128
    ecg, feeds = ROW_CASES[case]()
    want = ecg.run_reference(**feeds)
    grouped, src = run(ecg, feeds, "1", monkeypatch)
    single, src_single = run(ecg, feeds, "0", monkeypatch)
    assert ("__local float dn_red" in src) == fits and "__local" not in src_single
    for got, ref, other in zip(grouped, want, single):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got, other, rtol=1e-4, atol=1e-5)  # sums in another order: rounding


def test_topk_long_rows_with_ties_and_nan(device, monkeypatch):
    """TopK ranks every element in its own work-item (a row of 5000 took seconds on a GPU as one
    item's quadratic loop): ties go to the lower index, NaN ranks first, as the CPU kernel."""
    x = np.round(f32(2, 5000) * 4).astype(np.float32)  # many ties
    x[0, 17] = np.nan
    ecg, feeds = model([h.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=1)], {"x": x},
                       ["v", "i"], [("k", np.array([50], np.int64))])
    v, i = run(ecg, feeds, "1", monkeypatch)[0]
    rv, ri = ecg.run_reference(**feeds)
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(v, rv)
    assert np.isnan(v[0, 0]) and i[0, 0] == 17


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("shape,axis,k", [((3, 4000), -1, 37), ((2, 1500, 3), 1, 1500), ((1, 2048), -1, 1)])
def test_topk_long_rows_select_a_threshold_first(device, largest, shape, axis, k, monkeypatch):
    """TopK over float rows of 1024 elements or more finds each row's k-th best key by radix
    selection in a work-group, gathers the elements at or above it and ranks only those: three
    kernels (one with a 256-bin local histogram), the CPU kernel's values and indices exactly,
    with ties at the threshold (rounded values), NaN (first when largest, last when smallest),
    -0 beside +0 (equal: the lower index first), a middle axis and k = the whole row."""
    x = np.round(f32(*shape) * 3).astype(np.float32)
    flat = x.reshape(-1)
    flat[::97] = np.nan
    flat[5::89] = -0.0
    flat[7::89] = 0.0
    ecg, feeds = model([h.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)], {"x": x},
                       ["v", "i"], [("k", np.array([k], np.int64))])
    m, (v, i), src = run_model(ecg, feeds, "1", monkeypatch)
    rv, ri = ecg.run_reference(**feeds)
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(v, rv)
    np.testing.assert_array_equal(np.signbit(v), np.signbit(rv))  # the -0 and +0 of the input, each at its place
    selects = device["max_work_group"] >= 128 and device["local_mem_bytes"] >= 1040
    assert ("_select(" in src and "__local uint dn_hist[256]" in src and "_gather(" in src) == selects
    assert len(m.generated.launches) == (3 if selects else 1)


def test_kernel_argument_limit_comes_from_the_device(device):
    """compile(target="opencl") plans with the device's limit on kernel arguments
    (CL_DEVICE_MAX_PARAMETER_SIZE over 8-byte pointers, less the 3 every kernel takes), explain()
    names it where it split a block, and code generation refuses a plan made without it."""
    limit = device["max_kernel_args"]
    assert limit == device["max_parameter_bytes"] // 8 - 3
    n = limit + 10  # a chain of Adds over more inputs than one kernel may take
    xs = {f"x{i}": f32(4) for i in range(n)}
    nodes = [h.make_node("Add", ["x0", "x1"], ["s1"])]
    nodes += [h.make_node("Add", [f"s{i - 1}", f"x{i}"], [f"s{i}"]) for i in range(2, n)]
    ecg, feeds = model(nodes, xs, [f"s{n - 1}"])
    m = df.compile(ecg, target="opencl")
    np.testing.assert_allclose(m.run(*[feeds[v.name] for v in ecg.inputs])[0], ecg.run_reference(**feeds)[0],
                               rtol=1e-5, atol=1e-5)
    kernels = m.source().split("__kernel void ")[1:]
    assert len(kernels) >= 2 and all(k.split("{")[0].count("dnnf_v") <= limit for k in kernels)
    text = m.explain()
    assert f"over the opencl limit of {limit} (kernel-argument limit)" in text
    unlimited = df.plan.plan(ecg, target="opencl", max_kernel_args=10 * n)
    with pytest.raises(df.CompileError, match=f"kernel-argument limit of {limit}"):
        _core.generate_opencl(ecg.graph, unlimited, "")


def concat_a_gemm(m, k, n):  # A = Concat(x1, x2) along K (an index prologue), B a Linear's [n, k]
    return model([h.make_node("Concat", ["x1", "x2"], ["t"], axis=1),
                  h.make_node("Gemm", ["t", "w", "b"], ["y"], transB=1)],
                 {"x1": f32(m, k // 2), "x2": f32(m, k - k // 2)}, ["y"], [("w", f32(n, k)), ("b", f32(n))])


@pytest.mark.parametrize("case", ["linear_1x300x40", "linear_3x2048x100", "concat_a_2x256x48"])
def test_few_rows_with_b_along_k_reduce_in_work_groups(device, case, monkeypatch):
    """A GEMM with too few rows to tile whose B columns lie along K (a Linear layer's weights,
    [N, K]) runs a work-group per output element, its items splitting K (a classifier's GEMV);
    untiled (DNNF_OPENCL_TILING=0) it keeps one work-item per element. Both match the reference."""
    build, (m, k, n) = {"linear": gemm_epilogue, "concat": concat_a_gemm}[case.split("_")[0]], \
        map(int, case.split("_")[-1].split("x"))
    ecg, feeds = build(m, k, n)
    want = ecg.run_reference(**feeds)
    grouped = device["max_work_group"] >= 128 and device["local_mem_bytes"] >= 512
    for tiling in ("1", "0"):
        out, src = run(ecg, feeds, tiling, monkeypatch)
        uses = "__local float dn_red[128]" in src and f"dn_k += 128L" in src
        assert uses == (grouped and tiling == "1"), (case, tiling)
        if case.startswith("concat") and uses:
            assert "const long row = dn_m, j = dn_k;" in src  # A through its prologue, inside the group loop
        np.testing.assert_allclose(out[0], want[0], rtol=1e-4, atol=1e-4)


def concat_conv(channels, m, hw, computed=False):
    """Concat of len(channels) inputs along the channels, then a 3x3 Conv + Relu; `computed`: the
    first input made in the block (a Sigmoid) rather than read from memory."""
    ins = {f"x{i}": f32(2, c, *hw) for i, c in enumerate(channels)}
    nodes = [h.make_node("Sigmoid", ["x0"], ["s0"])] if computed else []
    cat_in = ["s0" if computed else "x0"] + [f"x{i}" for i in range(1, len(channels))]
    nodes += [h.make_node("Concat", cat_in, ["cat"], axis=1),
              h.make_node("Conv", ["cat", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
              h.make_node("Relu", ["c"], ["y"])]
    return model(nodes, ins, ["y"], [("w", f32(m, sum(channels), 3, 3)), ("b", f32(m))])


CONCAT_CONV = {  # (builder, whether each K step of a tap-major tile lies in one input)
    "aligned_2": (lambda: concat_conv((16, 32), 40, (9, 11)), True),
    "unaligned_3": (lambda: concat_conv((8, 24, 5), 36, (7, 10)), False),
    "computed_input": (lambda: concat_conv((16, 16), 48, (8, 8), computed=True), True),
    "few_outputs": (lambda: concat_conv((64, 96), 16, (2, 2)), True),  # the work-group per output
}


@pytest.mark.parametrize("case", sorted(CONCAT_CONV))
def test_channel_concat_feeding_a_conv_is_read_in_place(device, case, monkeypatch):
    """A Concat along the channels read only by a channels-first convolution is never written:
    the convolution reads each input where it lies (a pointer per input; a tap-major tile finds
    its step's input once per K step where every input's channels are a multiple of 16), tiled
    (64, 32), untiled and in work-groups per output. One stage in one kernel, no scratch, and the
    reference's numbers; the CPU target matches too."""
    build, aligned = CONCAT_CONV[case]
    ecg, feeds = build()
    want = ecg.run_reference(**feeds)
    for tiling in ("64", "32", "0"):
        m, out, src = run_model(ecg, feeds, tiling, monkeypatch)
        conv_kernels = [k for k in m.generated.kernels if any(s.startswith("Conv") for s in k["stages"])]
        assert len(conv_kernels) == 1, m.generated.kernels
        k = conv_kernels[0]
        parts = 3 if case == "unaligned_3" else 2
        assert k["stages"][-1].startswith(f"Conv k3 s1 g1 concat({parts})"), k["stages"]
        assert k["scratch_bytes"] == (0 if case != "computed_input" else 2 * 16 * 8 * 8 * 4)  # only the Sigmoid's
        tiled = "__local float dn_As" in src
        assert ("__global const float* dn_xs;" in src) == (tiled and aligned), tiling
        if case == "few_outputs":  # 128 outputs, K = 1440
            room = device["max_work_group"] >= 128 and device["local_mem_bytes"] >= 512
            assert ("__local float dn_red[128]" in src) == (room and tiling != "0")
        np.testing.assert_allclose(out[0], want[0], rtol=1e-4, atol=1e-4)
    cpu = df.compile(ecg)
    np.testing.assert_allclose(cpu.run(*[feeds[v.name] for v in ecg.inputs])[0], want[0], rtol=1e-4, atol=1e-4)


FEW_OUTPUTS = {  # (builder, outputs): too few rows or columns to tile, K of 128 or more
    "conv2d_2x2_pixels": (lambda: conv(64, 16, (2, 2), (3, 3), pads=[1, 1, 1, 1]), 2 * 16 * 4),
    "conv2d_groups_strided": (lambda: conv(64, 8, (5, 4), (3, 3), group=2, strides=[2, 2], pads=[1, 1, 1, 1]),
                              2 * 8 * 3 * 2),
    "conv1d_1_pixel": (lambda: conv(40, 24, (4,), (4,)), 2 * 24),
    "matmul_b_along_n": (lambda: matmul(8, 300, 16), 8 * 16),  # B [K, N]: not a Linear's [N, K]
}


@pytest.mark.parametrize("case", sorted(FEW_OUTPUTS))
def test_few_outputs_with_long_k_reduce_in_work_groups(device, case, monkeypatch):
    """A GEMM or convolution too small to tile whose outputs are too few to keep the device busy
    one work-item each (fewer than 256 per compute unit, DNNF_OPENCL_BUSY_ITEMS: a small image's
    last stages), with a K of 128 or more, runs a work-group per output element, its items
    splitting K; with as many outputs per unit as that or more (the setting at or below the
    case's outputs per unit, or 0), or untiled (DNNF_OPENCL_TILING=0), one work-item per element.
    All match the reference."""
    build, outputs = FEW_OUTPUTS[case]
    ecg, feeds = build()
    want = ecg.run_reference(**feeds)
    room = device["max_work_group"] >= 128 and device["local_mem_bytes"] >= 512
    for tiling, busy in (("1", None), ("0", None), ("1", "0"), ("1", str(outputs // device["compute_units"]))):
        if busy is not None:
            monkeypatch.setenv("DNNF_OPENCL_BUSY_ITEMS", busy)
        out, src = run(ecg, feeds, tiling, monkeypatch)
        assert "__local float dn_As" not in src  # never tiled
        uses = "__local float dn_red[128]" in src and "dn_k += 128L" in src
        busy_items = 256 if busy is None else int(busy)
        assert uses == (room and tiling == "1" and outputs < busy_items * device["compute_units"]), (case, tiling, busy)
        np.testing.assert_allclose(out[0], want[0], rtol=1e-4, atol=1e-4)


def test_a_bad_busy_items_setting_is_a_clear_error(device, monkeypatch):
    monkeypatch.setenv("DNNF_OPENCL_BUSY_ITEMS", "-5")
    ecg, _ = CASES["matmul_long_k"]()
    with pytest.raises(df.CompileError, match="DNNF_OPENCL_BUSY_ITEMS is '-5'"):
        df.compile(ecg, target="opencl")


@pytest.mark.parametrize("case", sorted(CASES))
def test_split_k_sums_partial_tiles_in_order(device, case, monkeypatch):
    """K split across work-groups (DNNF_OPENCL_SPLIT_K=3 forces what a GPU chooses for GEMMs
    whose tiles leave compute units idle): each group's partial tile goes to scratch and a
    second kernel sums the partials and runs the epilogue. Where K has 3 tile steps or more
    the module has one launch more than without the split, counts the partials' bytes as
    written, and matches the NumPy reference; forced off (1) no GEMM splits."""
    ecg, feeds = CASES[case]()
    want = ecg.run_reference(**feeds)
    monkeypatch.setenv("DNNF_OPENCL_SPLIT_K", "1")
    m1, whole, src_whole = run_model(ecg, feeds, "1", monkeypatch)
    assert "_part(" not in src_whole
    monkeypatch.setenv("DNNF_OPENCL_SPLIT_K", "3")
    m3, parts, src = run_model(ecg, feeds, "1", monkeypatch)
    if "__local float dn_As" not in src:
        return  # a device without room for tiles has nothing to split
    steps = re.search(r"dn_kbeg = dn_z \* (\d+)L", src)
    if steps is None:  # K under 3 tile steps would leave a split empty: not split
        assert "_part(" not in src and len(m3.generated.launches) == len(m1.generated.launches)
    else:
        out_bytes = sum(4 * r.size for r in want)  # each case's GEMM output is its output's size
        assert len(m3.generated.launches) == len(m1.generated.launches) + 1
        got = m3.stats["intermediate_bytes_written"] - m1.stats["intermediate_bytes_written"]
        assert got >= 2 * out_bytes and got % out_bytes == 0, (got, out_bytes)  # splits x the GEMM's output
    for a, b, r in zip(parts, whole, want):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)  # other sums: not the same bits


@pytest.mark.parametrize("features", ["none", *FEATURES])
@pytest.mark.parametrize("case", ["conv2d_tap_major_strided_groups", "gemm_transb_epilogue", "conv_transpose_2x2_s2"])
def test_each_tile_feature_keeps_reference_and_untiled_bits(device, case, features, monkeypatch):
    """Each feature of the tile alone (and none: the plain tile of scalar loads from local
    memory) gives the reference's results and the untiled kernel's bits at every tile side;
    the source shows the feature: floatV reads, a step fetched ahead under `dn_k0 + 16 <`,
    B's k (A's m) from the item's place along K (M) where that axis is contiguous, a
    convolution's tap found once per step."""
    monkeypatch.setenv("DNNF_OPENCL_TILE_FEATURES", features)
    ecg, feeds = CASES[case]()
    want = ecg.run_reference(**feeds)
    plain, _ = run(ecg, feeds, "0", monkeypatch)
    for tiling in ("64", "32"):
        tiled, src = run(ecg, feeds, tiling, monkeypatch)
        side = int(tiling)
        if "__local float dn_As" not in src:  # only a device without room for the tile
            assert device["max_work_group"] < 256 or device["local_mem_bytes"] < 2 * 16 * (side + 4) * 4
            continue
        assert f"dn_As[{16 * (side + (4 if features == 'vec' else 1))}]" in src
        assert ("*(__local const float" in src) == (features == "vec")
        assert ("if (dn_k0 + 16L < dn_kend)" in src) == (features == "prefetch")
        if case == "gemm_transb_epilogue":  # B = w^T: k contiguous
            assert ("const long dn_n = dn_n0 + dn_t / 16" in src) == (features == "kfast_b")
        if case.startswith("conv_transpose"):  # A = w [C, M taps]: m contiguous
            assert ("const long dn_m = dn_m0 + dn_bn" in src) == (features == "kfast_b")
        if case.startswith("conv2d"):
            assert ("const int dn_tap = (int)(dn_kb / " in src) == (features == "tap_major")
        for got, ref, other in zip(tiled, want, plain):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
            assert "_part(" in src or np.array_equal(got, other), (tiling, features)


def test_a_bad_tile_feature_is_a_clear_error(device, monkeypatch):
    monkeypatch.setenv("DNNF_OPENCL_TILE_FEATURES", "vec,turbo")
    ecg, _ = CASES["matmul_long_k"]()
    with pytest.raises(df.CompileError, match="DNNF_OPENCL_TILE_FEATURES names 'turbo'"):
        df.compile(ecg, target="opencl")


@pytest.mark.parametrize("value", ["abc", "-1", "2.5", "1000"])
def test_a_bad_split_k_setting_is_a_clear_error(device, value, monkeypatch):
    monkeypatch.setenv("DNNF_OPENCL_SPLIT_K", value)
    ecg, _ = CASES["matmul_long_k"]()
    with pytest.raises(df.CompileError, match="DNNF_OPENCL_SPLIT_K is '"):
        df.compile(ecg, target="opencl")


# (M, N, K, conv) of zoo layers -> (tile, K splits) on a GPU of 132 compute units (an H200):
# the choices that measured fastest there, one configuration at a time (benchmarks/README.md,
# runs 7 to 9 of benchmarks/opencl_tile_bench.py).
GPU_CHOICES = {
    "vgg conv 64->64 @224": ((64, 224 * 224, 64 * 9, True), (64, 1)),  # 64 rows: a 128 tile idles half
    "vgg conv 256->256 @56": ((256, 56 * 56, 256 * 9, True), (128, 5)),  # 50 tiles: 250 groups fill 2 waves
    "vgg conv 512->512 @14": ((512, 14 * 14, 512 * 9, True), (128, 15)),
    "unet conv 256->128 @128": ((128, 128 * 128, 256 * 9, True), (128, 1)),  # 128 groups: one wave
    "unet conv 1024->512 @32": ((512, 32 * 32, 1024 * 9, True), (128, 4)),  # 5 splits: 160 groups, 2 waves
    "unet up-conv 1024->512 @16": ((512 * 4, 16 * 16, 1024, False), (64, 4)),
    "bert ffn": ((128, 3072, 768, False), (64, 5)),  # split until 3 groups per unit, 8 K steps or more each
    "gemm 1024": ((1024, 1024, 1024, False), (64, 2)),
    # ResNet-50's convolutions: no split of 128-wide tiles into pieces of 12 K steps or more fills
    # the waves, so they keep run 7's tiles (32 wide, split below two groups per unit).
    "resnet conv 128->128 @28": ((128, 28 * 28, 128 * 9, True), (32, 6)),
    "resnet conv 256->256 @14": ((256, 14 * 14, 256 * 9, True), (32, 10)),
    "resnet conv 256->64 1x1 @56": ((64, 56 * 56, 256, True), (32, 3)),
}


@pytest.mark.parametrize("layer", sorted(GPU_CHOICES))
def test_gpu_tile_and_split_choices(layer):
    (m, n, k, conv), want = GPU_CHOICES[layer]
    assert _core.opencl_gemm_tile(m, n, k, 1, conv, compute_units=132, gpu=True) == want


def test_cpu_device_tile_and_split_choices():
    """A CPU device: 64-wide tiles where they give a group per compute unit, else 32-wide, K
    split below one group per unit, aiming at two; no 128-wide tiles (they would spill)."""
    t = _core.opencl_gemm_tile
    assert t(512, 512, 256, 1, True, compute_units=16, gpu=False) == (64, 1)
    assert t(64, 64, 256, 1, False, compute_units=16, gpu=False) == (32, 4)  # 4 groups; 8 splits capped by 16 K steps / 4
    assert t(64, 64, 32, 1, False, compute_units=16, gpu=False) == (32, 1)  # K too short to split
    assert t(16, 512, 64, 1, False, compute_units=16, gpu=False) == (0, 0)  # too few rows to tile
    assert t(512, 512, 64, 1, False, compute_units=16, gpu=False, local_mem_bytes=4096) == (0, 0)  # no room
