"""The ONNX import cache (``dnnfusion/frontends/onnx_cache.py``): a file imported once is
imported again from the cache, without the protobuf parse and the checker, and to exactly
the same graph; a changed file, other input shapes, a damaged entry or a disabled cache all
fall back to a real import."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import dnnfusion  # noqa: E402
from dnnfusion.frontends import onnx as onnx_frontend  # noqa: E402
from dnnfusion.frontends import onnx_cache  # noqa: E402

F = TensorProto.FLOAT


def model(seed=0, batch="N", raw=True):
    """x[batch, 32] -> MatMul(w) + b -> Relu, plus a 40-element Constant node added in."""
    rng = np.random.default_rng(seed)
    w_arr = rng.standard_normal((32, 40)).astype(np.float32)
    b_arr = rng.standard_normal(40).astype(np.float32)
    c_arr = rng.standard_normal(40).astype(np.float32)
    if raw:
        w = numpy_helper.from_array(w_arr, "w")
    else:  # float_data instead of raw_data: not locatable in the file, goes to the side file
        w = helper.make_tensor("w", F, w_arr.shape, w_arr.ravel().tolist(), raw=False)
    b = numpy_helper.from_array(b_arr, "b")
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(c_arr, "cv")),
             helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
             helper.make_node("Add", ["hb", "c"], ["hc"], name="addc"),
             helper.make_node("Relu", ["hc"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [batch, 32])],
                              [helper.make_tensor_value_info("y", F, [batch, 40])],
                              initializer=[w, b])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    expected = lambda x: np.maximum(x @ w_arr + b_arr + c_arr, 0)  # noqa: E731
    return m, expected


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory, and no settling time, so files written by the test are
    cached at once (the settling rule has its own test)."""
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DNNF_IMPORT_CACHE", raising=False)
    monkeypatch.setattr(onnx_cache, "_SETTLE_NS", 0)
    return tmp_path / "cache" / "imports"


def entries(d):
    return sorted(p.name for p in d.glob("*.json")) if d.exists() else []


def forbid_real_import(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the model was parsed again instead of coming from the cache")
    monkeypatch.setattr(onnx_frontend, "_read_and_check", refuse)


def test_second_import_comes_from_the_cache_and_is_identical(tmp_path, cache, monkeypatch):
    m, expected = model(raw=True)
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    first = dnnfusion.load(str(path), input_shapes={"x": [3, 32]})
    assert len(entries(cache)) == 1
    meta = json.loads((cache / entries(cache)[0]).read_text())
    where = {name: w for name, w, *_ in meta["constants"]}
    assert where == {"w": "model", "b": "model", "c": "blob"}  # c was made by a Constant node

    forbid_real_import(monkeypatch)
    second = dnnfusion.load(str(path), input_shapes={"x": [3, 32]})
    assert second.to_text() == first.to_text()  # every constant byte included
    x = np.random.default_rng(1).standard_normal((3, 32)).astype(np.float32)
    np.testing.assert_allclose(second.run_reference(x)[0], expected(x), rtol=1e-5, atol=1e-5)
    compiled = dnnfusion.compile(str(path), input_shapes={"x": [3, 32]})
    np.testing.assert_allclose(compiled(x), expected(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("elem,name", [(TensorProto.INT4, "int4"), (TensorProto.BFLOAT16, "bfloat16"),
                                       (TensorProto.FLOAT8E5M2, "float8_e5m2")])
def test_constants_of_ml_dtypes_types_come_back_from_the_cache(tmp_path, cache, monkeypatch, elem, name):
    """A weight of int4, bfloat16 or float8 (ml_dtypes' types, whose NumPy dtype strings are
    '<V1', '<V2', '<f1') is stored and read back by its ECG type, not missed on every load."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    w = (np.arange(64 * 64) % 16 - 8).reshape(64, 64).astype(getattr(ml_dtypes, name))  # large: not inline
    g = helper.make_graph([helper.make_node("Cast", ["w"], ["wf"], to=F), helper.make_node("MatMul", ["x", "wf"], ["y"])],
                          "g", [helper.make_tensor_value_info("x", F, [2, 64])], [helper.make_tensor_value_info("y", F, [2, 64])],
                          [numpy_helper.from_array(w, "w")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), path)
    first = dnnfusion.load(str(path))
    assert len(entries(cache)) == 1
    meta = json.loads((cache / entries(cache)[0]).read_text())
    assert {c[0]: c[3] for c in meta["constants"]}["w"] == first.graph.constants[0].dtype  # "i4", "bf16", ...
    forbid_real_import(monkeypatch)
    second = dnnfusion.load(str(path))
    assert second.to_text() == first.to_text()
    x = np.ones((2, 64), np.float32)
    np.testing.assert_array_equal(second.run_reference(x)[0], x @ w.astype(np.float32))


def test_initializers_without_raw_data_are_kept_in_the_side_file(tmp_path, cache, monkeypatch):
    m, expected = model(raw=False)
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    first = dnnfusion.load(str(path), input_shapes={"x": [2, 32]})
    meta = json.loads((cache / entries(cache)[0]).read_text())
    assert {name: w for name, w, *_ in meta["constants"]}["w"] == "blob"
    forbid_real_import(monkeypatch)
    assert dnnfusion.load(str(path), input_shapes={"x": [2, 32]}).to_text() == first.to_text()


def test_a_changed_file_is_imported_again(tmp_path, cache):
    path = tmp_path / "m.onnx"
    m0, _ = model(seed=0)
    onnx.save(m0, path)
    dnnfusion.load(str(path), input_shapes={"x": [2, 32]})
    m1, expected1 = model(seed=1)  # same size, other weights
    onnx.save(m1, path)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))
    g = dnnfusion.load(str(path), input_shapes={"x": [2, 32]})
    x = np.random.default_rng(2).standard_normal((2, 32)).astype(np.float32)
    np.testing.assert_allclose(g.run_reference(x)[0], expected1(x), rtol=1e-5, atol=1e-5)
    assert len(entries(cache)) == 2


def test_input_shapes_are_part_of_the_key(tmp_path, cache):
    path = tmp_path / "m.onnx"
    onnx.save(model()[0], path)
    a = dnnfusion.load(str(path), input_shapes={"x": [2, 32]})
    b = dnnfusion.load(str(path), input_shapes={"x": [5, 32]})
    c = dnnfusion.load(str(path))
    assert list(a.inputs[0].shape) == [2, 32] and list(b.inputs[0].shape) == [5, 32]
    assert list(c.inputs[0].shape) == ["N", 32]
    assert len(entries(cache)) == 3


def test_damaged_entries_are_ignored(tmp_path, cache):
    path = tmp_path / "m.onnx"
    m, expected = model()
    onnx.save(m, path)
    first = dnnfusion.load(str(path), input_shapes={"x": [2, 32]})
    key = entries(cache)[0][:-len(".json")]
    damages = [
        lambda: (cache / f"{key}.txt").write_text("graph main( {"),
        lambda: (cache / f"{key}.json").write_text("{\"format\": 1, \"constants\": ["),
        lambda: (cache / f"{key}.bin").write_bytes(b""),  # the Constant's bytes are gone
        lambda: (cache / f"{key}.txt").write_text(first.to_text(True).replace("f32[32,40]", "f32[40,32]")),
    ]
    for damage in damages:
        damage()
        g = dnnfusion.load(str(path), input_shapes={"x": [2, 32]})
        assert g.to_text() == first.to_text()  # imported again, and the entry rewritten


def test_a_file_written_just_now_is_not_cached(tmp_path, cache, monkeypatch):
    monkeypatch.setattr(onnx_cache, "_SETTLE_NS", 2_000_000_000)
    path = tmp_path / "m.onnx"
    onnx.save(model()[0], path)
    assert onnx_cache.key_for(str(path), None) is None
    dnnfusion.load(str(path))
    assert entries(cache) == []


def test_external_data_is_not_cached(tmp_path, cache):
    path = tmp_path / "m.onnx"
    m, expected = model()
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)
    g = dnnfusion.load(str(path), input_shapes={"x": [2, 32]})
    x = np.ones((2, 32), np.float32)
    np.testing.assert_allclose(g.run_reference(x)[0], expected(x), rtol=1e-5, atol=1e-5)
    assert entries(cache) == []


def test_the_cache_can_be_turned_off(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("DNNF_IMPORT_CACHE", "0")
    path = tmp_path / "m.onnx"
    onnx.save(model()[0], path)
    dnnfusion.load(str(path))
    assert entries(cache) == []


def test_elided_constants_must_match_their_declaration():
    g = dnnfusion.parse("graph g(%x: f32[20]) {\n  %w: f32[20] = const " +
                        "[" + ",".join(["1"] * 20) + "]\n  %y: f32[20] = Add(%x, %w)\n  return %y\n}")
    text = g.to_text(elide_constants=True)
    assert "<elided>" in text
    from dnnfusion import _core

    ok = _core.parse_text(text, {"w": np.full(20, 2, np.float32)})
    assert ok.constants[0].numpy().tolist() == [2.0] * 20
    with pytest.raises(dnnfusion.ModelFormatError, match="declared f32\\[20\\] but was given as f32\\[4,5\\]"):
        _core.parse_text(text, {"w": np.zeros((4, 5), np.float32)})
    with pytest.raises(dnnfusion.ModelFormatError, match="elided constant 'w' was not given"):
        _core.parse_text(text, {})
    with pytest.raises(dnnfusion.ModelFormatError, match="cannot be parsed"):
        _core.parse_text(text)
