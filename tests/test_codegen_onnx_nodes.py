"""Generated kernels for every operator in the table, against the ONNX backend node tests'
expected outputs: each covered case (see test_onnx_backend.py) that code generation
supports is compiled, merged with others into one module per opset (see
dnnfusion/testing/codegen_node_suite.py), and run under every dialect this CPU runs (compiled only for the x86 dialects it lacks)."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
import dnnfusion as df  # noqa: E402
from dnnfusion.testing import codegen_node_suite as cs  # noqa: E402

from dialects import compile_only, params  # noqa: E402

COLLECTED = cs.collect()
BATCHES = cs.batches(COLLECTED.entries)

# Cases compiled today (onnx 1.23): 1464 of the 1476 the reference covers (Tan, Asin, ..., Atanh
# 18, BitwiseAnd/Or/Xor/Not and BitShift on every integer type 43, ScatterElements and ScatterND
# with every reduction 14, BitCast 10, CumProd 9, LpPool 8, QuantizeLinear and DequantizeLinear
# on (u)int8 and (u)int16 8, DynamicQuantizeLinear 3 among them; the operators
# imported as their ONNX function bodies or as onnx_functions.py writes them 475, ReduceLogSumExp's
# double sums among them;
# Resize tf_crop_and_resize with the roi a graph input, read at run time, 4; integer and bool
# reductions added 7; Pow with an integer exponent, Trilu's k and Pad's constant_value read
# at run time and Pad mode wrap 19; CumSum on f64 and integers 9; the float16 cases computed
# in float32 as compile does by default, outputs rounded to float16, 16; TopK on integers 4;
# MaxPool on uint8 1; a float64 attention, MatMul and Softmax in double, 1; GridSample 18, AffineGrid 4;
# then 1522: bfloat16 computed in float32 as float16 is, DFT/STFT/MelWeightMatrix, the QOperator
# ops in int32, ReverseSequence/Col2Im/MaxUnpool; then 1540 with If/Loop/Scan rewritten at import, 1544 with Unsqueeze's scalar axes; 1729 with opsets 7 to 12 converted at import, 1731 with Det, 1734 with TensorScatter, 1738 with DeformConv, 1743 with optionals, 1757 with LinearAttention).
# The floor keeps coverage from dropping silently (an operator or element type code
# generation stops taking).
COMPILED_FLOOR = 1755

# Operators of the table with no compiled node case, and why. A stale row fails.
NOT_COMPILED_OPS = {
    # Its output length depends on the data; the memory plan needs static shapes.
    "NonMaxSuppression": "data-dependent output shape",
    "NonZero": "data-dependent output shape",
    "Unique": "data-dependent output shape",
}


@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("batch", range(len(BATCHES)))
def test_node_cases_through_generated_code(batch, isa):
    problems = cs.run_batch(BATCHES[batch], isa, run=not compile_only(isa))
    assert not problems, "\n".join(f"{k}: {v}" for k, v in sorted(problems.items()))


@pytest.mark.parametrize("batch", range(len(BATCHES)))
def test_node_cases_through_opencl(batch):
    """The same batches through the OpenCL target on the default OpenCL device (PoCL in CI)."""
    try:
        df._core.opencl_devices()
    except df.Error as e:
        pytest.skip(f"no OpenCL device: {e}")
    problems = cs.run_batch(BATCHES[batch], "opencl")
    assert not problems, "\n".join(f"{k}: {v}" for k, v in sorted(problems.items()))


def test_compiled_count_does_not_drop():
    n = len({e.case for e in COLLECTED.entries})
    assert n >= COMPILED_FLOOR, f"only {n} node cases compile, fewer than {COMPILED_FLOOR}"


def test_every_table_operator_has_a_compiled_case():
    compiled = {e.op for e in COLLECTED.entries}
    table = {r["onnx_name"] for r in df.op_table() if not r["internal"]}
    missing = table - compiled - set(NOT_COMPILED_OPS)
    assert not missing, f"operators with no node case through generated code: {sorted(missing)}"
    stale = set(NOT_COMPILED_OPS) & compiled
    assert not stale, f"NOT_COMPILED_OPS lists operators that now compile: {sorted(stale)}"


def test_rejections_are_clear_errors():
    # Every case code generation does not take was refused with UnsupportedOperatorError or
    # ShapeError naming what is missing (collect() lets any other exception through).
    # Each also says what to do about it (issue 17 part 3).
    advice = ("Cast", "float16='f32'", "as a constant", "as constants", "output_padding",
              "runs it and what follows on the host")
    assert COLLECTED.rejected
    for case, why in COLLECTED.rejected.items():
        assert why.startswith(("UnsupportedOperatorError: ", "ShapeError: ")), (case, why)
        assert len(why) > 40, (case, why)
        assert any(a in why for a in advice), f"{case}: the refusal does not say what to do: {why}"
