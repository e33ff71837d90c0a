"""What the results were measured on: CPU, ISA flags, memory, versions, environment."""
from __future__ import annotations

import importlib.metadata as md
import os
import platform
import subprocess
import sys

ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512cd", "avx512bw",
             "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx512vbmi", "avx_vnni",
             "amx_tile", "amx_bf16", "amx_int8")

ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
            "MKL_ENABLE_INSTRUCTIONS", "MKL_DEBUG_CPU_TYPE", "KMP_AFFINITY", "KMP_BLOCKTIME",
            "OMP_PROC_BIND", "OMP_PLACES", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "TVM_NUM_THREADS",
            "DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "DNNL_VERBOSE", "ATEN_CPU_CAPABILITY",
            "TORCHINDUCTOR_FREEZING", "TORCHINDUCTOR_CACHE_DIR", "LD_PRELOAD", "DNNF_CACHE_DIR", "DNNF_PRELUDE_CACHE_DIR",
            "DNNF_PROFILE", "DNNF_PROFILE_SECONDS", "DNNF_PROFILE_DB",
            "DNNF_BENCH_VENV", "PYTHONHASHSEED")

# distribution name -> label, for the versions table
DISTS = ("torch", "numpy", "onnx", "onnxruntime", "onnxscript", "transformers", "apache-tvm",
         "apache-tvm-ffi", "openvino", "MNN", "ai-edge-litert", "litert-torch", "executorch",
         "torchao")


def cpu_info() -> dict:
    info: dict = {"model_name": None, "vendor": None, "flags": [], "logical_cpus": os.cpu_count()}
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        text = ""
    for line in text.splitlines():
        k, _, v = line.partition(":")
        k, v = k.strip(), v.strip()
        if k == "model name" and info["model_name"] is None:
            info["model_name"] = v
        elif k == "vendor_id" and info["vendor"] is None:
            info["vendor"] = v
        elif k in ("cpu family", "model", "stepping") and k.replace(" ", "_") not in info:
            info[k.replace(" ", "_")] = v
        elif k == "flags" and not info["flags"]:
            flags = set(v.split())
            info["flags"] = [f for f in ISA_FLAGS if f in flags]
            info["hypervisor"] = "hypervisor" in flags
    try:
        info["affinity_cpus"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                info["mem_total_gb"] = round(int(line.split()[1]) / 1024 ** 2, 1)
    except OSError:
        pass
    return info


def versions(venv_python: str | None = None) -> dict:
    out: dict = {"python": platform.python_version()}
    for d in DISTS:
        try:
            out[d] = md.version(d)
        except md.PackageNotFoundError:
            pass
    try:
        import dnnfusion  # noqa: F401 - version of the working tree

        out["dnnfusion"] = getattr(dnnfusion, "__version__", "?")
        out["dnnfusion.compile"] = hasattr(dnnfusion, "compile")
    except Exception as e:  # noqa: BLE001
        out["dnnfusion"] = f"import failed: {e}"[:300]
    if venv_python and venv_python != sys.executable:
        code = ("import importlib.metadata as m, json\nd={}\n"
                f"for n in {list(DISTS)!r}:\n"
                "    try: d[n]=m.version(n)\n    except Exception: pass\nprint(json.dumps(d))")
        try:
            r = subprocess.run([venv_python, "-c", code], capture_output=True, text=True, timeout=60)
            import json

            vv = json.loads(r.stdout.strip().splitlines()[-1])
            out["bench_venv"] = {k: v for k, v in vv.items() if out.get(k) != v}
        except Exception as e:  # noqa: BLE001
            out["bench_venv"] = f"unreadable: {e}"
    return out


def git_rev(repo: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", repo, "describe", "--always", "--dirty"], capture_output=True,
                           text=True, timeout=10)
        return r.stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def tuning() -> dict:
    """What dnnfusion's generated kernels derive from this machine (register tile, GEMM cache
    blocking, threads; dnnfusion/tuning.py), or why it is unknown (no core, no compiler)."""
    try:
        from dnnfusion import tuning as t

        return t.machine_tuning()
    except Exception as e:  # noqa: BLE001 - the harness runs with a broken core too
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def describe(repo: str, venv_python: str | None) -> dict:
    return {
        "cpu": cpu_info(),
        "dnnfusion_tuning": tuning(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "versions": versions(venv_python),
        "env": {k: os.environ.get(k) for k in ENV_VARS if os.environ.get(k) is not None},
        "git": git_rev(repo),
        "loadavg_start": loadavg(),
    }
