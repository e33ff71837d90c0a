"""The roofline of the machine the harness runs on, and where each model's latency sits under it.

Measured in the same run as the latencies (a VM's peak and bandwidth are not the spec sheet's):
* compute roof: GFLOP/s of independent FMA chains in registers, one per thread (the probe of
  `benchmarks/gemm/gemm_bench.cc`, built for the instruction set dnnfusion compiles for here);
* memory slope: GB/s of STREAM's triad over three 256 MiB arrays, on the same thread count.

Per model (from the reference cell): FLOPs of the ONNX graph as imported (dnnfusion's count:
2 per multiply-add of Conv/Gemm/MatMul, one per element of elementwise ops, before any
rewriting, so the same for every framework), and the compulsory bytes of one inference
(every weight read once, the inputs read, the outputs written).

The bound is max(FLOPs / peak, bytes / bandwidth): no implementation can beat it on this machine
with this thread count. A framework's "% of bound" is bound_ms / its median ms.
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile

BENCH = pathlib.Path(__file__).resolve().parents[1]


def measure(threads: list[int], *, peak_s: float = 1.0, mib: int = 256, reps: int = 5,
            isa: str | None = None) -> dict:
    """{"isa", "per_threads": {t: {"peak_gflops", "bandwidth_gbs"}}} or {"error": why}."""
    try:
        sys.path.insert(0, str(BENCH))
        import gemm_bench

        isa, flags = gemm_bench.isa_flags(isa)
        with tempfile.TemporaryDirectory(prefix="dnnf-roof-") as tmp:
            exe = str(gemm_bench.compile_driver(pathlib.Path(tmp), flags))
            per = {}
            for t in threads:
                def probe(*args: str) -> dict:
                    out = subprocess.run([exe, *args], capture_output=True, text=True, check=True,
                                         timeout=120).stdout
                    return json.loads(out.splitlines()[-1])
                per[str(t)] = {**probe("peak", str(t), str(peak_s)),
                               **probe("bandwidth", str(t), str(mib), str(reps))}
        return {"isa": isa, "per_threads": per, "triad_mib": mib}
    except Exception as e:  # noqa: BLE001 - the latencies stand without a roofline
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def model_work(onnx_path: str, inputs: list, outputs: list) -> dict:
    """FLOPs (dnnfusion's count of the imported graph) and compulsory bytes of one inference."""
    import numpy as np
    import onnx
    from onnx import numpy_helper  # noqa: F401 - dtype table below

    import dnnfusion as df

    ecg = df.load(onnx_path)
    flops = int(df.rewrite.flops(ecg))
    proto = onnx.load(onnx_path, load_external_data=False)
    weight = 0
    for init in proto.graph.initializer:
        n = int(np.prod(init.dims)) if init.dims else 1
        weight += n * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(init.data_type)).itemsize
    io = sum(int(np.asarray(a).nbytes) for a in list(inputs) + list(outputs))
    return {"flops": flops, "weight_bytes": int(weight), "io_bytes": io,
            "compulsory_bytes": int(weight) + io}


def bound_ms(work: dict, roof: dict) -> float | None:
    """max(FLOPs / peak, bytes / bandwidth) in ms, or None without either."""
    if not work or not roof or not roof.get("peak_gflops") or not roof.get("bandwidth_gbs"):
        return None
    return max(work["flops"] / (roof["peak_gflops"] * 1e6),
               work["compulsory_bytes"] / (roof["bandwidth_gbs"] * 1e6))


def roof_for(result: dict, threads: int) -> dict | None:
    return ((result.get("meta") or {}).get("roofline") or {}).get("per_threads", {}).get(str(threads))
