"""What holds for every shape rule (cpp/ir/shape_*.cc): an absent required input raises
ShapeError, never a crash; where onnxruntime departs from the ONNX spec, the rules follow the
spec; the checks stricter than ONNX shape inference; and on 600 random Conv, pool, Slice,
Reshape, Pad, Resize and MatMul nodes the inferred shapes equal onnxruntime's, also with a
symbolic dim. The operators one by one are in test_shape_rules_nn.py and
test_shape_rules_layout.py."""

import numpy as np
import pytest

import dnnfusion as df

from shape_rule_helpers import (
    I64_MAX, I64_MIN, SYM, W, In, check, concrete, fails, i64, infer, onnx_infer, run,
)


def test_every_rule_fails_cleanly_on_missing_required_inputs():
    """Absent (None) required inputs give ShapeError, never a crash."""
    cases = {"TopK": (2, 2), "Reshape": (2, 1), "Unsqueeze": (2, 1), "Slice": (3, 1), "Pad": (2, 1),
             "Expand": (2, 1), "Tile": (2, 1), "Gather": (2, 1), "GatherElements": (2, 1),
             "Conv": (2, 1), "MatMul": (2, 1), "CumSum": (2, 1), "RoiAlign": (3, 1), "Range": (3, 1)}
    for op, (n_in, n_out) in cases.items():
        for missing in range(1, n_in):
            inputs = [In((2, 3, 4, 4))] + [i64(1)] * (n_in - 1)
            inputs[missing] = None
            with pytest.raises(df.ShapeError):
                infer(op, inputs, {}, n_out)


# ---------------------------------------------------------------- where onnxruntime is not the spec

def test_rules_follow_onnx_where_onnxruntime_deviates():
    """Cases where onnxruntime's kernels disagree with the ONNX spec, ONNX shape inference
    and the ONNX reference implementation; the rules follow the latter."""
    # SAME pooling with dilation: output ceil(in / stride) (onnxruntime shrinks it)
    for attrs in [{"kernel_shape": [3], "dilations": [2], "auto_pad": "SAME_LOWER"},
                  {"kernel_shape": [2], "strides": [2], "dilations": [3], "auto_pad": "SAME_UPPER"}]:
        for op in ["MaxPool", "AveragePool"]:
            assert infer(op, [In((1, 2, 7))], attrs) == onnx_infer(op, [In((1, 2, 7))], attrs) == [((1, 2, -(-7 // attrs.get("strides", [1])[0])), "f32")]
    # Slice ending at INT64_MAX with a negative step is empty from the clamped start (numpy
    # semantics); onnxruntime reads INT_MAX as "to the beginning" there
    x = np.zeros((7,), np.float32)
    args = [In((7,)), i64(5), i64(I64_MAX), i64(0), i64(-2)]
    assert infer("Slice", args) == onnx_infer("Slice", args) == [(x[5:I64_MAX:-2].shape, "f32")]
    # Split into num_outputs: the last chunk may be empty (onnxruntime rejects it)
    for n, d in [(4, 6), (3, 2)]:
        got = infer("Split", [In((d, 3))], {"num_outputs": n}, n)
        assert got == onnx_infer("Split", [In((d, 3))], {"num_outputs": n}, n)
        assert sum(s[0] for s, _ in got) == d


def test_stricter_checks_than_onnx_shape_inference():
    fails("MaxPool", [In((1, 2, 8))], {"kernel_shape": [2], "pads": [2, 0]}, r"pads \[2,0\] must be smaller than kernel_shape \[2\]")
    fails("ConvTranspose", [In((1, 1, 5)), W((1, 1, 3), np.float32)], {"output_padding": [1]},
          r"output_padding \[1\] must be smaller than the stride or the dilation")
    check("ConvTranspose", [In((1, 1, 5)), W((1, 1, 3), np.float32)], {"output_padding": [1], "strides": [2]})
    fails("ConvTranspose", [In((1, 1, 5)), W((1, 1, 3), np.float32)], {"strides": [2], "output_shape": [13]},
          r"output_shape \[13\] is not reachable on spatial axis 0: the transposed output is at most 12")
    check("ConvTranspose", [In((1, 1, 5)), W((1, 1, 3), np.float32)], {"strides": [2], "output_shape": [12]})
    check("ConvTranspose", [In((1, 1, 5)), W((1, 1, 3), np.float32)], {"strides": [2], "output_shape": [7]})
    fails("Pad", [In((3, 4)), i64(3, 0, 0, 0)], {"mode": "reflect"}, "reflect pads must be smaller than the size")
    check("Pad", [In((3, 4)), i64(3, 0, 0, 0)], {"mode": "edge"})
    check("Pad", [In((3, 4)), i64(2, 3, 0, 0)], {"mode": "reflect"})
    fails("Pad", [In((3, 0)), i64(0, 1, 0, 0)], {"mode": "edge"}, "mode edge cannot pad axis 1 of size 0")
    check("Squeeze", [In((1, 3, 1)), i64(0, -3)])  # a repeated axis is allowed, as onnxruntime does


# ---------------------------------------------------------------- randomized agreement with onnxruntime

def _random_case(rng):
    """One random node: (op, inputs, attrs, n_out)."""
    ri = lambda a, b: int(rng.integers(a, b + 1))  # noqa: E731
    kind = ri(0, 7)
    if kind <= 1:  # Conv / ConvTranspose
        n, g = ri(1, 3), [1, 1, 2, 3][ri(0, 3)]
        cin, cout = g * ri(1, 2), g * ri(1, 2)
        k = [ri(1, 4) for _ in range(n)]
        attrs = {"strides": [ri(1, 3) for _ in range(n)], "group": g}
        auto_pad = ["NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"][ri(0, 4)]
        if auto_pad == "NOTSET":
            attrs["pads"] = [ri(0, 2) for _ in range(2 * n)]
        else:
            attrs["auto_pad"] = auto_pad
        if auto_pad[:4] != "SAME":  # onnxruntime's Conv has no dilated SAME
            attrs["dilations"] = [ri(1, 2) for _ in range(n)]
        x = In([1, cin] + [ri(1, 9) for _ in range(n)])
        if kind == 0:
            return "Conv", [x, W([cout, cin // g] + k, np.float32)], attrs, 1
        attrs["output_padding"] = [ri(0, 1) if s > 1 else 0 for s in attrs["strides"]]
        return "ConvTranspose", [x, W([cin, cout // g] + k, np.float32)], attrs, 1
    if kind == 2:  # pools
        n = ri(1, 3)
        attrs = {"kernel_shape": [ri(1, 4) for _ in range(n)], "strides": [ri(1, 3) for _ in range(n)],
                 "ceil_mode": ri(0, 1)}
        attrs["pads"] = [ri(0, k - 1) for k in attrs["kernel_shape"] * 2]
        if ri(0, 1):
            attrs["dilations"] = [ri(1, 2) for _ in range(n)]
        return ["MaxPool", "AveragePool"][ri(0, 1)], [In([1, 2] + [ri(1, 9) for _ in range(n)])], attrs, 1
    if kind == 3:  # Slice
        r = ri(1, 3)
        shape = [ri(0, 7) for _ in range(r)]
        axes = list(rng.permutation(r)[:ri(1, r)])
        big = [I64_MAX, I64_MIN, 2**31 - 1, -2**31]
        pick = lambda: int(big[ri(0, 3)]) if ri(0, 3) == 0 else ri(-9, 9)  # noqa: E731
        steps = [[1, 2, 3, -1, -2, -3, 10][ri(0, 6)] for _ in axes]
        ends = [pick() for _ in axes]
        ends = [e if k > 0 or e < 2**31 - 1 else -2**31 for e, k in zip(ends, steps)]
        return "Slice", [In(shape), i64(*[pick() for _ in axes]), i64(*ends), i64(*axes), i64(*steps)], {}, 1
    if kind == 4:  # Reshape
        shape = [ri(0, 4) for _ in range(ri(0, 4))]
        spec = [[-1, 0, 1, 2, 3, 4, 6][ri(0, 6)] for _ in range(ri(0, 4))]
        return "Reshape", [In(shape), i64(*spec)], {"allowzero": ri(0, 1)}, 1
    if kind == 5:  # Pad
        r = ri(1, 3)
        return "Pad", [In([ri(1, 5) for _ in range(r)]), i64(*[ri(-2, 3) for _ in range(2 * r)])], \
            {"mode": ["constant", "reflect", "edge"][ri(0, 2)]}, 1
    if kind == 6:  # Resize
        r = ri(1, 4)
        shape = [ri(1, 12) for _ in range(r)]
        if ri(0, 1):
            return "Resize", [In(shape), None, np.array([[0.5, 0.7, 1.3, 2.0, 1.0, 0.333][ri(0, 5)] for _ in shape], np.float32)], {}, 1
        policy = ["stretch", "not_larger", "not_smaller"][ri(0, 2)]
        return "Resize", [In(shape), None, None, i64(*[ri(1, 20) for _ in shape])], {"keep_aspect_ratio_policy": policy}, 1
    a = [[1, 2, 3][ri(0, 2)] for _ in range(ri(1, 4))]  # MatMul
    b = [[1, 2, 3][ri(0, 2)] for _ in range(ri(1, 4))]
    return "MatMul", [In(a), In(b)], {}, 1


def test_random_nodes_agree_with_onnxruntime():
    """Whenever onnxruntime runs a random node, dnnfusion infers its output shapes, except
    for the documented stricter checks (a kernel larger than the padded input)."""
    rng = np.random.default_rng(1234)
    both = 0
    for _ in range(600):
        op, inputs, attrs, n_out = _random_case(rng)
        try:
            actual = run(op, inputs, attrs, n_out)
        except Exception:  # onnxruntime rejects it: not compared (it has extra limits)
            continue
        try:
            got = infer(op, inputs, attrs, n_out)
        except df.ShapeError as e:
            assert "kernel extent" in str(e), (op, attrs, str(e), actual)
            continue
        assert got == actual, (op, [getattr(i, "shape", i) for i in inputs], attrs)
        both += 1
        # The same node with one input dim symbolic: the rule either cannot decide without
        # that dim's value (ShapeError) or infers the same shapes with the symbol in them.
        x = inputs[0]
        if not x.shape:
            continue
        axis = int(rng.integers(0, len(x.shape)))
        SYM["Z"] = x.shape[axis]
        sym = [In(x.shape[:axis] + ("Z",) + x.shape[axis + 1:])] + list(inputs[1:])
        try:
            got_sym = infer(op, sym, attrs, n_out)
        except df.ShapeError as e:  # the batch dim of a convolution never matters
            assert not (axis == 0 and op in ("Conv", "ConvTranspose", "MaxPool", "AveragePool")), str(e)
            continue
        assert concrete(got_sym) == actual, (op, sym[0].shape, attrs, got_sym)
    assert both > 300
