"""DFT (opset 17 and 20), STFT and MelWeightMatrix, imported as the bodies
dnnfusion/frontends/onnx_signal.py writes (constant DFT matrices and a MatMul; frames
gathered with constant indices; a constant mel matrix): generated code and the NumPy oracle
against ONNX Runtime and the ONNX reference evaluator, and the refusals that name the node.

To keep this fast, the cases of one opset and dtype are nodes of one model, compiled once."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

ONNX_TYPE = {np.float32: T.FLOAT, np.float64: T.DOUBLE}
DTYPES = [np.float32, np.float64]

# name: (opset, attributes, input shape, dft_length or None, axis (opset 20's input) or None,
# whether ONNX Runtime agrees). ONNX Runtime 1.32's IRFFT differs from numpy.fft.irfft (which
# the spec cites and the ONNX reference computes) when dft_length is neither 2(M-1) nor 2M-1
# for M input bins; there the reference decides.
DFT_CASES = {
    "real_axis1": (20, {}, (2, 6, 3, 1), None, 1, True),
    "complex_default_axis": (20, {}, (2, 3, 7, 2), None, None, True),
    "complex_axis_neg3": (20, {}, (2, 5, 3, 2), None, -3, True),
    "complex_axis0": (20, {}, (4, 3, 2), None, 0, True),
    "rank2": (20, {}, (9, 2), None, 0, True),
    "rfft": (20, {"onesided": 1}, (2, 8, 3, 1), None, 1, True),
    "rfft_odd": (20, {"onesided": 1}, (3, 7, 1), None, -2, True),
    "inverse_complex": (20, {"inverse": 1}, (2, 6, 3, 2), None, 1, True),
    "inverse_real": (20, {"inverse": 1}, (3, 5, 1), None, None, True),
    "irfft_default_length": (20, {"inverse": 1, "onesided": 1}, (2, 5, 3, 2), None, 1, True),
    "irfft_odd_length": (20, {"inverse": 1, "onesided": 1}, (2, 5, 2), 9, None, True),
    "irfft_truncated": (20, {"inverse": 1, "onesided": 1}, (2, 6, 2), 6, None, False),
    "irfft_padded": (20, {"inverse": 1, "onesided": 1}, (2, 4, 2), 12, None, False),
    "shorter_length": (20, {}, (2, 8, 3, 2), 5, 1, True),
    "longer_length": (20, {}, (2, 5, 3, 1), 11, 1, True),
    "rfft_longer": (20, {"onesided": 1}, (2, 5, 1), 10, None, True),
    "inverse_shorter": (20, {"inverse": 1}, (2, 7, 2), 4, None, True),
    "inverse_longer": (20, {"inverse": 1}, (3, 4, 2, 2), 6, -3, True),
    "op17_default_axis": (17, {}, (2, 6, 3, 2), None, None, True),
    "op17_axis2": (17, {"axis": 2}, (2, 3, 6, 1), None, None, True),
    "op17_axis_neg2": (17, {"axis": -2, "onesided": 1}, (2, 3, 6, 1), None, None, True),
    "op17_inverse_length": (17, {"axis": 1, "inverse": 1}, (2, 6, 2), 8, None, True),
    "op17_irfft": (17, {"axis": 1, "inverse": 1, "onesided": 1}, (1, 4, 3, 2), None, None, True),
}


def _dft_node(case: str, opset: int, attrs: dict, length: int | None, axis: int | None) -> tuple:
    """One case's node and its constant operands, named after the case so cases share a graph."""
    ins = [f"x_{case}", f"len_{case}" if length is not None else "", f"axis_{case}" if axis is not None else ""]
    inits = []
    if length is not None:
        inits.append(nh.from_array(np.array(length, np.int64), f"len_{case}"))
    if axis is not None:
        inits.append(nh.from_array(np.array(axis, np.int64), f"axis_{case}"))
    while ins and not ins[-1]:
        ins.pop()
    return h.make_node("DFT", ins, [f"y_{case}"], name=case, **attrs), inits


def _model(nodes: list, inits: list, inputs: list, outputs: list, opset: int):
    """A model at one opset: the opset picks DFT's form (axis attribute or input)."""
    g = h.make_graph(nodes, "signal", inputs, outputs, inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _dft_model(opset: int, dtype, cases: list[str]):
    """Many cases in one graph, so one compile covers them."""
    nodes, inits, ins, outs = [], [], [], []
    for c in cases:
        _, attrs, shape, length, axis, _ = DFT_CASES[c]
        n, i = _dft_node(c, opset, attrs, length, axis)
        nodes.append(n)
        inits += i
        ins.append(h.make_tensor_value_info(f"x_{c}", ONNX_TYPE[dtype], shape))
        outs.append(h.make_tensor_value_info(f"y_{c}", ONNX_TYPE[dtype], None))
    return _model(nodes, inits, ins, outs, opset)


def _compile(model):
    """dnnfusion.compile on the bytes, without the checker's warning about shapeless outputs."""
    with warnings.catch_warnings():  # outputs declared without shapes: left to inference
        warnings.simplefilter("ignore", df.ModelWarning)
        return df.compile(model.SerializeToString())


def _tol(dtype, n: int, ort_f64: bool = False) -> dict:
    """f32: relative 1e-4 grown with the transform's length (each output sums n products).
    ONNX Runtime 1.32's double DFT/STFT is only float-accurate (errors ~3e-8, its twiddle
    factors), so against it f64 gets 1e-6; against the ONNX reference, 1e-10."""
    if dtype == np.float64:
        return {"rtol": 1e-6, "atol": 1e-7 * n} if ort_f64 else {"rtol": 1e-10, "atol": 1e-10 * n}
    return {"rtol": 1e-4, "atol": 2e-6 * n}


@functools.cache
def _dft_run(opset: int, dtype) -> dict:
    """Per case: (ours, ONNX Runtime's or None, the ONNX reference's, the oracle's)."""
    cases = [c for c in DFT_CASES if DFT_CASES[c][0] == opset]
    model = _dft_model(opset, dtype, cases)
    rng = np.random.default_rng(opset)
    feeds = {f"x_{c}": rng.standard_normal(DFT_CASES[c][2]).astype(dtype) for c in cases}
    ours = _compile(model)(**feeds)
    ref = ReferenceEvaluator(model).run(None, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        oracle = df.load(model.SerializeToString()).run_reference(**feeds)
    agree = [c for c in cases if DFT_CASES[c][5]]
    ort_model = _dft_model(opset, dtype, agree)
    want = ort.InferenceSession(ort_model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {f"x_{c}": feeds[f"x_{c}"] for c in agree})
    by_ort = dict(zip(agree, want))
    return {c: (ours[k], by_ort.get(c), ref[k], oracle[k]) for k, c in enumerate(cases)}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("case", list(DFT_CASES))
def test_dft_matches_onnxruntime_and_the_onnx_reference(case, dtype):
    opset, _, shape, length, axis, _ = DFT_CASES[case]
    ours, by_ort, ref, oracle = _dft_run(opset, dtype)[case]
    n = max(length or 0, *shape)
    assert ours.dtype == dtype and ours.shape == ref.shape
    np.testing.assert_allclose(ours, ref, **_tol(dtype, n))
    np.testing.assert_allclose(oracle, ref, **_tol(dtype, n))
    if by_ort is not None:
        assert by_ort.shape == ours.shape
        np.testing.assert_allclose(ours, by_ort, **_tol(dtype, n, ort_f64=True))


def test_dft_is_one_matmul_with_a_constant_matrix():
    m = _dft_model(20, np.float32, ["complex_axis_neg3"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        ops = [n.op for n in df.load(m.SerializeToString()).graph.nodes]
    assert ops.count("MatMul") == 1 and "DFT" not in ops and ops.count("Transpose") == 2


# ---- STFT --------------------------------------------------------------------------------------
# name: (signal shape, frame_step, frame_length or None, window: None, "input" or "constant",
# onesided or None (the default, 1))
STFT_CASES = {
    "length_no_window": ((2, 20, 1), 4, 8, None, None),
    "window_input": ((2, 20, 1), 4, None, "input", None),
    "window_constant_twosided": ((1, 19, 1), 3, 8, "constant", 0),
    "odd_frame_onesided": ((2, 17, 1), 5, 7, "input", 1),
    "complex_twosided": ((2, 16, 2), 4, 6, None, 0),
    "complex_onesided": ((1, 12, 2), 4, 8, "input", None),  # as ONNX Runtime and the reference: the first bins
    "whole_signal": ((1, 9, 1), 2, None, None, None),  # frame_length defaults to the signal length
}


def _stft_model(dtype, cases: list[str]):
    """The STFT cases in one graph and their feeds (the same data for the same case list)."""
    nodes, inits, ins, outs = [], [], [], []
    rng = np.random.default_rng(7)
    feeds = {}
    for c in cases:
        shape, step, length, window, onesided = STFT_CASES[c]
        names = [f"x_{c}", f"step_{c}", "", ""]
        inits.append(nh.from_array(np.array(step, np.int64), f"step_{c}"))
        ins.append(h.make_tensor_value_info(f"x_{c}", ONNX_TYPE[dtype], shape))
        feeds[f"x_{c}"] = rng.standard_normal(shape).astype(dtype)
        if length is not None:
            names[3] = f"len_{c}"
            inits.append(nh.from_array(np.array(length, np.int64), f"len_{c}"))
        if window is not None:
            names[2] = f"win_{c}"
            w = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(length or 8) / (length or 8))).astype(dtype)
            if window == "constant":
                inits.append(nh.from_array(w, f"win_{c}"))
            else:
                ins.append(h.make_tensor_value_info(f"win_{c}", ONNX_TYPE[dtype], w.shape))
                feeds[f"win_{c}"] = w
        while not names[-1]:
            names.pop()
        attrs = {} if onesided is None else {"onesided": onesided}
        nodes.append(h.make_node("STFT", names, [f"y_{c}"], name=c, **attrs))
        outs.append(h.make_tensor_value_info(f"y_{c}", ONNX_TYPE[dtype], None))
    return _model(nodes, inits, ins, outs, 17), feeds


@functools.cache
def _stft_run(dtype) -> dict:
    model, feeds = _stft_model(dtype, list(STFT_CASES))
    ours = _compile(model)(**feeds)
    ref = ReferenceEvaluator(model).run(None, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        oracle = df.load(model.SerializeToString()).run_reference(**feeds)
    # ONNX Runtime 1.32 fails on an STFT with neither window nor frame_length (a negative size)
    agree = [c for c in STFT_CASES if c != "whole_signal"]
    ort_model, ort_feeds = _stft_model(dtype, agree)
    want = ort.InferenceSession(ort_model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, ort_feeds)
    for c in agree:  # the same data
        np.testing.assert_array_equal(ort_feeds[f"x_{c}"], feeds[f"x_{c}"])
    by_ort = dict(zip(agree, want))
    return {c: (ours[k], by_ort.get(c), ref[k], oracle[k]) for k, c in enumerate(STFT_CASES)}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("case", list(STFT_CASES))
def test_stft_matches_onnxruntime_and_the_onnx_reference(case, dtype):
    ours, by_ort, ref, oracle = _stft_run(dtype)[case]
    n = STFT_CASES[case][0][1]
    assert ours.dtype == dtype and ours.shape == ref.shape
    np.testing.assert_allclose(ours, ref, **_tol(dtype, n))
    np.testing.assert_allclose(oracle, ref, **_tol(dtype, n))
    if by_ort is not None:
        np.testing.assert_allclose(ours, by_ort, **_tol(dtype, n, ort_f64=True))


# ---- MelWeightMatrix ---------------------------------------------------------------------------
# (num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, output_datatype)
MEL_CASES = [(8, 16, 8192, 0.0, 4096.0, None), (10, 64, 16000, 20.0, 8000.0, T.DOUBLE),
             (5, 31, 22050, 100.0, 6000.0, None), (40, 512, 16000, 0.0, 8000.0, T.FLOAT),
             (3, 10, 100, 10.0, 40.0, T.DOUBLE)]


def _mel_model(cases: list) -> tuple:
    """One graph input x is added to each output so the compiled graph computes something."""
    nodes, inits, outs = [], [], []
    for k, (mels, length, rate, lo, hi, dt) in enumerate(cases):
        names = [f"m{k}_{p}" for p in ("n", "len", "rate", "lo", "hi")]
        it = np.int32 if k % 2 else np.int64  # (the three share one integer type, T1)
        for name, v in zip(names, (np.array(mels, it), np.array(length, it), np.array(rate, it),
                                   np.array(lo, np.float32), np.array(hi, np.float32))):
            inits.append(nh.from_array(v, name))
        kw = {} if dt is None else {"output_datatype": dt}
        nodes.append(h.make_node("MelWeightMatrix", names, [f"y{k}"], name=f"mel{k}", **kw))
        outs.append(h.make_tensor_value_info(f"y{k}", dt or T.FLOAT, None))
    return _model(nodes, inits, [], outs, 17)


def test_mel_weight_matrix_matches_onnxruntime_and_the_onnx_reference():
    m = _mel_model(MEL_CASES)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {})
    ref = ReferenceEvaluator(m).run(None, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        g = df.load(m.SerializeToString())
    oracle = g.run_reference()
    assert all(n.op == "Constant" for n in g.graph.nodes) or not g.graph.nodes
    for k, (mels, length, *_rest) in enumerate(MEL_CASES):
        assert oracle[k].shape == (length // 2 + 1, mels) and oracle[k].dtype == want[k].dtype
        np.testing.assert_array_equal(oracle[k], ref[k])
        np.testing.assert_array_equal(oracle[k], want[k])


def test_mel_weight_matrix_feeds_a_compiled_spectrogram():
    """The constant matrix as exporters use it: |STFT|^2 @ mel weights, through generated code."""
    spec = h.make_node("STFT", ["x", "step", "win"], ["s"], name="stft")
    mel = h.make_node("MelWeightMatrix", ["n", "len", "rate", "lo", "hi"], ["w"], name="mel")
    sq, pw = h.make_node("Mul", ["s", "s"], ["sq"]), h.make_node("ReduceSum", ["sq", "last"], ["p"], keepdims=0)
    out = h.make_node("MatMul", ["p", "w"], ["y"])
    inits = [nh.from_array(np.array(v, dt), n) for v, dt, n in [
        (4, np.int64, "step"), (np.hanning(16), np.float32, "win"), (6, np.int64, "n"), (16, np.int64, "len"),
        (8000, np.int64, "rate"), (0.0, np.float32, "lo"), (4000.0, np.float32, "hi"), ([-1], np.int64, "last")]]
    m = _model([spec, mel, sq, pw, out], inits, [h.make_tensor_value_info("x", T.FLOAT, (2, 40, 1))],
               [h.make_tensor_value_info("y", T.FLOAT, None)], 17)
    x = np.random.default_rng(5).standard_normal((2, 40, 1)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(_compile(m)(x=x), want, rtol=1e-4, atol=1e-4)


# ---- refusals ----------------------------------------------------------------------------------
def _one(node, shape=(2, 6, 2), opset: int = 20, inits=(), inputs=()):
    """A one-node model for a refusal; only the import runs."""
    ins = [h.make_tensor_value_info("x", T.FLOAT, shape), *inputs]
    return _model([node], list(inits), ins, [h.make_tensor_value_info("y", T.FLOAT, None)], opset)


def _i64(v, name):
    """An int64 scalar initializer (dft_length, axis, frame_step, ...)."""
    return nh.from_array(np.array(v, np.int64), name)


ERROR_CASES = {
    "dft_length_input": (_one(h.make_node("DFT", ["x", "L"], ["y"], name="d"),
                              inputs=[h.make_tensor_value_info("L", T.INT64, ())]),
                         df.ShapeError, r"node 'd' \(DFT\): dft_length .*as a constant"),
    "axis_input": (_one(h.make_node("DFT", ["x", "", "a"], ["y"], name="d"),
                        inputs=[h.make_tensor_value_info("a", T.INT64, ())]),
                   df.ShapeError, r"node 'd' \(DFT\): axis .*as a constant"),
    "axis_last": (_one(h.make_node("DFT", ["x", "", "a"], ["y"], name="d"), inits=[_i64(-1, "a")]),
                  df.ShapeError, r"'d' \(DFT\): axis -1 is outside"),
    "axis_out_of_range_17": (_one(h.make_node("DFT", ["x"], ["y"], name="d", axis=3), opset=17),
                             df.ShapeError, r"'d' \(DFT\): axis 3"),
    "last_dim_3": (_one(h.make_node("DFT", ["x"], ["y"], name="d"), shape=(2, 6, 3)),
                   df.ShapeError, r"'d' \(DFT\): the input's last axis must be 1 \(real\) or 2"),
    "rfft_complex": (_one(h.make_node("DFT", ["x"], ["y"], name="d", onesided=1)),
                     df.ShapeError, r"'d' \(DFT\): onesided=1 \(RFFT\) takes a real input"),
    "irfft_real": (_one(h.make_node("DFT", ["x"], ["y"], name="d", onesided=1, inverse=1), shape=(2, 6, 1)),
                   df.ShapeError, r"'d' \(DFT\): .*IRFFT.* complex"),
    "zero_length": (_one(h.make_node("DFT", ["x", "L"], ["y"], name="d"), inits=[_i64(0, "L")]),
                    df.ShapeError, r"'d' \(DFT\): dft_length must be positive"),
    "too_large": (_one(h.make_node("DFT", ["x"], ["y"], name="d"), shape=(1, 4096, 2)),
                  df.ShapeError, r"'d' \(DFT\): a DFT matrix of .* elements is larger"),
    "symbolic_axis": (_one(h.make_node("DFT", ["x"], ["y"], name="d"), shape=(2, "n", 2)),
                      df.ShapeError, r"'d' \(DFT\) needs a static size"),
    "stft_step_input": (_one(h.make_node("STFT", ["x", "s", "", "L"], ["y"], name="st", onesided=0), opset=17,
                             inits=[_i64(4, "L")], inputs=[h.make_tensor_value_info("s", T.INT64, ())]),
                        df.ShapeError, r"node 'st' \(STFT\): frame_step .*as a constant"),
    "stft_frame_too_long": (_one(h.make_node("STFT", ["x", "s", "", "L"], ["y"], name="st", onesided=0), opset=17,
                                 inits=[_i64(2, "s"), _i64(7, "L")]),
                            df.ShapeError, r"'st' \(STFT\): frame_length 7 must be between 1 and the signal length 6"),
    "stft_window_length": (_one(h.make_node("STFT", ["x", "s", "w", "L"], ["y"], name="st", onesided=0), opset=17,
                                inits=[_i64(2, "s"), _i64(4, "L"), nh.from_array(np.ones(3, np.float32), "w")]),
                           df.ShapeError, r"'st' \(STFT\): frame_length 4 differs from the window's length 3"),
    "stft_rank": (_one(h.make_node("STFT", ["x", "s"], ["y"], name="st"), shape=(6, 1), opset=17,
                       inits=[_i64(2, "s")]),
                  df.ShapeError, r"'st' \(STFT\): the signal must be \[batch, length, 1\]"),
    "mel_input": (_one(h.make_node("MelWeightMatrix", ["n", "L", "r", "lo", "hi"], ["y"], name="mel"), opset=17,
                       inits=[_i64(16, "L"), _i64(8000, "r"), nh.from_array(np.array(0.0, np.float32), "lo"),
                              nh.from_array(np.array(4000.0, np.float32), "hi")],
                       inputs=[h.make_tensor_value_info("n", T.INT64, ())]),
                  df.ShapeError, r"node 'mel' \(MelWeightMatrix\): num_mel_bins .*as a constant"),
    "mel_past_nyquist": (_one(h.make_node("MelWeightMatrix", ["n", "L", "r", "lo", "hi"], ["y"], name="mel"),
                              opset=17, inits=[_i64(4, "n"), _i64(16, "L"), _i64(8000, "r"),
                                               nh.from_array(np.array(0.0, np.float32), "lo"),
                                               nh.from_array(np.array(8000.0, np.float32), "hi")]),
                         df.ShapeError, r"'mel' \(MelWeightMatrix\): upper_edge_hertz 8000.0 puts a filter past"),
    "mel_int_output": (_one(h.make_node("MelWeightMatrix", ["n", "L", "r", "lo", "hi"], ["y"], name="mel",
                                        output_datatype=T.INT32),
                            opset=17, inits=[_i64(4, "n"), _i64(16, "L"), _i64(8000, "r"),
                                             nh.from_array(np.array(0.0, np.float32), "lo"),
                                             nh.from_array(np.array(4000.0, np.float32), "hi")]),
                       df.DTypeError, r"'mel' \(MelWeightMatrix\): output_datatype 6"),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_bad_signal_nodes_are_refused_naming_the_node(case):
    model, error, match = ERROR_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        with pytest.raises(error, match=match):
            df.load(model.SerializeToString())
