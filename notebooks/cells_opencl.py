"""Cells of 05_opencl.ipynb (build_notebooks.py writes and runs it): the OpenCL target on this
machine's OpenCL device, and the committed results of a lent NVIDIA H100."""

OPENCL = [
    ("md", """# The OpenCL target

`dnnfusion.compile(model, target="opencl")` generates one OpenCL C program for the model from
the same fused plan and kernel plan as the CPU target (paper §4.4 runs on the mobile GPU
through OpenCL): a kernel per stage of each fused block, epilogues (and index-composed
prologues) evaluated before the store, GEMMs and convolutions (as implicit GEMMs) through
64 x 64 local-memory tiles, Softmax and LayerNorm rows as work-group reductions. It returns
the same `CompiledModel` API: `run`, `profile` (from OpenCL events), `stats`, `source()`.

This notebook runs on the machine's default OpenCL device (in CI, PoCL's CPU device;
`DNNF_OPENCL_DEVICE` picks another), then shows the results of the zoo on an NVIDIA H100 that a
session was lent, against PyTorch eager on the same GPU. `DNNF_NOTEBOOK_REDUCED=1` runs
fewer models (what CI does)."""),
    ("code", """import json, os, sys, warnings
from pathlib import Path
from IPython.display import Markdown, display
import dnnfusion as df
from dnnfusion import viz
from dnnfusion.zoo import compiled_check, registry

REDUCED = os.environ.get("DNNF_NOTEBOOK_REDUCED") == "1"   # parameter: fewer models (CI)
ROOT = Path.cwd().parent
sys.path.insert(0, str(ROOT))
from benchmarks import opencl_table
MODELS = ["vgg16", "bert_base", "mobilenetv2"] if REDUCED else registry.list()
warnings.filterwarnings("ignore", message="IProgress not found")


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return Markdown("\\n".join(lines))"""),
    ("md", """## The devices
`df.opencl_devices()` lists what the installed OpenCL drivers offer (also
`python -m dnnfusion info --devices`); the selected one is the default: the first GPU, else the
first device. The local-memory size and work-group limit decide whether a GEMM is tiled."""),
    ("code", """devices = df.opencl_devices()
display(md_table(["", "index", "name", "type", "platform", "compute units", "local KiB", "work-group"],
                 [["*" if d["selected"] else "", d["index"], d["name"], d["type"], d["platform"],
                   d["compute_units"], d["local_mem_bytes"] >> 10, d["max_work_group"]] for d in devices]))"""),
    ("md", """## One model through the OpenCL target
Compiled from the reduced ResNet-50: every output is checked against PyTorch eager; the
kernels' times come from OpenCL profiling events. Below, the start of one tiled convolution
kernel as generated (sizes are literals: shapes are static)."""),
    ("code", """path, inputs, ref_torch, _ = compiled_check.references("resnet50", True)
m = df.compile(path, inputs, target="opencl")
print(m)
print("kernels", m.stats["kernels"], "launches", len(m.generated.launches), "passes", m.stats["passes"])
print("max relative error vs PyTorch:", compiled_check._rel_err(m.run(*inputs), ref_torch))
src = m.source()
start = src.find("__local float dn_As")
kernel_start = src.rfind("__kernel", 0, start if start >= 0 else len(src))
print("\\n".join(src[kernel_start:].splitlines()[:24]))"""),
    ("code", """viz.plot_kernel_profile(m.profile(*inputs, repeat=5), n=12,
                        title=f"ResNet-50 (reduced) on {m.stats['device']}: the slowest kernels")"""),
    ("md", """## The zoo on this device, beside the CPU target
Reduced models (the OpenCL device here is usually PoCL on the same CPU, which runs OpenCL C
far slower than the CPU target's SIMD C++; the point of this table is that every model runs
and matches PyTorch). Median of 5 runs after a warm-up; `opencl ms` is a whole call (inputs
written to the device, every kernel, outputs read back)."""),
    ("code", """rows = [opencl_table.measure(name, repeat=5) for name in MODELS]
dev = next(d for d in devices if d["selected"])
display(Markdown(f"OpenCL device: **{dev['name']}** ({dev['platform']}); CPU target ISA: "
                 f"{df._core.cpu_features()['isa']}, {os.cpu_count()} cores"))
fmt = lambda r, k, f: format(r[k], f) if k in r else "-"
display(md_table(["model", "CPU passes", "OpenCL launches", "CPU ms", "OpenCL ms", "kernels ms", "rel. error", "error"],
                 [[r["model"], fmt(r, "cpu_passes", "d"), fmt(r, "launches", "d"), fmt(r, "cpu_ms", ".2f"),
                   fmt(r, "opencl_ms", ".2f"), fmt(r, "kernel_ms", ".2f"), fmt(r, "rel_err", ".1e"),
                   r.get("error", "")] for r in rows]))
bad = [r["model"] for r in rows if "error" in r or r["rel_err"] > compiled_check.REL_TOL]
print("models off PyTorch by more than 1e-3 or failing:", bad or "none")"""),
    ("code", """viz.plot_latencies({r["model"]: {"dnnfusion cpu": r.get("cpu_ms"), "dnnfusion opencl": r.get("opencl_ms")}
                    for r in rows}, title=f"Reduced models: CPU target vs OpenCL on {dev['name']}")"""),
    ("md", """## On an NVIDIA H100 (a lent GPU machine)
`benchmarks/opencl_gpu_check.sh` ran the zoo through `target="opencl"` on an H100 with NVIDIA's
OpenCL driver, beside PyTorch eager (CUDA, cuDNN/cuBLAS) on the same GPU, median of 10 runs
(5 for reduced models). These results were measured **before** the local-memory GEMM tiles
and work-group reductions, with one work-item per output element and per row: the session's
second device run, with the tiles, did not come back (the machine stopped answering)."""),
    ("code", """gpu = {}
for part in ("reduced", "full"):
    with open(ROOT / "benchmarks" / "results" / f"20261125-opencl-h100-{part}.json") as f:
        gpu[part] = json.load(f)
print(gpu["full"]["header"])
for part in ("full", "reduced"):
    rs = gpu[part]["rows"]
    ok = sum(1 for r in rs if "error" not in r and r["rel_err"] <= compiled_check.REL_TOL)
    print(f"{part} models: {ok} of {len(rs)} within 1e-3 of PyTorch (CPU eager)")
display(md_table(["model (full size)", "launches", "OpenCL ms", "kernels ms", "PyTorch eager CUDA ms", "rel. error"],
                 [[r["model"], r["launches"], f"{r['opencl_ms']:.2f}", f"{r['kernel_ms']:.2f}",
                   f"{r['torch_ms']:.2f}", f"{r['rel_err']:.1e}"] for r in gpu["full"]["rows"]]))"""),
    ("code", """viz.plot_latencies({r["model"]: {"dnnfusion opencl": r["opencl_ms"], "eager": r["torch_ms"]}
                    for r in gpu["full"]["rows"]},
                   title="Full-size models on an NVIDIA H100: dnnfusion (OpenCL, untiled) vs PyTorch eager (CUDA)")"""),
    ("code", """for part in ("full", "reduced"):
    rs = gpu[part]["rows"]
    faster = [r["model"] for r in rs if r["opencl_ms"] < r["torch_ms"]]
    slower = [r["model"] for r in rs if r["opencl_ms"] >= r["torch_ms"]]
    print(f"{part}: faster than PyTorch eager on the H100: {', '.join(faster) or 'none'}")
    print(f"{part}: slower: {', '.join(slower) or 'none'}")"""),
    ("md", """The faster models are many small operators: eager launches one CUDA kernel per operator,
the fused plan far fewer. The slower ones spend their time in large GEMMs and convolutions,
which the untiled kernels of that run computed one output element per work-item against
cuBLAS/cuDNN (what the tiles address), and, for the reduced R-CNNs, in a TopK that one
work-item per row ranked quadratically (1.7 s; each element is now ranked by its own
work-item)."""),
]
