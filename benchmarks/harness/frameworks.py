"""Framework back-ends of the harness.  Each ``prepare_*`` runs inside a cell subprocess.

``prepare_<fw>(ctx)`` builds the model for one framework at ``ctx.threads`` threads and
returns a :class:`Prepared`: ``run()`` does one inference on the fixed inputs and returns
the outputs as a list of NumPy arrays; ``kernels`` is the kernel count after fusion as the
framework reports it (definitions in benchmarks/README.md); ``compile_s`` the time from a
loaded model to a ready-to-run one.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

from . import counting


class NotAvailable(Exception):
    """The framework cannot run here (not installed, not implemented); the cell is 'n/a'."""


@dataclasses.dataclass
class Context:
    model: str
    reduced: bool
    threads: int
    workdir: pathlib.Path       # per-model artifact directory
    celldir: pathlib.Path       # per-cell scratch directory
    onnx_path: pathlib.Path | None
    inputs: list[np.ndarray]    # the fixed inputs (saved by the reference cell)
    onnx_input_names: list[str]
    n_outputs: int
    batch: int = 1              # the inputs' batch (models.batched)
    stage: str = "load"
    info: dict = dataclasses.field(default_factory=dict)

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if name == "stage":  # visible to the parent if this cell times out
            try:
                (self.celldir / "stage").write_text(str(value))
            except OSError:
                pass

    def torch_model(self):
        from .models import load

        return load(self.model, self.reduced, self.batch)

    def torch_inputs(self):
        import torch

        return tuple(torch.from_numpy(np.ascontiguousarray(x)) for x in self.inputs)

    def need_onnx(self) -> pathlib.Path:
        if self.onnx_path is None or not pathlib.Path(self.onnx_path).exists():
            raise RuntimeError("no ONNX file (the ONNX export failed in the reference cell)")
        return pathlib.Path(self.onnx_path)


@dataclasses.dataclass
class Prepared:
    run: Callable[[], list[np.ndarray]]
    kernels: int | None
    compile_s: float | None
    details: dict = dataclasses.field(default_factory=dict)


def flatten_torch(out: Any) -> list[np.ndarray]:
    import torch
    import torch.utils._pytree as pytree

    leaves, _ = pytree.tree_flatten(out)
    return [x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
            for x in leaves]


def _import(mod: str, pip_name: str):
    import importlib

    try:
        return importlib.import_module(mod)
    except ImportError as e:
        raise NotAvailable(f"{pip_name} not installed ({e.__class__.__name__}: {e})") from e


# ---------------------------------------------------------------- PyTorch eager
def prepare_eager(ctx: Context) -> Prepared:
    import torch

    torch.set_num_threads(ctx.threads)
    m = ctx.torch_model().module
    x = ctx.torch_inputs()
    ctx.stage = "count"
    dc = counting.DispatchCounter()
    with torch.no_grad(), dc.mode:  # no_grad, not inference_mode: see DispatchCounter
        m(*x)
    res = dc.result()

    def run():
        with torch.inference_mode():
            return flatten_torch(m(*x))

    return Prepared(run, res["kernels"], 0.0,
                    {"views": res["views"], "hist": res["hist"], "num_threads": torch.get_num_threads()})


# ---------------------------------------------------------------- torch.compile / Inductor
def prepare_inductor(ctx: Context) -> Prepared:
    import torch
    import torch._inductor.config as icfg
    from torch._inductor.utils import run_and_get_code

    torch.set_num_threads(ctx.threads)
    icfg.freezing = True  # inference: fold weights, pre-pack oneDNN/MKL weights
    m = ctx.torch_model().module
    x = ctx.torch_inputs()
    ctx.stage = "compile"
    t0 = time.perf_counter()
    compiled = torch.compile(m)
    with torch.no_grad():
        _, codes = run_and_get_code(compiled, *x)  # first call compiles (and runs once)
    compile_s = time.perf_counter() - t0
    res = counting.inductor_kernel_count(codes)
    (ctx.celldir / "inductor_output_code.py").write_text("\n\n# ----- next graph\n\n".join(codes))

    def run():
        with torch.no_grad():
            return flatten_torch(compiled(*x))

    return Prepared(run, res.pop("kernels"), compile_s,
                    dict(res, freezing=True, num_threads=torch.get_num_threads()))


# ---------------------------------------------------------------- ONNX Runtime
def prepare_ort(ctx: Context) -> Prepared:
    ort = _import("onnxruntime", "onnxruntime")
    import onnx

    path = ctx.need_onnx()

    def options(save: pathlib.Path | None):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = ctx.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        if save is not None:
            so.optimized_model_filepath = str(save)
        return so

    ctx.stage = "count"
    opt_path = ctx.celldir / "ort_optimized.onnx"
    s = ort.InferenceSession(str(path), options(opt_path), providers=["CPUExecutionProvider"])
    del s
    opt = onnx.load(str(opt_path), load_external_data=False)
    kinds = [(n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type for n in opt.graph.node]
    ctx.stage = "compile"
    t0 = time.perf_counter()
    sess = ort.InferenceSession(str(path), options(None), providers=["CPUExecutionProvider"])
    compile_s = time.perf_counter() - t0
    feeds = _onnx_feeds(sess.get_inputs(), ctx)

    def run():
        return [np.asarray(o) for o in sess.run(None, feeds)]

    return Prepared(run, len(kinds), compile_s, {"hist": counting.hist(kinds),
                                                 "providers": sess.get_providers()})


def _onnx_feeds(graph_inputs, ctx: Context) -> dict[str, np.ndarray]:
    """Map the saved inputs to an ONNX session's inputs, by name, else by position."""
    names = [i.name for i in graph_inputs]
    by_name = dict(zip(ctx.onnx_input_names, ctx.inputs))
    if all(n in by_name for n in names):
        return {n: by_name[n] for n in names}
    if len(names) != len(ctx.inputs):
        raise RuntimeError(f"session has {len(names)} inputs, model has {len(ctx.inputs)}")
    return dict(zip(names, ctx.inputs))


# ---------------------------------------------------------------- TVM (Relax)
def prepare_tvm(ctx: Context) -> Prepared:
    tvm = _import("tvm", "apache-tvm")
    from tvm import relax
    from tvm.relax.backend.cpu_generic import pipeline as cpu_pipeline
    from tvm.relax.frontend.onnx import from_onnx
    import onnx

    path = ctx.need_onnx()
    ctx.stage = "convert"
    t0 = time.perf_counter()
    model = onnx.load(str(path))
    shape_dict = {n: list(x.shape) for n, x in zip(ctx.onnx_input_names, ctx.inputs)}
    front_end_input = "ONNX model as exported"
    try:
        mod = from_onnx(model, shape_dict=shape_dict, keep_params_in_input=False)
    except Exception as e:  # noqa: BLE001 - retry on the constant-folded model
        from .onnx_fold import fold_constants

        first = f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"
        model, n_folded = fold_constants(onnx.load(str(path)))
        try:
            mod = from_onnx(model, shape_dict=shape_dict, keep_params_in_input=False)
        except Exception as e2:
            raise RuntimeError(f"Relax ONNX front-end failed ({first}); also after constant "
                               f"folding: {type(e2).__name__}: {' '.join(str(e2).split())[:160]}") from e2
        front_end_input = f"constant-folded ONNX ({n_folded} constant nodes folded; the " \
                          f"exported model failed: {first})"
    del model
    try:
        mcpu = tvm.target.codegen.llvm_get_system_cpu()
    except Exception:  # noqa: BLE001
        mcpu = "native"
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": ctx.threads})
    ctx.stage = "compile"
    with target:
        passes = cpu_pipeline.library_dispatch_passes(target) + cpu_pipeline.legalize_passes(target)
        passes += [relax.transform.RewriteDataflowReshape()]
        mod = tvm.transform.Sequential(passes)(mod)
    res = counting.tvm_kernel_count(mod)
    ex = tvm.compile(mod, target=target)
    dev = tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    compile_s = time.perf_counter() - t0
    pnames = [str(getattr(p, "name_hint", p)) for p in mod["main"].params]
    ctx.info["tvm_params"] = pnames
    by_name = dict(zip(ctx.onnx_input_names, ctx.inputs))
    if all(n in by_name for n in pnames):
        arrays = [by_name[n] for n in pnames]
    elif len(pnames) == len(ctx.inputs):
        arrays = list(ctx.inputs)
    else:
        raise RuntimeError(f"Relax main takes inputs {pnames}, model has {ctx.onnx_input_names}")
    args = [tvm.runtime.tensor(np.ascontiguousarray(x), dev) for x in arrays]
    f = vm["main"]

    def flat(o):
        if hasattr(o, "numpy"):
            return [o.numpy()]
        out = []
        for e in o:
            out += flat(e)
        return out

    def run():
        return flat(f(*args))

    return Prepared(run, res.pop("kernels"), compile_s,
                    dict(res, target=str(target), tuned=False, front_end_input=front_end_input,
                         tvm_num_threads=os.environ.get("TVM_NUM_THREADS")))


# ---------------------------------------------------------------- OpenVINO
def prepare_openvino(ctx: Context) -> Prepared:
    ov = _import("openvino", "openvino")
    path = ctx.need_onnx()
    ctx.stage = "compile"
    t0 = time.perf_counter()
    core = ov.Core()
    model = core.read_model(str(path))
    cfg = {"INFERENCE_NUM_THREADS": ctx.threads, "NUM_STREAMS": 1,
           "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}
    compiled = core.compile_model(model, "CPU", cfg)
    compile_s = time.perf_counter() - t0
    ctx.stage = "count"
    res = counting.openvino_kernel_count(compiled.get_runtime_model())
    req = compiled.create_infer_request()
    names = [p.get_any_name() for p in model.inputs]
    by_name = dict(zip(ctx.onnx_input_names, ctx.inputs))
    if all(n in by_name for n in names):
        feeds = {i: by_name[n] for i, n in enumerate(names)}
    elif len(names) == len(ctx.inputs):
        feeds = dict(enumerate(ctx.inputs))
    else:
        raise RuntimeError(f"OpenVINO model inputs {names} do not match {ctx.onnx_input_names}")
    outs = compiled.outputs

    def run():
        r = req.infer(feeds)
        return [np.array(r[o]) for o in outs]

    return Prepared(run, res["kernels"], compile_s,
                    {"hist": res["hist"], "config": {k: str(v) for k, v in cfg.items()}})


# ---------------------------------------------------------------- MNN
def prepare_mnn(ctx: Context) -> Prepared:
    MNN = _import("MNN", "MNN")
    import onnx

    path = ctx.need_onnx()
    ctx.stage = "convert"
    t0 = time.perf_counter()
    mnn_path = ctx.celldir / "model.mnn"
    conv = subprocess.run(
        [sys.executable, "-c", "import sys; from MNN.tools.mnnconvert import main; sys.exit(main())",
         "-f", "ONNX", "--modelFile", str(path), "--MNNModel", str(mnn_path), "--bizCode", "dnnf"],
        capture_output=True, text=True, timeout=1800)
    conv_log = (conv.stdout + conv.stderr).strip().splitlines()
    conv_errors = [ln.strip() for ln in conv_log if "error" in ln.lower()][:3]
    if conv.returncode != 0 or not mnn_path.exists():
        raise RuntimeError("mnnconvert failed: " + " | ".join(conv_errors or conv_log[-3:]))
    ctx.stage = "compile"
    it = MNN.Interpreter(str(mnn_path))
    sess = it.createSession({"numThread": ctx.threads, "precision": "high", "backend": "CPU"})
    compile_s = time.perf_counter() - t0
    inputs = it.getSessionInputAll(sess)
    by_name = dict(zip(ctx.onnx_input_names, ctx.inputs))
    if not all(n in by_name for n in inputs):
        raise RuntimeError(f"MNN inputs {list(inputs)} do not match {ctx.onnx_input_names}")
    keep: list = []  # MNN.Tensor may point into these NumPy buffers: keep them alive
    copies = []
    for n, t in inputs.items():
        x = by_name[n]
        if x.dtype.kind in "iub":
            htype, x = MNN.Halide_Type_Int, np.ascontiguousarray(x, dtype=np.int32)
        else:
            htype, x = MNN.Halide_Type_Float, np.ascontiguousarray(x, dtype=np.float32)
        host = MNN.Tensor(tuple(x.shape), htype, x, MNN.Tensor_DimensionType_Caffe)
        keep += [x, host]
        if tuple(t.getShape()) != tuple(x.shape):
            raise RuntimeError(f"MNN input {n} has shape {t.getShape()}, data {x.shape}")
        t.copyFrom(host)
        copies.append((t, host))
    onnx_outs = [o.name for o in onnx.load(str(path), load_external_data=False).graph.output]
    ctx.stage = "count"
    executed: list[str] = []

    def before(_tensors, info):
        executed.append(info.getType())
        return True

    rc = it.runSessionWithCallBackInfo(sess, before, lambda _t, _i: True)
    if rc != 0 or not executed:
        raise RuntimeError(f"MNN session did not run ({_MNN_ERRORS.get(rc, rc)}, {len(executed)} ops)"
                           + (f"; mnnconvert said: {' | '.join(conv_errors)}" if conv_errors else ""))
    all_out = it.getSessionOutputAll(sess)
    missing = [n for n in onnx_outs if n not in all_out]
    if missing:
        raise RuntimeError(f"MNN session lacks outputs {missing}")

    hosts = []
    for n in onnx_outs:
        t = all_out[n]
        shape = tuple(t.getShape())
        is_int = t.getDataType() == MNN.Halide_Type_Int
        buf = np.zeros(shape, np.int32 if is_int else np.float32)
        host = MNN.Tensor(shape, MNN.Halide_Type_Int if is_int else MNN.Halide_Type_Float, buf,
                          MNN.Tensor_DimensionType_Caffe)
        keep.append(buf)
        hosts.append((t, host, shape))

    def run():
        # MNN may reuse an input tensor's memory as scratch (seen with a leading Raster op):
        # a second runSession without a fresh copy computes on garbage, so every run copies.
        for t, host in copies:
            t.copyFrom(host)
        rc = it.runSession(sess)
        if rc != 0:
            raise RuntimeError(f"MNN runSession failed: {_MNN_ERRORS.get(rc, rc)}")
        outs = []
        for t, host, shape in hosts:
            t.copyToHostTensor(host)
            outs.append(np.array(host.getNumpyData(), copy=True).reshape(shape))
        return outs

    import hashlib

    return Prepared(run, len(executed), compile_s,
                    {"hist": counting.hist(executed), "precision": "high",
                     # mnnconvert 3.6.1 is not deterministic (BERT: some conversions run with
                     # ~2e-3 relative error); the hash tells conversions apart
                     "mnn_model_sha256": hashlib.sha256(mnn_path.read_bytes()).hexdigest()[:16]})


_MNN_ERRORS = {1: "OUT_OF_MEMORY", 2: "NOT_SUPPORT", 3: "COMPUTE_SIZE_ERROR", 4: "NO_EXECUTION",
               5: "INVALID_VALUE"}


# ---------------------------------------------------------------- LiteRT (via litert-torch)
def prepare_litert(ctx: Context) -> Prepared:
    litert_torch = _import("litert_torch", "litert-torch (see benchmarks/setup_venv.sh)")
    interp_mod = _import("ai_edge_litert.interpreter", "ai-edge-litert")
    import torch

    torch.set_num_threads(ctx.threads)
    m = ctx.torch_model().module
    x = ctx.torch_inputs()
    ctx.stage = "convert"
    t0 = time.perf_counter()
    edge = litert_torch.convert(m, x)
    tfl = ctx.celldir / "model.tflite"
    edge.export(str(tfl))
    ctx.stage = "compile"
    it = interp_mod.Interpreter(model_path=str(tfl), num_threads=ctx.threads)
    it.allocate_tensors()
    compile_s = time.perf_counter() - t0
    ops = [o["op_name"] for o in it._get_ops_details()]
    tfl_ops = [o for o in ops if o != "DELEGATE"]
    runner = it.get_signature_runner()
    in_names = list(runner.get_input_details().keys())
    if len(in_names) != len(ctx.inputs):
        raise RuntimeError(f"tflite signature has inputs {in_names}, model has {len(ctx.inputs)}")

    def order(k: str):
        digits = "".join(c for c in k if c.isdigit())
        return (int(digits) if digits else 0, k)

    in_names.sort(key=order)
    want = runner.get_input_details()
    feeds = {n: np.ascontiguousarray(a, dtype=want[n]["dtype"]) for n, a in zip(in_names, ctx.inputs)}

    def run():
        out = runner(**feeds)
        return [np.asarray(out[k]) for k in sorted(out, key=order)]

    return Prepared(run, len(tfl_ops), compile_s,
                    {"hist": counting.hist(tfl_ops), "delegate_nodes": ops.count("DELEGATE"),
                     "signature_inputs": in_names})


# ---------------------------------------------------------------- ExecuTorch (XNNPACK)
def prepare_executorch(ctx: Context) -> Prepared:
    _import("executorch", "executorch (see benchmarks/setup_venv.sh)")
    import torch
    from executorch.backends.xnnpack import xnnpack_preprocess
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    torch.set_num_threads(ctx.threads)
    m = ctx.torch_model().module
    x = ctx.torch_inputs()
    ctx.stage = "convert"
    xnn_graphs: list[Any] = []
    orig = xnnpack_preprocess.serialize_xnnpack_binary

    def capture(graph, *a, **k):  # record each XNNPACK subgraph handed to the delegate
        xnn_graphs.append(graph)
        return orig(graph, *a, **k)

    t0 = time.perf_counter()
    xnnpack_preprocess.serialize_xnnpack_binary = capture
    try:
        ep = torch.export.export(m, x, strict=False)
        edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
        et = edge.to_executorch()
    finally:
        xnnpack_preprocess.serialize_xnnpack_binary = orig
    pte = ctx.celldir / "model.pte"
    pte.write_bytes(et.buffer)
    ctx.stage = "compile"
    try:
        from executorch.extension.pybindings import portable_lib

        portable_lib._unsafe_reset_threadpool(ctx.threads)
        threads = portable_lib._threadpool_get_thread_count()
    except Exception as e:  # noqa: BLE001
        threads = f"unknown ({e.__class__.__name__})"
    plan = et.executorch_program.execution_plan[0]
    try:
        method = Runtime.get().load_program(str(pte)).load_method("forward")
    except RuntimeError as e:
        ops = sorted({o.name for o in plan.operators})
        hint = " (OperatorMissing: an op left outside the XNNPACK delegate has no kernel in the " \
               "runtime)" if "0x:14" in str(e) or "0x14" in str(e) else ""
        raise RuntimeError(f"{e}{hint}; non-delegated ops: {', '.join(ops)[:200]}") from e
    compile_s = time.perf_counter() - t0
    kernel_calls, delegate_calls = [], 0
    for chain in plan.chains:
        for ins in chain.instructions:
            kind = type(ins.instr_args).__name__
            if kind == "KernelCall":
                name = plan.operators[ins.instr_args.op_index].name
                if not name.startswith("executorch_prim::"):
                    kernel_calls.append(name)
            elif kind == "DelegateCall":
                delegate_calls += 1
    xnn_nodes = [type(n.xnode_union).__name__ for g in xnn_graphs for n in g.xnodes]
    xin = list(x)

    def run():
        return flatten_torch(method.execute(xin))

    return Prepared(run, len(kernel_calls) + len(xnn_nodes), compile_s,
                    {"xnnpack_nodes": len(xnn_nodes), "xnnpack_hist": counting.hist(xnn_nodes),
                     "delegate_calls": delegate_calls, "portable_kernel_calls": counting.hist(kernel_calls),
                     "threadpool_threads": threads})


# ---------------------------------------------------------------- dnnfusion
def prepare_dnnfusion(ctx: Context, isa: str | None = None) -> Prepared:
    """dnnfusion.compile on the ONNX file. The runner gives each cell an empty kernel cache
    (``$DNNF_CACHE_DIR`` in the cell's directory), so ``compile_s`` is a cold compile, as
    torch.compile's is. That model is then dropped and the same model compiled again, from the
    caches the first compile filled: its time is ``details["compile_warm_s"]``, and it is the
    model timed (one compiled model alive at a time, so that the cell's peak RSS is one
    model's; both in memory at once doubled it). ``isa``: the instruction set asked for (None:
    this CPU's best)."""
    import gc

    import dnnfusion

    if getattr(dnnfusion, "_harness_stub", None):  # see models.zoo()
        raise RuntimeError(dnnfusion._harness_stub)
    if not hasattr(dnnfusion, "compile"):
        raise NotAvailable("not implemented yet (dnnfusion.compile does not exist)")
    path = ctx.need_onnx()
    ctx.stage = "compile"
    t0 = time.perf_counter()
    m = dnnfusion.compile(str(path), example_inputs=tuple(ctx.inputs), threads=ctx.threads, isa=isa)
    compile_s = time.perf_counter() - t0
    cold = getattr(m, "stats", {}) or {}
    cold_hit, cold_profile_s = bool(cold.get("cache_hit")), float((cold.get("profile") or {}).get("seconds") or 0.0)
    del m, cold
    gc.collect()
    t0 = time.perf_counter()
    m = dnnfusion.compile(str(path), example_inputs=tuple(ctx.inputs), threads=ctx.threads, isa=isa)
    compile_warm_s = time.perf_counter() - t0
    stats = dict(getattr(m, "stats", {}) or {})
    # profile="auto" measures within a budget: yellow pairs the cold compile left unmeasured
    # are measured by the warm one (then it is not all warm; the table says how long that took,
    # and the plan timed may differ from the cold compile's)
    warm_profile_s = float((stats.get("profile") or {}).get("seconds") or 0.0)
    # Where the yellow fusion decisions came from (compile's profile="auto" measures them on
    # this machine within a budget and caches them, so a second run may plan differently).
    for k, v in (stats.get("profile") or {}).items():
        if isinstance(v, (int, float, str)):
            stats[f"profile_{k}"] = v
    x = list(ctx.inputs)

    def run():
        out = m(*x)
        if isinstance(out, (list, tuple)):
            return [np.asarray(o) for o in out]
        return [np.asarray(out)]

    # Passes over memory the generated code makes (loop nests, transposes, anchor calls):
    # like ORT's kernels, each reads or writes whole tensors; plan blocks are in the stats.
    return Prepared(run, stats.get("passes"), compile_s,
                    {"operators_before": stats.get("operators_before"),
                     "compile_cold_cache_hit": cold_hit, "compile_cold_profile_s": round(cold_profile_s, 3),
                     "compile_warm_s": round(compile_warm_s, 4), "compile_warm_cache_hit": bool(stats.get("cache_hit")),
                     "compile_warm_profile_s": round(warm_profile_s, 3),
                     "stats": {k: v for k, v in stats.items() if isinstance(v, (int, float, str))}})


def prepare_dnnfusion_avx2(ctx: Context) -> Prepared:
    """dnnfusion restricted to AVX2+FMA on a machine that has AVX-512 (the code an AVX2-only
    CPU gets, with this machine's caches and clock). On a CPU whose best is AVX2 the
    ``dnnfusion`` column is already that code, so this column says so instead of repeating it."""
    from dnnfusion import _core

    best = _core.cpu_features()["isa"]
    if best != "avx512":
        raise NotAvailable(f"this CPU's best instruction set is {best}: the dnnfusion column is the "
                           "AVX2 code" if best == "avx2" else f"this CPU lacks AVX2 (best: {best})")
    return prepare_dnnfusion(ctx, isa="avx2")


# ---------------------------------------------------------------- self-test
def prepare_selftest_raise(ctx: Context) -> Prepared:
    ctx.stage = "compile"
    raise RuntimeError("deliberate failure (harness self-test framework)")


@dataclasses.dataclass(frozen=True)
class Framework:
    name: str
    label: str
    prepare: Callable[[Context], Prepared]
    venv: bool = False           # runs in the bench venv (benchmarks/setup_venv.sh)
    module: str | None = None    # import name, to tell whether it is installed
    dist: str | None = None      # distribution name, for its version


FRAMEWORKS: dict[str, Framework] = {f.name: f for f in [
    Framework("eager", "PyTorch eager", prepare_eager, module="torch", dist="torch"),
    Framework("ort", "ONNX Runtime", prepare_ort, module="onnxruntime", dist="onnxruntime"),
    Framework("inductor", "torch.compile (Inductor)", prepare_inductor, module="torch", dist="torch"),
    Framework("tvm", "TVM (Relax, untuned)", prepare_tvm, module="tvm", dist="apache-tvm"),
    Framework("openvino", "OpenVINO", prepare_openvino, module="openvino", dist="openvino"),
    Framework("mnn", "MNN", prepare_mnn, module="MNN", dist="MNN"),
    Framework("litert", "LiteRT (XNNPACK)", prepare_litert, venv=True, module="litert_torch",
              dist="litert-torch"),
    Framework("executorch", "ExecuTorch (XNNPACK)", prepare_executorch, venv=True,
              module="executorch", dist="executorch"),
    Framework("dnnfusion", "dnnfusion", prepare_dnnfusion, module="dnnfusion", dist=None),
    Framework("dnnfusion_avx2", "dnnfusion, isa=avx2", prepare_dnnfusion_avx2, module="dnnfusion", dist=None),
    Framework("selftest_raise", "self-test (raises)", prepare_selftest_raise),
]}

DEFAULT_FRAMEWORKS = ["eager", "ort", "inductor", "tvm", "openvino", "mnn", "litert",
                      "executorch", "dnnfusion"]
