"""Shape rules of the layout and indexing operators (cpp/ir/shape_tensor.cc,
shape_index.cc): Reshape, Flatten, Squeeze, Unsqueeze, Concat, Split, Slice, Pad, Shape,
Size, Transpose, DepthToSpace, SpaceToDepth, Expand, Tile, Resize, Gather, GatherElements,
ConstantOfShape and Range. The inferred output shapes and dtypes equal what onnxruntime
actually produces when the same one-node ONNX model runs on real arrays (and, for a few ops,
numpy); user mistakes raise ShapeError with a message that says what was expected; symbolic
dims pass through where the op does not need their value."""

import numpy as np
import pytest

from shape_rule_helpers import I64_MAX, I64_MIN, NP, OPSET, In, check, f32, fails, i64, infer


# ---------------------------------------------------------------- Reshape, Flatten, Squeeze, Unsqueeze

RESHAPE = [((2, 3, 4), i64(6, 4), {}), ((2, 3, 4), i64(-1), {}), ((2, 3, 4), i64(0, -1), {}),
           ((2, 3, 4), i64(4, 0, -1), {}), ((2, 3, 4), i64(0, 0, 2, 2), {}), ((2, 3, 4), i64(1, -1, 1, 2), {}),
           ((2, 0, 4), i64(0, 0, 4), {}), ((2, 0, 4), i64(0, -1), {}), ((2, 0, 4), i64(0, 4, 0), {"allowzero": 1}),
           ((0, 3), i64(3, 0), {"allowzero": 1}), ((), i64(1, 1), {}), ((1, 1), i64(), {})]


@pytest.mark.parametrize("x,shape,attrs", RESHAPE)
def test_reshape_matches_onnxruntime(x, shape, attrs):
    check("Reshape", [In(x), shape], attrs)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten_matches_onnxruntime(axis):
    check("Flatten", [In((2, 3, 4))], {"axis": axis})


@pytest.mark.parametrize("x,axes", [((1, 3, 1, 2), None), ((1, 3, 1, 2), i64(0)), ((1, 3, 1, 2), i64(-2, 0)),
                                    ((1,), None), ((3, 1), i64(1))])
def test_squeeze_matches_onnxruntime(x, axes):
    check("Squeeze", [In(x), axes])


@pytest.mark.parametrize("x,axes", [((3, 4), i64(0)), ((3, 4), i64(-1)), ((3, 4), i64(0, 3)),
                                    ((3, 4), i64(1, -1, 0)), ((), i64(0, 1))])
def test_unsqueeze_matches_onnxruntime(x, axes):
    check("Unsqueeze", [In(x), axes])


def test_reshape_family_errors_and_symbols():
    fails("Reshape", [In((2, 3, 4)), i64(5, -1)], {}, r"cannot reshape f32\[2,3,4\] to \[5,-1\]: 24 elements do not divide into 5")
    fails("Reshape", [In((2, 3, 4)), i64(5, 5)], {}, "24 elements vs 25")
    fails("Reshape", [In((2, 3, 4)), i64(-1, -1)], {}, "more than one -1")
    fails("Reshape", [In((2, 3, 4)), i64(0, -2)], {}, "invalid entry -2")
    fails("Reshape", [In((6,)), i64(0, 0)], {}, "copies input dim 1 .* has rank 1")
    fails("Reshape", [In((0, 3)), i64(0, -1)], {"allowzero": 1}, "both 0 and -1")
    fails("Reshape", [In((2, 3)), In((2,), "i64")], {}, r"shape \(input 1\) must be a constant")
    fails("Reshape", [In((2, 3)), np.array([[6]], np.int64)], {}, "shape must be a 1-D tensor")
    fails("Reshape", [In(("B", "S", 4)), i64(-1, 4)], {}, "product involving symbolic dims")
    fails("Reshape", [In(("B", 4)), i64(2, 4)], {}, "symbolic dims are not carried over")
    assert infer("Reshape", [In(("B", "S", 768)), i64(0, 0, 12, 64)]) == [(("B", "S", 12, 64), "f32")]
    assert infer("Reshape", [In(("B", 3, 4)), i64(-1, 12)]) == [(("B", 12), "f32")]
    check("Reshape", [In(("B", 3, 4)), i64(0, -1)])
    check("Reshape", [In(("B", 2, 6)), i64(-1, 3, 4)])
    fails("Flatten", [In((2, 3))], {"axis": 3}, r"axis 3 is out of range \[-2, 2\]")
    assert infer("Flatten", [In(("N", 512, 1, 1))]) == [(("N", 512), "f32")]
    fails("Flatten", [In(("N", "S", 4))], {"axis": 2}, r"merging dims \[N,S\] needs a static size")
    fails("Squeeze", [In((1, 3)), i64(1)], {}, r"cannot squeeze axis 1 of f32\[1,3\]: its size is not 1")
    fails("Squeeze", [In(("N", 1))], {}, "cannot tell whether the symbolic dim 'N'")
    fails("Squeeze", [In((1, 3)), i64(2)], {}, "axes value 2 is out of range")
    assert infer("Squeeze", [In(("N", 1, "S")), i64(1)]) == [(("N", "S"), "f32")]
    fails("Unsqueeze", [In((3, 4)), i64(0, 0)], {}, r"axes \[0,0\] name axis 0 twice")
    fails("Unsqueeze", [In((3, 4)), i64(3)], {}, "axes value 3 is out of range for rank 3")
    assert infer("Unsqueeze", [In(("B", "S")), i64(1, -1)]) == [(("B", 1, "S", 1), "f32")]


# ---------------------------------------------------------------- Concat, Split

@pytest.mark.parametrize("shapes,axis", [([(2, 3), (2, 5)], 1), ([(2, 3), (4, 3), (1, 3)], 0),
                                          ([(2, 3, 4)], -1), ([(2, 0, 4), (2, 3, 4)], -2)])
def test_concat_matches_onnxruntime(shapes, axis):
    check("Concat", [In(s) for s in shapes], {"axis": axis})


SPLIT = [((6, 4), None, {}, 3), ((6, 4), i64(1, 2, 3), {}, 3), ((6, 4), i64(4, 0), {"axis": -1}, 2),
         ((7, 4), None, {"num_outputs": 3}, 3), ((6, 5), None, {"num_outputs": 2, "axis": 1}, 2),
         ((5, 2), None, {"num_outputs": 3}, 3), ((6, 4), None, {"num_outputs": 1}, 1),
         ((10,), None, {"num_outputs": 4}, 4)]


@pytest.mark.parametrize("x,split,attrs,n", SPLIT)
def test_split_matches_onnxruntime(x, split, attrs, n):
    # opset 18+ needs split or num_outputs; the equal split into the outputs is opset 13's
    check("Split", [In(x), split], attrs, n, opset=13 if split is None and not attrs else OPSET)


def test_concat_split_errors_and_symbols():
    fails("Concat", [In((2, 3)), In((3, 3))], {"axis": 1}, r"input 1 f32\[3,3\] differs from f32\[2,3\] on axis 0")
    fails("Concat", [In((2, 3)), In((2, 3, 1))], {"axis": 0}, "inputs must have one rank")
    fails("Concat", [In((2, 3)), In((2, 3), "i32")], {"axis": 0}, "inputs must have one element type")
    fails("Concat", [In((2, 3))], {}, "attribute 'axis' is required")
    fails("Concat", [In((2, 3))], {"axis": 2}, "axis 2 is out of range for rank 2")
    fails("Concat", [In(("N", 3)), In(("N", 3))], {"axis": 0}, "sum involving symbolic dims")
    assert infer("Concat", [In(("B", "S", 4)), In(("B", "S", 8))], {"axis": -1}) == [(("B", "S", 12), "f32")]
    assert infer("Concat", [In(("B", 4)), In((3, 4))], {"axis": 1}) == [((3, 8), "f32")]
    fails("Split", [In((6, 4)), i64(1, 2)], {}, r"split \[1,2\] sums to 3 but axis 0 of f32\[6,4\] has size 6", 2)
    fails("Split", [In((6, 4)), i64(1, 2)], {}, "has 2 entries but the node has 3 outputs", 3)
    fails("Split", [In((6, 4)), i64(3, 3)], {"num_outputs": 2}, "not both", 2)
    fails("Split", [In((6, 4))], {"num_outputs": 3}, "num_outputs is 3 but the node has 2 outputs", 2)
    fails("Split", [In((5, 4))], {"num_outputs": 4}, r"size 5 cannot be split into 4 chunks of 2 \(the last would be negative\)", 4)
    fails("Split", [In((7,))], {}, "size 7 is not evenly splittable into 3 outputs", 3)
    fails("Split", [In(("N", 4))], {}, "cannot split the symbolic axis 'N' into 2 parts", 2)
    assert infer("Split", [In(("B", 6))], {"axis": 1}, 2) == [(("B", 3), "f32")] * 2
    assert infer("Split", [In(("B", 6)), i64(2, 4)], {"axis": 1}, 2) == [(("B", 2), "f32"), (("B", 4), "f32")]


# ---------------------------------------------------------------- Slice, Pad

SLICE = [
    (i64(1), i64(3), None, None), (i64(0, 1), i64(-1, 100), None, None),
    (i64(1), i64(I64_MAX), i64(-1), None), (i64(-1), i64(I64_MIN), i64(1), i64(-1)),
    (i64(5, 0), i64(0, 3), i64(0, 2), i64(-2, 2)), (i64(-100), i64(100), i64(2), i64(3)),
    (i64(3), i64(1), i64(0), i64(1)), (i64(10), i64(0), i64(0), i64(-1)), (i64(-2), i64(-1), None, None),
    (np.array([1], np.int32), np.array([4], np.int32), np.array([1], np.int32), np.array([2], np.int32)),
    (i64(0), i64(5), i64(1), i64(I64_MAX)), (i64(4), i64(0), i64(2), i64(I64_MIN)),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICE)
def test_slice_matches_onnxruntime_and_numpy(starts, ends, axes, steps):
    x = np.zeros((6, 5, 7), np.float32)
    got = check("Slice", [In(x.shape), starts, ends, axes, steps])
    idx = [slice(None)] * 3
    ax = axes if axes is not None else range(len(starts))
    st = steps if steps is not None else [1] * len(starts)
    for a, s, e, k in zip(ax, starts, ends, st):
        idx[a] = slice(int(s), int(e), int(max(min(k, 2**62), -2**62)))
    assert got[0][0] == x[tuple(idx)].shape


PAD = [(i64(1, 2, 3, 4), None, None, {}), (i64(0, 1, 0, 2), f32(1.5), None, {"mode": "constant"}),
       (i64(1, 0, 2, 0), None, None, {"mode": "reflect"}), (i64(2, 2, 2, 2), None, None, {"mode": "edge"}),
       (i64(3, 1), None, i64(1), {"mode": "wrap"}), (i64(-1, 1, 0, -2), None, None, {}),
       (i64(2, 1), None, i64(-2), {})]


@pytest.mark.parametrize("pads,value,axes,attrs", PAD)
def test_pad_matches_onnxruntime(pads, value, axes, attrs):
    check("Pad", [In((4, 5)), pads, value, axes], attrs)


def test_pad_matches_numpy():
    x = np.zeros((2, 3, 4), np.float32)
    got = infer("Pad", [In(x.shape), i64(0, 1, 2, 3, 0, 1), None, i64(0, 1, 2)])
    assert got[0][0] == np.pad(x, [(0, 3), (1, 0), (2, 1)]).shape


def test_slice_pad_errors_and_symbols():
    x = In((6, 5))
    fails("Slice", [x, i64(0), i64(3), i64(0), i64(0)], {}, r"steps \[0\] contain a 0")
    fails("Slice", [x, i64(0, 1), i64(3), None, None], {}, "must have one length")
    fails("Slice", [x, i64(0, 0), i64(3, 3), i64(1, -1), None], {}, "name axis 1 twice")
    fails("Slice", [x, i64(0), i64(3), i64(2), None], {}, "axes value 2 is out of range for rank 2")
    fails("Slice", [x, In((1,), "i64"), i64(3)], {}, r"starts \(input 1\) must be a constant")
    assert infer("Slice", [In(("B", "S", 8)), i64(2), i64(6), i64(-1)]) == [(("B", "S", 4), "f32")]
    assert infer("Slice", [In(("B", "S")), i64(0), i64(I64_MAX), i64(1)]) == [(("B", "S"), "f32")]
    assert infer("Slice", [In(("B", "S")), i64(-1), i64(I64_MIN), i64(1), i64(-1)]) == [(("B", "S"), "f32")]
    fails("Slice", [In(("B", "S")), i64(1), i64(I64_MAX), i64(1)], {}, "symbolic size 'S' and the slice")
    fails("Pad", [x, i64(1, 1, 1)], {}, r"pads \[1,1,1\] must have 2 x 2 values")
    fails("Pad", [x, i64(-4, 0, -4, 0)], {}, "remove more than the size 6 of axis 0")
    fails("Pad", [x, i64(1, 1, 1, 1)], {"mode": "mirror"}, "mode must be constant, reflect, edge or wrap")
    fails("Pad", [x, i64(1, 1, 1, 1), np.array(0, np.int32)], {}, "constant_value .* must have the element type")
    fails("Pad", [x, i64(1, 1), None, i64(1, 1)], {}, "name axis 1 twice")
    assert infer("Pad", [In(("B", 5)), i64(0, 1, 0, 2)]) == [(("B", 8), "f32")]
    fails("Pad", [In(("B", 5)), i64(1, 0, 0, 0)], {}, "symbolic size 'B' and pads change it")


# ---------------------------------------------------------------- Shape, Size, Transpose

@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 10},
                                   {"start": 3, "end": 1}, {"start": -10}])
def test_shape_matches_onnxruntime(attrs):
    got = check("Shape", [In((2, 3, 4))], attrs)
    assert got[0][1] == "i64"
    assert infer("Shape", [In(("B", "S", 4))], attrs) == got  # only the rank matters


def test_size_matches_onnxruntime():
    assert check("Size", [In((2, 3, 4))]) == [((), "i64")]
    assert infer("Size", [In(("B", "S"), "bool")]) == [((), "i64")]


@pytest.mark.parametrize("x,perm", [((2, 3, 4), None), ((2, 3, 4), [0, 2, 1]), ((2, 3, 4, 5), [3, 0, 2, 1]),
                                    ((7,), [0]), ((), None)])
def test_transpose_matches_onnxruntime(x, perm):
    check("Transpose", [In(x)], {} if perm is None else {"perm": perm})


def test_transpose_errors_and_symbols():
    fails("Transpose", [In((2, 3, 4))], {"perm": [0, 1]}, r"perm \[0,1\] is not a permutation of 0..2")
    fails("Transpose", [In((2, 3, 4))], {"perm": [0, 1, 1]}, "is not a permutation")
    fails("Transpose", [In((2, 3, 4))], {"perm": [0, 1, 3]}, "is not a permutation")
    assert infer("Transpose", [In(("B", "S", 12, 64))], {"perm": [0, 2, 1, 3]}) == [(("B", 12, "S", 64), "f32")]


# ---------------------------------------------------------------- DepthToSpace, SpaceToDepth

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("b", [1, 2, 3])
def test_depth_space_match_onnxruntime(mode, b):
    check("DepthToSpace", [In((1, 36, 2, 3))], {"blocksize": b, "mode": mode})
    check("SpaceToDepth", [In((1, 2, 6, 12))], {"blocksize": b})


def test_depth_space_errors_and_symbols():
    fails("DepthToSpace", [In((1, 8, 2, 3))], {"blocksize": 3}, r"channels 8 of f32\[1,8,2,3\] are not divisible by blocksize\^2 = 9")
    fails("DepthToSpace", [In((1, 8, 2, 3))], {}, "attribute 'blocksize' is required")
    fails("DepthToSpace", [In((1, 8, 2, 3))], {"blocksize": 2, "mode": "XYZ"}, "mode must be DCR or CRD")
    fails("SpaceToDepth", [In((1, 2, 6, 5))], {"blocksize": 2}, "width 5 .* is not divisible by blocksize 2")
    fails("SpaceToDepth", [In((2, 6, 5))], {"blocksize": 2}, r"input must have shape \[N, C, H, W\]")
    assert infer("DepthToSpace", [In(("N", 8, 2, 3))], {"blocksize": 2}) == [(("N", 2, 4, 6), "f32")]
    fails("DepthToSpace", [In(("N", 8, "H", 3))], {"blocksize": 2}, "height is the symbolic size 'H'")
    assert infer("SpaceToDepth", [In(("N", 3, 4, 4))], {"blocksize": 2}) == [(("N", 12, 2, 2), "f32")]


# ---------------------------------------------------------------- Expand, Tile

@pytest.mark.parametrize("x,shape", [((3, 1), i64(2, 3, 4)), ((3, 1), i64(1, 1)), ((1, 4), i64(3, 1)),
                                     ((2, 1, 3), i64(5, 1)), ((), i64(2, 2)), ((3,), i64()), ((1, 3), i64(0, 1))])
def test_expand_matches_onnxruntime(x, shape):
    check("Expand", [In(x), shape])


@pytest.mark.parametrize("x,reps", [((2, 3), i64(1, 1)), ((2, 3), i64(2, 3)), ((2, 3, 1), i64(1, 0, 4))])
def test_tile_matches_onnxruntime_and_numpy(x, reps):
    got = check("Tile", [In(x), reps])
    assert got[0][0] == np.tile(np.zeros(x), reps).shape


def test_expand_tile_errors_and_symbols():
    fails("Expand", [In((3, 2)), i64(4, 3)], {}, r"input f32\[3,2\] does not broadcast with shape \[4,3\]")
    fails("Expand", [In((3, 2)), i64(-1, 2)], {}, "negative entry")
    fails("Expand", [In((3, 2)), In((2,), "i64")], {}, r"shape \(input 1\) must be a constant")
    assert infer("Expand", [In(("B", 1, 4)), i64(1, 5, 1)]) == [(("B", 5, 4), "f32")]
    check("Expand", [In(("B", 1, 4)), i64(3, 1, 5, 1)])
    fails("Tile", [In((3, 2)), i64(2)], {}, r"repeats \[2\] must have one entry per axis of f32\[3,2\]")
    fails("Tile", [In((3, 2)), i64(2, -1)], {}, "negative entry")
    assert infer("Tile", [In(("B", 2)), i64(1, 3)]) == [(("B", 6), "f32")]
    fails("Tile", [In(("B", 2)), i64(2, 3)], {}, "'B' and is repeated 2 times")


# ---------------------------------------------------------------- Resize

RESIZE = [
    (f32(1, 1, 2, 2), None, {}), (f32(1, 1, 0.5, 1.5), None, {"mode": "linear"}),
    (f32(1, 1, 0.7, 1.3), None, {}), (f32(1, 1, 0.333, 2.6), None, {"mode": "cubic"}),
    (f32(2, 3), None, {"axes": [2, 3]}), (f32(0.6, 1.9), None, {"axes": [-1, 2]}),
    (None, i64(1, 3, 7, 20), {}), (None, i64(7, 20), {"axes": [2, 3]}),
    (None, i64(7, 20), {"axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}),
    (None, i64(7, 20), {"axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller"}),
    (None, i64(1, 3, 5, 9), {"keep_aspect_ratio_policy": "not_smaller"}),
]


@pytest.mark.parametrize("scales,sizes,attrs", RESIZE)
def test_resize_matches_onnxruntime(scales, sizes, attrs):
    check("Resize", [In((1, 3, 10, 9)), None, scales, sizes], attrs)


def test_resize_matches_onnx_shape_inference_for_old_style_empty_scales():
    # opset-11 exports pass an empty scales tensor next to sizes
    check("Resize", [In((1, 3, 4, 4)), f32(), f32(), i64(1, 3, 8, 8)])


def test_resize_errors_and_symbols():
    x = In((1, 3, 10, 9))
    fails("Resize", [x], {}, "give exactly one of scales .* got neither")
    fails("Resize", [x, None, f32(1, 1, 2, 2), i64(1, 3, 20, 18)], {}, "got both")
    fails("Resize", [x, None, f32(1, 2)], {}, "scales has 2 values but 4 axes are resized")
    fails("Resize", [x, None, f32(1, 1, 0, 2)], {}, "scales must be positive and finite")
    fails("Resize", [x, None, f32(2, 2)], {"axes": [2, 2]}, "name axis 2 twice")
    fails("Resize", [x, None, None, i64(5, 5)], {"axes": [2, 3], "keep_aspect_ratio_policy": "fit"},
          "keep_aspect_ratio_policy must be stretch")
    fails("Resize", [x, None, f32(1, 1, 2, 2)], {"keep_aspect_ratio_policy": "not_larger"}, "cannot be combined")
    fails("Resize", [x, None, In((4,))], {}, r"scales \(input 2\) must be a constant")
    fails("Resize", [x, None, None, i64(1, 3, 5, 5)], {"mode": "bilinear"}, "mode must be nearest, linear or cubic")
    assert infer("Resize", [In(("N", 3, 10, 9)), None, f32(1, 1, 2, 2)]) == [(("N", 3, 20, 18), "f32")]
    assert infer("Resize", [In(("N", 3, "H", "W")), None, None, i64(32, 32)], {"axes": [2, 3]}) == [
        (("N", 3, 32, 32), "f32")]
    check("Resize", [In(("N", 3, 10, 9)), None, None, i64(5, 4)], {"axes": [2, 3]})
    fails("Resize", [In(("N", 3, "H", 9)), None, f32(1, 1, 2, 2)], {}, "axis 2 has the symbolic size 'H' and is resized")


# ---------------------------------------------------------------- Gather, GatherElements

GATHER = [((5, 4), In((), "i64", data=[2]), 0), ((5, 4), In((3,), "i64", data=[0, -1, 3]), 1),
          ((5, 4, 3), In((2, 2), "i32", data=[0, 1, 2, -2]), 1), ((5, 4, 3), In((2, 3), "i64", data=[0] * 6), -1),
          ((5,), In((0,), "i64", data=[]), 0), ((5, 4), i64(4, 0), 0)]


@pytest.mark.parametrize("x,idx,axis", GATHER)
def test_gather_matches_onnxruntime_and_numpy(x, idx, axis):
    got = check("Gather", [In(x), idx], {"axis": axis})
    ind = idx if isinstance(idx, np.ndarray) else idx.array(None)
    assert got[0][0] == np.take(np.zeros(x), ind, axis=axis).shape


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_matches_onnxruntime(axis):
    check("GatherElements", [In((4, 5)), In((2, 3), "i64", data=[0, 1, 1, 0, 1, 0])], {"axis": axis})


def test_gather_errors_and_symbols():
    fails("Gather", [In((5, 4)), i64(5)], {}, "index 5 is out of range for axis 0 of size 5")
    fails("Gather", [In((5, 4)), i64(-5)], {"axis": 1}, "index -5 is out of range for axis 1 of size 4")
    fails("Gather", [In((5, 4)), In((2,), "f32")], {}, "indices must be i32 or i64")
    fails("Gather", [In((5, 4)), In((2,), "i64")], {"axis": 2}, "axis 2 is out of range for rank 2")
    fails("Gather", [In(()), In((2,), "i64")], {}, "data must have rank >= 1")
    assert infer("Gather", [In((30000, 768)), In(("B", "S"), "i64")]) == [(("B", "S", 768), "f32")]
    assert infer("Gather", [In(("B", "S", 768)), i64(0)], {"axis": 1}) == [(("B", 1, 768), "f32")]
    assert infer("Gather", [In(("B", "S", 768)), np.array(0, np.int64)], {"axis": 1}) == [(("B", 768), "f32")]
    fails("GatherElements", [In((4, 5)), In((4,), "i64")], {}, "indices must have the rank of data")
    fails("GatherElements", [In((4, 5)), In((2, 6), "i64")], {}, "larger than data .* on axis 1")
    assert infer("GatherElements", [In(("B", 5)), In(("B", 2), "i64")], {"axis": 1}) == [(("B", 2), "f32")]


# ---------------------------------------------------------------- ConstantOfShape, Range

@pytest.mark.parametrize("shape", [i64(2, 3), i64(), i64(0, 4)])
@pytest.mark.parametrize("value", [None, np.array([7], np.int32), np.array([1.5], np.float64),
                                   np.array([True]), np.array([3], np.int64)])
def test_constant_of_shape_matches_onnxruntime(shape, value):
    check("ConstantOfShape", [shape], {} if value is None else {"value": value})


RANGE_INT = [(0, 10, 3), (10, 0, -3), (5, 5, 1), (5, 0, 1), (-7, 8, 4), (3, -100, -7)]
RANGE_FLOAT = [(0.0, 1.0, 0.3), (1.0, -1.0, -0.25), (0.5, 10.0, 0.1), (2.5, 2.5, 1.0)]


@pytest.mark.parametrize("start,limit,delta,dtype",
                         [(*r, t) for r in RANGE_INT for t in ["i16", "i32", "i64", "f32", "f64"]] +
                         [(*r, t) for r in RANGE_FLOAT for t in ["f32", "f64"]])
def test_range_matches_onnxruntime_and_numpy(start, limit, delta, dtype):
    args = [np.array(v, NP[dtype]) for v in (start, limit, delta)]
    if dtype == "i16":
        got = infer("Range", args)  # onnxruntime has no i16 Range kernel
    else:
        got = check("Range", args)
    assert got == [(np.arange(*args).shape, dtype)]


def test_range_counts_in_the_operand_type_like_numpy():
    # onnxruntime computes these counts in double, ONNX shape inference half in float;
    # numpy.arange, the ONNX reference and dnnfusion's reference kernel use the operand type
    for v in [(-1.2, -6.0, -0.2), (0.2, -0.3, -0.25), (0.1, 0.7, 0.2), (0.0, 1.0, 0.1), (-3.3, 7.1, 0.7)]:
        for dtype in ["f16", "f32", "f64"]:
            args = [np.array(x, NP[dtype]) for x in v]
            count = max(int(np.ceil((args[1] - args[0]) / args[2])), 0)  # numpy in the dtype
            assert infer("Range", args) == [((count,), dtype)], (v, dtype)


def test_constant_of_shape_range_errors():
    fails("ConstantOfShape", [i64(2, -1)], {}, r"shape \[2,-1\] has a negative entry")
    fails("ConstantOfShape", [In((2,), "i64")], {}, r"shape \(input 0\) must be a constant")
    fails("ConstantOfShape", [i64(2)], {"value": np.array([1, 2], np.float32)}, r"must hold one element, got f32\[2\]")
    fails("Range", [np.array(0, np.int64), np.array(5, np.int64), np.array(0, np.int64)], {}, "delta must not be 0")
    fails("Range", [np.array(0, np.int64), np.array(5, np.int32), np.array(1, np.int64)], {}, "limit must have the element type of start")
    fails("Range", [np.array(0, np.int64), In((), "i64"), np.array(1, np.int64)], {}, r"limit \(input 1\) must be a constant")
    fails("Range", [i64(0, 1), np.array(5, np.int64), np.array(1, np.int64)], {}, "start must be a scalar")
    fails("Range", [np.array(0, np.float32), np.array(np.inf, np.float32), np.array(1, np.float32)], {},
          "no finite element count")
    fails("Range", [np.array(0, np.uint8), np.array(5, np.uint8), np.array(1, np.uint8)], {}, "start must be f16, f32, f64, i16, i32 or i64, got u8")

