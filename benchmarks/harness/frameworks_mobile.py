"""Harness back-ends for the mobile runtimes: MNN (from an ONNX file) and the XNNPACK-delegated
LiteRT and ExecuTorch (from the PyTorch module; they run in the bench venv,
``benchmarks/setup_venv.sh``). See ``cell_api.py`` for the contract."""
from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import numpy as np

from . import counting
from .cell_api import Context, Prepared, flatten_torch, need_module


# ---------------------------------------------------------------- MNN
def prepare_mnn(ctx: Context) -> Prepared:
    MNN = need_module("MNN", "MNN")
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
    litert_torch = need_module("litert_torch", "litert-torch (see benchmarks/setup_venv.sh)")
    interp_mod = need_module("ai_edge_litert.interpreter", "ai-edge-litert")
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
    need_module("executorch", "executorch (see benchmarks/setup_venv.sh)")
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
