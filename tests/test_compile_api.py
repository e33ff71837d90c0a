"""End to end through ``dnnfusion.compile``: tiny ONNX and torch models against the NumPy
reference and PyTorch, every planner, NumPy and torch in/out, call errors, stats, the
``torch.compile`` backend (with its fallback) and ``python -m dnnfusion run``."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

RNG = np.random.default_rng(11)
PLANNERS = ["dnnfusion", "none", "patterns", "tvm", "dp"]


@pytest.fixture(autouse=True)
def _shipped_opt_level(monkeypatch):
    """The public API as users run it: generated code at the caller's level (-O3 unless set),
    not the suite's -O1 (conftest.py)."""
    from conftest import CALLER_OPT_LEVEL

    if CALLER_OPT_LEVEL is None:
        monkeypatch.delenv("DNNF_OPT_LEVEL", raising=False)
    else:
        monkeypatch.setenv("DNNF_OPT_LEVEL", CALLER_OPT_LEVEL)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def onnx_model(nodes, inputs, outputs, inits=(), opset=20):
    """inputs: name -> shape (float32); outputs: names, shapes inferred."""
    ins = [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs.items()]
    g = h.make_graph(nodes, "t", ins, [], [nh.from_array(v, k) for k, v in inits])
    m = onnx.shape_inference.infer_shapes(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]))
    infos = {v.name: v for v in m.graph.value_info}
    m.graph.output.extend([infos[o] for o in outputs])
    del m.graph.value_info[:]
    return m


def conv_relu():
    w, b = f32(8, 3, 3, 3), f32(8)
    m = onnx_model([h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                    h.make_node("Relu", ["c"], ["y"])], {"x": [1, 3, 10, 10]}, ["y"],
                   [("w", w), ("b", b)])
    return m, [f32(1, 3, 10, 10)]


def matmul_add_gelu():
    w, b = f32(32, 24), f32(24)
    m = onnx_model([h.make_node("MatMul", ["x", "w"], ["mm"]), h.make_node("Add", ["mm", "b"], ["a"]),
                    h.make_node("Gelu", ["a"], ["y"])], {"x": [2, 5, 32]}, ["y"], [("w", w), ("b", b)])
    return m, [f32(2, 5, 32)]


def transpose_reshape():
    shape = np.array([6, 20], np.int64)
    m = onnx_model([h.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
                    h.make_node("Reshape", ["t", "s"], ["r"]), h.make_node("Sigmoid", ["r"], ["y"])],
                   {"x": [2, 4, 15]}, ["y"], [("s", shape)])
    return m, [f32(2, 4, 15)]


def two_outputs():
    m = onnx_model([h.make_node("Add", ["x", "z"], ["s"]), h.make_node("Tanh", ["s"], ["a"]),
                    h.make_node("Mul", ["s", "x"], ["b"])], {"x": [3, 17], "z": [3, 17]}, ["a", "b"])
    return m, [f32(3, 17), f32(3, 17)]


CASES = {"conv_relu": conv_relu, "matmul_add_gelu": matmul_add_gelu,
         "transpose_reshape": transpose_reshape, "two_outputs": two_outputs}


def reference(model, inputs):
    return df.load(model).run_reference(*inputs)


def assert_close(got, want, rtol=1e-4, atol=1e-5):
    got = got if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("planner", PLANNERS)
def test_onnx_models_match_reference(case, planner):
    model, inputs = CASES[case]()
    m = df.compile(model, planner=planner)
    assert_close(m(*inputs), reference(model, inputs))
    assert m.stats["planner"] == planner


@pytest.mark.parametrize("form", ["proto", "bytes", "path"])
def test_model_forms(form, tmp_path):
    model, inputs = matmul_add_gelu()
    if form == "bytes":
        model_in = model.SerializeToString()
    elif form == "path":
        model_in = str(tmp_path / "m.onnx")
        onnx.save(model, model_in)
    else:
        model_in = model
    assert_close(df.compile(model_in)(*inputs), reference(model, inputs))


def test_scalar_isa_and_no_rewrites_agree():
    model, inputs = matmul_add_gelu()
    want = reference(model, inputs)
    s = df.compile(model, isa="scalar", optimize=False)
    assert s.stats["isa"] == "scalar"
    assert s.stats["operators_after_rewrite"] == s.stats["operators_before"]
    assert_close(s(*inputs), want)


def test_stats_explain_source_and_cache_hit():
    model, inputs = transpose_reshape()
    m = df.compile(model, threads=1)
    s = m.stats
    for key in ("operators_before", "operators_after_rewrite", "kernels", "passes",
                "intermediate_bytes_written", "plan_blocks", "estimated_intermediate_bytes_saved",
                "kernels_after", "intermediate_bytes_removed", "arena_bytes", "compile_seconds", "codegen_seconds",
                "cc_seconds", "cache_hit", "isa", "threads", "planner"):
        assert key in s, key
    assert s["operators_before"] == 3 and s["plan_blocks"] == s["kernels_after"] == len(m.plan.blocks) >= 1
    assert s["kernels"] == len(m.kernels) and s["passes"] == sum(k["passes"] for k in m.kernels)
    assert s["threads"] == 1 and s["isa"] == _core.cpu_features()["isa"]
    assert "dnnf_run" in m.source() and "fused blocks" in m.explain()
    assert isinstance(m.plan, df.FusionPlan) and isinstance(m.graph, df.ECG)
    again = df.compile(model, threads=1)
    assert again.stats["cache_hit"] and again.library_path == m.library_path
    m.set_num_threads(2)
    assert m.stats["threads"] == 2
    assert_close(m(*inputs), reference(model, inputs))


def test_profile_times_every_kernel():
    model, inputs = two_outputs()
    m = df.compile(model, threads=1, planner="none")  # one kernel per operator
    prof = m.profile(*inputs, repeat=3, warmup=1)
    assert [r["function"] for r in prof.rows] == [k["function"] for k in m.kernels] + ["(output copies)"]
    assert len(prof.rows) == m.stats["kernels_after"] + 1 == 4
    assert all(r["ms"] >= 0 for r in prof.rows) and prof.total_ms > 0
    assert prof.top(2) == sorted(prof.rows, key=lambda r: -r["ms"])[:2]
    text = str(prof)
    assert "3 kernels" in text and "median of 3 runs, 1 threads" in text
    for k in m.kernels:
        assert k["function"] in text
    with pytest.raises(ValueError, match="repeat"):
        m.profile(*inputs, repeat=0)
    with pytest.raises(df.ShapeError):
        m.profile(f32(2, 17), inputs[1])
    assert_close(m(*inputs), reference(model, inputs))  # the timed runs left the model usable


def test_several_outputs_are_a_tuple_and_inputs_bind_by_name():
    model, (x, z) = two_outputs()
    m = df.compile(model)
    want = reference(model, [x, z])
    out = m(x, z)
    assert isinstance(out, tuple) and len(out) == 2
    assert_close(out, want)
    assert_close(m(z=z, x=x), want)
    assert_close(m(x, z=z), want)
    single, _ = matmul_add_gelu()
    assert isinstance(df.compile(single)(f32(2, 5, 32)), np.ndarray)


def test_call_errors():
    model, (x, z) = two_outputs()
    m = df.compile(model)
    with pytest.raises(TypeError, match=r"takes 2 inputs \(x, z\), got 3"):
        m(x, z, x)
    with pytest.raises(TypeError, match="missing input z"):
        m(x)
    with pytest.raises(TypeError, match="no input named 'w'"):
        m(x, z, w=x)
    with pytest.raises(TypeError, match="'x' given twice"):
        m(x, z, x=x)
    with pytest.raises(df.DTypeError, match=r"input 'z': expected f32\[3,17\], got i64\[3,17\]"):
        m(x, z.astype(np.int64))
    with pytest.raises(df.ShapeError, match=r"input 'x': expected f32\[3,17\], got f32\[17,3\]"):
        m(x.T.copy(), z)
    with pytest.raises(TypeError, match="must be a numpy array or a torch tensor, got list"):
        m(x.tolist(), z)
    assert_close(m(np.asfortranarray(x), z[:, :]), reference(model, [x, z]))


def test_symbolic_onnx_dims_from_example_inputs():
    ins = [h.make_tensor_value_info("x", T.FLOAT, ["batch", 7])]
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "t", ins,
                     [h.make_tensor_value_info("y", T.FLOAT, ["batch", 7])])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    x = f32(3, 7)
    m = df.compile(model, example_inputs=(x,))
    assert_close(m(x), [np.maximum(x, 0)])
    m2 = df.compile(model, input_shapes={"x": [2, 7]})
    assert [int(d) for d in m2.graph.inputs[0].shape] == [2, 7]


def test_target_planner_and_threads_are_checked():
    model, _ = transpose_reshape()
    with pytest.raises(df.Error, match="unknown target 'cuda'; choose one of cpu, opencl"):
        df.compile(model, target="cuda")
    with pytest.raises(df.Error, match="unknown planner 'xla'"):
        df.compile(model, planner="xla")
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        df.compile(model, threads=0)


def test_unsupported_operator_is_reported():
    m = onnx_model([h.make_node("Relu", ["x"], ["y"])], {"x": [4]}, ["y"])
    m.graph.node[0].op_type = "NoSuchOp"
    with pytest.raises(df.UnsupportedOperatorError):
        df.compile(m)


# torch --------------------------------------------------------------------------------------
torch = pytest.importorskip("torch")


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x, y):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x))) + y, (x * 2).transpose(0, 1)


def mlp():
    torch.manual_seed(0)
    return MLP().eval(), (torch.randn(4, 16), torch.randn(4, 8))


def test_torch_module_in_torch_out():
    module, ex = mlp()
    m = df.compile(module, example_inputs=ex)
    out = m(*ex)
    assert isinstance(out, tuple) and all(isinstance(o, torch.Tensor) for o in out)
    with torch.no_grad():
        want = module(*ex)
    for o, w in zip(out, want):
        torch.testing.assert_close(o, w, rtol=1e-4, atol=1e-5)
    # NumPy in, NumPy out, same model.
    np_out = m(*[t.numpy() for t in ex])
    assert isinstance(np_out[0], np.ndarray)
    # A non-contiguous tensor is fine; an int64 tensor where float32 is expected is not cast.
    x_t = torch.randn(16, 4).t()
    torch.testing.assert_close(m(x_t, ex[1])[0], module(x_t, ex[1])[0].detach(), rtol=1e-4, atol=1e-5)
    with pytest.raises(df.DTypeError, match="input 'x'"):
        m(ex[0].to(torch.int64), ex[1])
    with pytest.raises(df.DTypeError, match=r"expected f32\[4,16\], got bf16\[4,16\]"):
        m(ex[0].to(torch.bfloat16), ex[1])


def test_torch_compile_backend():
    module, ex = mlp()
    torch._dynamo.reset()
    c = torch.compile(module, backend="dnnfusion")
    with torch.no_grad():
        got, want = c(*ex), module(*ex)
    assert isinstance(got, tuple)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_torch_compile_backend_falls_back_with_a_warning():
    class FFT(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).real * 2

    torch._dynamo.reset()
    x = torch.randn(8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = torch.compile(FFT(), backend="dnnfusion")(x)
    torch.testing.assert_close(y, torch.fft.rfft(x).real * 2)
    assert any("runs on PyTorch instead" in str(w.message) for w in caught)


def test_backend_name_resolves_without_importing_dnnfusion():
    code = ("import sys, torch\n"
            "from torch._dynamo.backends.registry import lookup_backend\n"
            "fn = lookup_backend('dnnfusion')\n"
            "print(fn.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "dnnfusion.torch_backend"


# command line -------------------------------------------------------------------------------
def _cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "dnnfusion", "run", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "DNNF_NUM_THREADS": "1"})


def test_cli_run_onnx_file(tmp_path):
    model, _ = matmul_add_gelu()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    out = _cli(str(path), "--repeat", "3", "--threads", "1", "--kernels", "5")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "operators  3 before" in out.stdout and "OK" in out.stdout
    assert "1 thread" in out.stdout and "dnnfusion" in out.stdout
    kernels = out.stdout.split("kernels    ")[1]
    assert "median of 3 runs, 1 threads" in kernels and "k0" in kernels


@pytest.mark.slow
def test_cli_run_reduced_zoo_model():
    out = _cli("tinybert", "--reduced", "--repeat", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "vs PyTorch eager" in out.stdout and "MISMATCH" not in out.stdout
    assert "PyTorch eager" in out.stdout.split("latency")[1]
