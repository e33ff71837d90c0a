"""Structural fuzzing (issue 17 part 5): mutated ONNX models (dnnfusion/testing/proto_fuzz.py)
against `load` and `compile`, in a child process with a time limit, so that a crash or a hang
fails the test and names its case instead of taking pytest down. Every case must end in a
dnnfusion.Error or a compiled model that matches the reference. CI runs fixed seeds; longer:

    python -m dnnfusion.testing.proto_fuzz --cases 5000 --seed 7 --compile-every 1
    python -m dnnfusion.testing.proto_fuzz --atheris -max_total_time=600"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import dnnfusion as df

pytest.importorskip("onnx")
from dnnfusion.testing import proto_fuzz  # noqa: E402


CASES = int(os.environ.get("DNNF_PROTO_FUZZ_CASES", "600"))  # .ci/sanitize runs fewer


@pytest.mark.parametrize("seed", [1, 2])
def test_mutated_models_end_in_an_error_or_a_correct_result(seed):
    cmd = [sys.executable, "-m", "dnnfusion.testing.proto_fuzz", "--cases", str(CASES), "--seed", str(seed),
           "--compile-every", "3"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        last = [ln for ln in out.splitlines() if ln.startswith("case ")][-1:]
        pytest.fail(f"the fuzzer hung at {last} (proto_fuzz.case_bytes(i, seed) rebuilds it)")
    last = [ln for ln in r.stdout.splitlines() if ln.startswith("case ")][-1:]
    assert r.returncode == 0, (f"ended with {r.returncode} at {last} (proto_fuzz.case_bytes(i, seed) "
                               f"rebuilds it):\n{r.stderr[-4000:]}")
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("tally ")]
    tally = dict(kv.split("=") for kv in line.split()[1:])
    # The mutations reach both ends: refusals, and models that still compile and run.
    assert int(tally["error"]) > CASES // 6 and int(tally.get("matched", 0)) > (10 if CASES >= 600 else 0), tally


def test_a_shape_too_large_for_any_machine_is_a_shape_error():
    """Found by the fuzzer: an input dim of 2^62 made the element count overflow int64, and
    the model compiled with a 0-byte arena."""
    import onnx

    m = onnx.load_model_from_string(proto_fuzz.seed_models()[2])
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2**62
    with pytest.raises(df.ShapeError, match="more than 2\\^62 bytes"):
        df.load(m.SerializeToString())


def test_a_tensor_too_large_for_this_machine_is_a_clear_error():
    import onnx

    m = onnx.load_model_from_string(proto_fuzz.seed_models()[2])
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2**36
    with pytest.raises(df.Error, match="cannot allocate"):
        df.compile(m.SerializeToString(), threads=1)


def test_float16_cases_are_fed_float16():
    """A mutation that turns the input float16 is compiled (float16="f32") and checked with
    float16 inputs against the reference."""
    import onnx

    m = onnx.load_model_from_string(proto_fuzz.seed_models()[2])
    m.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    m.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    assert proto_fuzz.check(m.SerializeToString(), compile_it=True) == "matched"
    assert np.dtype(df.ecg.numpy_dtype(df.load(m.SerializeToString()).inputs[0].dtype)) == np.float16


def test_coverage_guided_search_with_atheris():
    """20 s of atheris (libFuzzer over Python coverage of the front end) on bytes and on
    seeded structural mutations; a crash, a hang (-timeout) or a foreign exception fails."""
    pytest.importorskip("atheris")
    cmd = [sys.executable, "-m", "dnnfusion.testing.proto_fuzz", "--atheris", "-max_total_time=20",
           "-seed=1", "-timeout=60", "-rss_limit_mb=4096"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    runs = [ln for ln in r.stderr.splitlines() if ln.startswith("Done ")]
    covs = [int(tok[len("cov: "):].split()[0]) for ln in r.stderr.splitlines() for tok in [ln[ln.find("cov: "):]]
            if "cov: " in ln]
    assert runs and max(covs) > 200, (runs, covs[-3:])


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_an_empty_batch_runs_in_the_reference_and_the_compiled_model(op):
    """Found by the fuzzer: the NumPy reference's convolutions reshaped with -1, which NumPy
    cannot infer for an empty batch, so `run_reference` raised a bare ValueError."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    w = np.ones((3, 2, 3, 3) if op == "ConvTranspose" else (2, 3, 3, 3), np.float32)
    g = h.make_graph([h.make_node(op, ["x", "w"], ["y"])], "empty",
                     [h.make_tensor_value_info("x", T.FLOAT, [0, 3, 5, 5])],
                     [h.make_tensor_value_info("y", T.FLOAT, [0, 2, 7, 7] if op == "ConvTranspose" else [0, 2, 3, 3])],
                     [nh.from_array(w, "w")])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString()
    x = np.zeros((0, 3, 5, 5), np.float32)
    (want,) = df.load(model).run_reference(x)
    got = df.compile(model, threads=1)(x)
    assert got.shape == want.shape == ((0, 2, 7, 7) if op == "ConvTranspose" else (0, 2, 3, 3))


def test_operands_too_large_for_this_machine_fail_the_call_with_a_clear_error():
    """Found by the fuzzer: OneHot's indices mutated to 2^40 elements; the model compiles (its
    arena is small); the call gets a view with no memory behind it, whose contiguous copy
    cannot be made (pybind11's array::ensure returned null for it, and the kernels read null:
    a segmentation fault), nor could the output be allocated."""
    import onnx

    m = onnx.load_model_from_string(proto_fuzz.seed_models()[3])
    m.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 2**36
    c = df.compile(m.SerializeToString(), threads=1)
    x = np.zeros((3, 2, 4), np.float32)
    oi = np.lib.stride_tricks.as_strided(np.zeros(1, np.int64), (2**36,), (0,))  # no memory behind it
    with pytest.raises(df.Error, match="input 'oi': cannot make the contiguous copy|cannot allocate"):
        c(x, oi)


def test_a_name_that_is_not_utf8_is_a_model_format_error():
    """Found by the atheris search: a node output name that is not UTF-8, on an operator
    imported through its ONNX function body (Celu here), reached the function inliner, where
    reading it raised UnicodeDecodeError instead of a dnnfusion.Error. The bytes are patched
    after serializing (protobuf will not set them)."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Celu", ["x"], ["OUTX"], alpha=1.0), helper.make_node("Neg", ["OUTX"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    good = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_allclose(df.load(good).run_reference(x)[0], -np.where(x > 0, x, np.expm1(x)), rtol=1e-6)
    bad = good.replace(b"OUTX", b"O\x90TX")
    assert bad != good
    with pytest.raises(df.ModelFormatError, match="not UTF-8"):
        df.load(bad)
