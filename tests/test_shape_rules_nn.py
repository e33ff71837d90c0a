"""Shape rules of the nn operators (cpp/ir/shape_nn.cc; TopK, NonMaxSuppression and RoiAlign
of shape_index.cc): Conv and ConvTranspose, Gemm and MatMul, the normalizations, the pools,
reductions, ArgMax/ArgMin, Softmax, CumSum, TopK and the detection operators. The inferred
output shapes and dtypes equal what onnxruntime actually produces when the same one-node ONNX
model runs on real arrays (and, for a few ops, torch); user mistakes raise ShapeError with a
message that says what was expected; symbolic dims pass through where the op does not need
their value."""

import numpy as np
import pytest

from shape_rule_helpers import W, In, check, f32, fails, i64, infer, run


# ---------------------------------------------------------------- Conv / ConvTranspose

CONV = [
    ((1, 3, 10, 12), (4, 3, 3, 3), {}),
    ((2, 3, 10, 12), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 11, 9), (4, 3, 3, 2), {"strides": [3, 2], "pads": [0, 1, 2, 0], "dilations": [2, 3]}),
    ((1, 4, 9, 9), (6, 2, 3, 3), {"group": 2}),
    ((1, 4, 9, 9), (4, 1, 3, 3), {"group": 4, "strides": [2, 2]}),  # depthwise
    ((1, 3, 10, 7), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 10, 7), (4, 3, 4, 4), {"auto_pad": "SAME_LOWER", "strides": [3, 2]}),
    ((1, 3, 10, 7), (4, 3, 3, 2), {"auto_pad": "VALID", "strides": [2, 3]}),
    ((1, 3, 10, 7), (4, 3, 3, 3), {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2]}),
    ((1, 3, 17), (5, 3, 4), {"strides": [3], "pads": [1, 2]}),  # 1-D
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 3), {"strides": [1, 2, 2], "pads": [0, 1, 1, 1, 0, 1]}),  # 3-D
]


@pytest.mark.parametrize("x,w,attrs", CONV)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_matches_onnxruntime(x, w, attrs, bias):
    check("Conv", [In(x), W(w, np.float32), W(w[0], np.float32) if bias else None], attrs)


def test_conv_matches_torch():
    torch = pytest.importorskip("torch")
    x = torch.zeros(2, 6, 15, 13)
    for stride, pad, dil, groups in [(1, 0, 1, 1), (2, 3, 1, 2), (3, 2, 2, 3), (2, 1, 3, 6)]:
        w = torch.zeros(12, 6 // groups, 3, 5)
        y = torch.nn.functional.conv2d(x, w, None, stride, pad, dil, groups)
        got = infer("Conv", [In(tuple(x.shape)), w.numpy(), None],
                    {"strides": [stride] * 2, "pads": [pad] * 4, "dilations": [dil] * 2, "group": groups})
        assert got == [(tuple(y.shape), "f32")]


CONV_T = [
    ((1, 3, 5, 6), (3, 4, 3, 3), {}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 3], "output_padding": [1, 2]}),
    ((1, 3, 5, 6), (3, 4, 2, 3), {"strides": [2, 2], "dilations": [2, 1], "pads": [0, 1, 1, 0]}),
    ((1, 4, 5, 6), (4, 2, 3, 3), {"group": 2, "strides": [2, 2]}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 2], "output_shape": [10, 12]}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 5, 6), (3, 4, 4, 4), {"strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 2], "auto_pad": "VALID"}),
    ((1, 3, 7), (3, 2, 4), {"strides": [3], "pads": [1, 2], "output_padding": [2]}),
    ((1, 2, 3, 4, 5), (2, 3, 2, 2, 2), {"strides": [2, 1, 2]}),
]


@pytest.mark.parametrize("x,w,attrs", CONV_T)
def test_conv_transpose_matches_onnxruntime(x, w, attrs):
    check("ConvTranspose", [In(x), W(w, np.float32), W(w[1] * attrs.get("group", 1), np.float32)], attrs)


def test_conv_transpose_matches_torch():
    torch = pytest.importorskip("torch")
    x = torch.zeros(1, 4, 7, 5)
    w = torch.zeros(4, 3, 3, 2)
    y = torch.nn.functional.conv_transpose2d(x, w, None, (2, 3), (1, 0), (1, 2), 2, (2, 1))
    got = infer("ConvTranspose", [In((1, 4, 7, 5)), w.numpy()],
                {"strides": [2, 3], "pads": [1, 0, 1, 0], "output_padding": [1, 2], "group": 2,
                 "dilations": [2, 1]})
    assert got == [(tuple(y.shape), "f32")]


def test_conv_errors():
    x = In((1, 3, 8, 8))
    fails("Conv", [x, W((4, 2, 3, 3), np.float32)], {}, r"input channels 3 must equal weight dim 1 \(2\) x group \(1\)")
    fails("Conv", [In((1, 4, 8, 8)), W((6, 2, 3, 3), np.float32)], {"group": 4}, "not divisible by group 4")
    fails("Conv", [In((1, 3, 8)), W((4, 3, 3, 3), np.float32)], {}, "weight must have the input's rank 3")
    fails("Conv", [In((3, 8)), W((4, 3, 3), np.float32)], {}, r"rank >= 3 \(N, C, spatial...\), got f32\[3,8\]")
    fails("Conv", [x, W((4, 3, 9, 3), np.float32)], {}, r"kernel extent 9 .* larger than the padded input 8")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"dilations": [4, 1]}, r"kernel extent 9 \(kernel 3, dilation 4\)")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"strides": [1]}, r"'strides' must have 2 values, got \[1\]")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"strides": [0, 1]}, r"'strides' values must be in \[1, 2\^31\], got \[0,1\]")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"pads": [1, 1, 1]}, "'pads' must have 4 values")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"kernel_shape": [2, 2]}, "does not match the weight")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"auto_pad": "SAME"}, "auto_pad must be NOTSET")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32)], {"auto_pad": "VALID", "pads": [1, 1, 1, 1]},
          "cannot be combined with auto_pad=VALID")
    fails("Conv", [x, W((4, 3, 3, 3), np.float32), W((5,), np.float32)], {}, r"bias must have shape \[4\], got f32\[5\]")
    fails("Conv", [In((1, 3, 8, 8), "i32"), W((4, 3, 3, 3), np.int32)], {}, "X must be a float tensor")
    fails("Conv", [x, W((4, 3, 3, 3), np.float64)], {}, "W must have the element type of input 0")
    fails("ConvTranspose", [x, W((4, 3, 3, 3), np.float32)], {}, "input channels 3 must equal weight dim 0")
    fails("ConvTranspose", [x, W((3, 3, 3, 3), np.float32)], {"output_shape": [16]}, "output_shape must have 2 values")
    fails("ConvTranspose", [x, W((3, 3, 3, 3), np.float32)], {"pads": [9, 9, 9, 9]}, "exceed the transposed output")


def test_conv_symbolic_dims():
    # batch passes through; size-preserving windows keep symbolic spatial dims
    assert infer("Conv", [In(("N", 3, "H", "W")), W((4, 3, 3, 3), np.float32)],
                 {"pads": [1, 1, 1, 1]}) == [(("N", 4, "H", "W"), "f32")]
    check("Conv", [In(("N", 3, "H", "W")), W((4, 3, 3, 3), np.float32)], {"auto_pad": "SAME_UPPER"})
    check("Conv", [In(("N", 3, 8, 8)), W((4, 3, 3, 3), np.float32)], {"strides": [2, 2]})
    fails("Conv", [In(("N", 3, "H", 8)), W((4, 3, 3, 3), np.float32)], {"strides": [2, 2]},
          r"spatial axis 0 has the symbolic size 'H' .* input_shapes=")
    assert infer("ConvTranspose", [In(("N", 3, 4, 4)), W((3, 2, 3, 3), np.float32)],
                 {"strides": [2, 2]})[0][0][0] == "N"


# ---------------------------------------------------------------- Gemm / MatMul

@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c", [None, (5,), (1, 5), (4, 1), (4, 5), ()])
def test_gemm_matches_onnxruntime(ta, tb, c):
    a = (3, 4) if ta else (4, 3)
    b = (5, 3) if tb else (3, 5)
    check("Gemm", [In(a), In(b), None if c is None else In(c)], {"transA": ta, "transB": tb, "alpha": 0.5})


MATMUL = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
          ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 1)), ((1, 2, 3), (6, 3, 4)), ((4,), (2, 5, 4, 3)),
          ((2, 1, 4, 3), (3,)), ((0, 2, 3), (3, 0))]


@pytest.mark.parametrize("a,b", MATMUL)
def test_matmul_matches_numpy_and_onnxruntime(a, b):
    got = check("MatMul", [In(a), In(b)])
    assert got == [(np.matmul(np.zeros(a, np.float32), np.zeros(b, np.float32)).shape, "f32")]


def test_gemm_matmul_errors_and_symbols():
    fails("Gemm", [In((4, 3)), In((4, 5))], {}, r"inner dimensions differ: A is \[4,3\], B is \[4,5\]")
    fails("Gemm", [In((4, 3)), In((3, 5)), In((3, 5))], {}, r"C f32\[3,5\] does not broadcast to \[M,N\] = \[4,5\]")
    fails("Gemm", [In((4, 3, 1)), In((3, 5))], {}, "A and B must be matrices")
    fails("Gemm", [In((4, 3)), In((3, 5))], {"transA": 2}, "'transA' must be 0 or 1")
    fails("MatMul", [In((2, 3)), In((4, 5))], {}, r"inner dimensions differ: f32\[2,3\] @ f32\[4,5\]")
    fails("MatMul", [In((2, 2, 3)), In((3, 3, 4))], {}, r"batch dimensions \[2\] and \[3\] do not broadcast")
    fails("MatMul", [In(()), In((3,))], {}, "rank >= 1")
    fails("MatMul", [In((2, 3)), In((3, 4), "f64")], {}, "element type")
    check("Gemm", [In(("N", 3)), In((3, 5)), W((5,), np.float32)])
    assert infer("MatMul", [In(("B", "S", 8)), In((8, 16))]) == [(("B", "S", 16), "f32")]
    check("MatMul", [In(("B", 1, "S", 8)), In((4, 8, "S"))])


# ---------------------------------------------------------------- normalization

@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 4, 5)])
def test_instance_norm_matches_onnxruntime(shape):
    c = shape[1]
    check("InstanceNormalization", [In(shape), In((c,)), In((c,))], {"epsilon": 1e-3})


@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
@pytest.mark.parametrize("n_out", [1, 3])
def test_layer_norm_matches_onnxruntime(axis, n_out):
    shape = (2, 3, 4)
    norm = shape[axis:]
    check("LayerNormalization", [In(shape), In(norm), In(norm)], {"axis": axis}, n_out)


def test_layer_norm_stats_shape_dtype_and_errors():
    got = infer("LayerNormalization", [In(("B", "S", 8), "f64"), In((8,), "f64")], {}, 3)
    assert got == [(("B", "S", 8), "f64"), (("B", "S", 1), "f32"), (("B", "S", 1), "f32")]
    got = infer("LayerNormalization", [In((2, 3, 8), "f16"), In((3, 8), "f16")], {"axis": 1, "stash_type": 11}, 3)
    assert got[1] == ((2, 1, 1), "f64")
    check("LayerNormalization", [In((2, 3, 8)), In((1, 8))], {"axis": 1}, 3)  # Scale broadcasts
    fails("LayerNormalization", [In((2, 8)), In((4,))], {}, r"Scale f32\[4\] must broadcast to the normalized shape \[8\]")
    fails("LayerNormalization", [In((2, 8)), In((8,))], {"axis": 2}, "axis 2 is out of range for rank 2")
    fails("LayerNormalization", [In((2, 8))], {}, r"Scale \(input 1\) is required")
    fails("InstanceNormalization", [In((2, 3, 5)), In((4,)), In((3,))], {}, r"scale must have shape \[3\], got f32\[4\]")
    fails("InstanceNormalization", [In((2, 3)), In((3,)), In((3,))], {}, "rank >= 3")
    check("InstanceNormalization", [In(("N", 3, "H", "W")), In((3,)), In((3,))])


# ---------------------------------------------------------------- pooling

POOL = [
    ((1, 2, 9, 9), {"kernel_shape": [3, 3]}),
    ((1, 2, 9, 10), {"kernel_shape": [3, 2], "strides": [2, 2]}),
    ((1, 2, 9, 10), {"kernel_shape": [3, 3], "strides": [2, 3], "pads": [1, 1, 1, 0]}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 4, 7), {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ((1, 2, 11, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 11, 8), {"kernel_shape": [4, 2], "strides": [3, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 11, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "auto_pad": "VALID"}),
    ((1, 2, 12, 12), {"kernel_shape": [2, 3], "dilations": [2, 2], "strides": [2, 1]}),
    ((1, 2, 12, 12), {"kernel_shape": [2, 2], "dilations": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((2, 3, 17), {"kernel_shape": [4], "strides": [3], "pads": [1, 2]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 3], "ceil_mode": 1}),
]


@pytest.mark.parametrize("x,attrs", POOL)
def test_max_pool_matches_onnxruntime(x, attrs):
    check("MaxPool", [In(x)], attrs)
    if len(x) == 4:  # Indices (i64) output
        check("MaxPool", [In(x)], {**attrs, "storage_order": 1}, 2)


@pytest.mark.parametrize("x,attrs", POOL)
def test_average_pool_matches_onnxruntime(x, attrs):
    check("AveragePool", [In(x)], {**attrs, "count_include_pad": 1})


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("n,k,s,p", [(4, 2, 3, 1), (7, 3, 2, 1), (10, 3, 3, 0), (5, 2, 2, 1), (6, 3, 4, 1)])
def test_max_pool_matches_torch(ceil_mode, n, k, s, p):
    torch = pytest.importorskip("torch")
    y = torch.nn.functional.max_pool1d(torch.zeros(1, 2, n), k, s, p, ceil_mode=ceil_mode)
    got = infer("MaxPool", [In((1, 2, n))], {"kernel_shape": [k], "strides": [s], "pads": [p, p],
                                             "ceil_mode": int(ceil_mode)})
    assert got == [(tuple(y.shape), "f32")]


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("x", [(2, 3, 5), (1, 3, 4, 5), (1, 2, 3, 4, 5), ("N", 3, "H", "W")])
def test_global_pool_matches_onnxruntime(op, x):
    got = check(op, [In(x)])
    assert got[0][0][:2] == x[:2]


def test_pool_errors_and_symbols():
    fails("MaxPool", [In((1, 2, 8, 8))], {}, "attribute 'kernel_shape' is required")
    fails("MaxPool", [In((1, 2, 8, 8))], {"kernel_shape": [3]}, "'kernel_shape' must have 2 values")
    fails("MaxPool", [In((1, 2, 2, 8))], {"kernel_shape": [3, 3]}, r"kernel extent 3 .* padded input 2")
    fails("MaxPool", [In((8, 8))], {"kernel_shape": [3, 3]}, "rank >= 3")
    fails("MaxPool", [In((1, 2, 8, 8))], {"kernel_shape": [3, 3], "storage_order": 2}, "'storage_order' must be 0 or 1")
    fails("AveragePool", [In((1, 2, 8, 8), "i32")], {"kernel_shape": [3, 3]}, "X must be a float tensor")
    fails("GlobalAveragePool", [In((3, 8))], {}, "rank >= 3")
    assert infer("MaxPool", [In(("N", 2, 8, 8))], {"kernel_shape": [2, 2], "strides": [2, 2]}, 2) == [
        (("N", 2, 4, 4), "f32"), (("N", 2, 4, 4), "i64")]
    check("MaxPool", [In(("N", 2, "H", "W"))], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
    check("AveragePool", [In(("N", 2, 9, "W"))], {"kernel_shape": [3, 1], "strides": [2, 1]})


# ---------------------------------------------------------------- reductions, Softmax, TopK

REDUCE_OPS = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"]
REDUCE = [(None, {}), (i64(1), {}), (i64(-1, 0), {"keepdims": 0}), (i64(2), {"keepdims": 0}),
          (None, {"keepdims": 0}), (i64(), {}), (i64(), {"noop_with_empty_axes": 1}),
          (None, {"noop_with_empty_axes": 1, "keepdims": 0}), (i64(0, 1, 2), {"keepdims": 1})]


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes,attrs", REDUCE)
def test_reductions_match_onnxruntime(op, axes, attrs):
    check(op, [In((2, 3, 4)), axes], attrs)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": 1}, {"axis": -1, "keepdims": 0}, {"axis": 0, "keepdims": 0},
                                   {"select_last_index": 1}])
def test_argmax_matches_onnxruntime(op, attrs):
    got = check(op, [In((2, 3, 4))], attrs)
    assert got[0][1] == "i64"


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -2])
def test_softmax_matches_onnxruntime(op, axis):
    check(op, [In((2, 3, 4))], {} if axis is None else {"axis": axis})


@pytest.mark.parametrize("axis,exclusive,reverse", [(0, 0, 0), (-1, 1, 0), (1, 1, 1)])
def test_cumsum_matches_onnxruntime(axis, exclusive, reverse):
    check("CumSum", [In((2, 3, 4)), np.array(axis, np.int64)], {"exclusive": exclusive, "reverse": reverse})
    check("CumSum", [In((2, 3, 4)), In((), "i32", data=[0])])  # a computed axis is fine too


@pytest.mark.parametrize("k,attrs", [(2, {}), (1, {"axis": 0}), (4, {"axis": 1, "largest": 0}),
                                     (0, {}), (5, {"axis": -1, "sorted": 0})])
def test_topk_matches_onnxruntime(k, attrs):
    got = check("TopK", [In((2, 4, 5)), i64(k)], attrs, 2)
    assert [t for _, t in got] == ["f32", "i64"]


def test_reduction_softmax_topk_errors_and_symbols():
    fails("ReduceSum", [In((2, 3)), i64(2)], {}, "axes value 2 is out of range for rank 2")
    check("ReduceSum", [In((2, 3)), i64(1, -1)], {"keepdims": 0})  # a repeated axis counts once
    fails("Softmax", [In(())], {"axis": 0}, "rank >= 1")
    fails("ReduceSum", [In((2, 3)), In((1,), "i64")], {}, r"axes \(input 1\) must be a constant")
    fails("ReduceMean", [In((2, 3), "bool")], {}, "cannot reduce a bool tensor")
    fails("ArgMax", [In((2, 3))], {"axis": 3}, "axis 3 is out of range for rank 2")
    fails("Softmax", [In((2, 3))], {"axis": -3}, "axis -3 is out of range for rank 2")
    fails("Softmax", [In((2, 3), "i32")], {}, "must be a float tensor")
    fails("CumSum", [In((2, 3)), np.array(2, np.int64)], {}, "axis 2 is out of range")
    fails("CumSum", [In((2, 3)), np.array(1.0, np.float32)], {}, "axis must be an i32 or i64 tensor")
    fails("TopK", [In((2, 3)), i64(4)], {}, r"K = 4 exceeds the size 3 of axis 1 of f32\[2,3\]", 2)
    fails("TopK", [In((2, 3)), In((1,), "i64")], {}, r"K \(input 1\) must be a constant", 2)
    fails("TopK", [In((2, 3)), i64(1, 2)], {}, "K must be a constant holding a single value", 2)
    assert infer("ReduceMean", [In(("B", "S", 8)), i64(-1)]) == [(("B", "S", 1), "f32")]
    assert infer("ReduceSum", [In(("B", "S", 8)), i64(1)], {"keepdims": 0}) == [(("B", 8), "f32")]
    assert infer("ReduceMax", [In(("B", "S"))], {"keepdims": 0}) == [((), "f32")]
    assert infer("ArgMax", [In(("B", "S", 8))], {"axis": 2}) == [(("B", "S", 1), "i64")]
    assert infer("Softmax", [In(("B", "S", "S"))]) == [(("B", "S", "S"), "f32")]
    assert infer("CumSum", [In(("B", "S")), np.array(-1, np.int64)]) == [(("B", "S"), "f32")]
    assert infer("TopK", [In(("B", 10)), i64(3)], {}, 2) == [(("B", 3), "f32"), (("B", 3), "i64")]
    assert infer("TopK", [In((4, "S")), i64(3)], {}, 2)[1] == ((4, 3), "i64")


# ---------------------------------------------------------------- NonMaxSuppression, RoiAlign

def test_non_max_suppression():
    boxes = In((1, 6, 4), data=[[0, 0, 1, 1], [0, .1, 1, 1.1], [0, -.1, 1, .9], [0, 10, 1, 11],
                                [0, 10.1, 1, 11.1], [0, 100, 1, 101]])
    scores = In((1, 1, 6), data=[.9, .75, .6, .95, .5, .3])
    inputs = [boxes, scores, i64(3), f32(0.5), f32(0.0)]
    got = infer("NonMaxSuppression", inputs)
    assert got == [(("nms_selected", 3), "i64")]  # the count depends on the data
    (actual,) = run("NonMaxSuppression", inputs)
    assert actual[0][1] == 3 and actual[1] == "i64"
    assert infer("NonMaxSuppression", [In(("N", 6, 4)), In(("N", 2, 6))]) == [((0, 3), "i64")]
    fails("NonMaxSuppression", [In((1, 6, 5)), In((1, 1, 6))], {}, r"boxes must have shape \[num_batches, spatial_dimension, 4\]")
    fails("NonMaxSuppression", [In((1, 6, 4)), In((1, 1, 7))], {}, "disagree on num_batches or spatial_dimension")
    fails("NonMaxSuppression", [In((1, 6, 4)), In((1, 1, 6)), i64(3), f32(0.5, 0.2)], {}, "iou_threshold must be a scalar")


@pytest.mark.parametrize("attrs", [{}, {"output_height": 3, "output_width": 2, "sampling_ratio": 2},
                                   {"mode": "max", "coordinate_transformation_mode": "output_half_pixel"}])
def test_roi_align_matches_onnxruntime(attrs):
    rois = In((3, 4), data=[[0, 0, 4, 4], [1, 1, 3, 5], [2, 0, 6, 3]])
    idx = In((3,), "i64", data=[0, 1, 0])
    check("RoiAlign", [In((2, 5, 8, 8)), rois, idx], attrs)
    assert infer("RoiAlign", [In(("N", 5, "H", "W")), In(("R", 4)), In(("R",), "i64")], attrs)[0][0][:2] == ("R", 5)
    fails("RoiAlign", [In((2, 5, 8, 8)), In((3, 5)), idx], attrs, r"rois must have shape \[num_rois, 4\]")
    fails("RoiAlign", [In((2, 5, 8, 8)), rois, In((4,), "i64")], attrs, r"batch_indices must have shape \[3\]")
    fails("RoiAlign", [In((2, 5, 8)), rois, idx], attrs, r"X must have shape \[N, C, H, W\]")
