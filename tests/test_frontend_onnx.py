"""The ONNX front-end: what it refuses (each error with its class and a message that names
the problem) and what it imports (external data, symbolic dims, folded shape arithmetic,
normalized opset forms, whole models exported from PyTorch)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import dnnfusion  # noqa: E402
from dnnfusion import DTypeError, ModelFormatError, ShapeError, UnsupportedOperatorError  # noqa: E402

F = TensorProto.FLOAT


def make_model(nodes, inputs, outputs, initializers=(), opset=17, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset), *[helper.make_opsetid(d, v) for d, v in extra_opsets]]
    return helper.make_model(graph, opset_imports=opsets)


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def mlp_model(hidden=64):
    """x[N, 32] -> MatMul(w) + b -> Relu: big enough for its weight to go to external data."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((32, hidden)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
             helper.make_node("Relu", ["hb"], ["y"], name="relu")]
    return make_model(nodes, [vi("x", ["N", 32])], [vi("y", ["N", hidden])], [w, b])


def mlp_expected(model, x):
    w = numpy_helper.to_array(model.graph.initializer[0])
    b = numpy_helper.to_array(model.graph.initializer[1])
    return np.maximum(x @ w + b, 0)


# ---------------------------------------------------------------------------------------
# Unreadable and invalid models
# ---------------------------------------------------------------------------------------
def test_truncated_file(tmp_path):
    data = mlp_model().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match="not a readable ONNX model"):
        dnnfusion.load(str(path))


def test_truncated_bytes():
    data = mlp_model().SerializeToString()
    with pytest.raises(ModelFormatError, match="not a readable ONNX model"):
        dnnfusion.load(data[: len(data) // 2])


def test_random_bytes(tmp_path):
    data = np.random.default_rng(0).bytes(4096)
    path = tmp_path / "random.onnx"
    path.write_bytes(data)
    with pytest.raises(ModelFormatError, match="not a readable ONNX model"):
        dnnfusion.load(path)
    with pytest.raises(ModelFormatError, match="not a readable ONNX model"):
        dnnfusion.load(data)


def test_empty_file_and_bytes(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ModelFormatError, match=r"empty \(0 bytes\)"):
        dnnfusion.load(str(path))
    with pytest.raises(ModelFormatError, match="bytes are empty"):
        dnnfusion.load(b"")


def test_missing_file(tmp_path):
    with pytest.raises(ModelFormatError, match="no such file"):
        dnnfusion.load(str(tmp_path / "nope.onnx"))


def test_directory_is_not_a_model(tmp_path):
    with pytest.raises(ModelFormatError, match="is not a file"):
        dnnfusion.load(tmp_path)


def test_model_failing_the_checker():
    # The node reads a value nothing defines.
    m = make_model([helper.make_node("Relu", ["ghost"], ["y"], name="r")],
                   [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(ModelFormatError, match="fails the ONNX checker.*ghost"):
        dnnfusion.load(m)


def test_empty_graph():
    m = make_model([], [vi("x", [2])], [vi("x", [2])])
    with pytest.raises(ModelFormatError, match="empty"):
        dnnfusion.load(m)


def test_no_graph():
    with pytest.raises(ModelFormatError, match="has no graph"):
        dnnfusion.load(onnx.ModelProto(ir_version=8))


def test_onnx_missing_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` fail
    with pytest.raises(ImportError, match=r"pip install dnnfusion\[onnx\]"):
        dnnfusion.load(b"\x08\x07")


# ---------------------------------------------------------------------------------------
# Unsupported operators, opsets, attributes and element types
# ---------------------------------------------------------------------------------------
def test_unknown_operator_in_default_domain():
    # The checker would reject 'Foo' too; the front-end screens operators first so that the
    # error says what is really wrong.
    m = make_model([helper.make_node("Foo", ["x"], ["y"], name="Conv_12")],
                   [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(UnsupportedOperatorError,
                       match=r"node 'Conv_12' uses operator 'Foo' \(domain '', opset 17\), "
                             "which dnnfusion does not support"):
        dnnfusion.load(m)


def test_onnx_operator_outside_the_ecg():
    m = make_model([helper.make_node("MaxRoiPool", ["x", "r"], ["y"], pooled_shape=[2, 2])],
                   [vi("x", [1, 1, 4, 4]), vi("r", [1, 5])], [vi("y", [1, 1, 2, 2])])
    with pytest.raises(UnsupportedOperatorError, match=r"node 'MaxRoiPool_0' uses operator 'MaxRoiPool'"):
        dnnfusion.load(m)


def test_operator_in_another_domain():
    m = make_model([helper.make_node("FusedGemm", ["x", "x"], ["y"], name="fg",
                                     domain="com.microsoft")],
                   [vi("x", [2, 2])], [vi("y", [2, 2])], extra_opsets=[("com.microsoft", 1)])
    with pytest.raises(UnsupportedOperatorError,
                       match=r"node 'fg' uses operator 'FusedGemm' \(domain 'com.microsoft', "
                             r"opset 1\)"):
        dnnfusion.load(m)


@pytest.mark.parametrize("op, domain, advice", [
    ("Binarizer", "ai.onnx.ml", r"classical-ML operators \(domain ai\.onnx\.ml\) are not compiled: cut the "
                                r"graph around it \(onnx\.utils\.extract_model\)"),
    ("Momentum", "ai.onnx.preview.training", "training operators are not compiled: export the inference graph"),
    ("StringNormalizer", "", "process the text before the model"),
    ("ImageDecoder", "", "decode the image before the model"),
    ("MaxRoiPool", "", r"cut the graph around it .* or express it with standard ONNX operators"),
])
def test_refused_operator_says_what_to_do(op, domain, advice):
    """Issue 17: each refusal names the operator and what the user can do about it."""
    extra = [(domain, 1 if "training" in domain else 3)] if domain else []
    m = make_model([helper.make_node(op, ["x"], ["y"], name="n", domain=domain)],
                   [vi("x", [2])], [vi("y", [2])], extra_opsets=extra)
    with pytest.raises(UnsupportedOperatorError, match=f"node 'n' uses operator '{op}' .*does not support; .*{advice}"):
        dnnfusion.load(m)


@pytest.mark.parametrize("kind", ["sequence", "optional"])
def test_non_tensor_graph_input_says_what_to_do(kind):
    tensor = helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    typ = (helper.make_sequence_type_proto(tensor) if kind == "sequence"
           else helper.make_optional_type_proto(tensor))
    graph = helper.make_graph([helper.make_node("Identity", ["s"], ["y"])], "g",
                              [helper.make_value_info("s", typ)], [helper.make_value_info("y", typ)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    advice = "build the sequence in the model" if kind == "sequence" else "declare the input as a plain tensor"
    with pytest.raises(DTypeError, match=f"graph input 's' is a {kind}_type; dnnfusion supports tensor "
                                         f"inputs only: .*{advice}"):
        dnnfusion.load(m)


def test_old_opset():
    """Opsets 7..12 are converted to 13 (tests/test_old_opsets.py); older ones are refused."""
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])],
                   opset=11)
    assert [n.op for n in dnnfusion.load(m).nodes] == ["Relu"]
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])],
                   opset=5)
    with pytest.raises(UnsupportedOperatorError, match=r"opset 5; dnnfusion supports opsets 13\.\."):
        dnnfusion.load(m)


def test_opset_newer_than_onnx_knows():
    newest = onnx.defs.onnx_opset_version()
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])],
                   opset=newest + 1)
    with pytest.raises(UnsupportedOperatorError, match=f"opset {newest + 1}; dnnfusion supports"):
        dnnfusion.load(m)


def test_unchecked_schema_version_is_refused(monkeypatch):
    from dnnfusion.frontends import onnx as frontend

    monkeypatch.setitem(frontend.CHECKED_VERSIONS, "Relu", (13,))  # pretend 14 is new
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2])],
                   [vi("y", [2])], opset=14)
    with pytest.raises(UnsupportedOperatorError,
                       match=r"node 'r' uses operator 'Relu' version 14 \(domain '', opset 14\); "
                             "dnnfusion has checked versions 13"):
        dnnfusion.load(m)


@pytest.mark.parametrize("elem", [TensorProto.COMPLEX64, TensorProto.STRING])
def test_unsupported_input_dtype(elem):
    m = make_model([helper.make_node("Identity", ["x"], ["y"])],
                   [vi("x", [2], elem)], [vi("y", [2], elem)])
    with pytest.raises(DTypeError, match=f"graph input 'x' has element type "
                                         f"{TensorProto.DataType.Name(elem)}"):
        dnnfusion.load(m)
    if elem == TensorProto.STRING:
        with pytest.raises(DTypeError, match="process the text before the model"):
            dnnfusion.load(m)


def test_unsupported_initializer_dtype():
    t = helper.make_tensor("w8", TensorProto.COMPLEX64, [2], [1.0, 2.0])
    m = make_model([helper.make_node("Add", ["x", "w8"], ["y"])],
                   [vi("x", [2], TensorProto.COMPLEX64)], [vi("y", [2], TensorProto.COMPLEX64)], [t])
    with pytest.raises(DTypeError, match="initializer 'w8' has element type COMPLEX64"):
        dnnfusion.load(m)


def test_cast_to_unsupported_dtype():
    m = make_model([helper.make_node("Cast", ["x"], ["y"], name="c", to=TensorProto.COMPLEX64)],
                   [vi("x", [2])], [vi("y", [2], TensorProto.COMPLEX64)])
    with pytest.raises(DTypeError, match="node 'c' \\(Cast\\) makes 'y' of element type COMPLEX64"):
        dnnfusion.load(m)


def test_batchnorm_training_mode():
    c = [numpy_helper.from_array(np.ones(3, np.float32), n) for n in ("s", "b", "m", "v")]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                            name="bn", training_mode=1)
    m = make_model([node], [vi("x", [1, 3, 2, 2])],
                   [vi("y", [1, 3, 2, 2]), vi("rm", [3]), vi("rv", [3])], c, opset=15)
    with pytest.raises(UnsupportedOperatorError, match="node 'bn' .*training_mode=1"):
        dnnfusion.load(m)


def test_string_constant():
    node = helper.make_node("Constant", [], ["s"], name="k", value_strings=["a", "b"])
    m = make_model([node, helper.make_node("Identity", ["s"], ["y"])], [],
                   [vi("y", [2], TensorProto.STRING)])
    with pytest.raises(UnsupportedOperatorError, match="node 'k' \\(Constant\\): attribute "
                                                       "'value_strings'"):
        dnnfusion.load(m)


def test_sparse_initializer():
    values = numpy_helper.from_array(np.ones(2, np.float32), "sp")
    indices = numpy_helper.from_array(np.array([0, 3], np.int64), "sp_idx")
    sparse = helper.make_sparse_tensor(values, indices, [4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "sp"], ["y"])], "g",
                              [vi("x", [4])], [vi("y", [4])], sparse_initializer=[sparse])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedOperatorError, match="sparse initializer 'sp'"):
        dnnfusion.load(m)


def test_shape_mismatch_names_the_node():
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"], name="the_add")],
                   [vi("a", [2, 3]), vi("b", [4, 5])], [vi("y", [2, 3])])
    with pytest.raises(ShapeError, match=r"node 'the_add' \(Add\).*do not broadcast"):
        dnnfusion.load(m)


# ---------------------------------------------------------------------------------------
# Inputs and input_shapes
# ---------------------------------------------------------------------------------------
def two_input_model():
    x = vi("x", ["batch", 3])
    z = helper.make_tensor_value_info("z", F, None)  # no shape at all
    # Leave one dim with neither dim_value nor dim_param.
    z.type.tensor_type.shape.dim.add().dim_param = "batch"
    z.type.tensor_type.shape.dim.add()
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("ReduceSum", ["z", "axes"], ["zs"], name="sum", keepdims=1),
             helper.make_node("Mul", ["x", "zs"], ["y"], name="mul")]
    return make_model(nodes, [x, z], [vi("y", ["batch", 3])], [axes])


def test_symbolic_dims_are_kept():
    g = dnnfusion.load(two_input_model())
    x, z = g.inputs
    assert x.shape == ("batch", 3)
    assert z.shape == ("batch", "z_dim1")
    assert g.outputs[0].shape == ("batch", 3)


def test_input_shapes_specialize_and_bind_symbols_everywhere():
    g = dnnfusion.load(two_input_model(), input_shapes={"x": [4, 3]})
    x, z = g.inputs
    assert x.shape == (4, 3)
    assert z.shape == (4, "z_dim1")  # 'batch' is one size across the graph
    g = dnnfusion.load(two_input_model(), input_shapes={"x": [4, None], "z": [None, 3]})
    assert [v.shape for v in g.inputs] == [(4, 3), (4, 3)]
    assert g.outputs[0].shape == (4, 3)
    x = np.ones((4, 3), np.float32)
    np.testing.assert_array_equal(g.run_reference(x, x)[0], 3 * x)


def test_input_shapes_wrong_rank():
    with pytest.raises(ShapeError, match=r"input_shapes\['x'\] = \[4\] has rank 1.*rank 2"):
        dnnfusion.load(two_input_model(), input_shapes={"x": [4]})


def test_input_shapes_fixed_dim_disagrees():
    with pytest.raises(ShapeError, match="disagrees with the model's shape.*axis 1.*fixes it to 3"):
        dnnfusion.load(two_input_model(), input_shapes={"x": [4, 5]})


def test_input_shapes_unknown_name_lists_inputs():
    with pytest.raises(ShapeError, match=r"\['w'\].*the graph inputs are \['x', 'z'\]"):
        dnnfusion.load(two_input_model(), input_shapes={"w": [1, 3]})


def test_input_shapes_conflicting_symbol():
    with pytest.raises(ShapeError, match="binds symbol 'batch' to both 4 and 5"):
        dnnfusion.load(two_input_model(), input_shapes={"x": [4, 3], "z": [5, 3]})


def test_input_shapes_bad_dim():
    with pytest.raises(ShapeError, match="-1 is not a dimension"):
        dnnfusion.load(two_input_model(), input_shapes={"x": [-1, 3]})


# ---------------------------------------------------------------------------------------
# External data
# ---------------------------------------------------------------------------------------
def test_external_data_loaded_relative_to_the_model(tmp_path, monkeypatch):
    m = mlp_model(hidden=64)
    x = np.random.default_rng(1).standard_normal((2, 32)).astype(np.float32)
    want = mlp_expected(m, x)  # before saving: save_model moves m's data out
    folder = tmp_path / "model"
    folder.mkdir()
    onnx.save_model(m, str(folder / "mlp.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    assert (folder / "weights.bin").stat().st_size > 32 * 64 * 4
    monkeypatch.chdir(tmp_path)  # not the model's folder
    g = dnnfusion.load(str(folder / "mlp.onnx"))
    np.testing.assert_allclose(g.run_reference(x)[0], want, rtol=1e-5, atol=1e-5)


def test_external_data_missing(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save_model(mlp_model(), str(path), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(ModelFormatError, match="weights.bin|external data"):
        dnnfusion.load(path)


def test_external_data_not_loaded_in_a_proto(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save_model(mlp_model(), str(path), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    proto = onnx.load(str(path), load_external_data=False)
    with pytest.raises(ModelFormatError, match="tensor 'w' keeps its data in an external file"):
        dnnfusion.load(proto)


def test_bytes_and_path_give_the_same_graph(tmp_path):
    m = mlp_model()
    path = tmp_path / "mlp.onnx"
    onnx.save_model(m, str(path))
    texts = {dnnfusion.load(src).to_text() for src in (m, m.SerializeToString(), path, str(path))}
    assert len(texts) == 1


# ---------------------------------------------------------------------------------------
# Translation details
# ---------------------------------------------------------------------------------------
def test_shape_arithmetic_chain_is_folded():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape on a static input, as exporters
    write `x.reshape(x.shape[0], -1)`: nothing of it is left but a constant shape."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Constant", [], ["ax"], value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Constant", [], ["m1"], value_ints=[-1]),
        helper.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"], name="flatten"),
    ]
    m = make_model(nodes, [vi("x", [2, 3, 4])], [vi("y", [2, 12])])
    g = dnnfusion.load(m)
    assert [n.op for n in g.nodes] == ["Reshape"]
    reshape = g.nodes[0]
    assert reshape.name == "flatten"
    assert reshape.inputs[1].is_constant
    np.testing.assert_array_equal(reshape.inputs[1].numpy(), [2, -1])
    assert g.outputs[0].shape == (2, 12)


def test_symbolic_shape_arithmetic_is_kept():
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape")]
    m = make_model(nodes, [vi("x", ["N", 3])], [vi("s", [2], TensorProto.INT64)])
    assert [n.op for n in dnnfusion.load(m).nodes] == ["Shape"]
    assert dnnfusion.load(m, input_shapes={"x": [5, 3]}).nodes == []


def test_reduce_axes_attribute_becomes_an_input():
    node = helper.make_node("ReduceMean", ["x"], ["y"], name="rm", axes=[1], keepdims=0)
    m = make_model([node], [vi("x", [2, 3])], [vi("y", [2])], opset=13)
    g = dnnfusion.load(m)
    (n,) = g.nodes
    assert "axes" not in n.attrs and n.attrs["keepdims"] == 0
    np.testing.assert_array_equal(n.inputs[1].numpy(), [1])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(g.run_reference(x)[0], x.mean(axis=1))


def test_split_without_sizes_gets_num_outputs():
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], name="sp", axis=1)
    m = make_model([node], [vi("x", [2, 6])], [vi(o, [2, 2]) for o in "abc"], opset=13)
    g = dnnfusion.load(m)
    assert g.nodes[0].attrs["num_outputs"] == 3
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for got, want in zip(g.run_reference(x), np.split(x, 3, axis=1)):
        np.testing.assert_array_equal(got, want)


def test_roialign_10_keeps_its_coordinate_mode():
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], output_height=2,
                            output_width=2)
    m = make_model([node], [vi("x", [1, 1, 4, 4]), vi("rois", [1, 4]),
                            vi("idx", [1], TensorProto.INT64)], [vi("y", [1, 1, 2, 2])], opset=13)
    (n,) = dnnfusion.load(m).nodes
    assert n.attrs["coordinate_transformation_mode"] == "output_half_pixel"


def test_newest_opset_is_accepted():
    newest = onnx.defs.onnx_opset_version()
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])],
                   opset=newest)
    assert [n.op for n in dnnfusion.load(m).nodes] == ["Relu"]


def test_names_optional_inputs_and_outputs():
    nodes = [
        helper.make_node("Clip", ["x", "", "hi"], ["c"], name="clip"),
        helper.make_node("Dropout", ["c"], ["d", ""]),  # trailing empty output: dropped
        helper.make_node("LayerNormalization", ["d", "scale"], ["y", "", "inv"], axis=-1),
    ]
    hi = numpy_helper.from_array(np.array(0.5, np.float32), "hi")
    scale = numpy_helper.from_array(np.ones(3, np.float32), "scale")
    m = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3]), vi("inv", [2, 1])], [hi, scale])
    g = dnnfusion.load(m)
    clip, drop, ln = g.nodes
    assert clip.name == "clip" and clip.inputs[1] is None and clip.inputs[2].name == "hi"
    assert drop.name == "Dropout_1" and [v.name for v in drop.outputs] == ["d"]
    assert ln.name == "LayerNormalization_2"
    assert [v.name for v in ln.outputs] == ["y", "LayerNormalization_2:1", "inv"]
    assert [v.name for v in g.outputs] == ["y", "inv"]


def test_checked_versions_cover_the_op_table_and_installed_onnx():
    """Every ECG operator has its checked ONNX schema versions, each is a real version, and
    every version reachable from opset 13 up to the installed onnx's newest is checked: a
    new onnx with a changed operator fails here until someone reads the change."""
    from dnnfusion.frontends.onnx import CHECKED_VERSIONS, MIN_OPSET

    table = {row["onnx_name"] for row in dnnfusion.op_table() if not row["internal"]}
    assert set(CHECKED_VERSIONS) == table
    newest = onnx.defs.onnx_opset_version()
    for op, versions in CHECKED_VERSIONS.items():
        for v in versions:
            assert onnx.defs.get_schema(op, v, "").since_version == v, (op, v)
        reachable = set()
        for opset in range(MIN_OPSET, newest + 1):
            try:
                reachable.add(onnx.defs.get_schema(op, opset, "").since_version)
            except onnx.defs.SchemaError:
                pass  # the op does not exist yet at this opset
        assert reachable == set(versions), (op, sorted(reachable), versions)


# ---------------------------------------------------------------------------------------
# Models exported from PyTorch, against PyTorch and ONNX Runtime
# ---------------------------------------------------------------------------------------
def _export(module, example, path, **kwargs):
    torch = pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(module, example, str(path), dynamo=False, input_names=["x"],
                          output_names=["y"], **kwargs)
        return module(*example).numpy()


def _ort(path, x):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def test_torch_cnn(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.fc = torch.nn.Linear(16, 10)

        def forward(self, x):
            x = torch.relu(self.bn(self.c1(x)))
            x = torch.nn.functional.max_pool2d(x, 2)
            x = torch.relu(self.c2(x)).mean(dim=(2, 3))
            return torch.softmax(self.fc(x), -1)

    m = CNN().eval()
    with torch.no_grad():  # non-trivial BN statistics
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 16, 16)
    path = tmp_path / "cnn.onnx"
    want = _export(m, (x,), path)
    got = dnnfusion.load(path).run_reference(x.numpy())[0]
    assert got.dtype == np.float32 and got.shape == (2, 10)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, _ort(path, x.numpy()), rtol=1e-4, atol=1e-5)


def test_torch_attention_block(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Attention(torch.nn.Module):
        def __init__(self, d=32, heads=4):
            super().__init__()
            self.heads = heads
            self.ln = torch.nn.LayerNorm(d)
            self.qkv = torch.nn.Linear(d, 3 * d)
            self.out = torch.nn.Linear(d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
            q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
                       for z in (q, k, v))
            a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, -1)
            y = (a @ v).transpose(1, 2).reshape(b, t, d)
            return x + torch.nn.functional.gelu(self.out(y))

    x = torch.randn(2, 5, 32)
    path = tmp_path / "attention.onnx"
    want = _export(Attention().eval(), (x,), path,
                   dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})
    # Dynamic axes: the reshapes read the input's shape at run time; specializing the
    # symbols folds all of that shape arithmetic away.
    assert onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    g = dnnfusion.load(path, input_shapes={"x": [2, 5, 32]})
    ops = {n.op for n in g.nodes}
    assert not ops & {"Shape", "Gather", "Concat", "Unsqueeze", "Cast"}, ops
    assert all(n.inputs[1].is_constant for n in g.nodes if n.op == "Reshape")
    got = g.run_reference(x.numpy())[0]
    assert got.dtype == np.float32 and got.shape == (2, 5, 32)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, _ort(path, x.numpy()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,shape,axis", [("Unsqueeze", [2, 3], 1), ("Unsqueeze", [2, 3], -1)])
def test_scalar_axes_of_unsqueeze(op, shape, axis):
    """A constant scalar `axes` (AffineGrid's expanded body writes one; ONNX Runtime accepts it
    for Unsqueeze, the spec asks for 1-D) reads as the one axis."""
    ort = pytest.importorskip("onnxruntime")
    m = make_model([helper.make_node(op, ["x", "a"], ["y"])], [vi("x", shape)], [vi("y", None)],
                   [numpy_helper.from_array(np.array(axis, np.int64), "a")], opset=18)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = dnnfusion.compile(m.SerializeToString())(x)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
