"""The ECG (cpp/ir/): the op table is complete, text form round-trips, the verifier
rejects malformed graphs, constants are not copied, errors are the documented ones."""

import re
import subprocess
import sys

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core, reference
from dnnfusion.builtin import tiny_convnet
from dnnfusion.ecg import MAPPING_TYPES

OPS = df.op_table()


@pytest.mark.parametrize("row", OPS, ids=[r["name"] for r in OPS])
def test_every_op_has_mapping_type_shape_rule_and_reference(row):
    assert row["mapping"] in MAPPING_TYPES
    assert row["has_shape_rule"], f"{row['name']} has no shape rule in cpp/ir/shape_*.cc"
    assert row["name"] in reference.KERNELS, f"{row['name']} has no kernel in reference.py"
    assert bool(row["onnx_name"]) != row["internal"]  # internal ops (compiler-made) have no ONNX name
    assert 0 <= row["min_inputs"] and (row["max_inputs"] < 0 or row["max_inputs"] >= row["min_inputs"])


def test_op_table_has_the_paper_models_operators():
    needed = """Conv ConvTranspose Gemm MatMul BatchNormalization InstanceNormalization
    LayerNormalization Relu LeakyRelu Elu Sigmoid HardSigmoid HardSwish Tanh Softplus Mish
    Gelu Erf Add Sub Mul Div Pow Sqrt Reciprocal Exp Log Neg Abs Max Min Clip Where Equal
    Less Greater Not And Cast MaxPool AveragePool GlobalAveragePool GlobalMaxPool ReduceMean
    ReduceSum ReduceMax Softmax LogSoftmax Reshape Flatten Squeeze Unsqueeze Transpose
    Concat Split Slice Gather Expand Tile Pad Resize DepthToSpace SpaceToDepth Shape
    ConstantOfShape Range Identity Dropout Constant TopK NonMaxSuppression RoiAlign""".split()
    names = {r["name"] for r in OPS}
    assert not set(needed) - names


def test_mapping_types_follow_the_paper():
    m = {r["name"]: r["mapping"] for r in OPS}
    assert m["Relu"] == m["Add"] == m["BatchNormalization"] == "One-to-One"
    assert m["Conv"] == m["MatMul"] == m["Softmax"] == m["ReduceMean"] == "Many-to-Many"
    assert m["Reshape"] == m["Concat"] == m["Slice"] == "Reorganize"
    assert m["Transpose"] == m["DepthToSpace"] == "Shuffle"
    assert m["Expand"] == m["Resize"] == m["Tile"] == "One-to-Many"
    props = {r["name"]: r for r in OPS}
    assert props["Add"]["commutative"] and props["Add"]["associative"]
    assert props["Mul"]["distributive"] and not props["Sub"]["commutative"]
    assert props["MatMul"]["associative"] and not props["MatMul"]["commutative"]


def test_broadcasting_a_computed_tensor_is_one_to_many():
    g = tiny_convnet()
    kinds = {n.name: n.mapping_type for n in g.nodes}
    assert kinds["se.scale"] == "One-to-Many"      # x * gate[N,C,1,1]
    assert kinds["skip.conv"] == "Many-to-Many"
    assert kinds["residual"] == "One-to-One"       # same shapes
    s = g.summary()
    assert all(s.by_mapping[t] > 0 for t in MAPPING_TYPES), s.by_mapping
    assert s.operators == len(g.nodes) == sum(s.by_op.values())


def test_text_round_trip_is_exact():
    g = tiny_convnet()
    text = g.to_text()
    g2 = df.parse(text)
    assert g2.to_text() == text
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.testing.assert_array_equal(g.run_reference(x)[0], g2.run_reference(x)[0])


def test_text_form_reads_like_the_example():
    text = """
    graph demo(%x: f32[batch,4]) {
      %s: f32[] = const [0.5]
      %"onnx::Mul_1": f32[batch,4] = Mul(%x, %s) @"scale"
      %y: f32[batch,4] = Clip(%"onnx::Mul_1", _, _) {} @"clip"
      return %y
    }"""
    text = text.replace(" {} @", " @")
    g = df.parse(text)
    assert [n.op for n in g.nodes] == ["Mul", "Clip"]
    assert g.inputs[0].shape == ("batch", 4)          # a symbolic dimension survives
    assert g.nodes[1].inputs[1] is None               # absent optional input
    assert df.parse(g.to_text()).to_text() == g.to_text()


def test_special_floats_and_names_round_trip():
    g = _core.Graph("weird name")
    x = g.add_input('in"put\n', "f64", [3])
    c = g.add_constant("c", np.array([np.inf, -np.inf, 1e-300], np.float64))
    (y,) = g.add_node("Add", [x, c], {"alpha": 1e-7, "names": ["a", "b"], "none": []}, 1)
    g.set_outputs([y])
    text = g.to_text()
    g2 = df.parse(text)
    assert g2.to_text() == text
    assert g2.inputs[0].name == 'in"put\n'
    np.testing.assert_array_equal(g2.constants[0].numpy(), c.numpy())


@pytest.mark.parametrize("text,fragment", [
    ("graph g(%x: f32[2]) {\n  return %y\n}", "used before it is defined"),
    ("graph g(%x: f32[2]) {\n  %y: f32[3] = Relu(%x)\n  return %y\n}", "shape rule gives f32[2]"),
    ("graph g(%x: f32[2]) {\n  %y: f32[2] = Frobnicate(%x)\n  return %y\n}", "unknown operator"),
    ("graph g(%x: f32[2]) {\n  %c: f32[2] = const [1.0]\n  return %c\n}", "needs 2 values"),
    ("graph g(%x: q7[2]) {\n  return %x\n}", "unknown element type"),
    ("graph g(%x: f32[2]) {\n  %y: f32[2] = Relu(%x)\n}", "expected 'return'"),
    ("graph g(%x: f32[2]) {\n  %y: f32[2] = Relu(%x)\n  return\n}", "has no outputs"),
    ("graph g(%x: f32[2]) {\n  %y: f32[2] = Relu(%x)\n  %y: f32[2] = Relu(%x)\n  return %y\n}",
     "defined twice"),
])
def test_malformed_text_is_rejected_with_a_clear_message(text, fragment):
    with pytest.raises(df.ModelFormatError, match=re.escape(fragment)):
        df.parse(text)


def test_parse_errors_give_line_and_column():
    with pytest.raises(df.ModelFormatError, match=r"line 2, column \d+"):
        df.parse("graph g(%x: f32[2]) {\n  %y: f32[2] = Relu(%x,,)\n  return %y\n}")


def test_constants_are_not_copied():
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = _core.Graph()
    v = g.add_constant("w", w)
    view = v.numpy()
    assert np.shares_memory(view, w)
    assert not view.flags.writeable
    del w  # the graph keeps the user's array alive
    assert view.sum() == 66


def test_non_contiguous_constants_are_packed():
    w = np.arange(12, dtype=np.float32).reshape(3, 4).T
    g = _core.Graph()
    np.testing.assert_array_equal(g.add_constant("w", w).numpy(), w)


def test_unsupported_dtype_is_a_dtype_error():
    g = _core.Graph()
    with pytest.raises(df.DTypeError, match="complex64"):
        g.add_constant("z", np.zeros(2, np.complex64))
    with pytest.raises(df.DTypeError, match="unknown element type 'f8'"):
        g.add_input("x", "f8", [2])


def test_shape_mismatch_names_the_node_and_leaves_the_graph_unchanged():
    g = _core.Graph()
    x = g.add_input("x", "f32", [2, 3])
    y = g.add_input("y", "f32", [4])
    with pytest.raises(df.ShapeError, match=r"node 'bad_add' \(Add\): shapes \[2,3\] and \[4\]"):
        g.add_node("Add", [x, y], {}, 1, "bad_add", ["z"])
    assert len(g.nodes) == 0 and g.value("z") is None


def test_arity_is_checked():
    g = _core.Graph()
    x = g.add_input("x", "f32", [2])
    with pytest.raises(df.ShapeError, match="takes 2..2 inputs, got 1"):
        g.add_node("Add", [x], {}, 1)


def test_dtype_mismatch_between_inputs():
    g = _core.Graph()
    x = g.add_input("x", "f32", [2])
    i = g.add_input("i", "i64", [2])
    with pytest.raises(df.ShapeError, match="one element type"):
        g.add_node("Add", [x, i], {}, 1)


def test_removable_marks_intermediates_only():
    g = tiny_convnet()
    out = g.outputs[0]
    assert not out.removable
    assert not g.inputs[0].removable
    assert all(not c.removable for c in g.constants)
    assert all(o.removable for n in g.nodes[:-1] for o in n.outputs)


def test_reference_runs_the_builtin_network():
    g = tiny_convnet(batch=2)
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    (y,) = g.run_reference(x)
    assert y.shape == (2, 10) and y.dtype == np.float32
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-5)


def test_cli_info_uses_the_builtin_network():
    r = subprocess.run([sys.executable, "-m", "dnnfusion", "info"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "graph tiny_convnet: 18 operators" in r.stdout
    assert "Many-to-Many" in r.stdout and "Conv" in r.stdout


def test_cli_info_machine_says_what_compile_uses(tmp_path):
    """`info --machine`: the CPU key, ISA, threads, compiler, kernel cache and the profiling
    databases, with this machine's own measurements counted from its file."""
    import os

    import dnnfusion as df
    from dnnfusion import profiling

    env = dict(os.environ, DNNF_CACHE_DIR=str(tmp_path), DNNF_NUM_THREADS="3", DNNF_PROFILE_DB="")
    isa = df._core.cpu_features()["isa"]
    r = subprocess.run([sys.executable, "-m", "dnnfusion", "info", "--machine"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    lines = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln and not ln.startswith(" ")}
    assert df.plan.profile_target("cpu") in lines["cpu"]
    assert lines["isa"].split()[1] == isa and lines["threads"].split()[1] == "3"
    assert str(tmp_path) in lines["kernels"] and "0 compiled modules" in lines["kernels"]
    assert "measured here (" + isa + ")" in r.stdout and ": 0 entries" in r.stdout
    # With a measurement cached, it is counted.
    db = tmp_path / "kernels" / profiling.machine_db(isa).name
    df.plan.write_profile_db(db, [{"target": df.plan.profile_target("cpu"), "producer": "Transpose",
                                   "consumer": "MatMul", "producer_type": "Shuffle",
                                   "consumer_type": "Many-to-Many", "bucket": "2^12",
                                   "fused_ms": 1.0, "unfused_ms": 2.0}], merge=False)
    r = subprocess.run([sys.executable, "-m", "dnnfusion", "info", "--machine"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert f"{db}: 1 entries" in r.stdout, r.stdout


def test_cli_reports_errors_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    r = subprocess.run([sys.executable, "-m", "dnnfusion", "info", str(bad)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert "ModelFormatError" in r.stderr and "Traceback" not in r.stderr
