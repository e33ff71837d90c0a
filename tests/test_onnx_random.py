"""RandomUniform, RandomNormal, their *Like forms and Bernoulli (frontends/onnx_random.py):
draws made on the host before every call, the arithmetic around them compiled. Random
outputs cannot be compared number by number, so their statistics are compared with the
distribution's and with ONNX Runtime's on the same model."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import dnnfusion as df  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

N = 200_000


def _model(nodes, inputs, outputs):
    g = h.make_graph(nodes, "random", inputs, outputs)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m.SerializeToString()


def _normal_model(seed=None):
    kw = {} if seed is None else {"seed": float(seed)}
    return _model([h.make_node("RandomNormalLike", ["x"], ["z"], mean=2.0, scale=3.0, **kw),
                   h.make_node("Add", ["x", "z"], ["y"])],
                  [h.make_tensor_value_info("x", T.FLOAT, [N])], [h.make_tensor_value_info("y", T.FLOAT, [N])])


def test_normal_draws_have_the_distribution_and_change_every_call():
    m = df.compile(_normal_model(), threads=1)
    assert m.input_names == ["x"]  # the hidden input of the draws is not the caller's
    x = np.linspace(-1, 1, N, dtype=np.float32)
    a, b = m(x), m(x)
    for y in (a, b):
        z = y - x
        assert abs(z.mean() - 2.0) < 0.05 and abs(z.std() - 3.0) < 0.05, (z.mean(), z.std())
    assert (a != b).mean() > 0.99
    want = ort.InferenceSession(_normal_model(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0] - x
    assert abs((a - x).std() - want.std()) < 0.05


def test_a_seed_gives_the_same_sequence_of_calls_in_every_compile():
    x = np.zeros(N, np.float32)
    m1, m2 = df.compile(_normal_model(seed=7), threads=1), df.compile(_normal_model(seed=7), threads=1)
    first = m1(x)
    np.testing.assert_array_equal(first, m2(x))
    np.testing.assert_array_equal(m1(x), m2(x))  # the second call: the next draws, in both
    assert not np.array_equal(first, m1(x))
    other = df.compile(_normal_model(seed=8), threads=1)(x)
    assert not np.array_equal(first, other)


def test_uniform_with_a_shape_and_a_dtype():
    data = _model([h.make_node("RandomUniform", [], ["u"], shape=[50, 400], low=-1.0, high=3.0, dtype=11),
                   h.make_node("Mul", ["u", "s"], ["y"])],
                  [h.make_tensor_value_info("s", T.DOUBLE, [1])], [h.make_tensor_value_info("y", T.DOUBLE, [50, 400])])
    m = df.compile(data, threads=1)
    y = m(np.array([2.0]))
    assert y.dtype == np.float64 and y.shape == (50, 400)
    assert y.min() >= -2.0 and y.max() < 6.0 and abs(y.mean() - 2.0) < 0.05


def test_bernoulli_matches_onnx_runtime():
    """Bernoulli's ONNX function body is Greater(RandomUniformLike(p), p): ones with
    probability 1 - p, which is what ONNX Runtime returns too (0.7 at p = 0.3)."""
    data = _model([h.make_node("Bernoulli", ["p"], ["b"])], [h.make_tensor_value_info("p", T.FLOAT, [N])],
                  [h.make_tensor_value_info("b", T.FLOAT, [N])])
    p = np.where(np.arange(N) % 2 == 0, 0.3, 0.9).astype(np.float32)
    got = df.compile(data, threads=1)(p)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"p": p})[0]
    assert set(np.unique(got)) <= {0.0, 1.0}
    for sel in (p == np.float32(0.3), p == np.float32(0.9)):
        assert abs(got[sel].mean() - want[sel].mean()) < 0.01, (got[sel].mean(), want[sel].mean())


def test_an_input_with_the_reserved_name_is_refused():
    data = _model([h.make_node("Relu", ["__dnnf_random__.normal.none.0"], ["y"])],
                  [h.make_tensor_value_info("__dnnf_random__.normal.none.0", T.FLOAT, [3])],
                  [h.make_tensor_value_info("y", T.FLOAT, [3])])
    with pytest.raises(df.ModelFormatError, match="reserves"):
        df.load(data)


@pytest.mark.parametrize("training", [True, False])
def test_dropout_in_training_mode_matches_onnx_runtime(training):
    """Monte Carlo dropout: training_mode a runtime input; kept elements scaled by
    1 / (1 - ratio), the mask true where kept (all true outside training)."""
    data = _model([h.make_node("Dropout", ["x", "r", "t"], ["y", "z"], seed=3)],
                  [h.make_tensor_value_info("x", T.FLOAT, [N]), h.make_tensor_value_info("r", T.FLOAT, []),
                   h.make_tensor_value_info("t", T.BOOL, [])],
                  [h.make_tensor_value_info("y", T.FLOAT, [N]), h.make_tensor_value_info("z", T.BOOL, [N])])
    m = df.compile(data, threads=1)
    x = np.linspace(1, 2, N, dtype=np.float32)
    feeds = [x, np.array(0.25, np.float32), np.array(training)]
    y, z = m(*feeds)
    yo, zo = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, dict(zip("xrt", feeds)))
    if not training:
        np.testing.assert_array_equal(y, x)
        assert z.all() and zo.all()
        return
    np.testing.assert_allclose(y[z], x[z] / 0.75, rtol=1e-6)
    assert (y[~z] == 0).all()
    assert abs(z.mean() - zo.mean()) < 0.01 and abs(z.mean() - 0.75) < 0.01
    assert not np.array_equal(z, m(*feeds)[1])  # a new mask every call


def test_the_reference_draws_the_hidden_inputs_itself():
    g = df.load(_normal_model(seed=4))
    x = np.zeros(N, np.float32)
    for y in (g.run_reference(x)[0], g.run_reference(x=x)[0], g.run_reference({"x": x})[0]):
        assert abs(y.mean() - 2.0) < 0.05 and abs(y.std() - 3.0) < 0.05
