"""Framework back-ends of the harness.  Each ``prepare_*`` runs inside a cell subprocess.

``prepare_<fw>(ctx)`` builds the model for one framework at ``ctx.threads`` threads and
returns a :class:`Prepared`: ``run()`` does one inference on the fixed inputs and returns
the outputs as a list of NumPy arrays; ``kernels`` is the kernel count after fusion as the
framework reports it (definitions in benchmarks/README.md); ``compile_s`` the time from a
loaded model to a ready-to-run one. The contract (``Context``, ``Prepared``, ``NotAvailable``)
is in ``cell_api.py``; MNN, LiteRT and ExecuTorch are in ``frameworks_mobile.py``.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import time
from typing import Callable

import numpy as np

from . import counting
from .cell_api import Context, NotAvailable, Prepared, flatten_torch, need_module  # noqa: F401 (re-exported)
from .frameworks_mobile import prepare_executorch, prepare_litert, prepare_mnn


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
def ort_options(ort, threads: int):
    """ONNX Runtime's session options in every measurement here (also side_by_side.py)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return so


def openvino_config(threads: int) -> dict:
    """OpenVINO's CPU configuration in every measurement here (also side_by_side.py): f32 set
    explicitly, since it would pick bf16 on an AMX CPU."""
    return {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "f32"}


def openvino_feeds(model, names: list[str], arrays: list) -> dict:
    """The inputs by OpenVINO's input index: by name, else by position."""
    ov_names = [p.get_any_name() for p in model.inputs]
    by_name = dict(zip(names, arrays))
    if all(n in by_name for n in ov_names):
        return {i: by_name[n] for i, n in enumerate(ov_names)}
    if len(ov_names) == len(arrays):
        return dict(enumerate(arrays))
    raise RuntimeError(f"OpenVINO model inputs {ov_names} do not match {names}")


def prepare_ort(ctx: Context) -> Prepared:
    ort = need_module("onnxruntime", "onnxruntime")
    import onnx

    path = ctx.need_onnx()

    def options(save: pathlib.Path | None):
        so = ort_options(ort, ctx.threads)
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
    tvm = need_module("tvm", "apache-tvm")
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
    ov = need_module("openvino", "openvino")
    path = ctx.need_onnx()
    ctx.stage = "compile"
    t0 = time.perf_counter()
    core = ov.Core()
    model = core.read_model(str(path))
    cfg = openvino_config(ctx.threads)
    compiled = core.compile_model(model, "CPU", cfg)
    compile_s = time.perf_counter() - t0
    ctx.stage = "count"
    res = counting.openvino_kernel_count(compiled.get_runtime_model())
    req = compiled.create_infer_request()
    feeds = openvino_feeds(model, ctx.onnx_input_names, ctx.inputs)
    outs = compiled.outputs

    def run():
        r = req.infer(feeds)
        return [np.array(r[o]) for o in outs]

    return Prepared(run, res["kernels"], compile_s,
                    {"hist": res["hist"], "config": {k: str(v) for k, v in cfg.items()}})


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
        raise NotAvailable(f"this CPU's best instruction set is {best}: "
                           + ("the dnnfusion column is the AVX2 code" if best == "avx2" else "it lacks AVX2"))
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
