"""Cells of 05_opencl.ipynb (build_notebooks.py writes and runs it): the OpenCL target on this
machine's OpenCL device, and the committed results of a lent NVIDIA H100."""

OPENCL = [
    ("md", """# The OpenCL target

`dnnfusion.compile(model, target="opencl")` generates one OpenCL C program for the model from
the same fused plan and kernel plan as the CPU target (paper §4.4 runs on the mobile GPU
through OpenCL): a kernel per stage of each fused block, epilogues (and index-composed
prologues) evaluated before the store, GEMMs and convolutions (as implicit GEMMs) through
64 x 64 local-memory tiles (32 x 32 for GEMMs too small to give every compute unit a
64-wide tile), Softmax and LayerNorm rows, long reductions and global pools as work-group
reductions. It returns
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
OpenCL driver, beside PyTorch eager (CUDA, cuDNN/cuBLAS, TF32 allowed for convolutions) on the
same GPU, median of 10 runs (5 for reduced models), in two sessions' runs on 2026-11-26:
**run 1** with the 64 x 64 local-memory tiles as they were then, the same models untiled
(`DNNF_OPENCL_TILING=0`) and all 18 reduced models; **run 2** after two changes: 32 x 32
tiles where 64-wide ones would give the GPU fewer work-groups than its 132 compute units, and
the implicit-GEMM convolution decomposing each work-item's pixel once, in 32-bit arithmetic.
Each run timed eager itself (its numbers moved between the two machines by up to 25%), so
compare a run's columns with each other. Run 2's time limit (200 s) ended before MobileBERT,
MobileNetV2 and EfficientNet-B0."""),
    ("code", """def gpu_rows(name):
    with open(ROOT / "benchmarks" / "results" / f"20261126-opencl-h100-{name}.json") as f:
        return {r["model"]: r for r in json.load(f)["rows"]}

reduced, run1, untiled, run2, tile64 = (gpu_rows(n) for n in ("reduced", "full", "full-untiled", "run2-full",
                                                               "run2-full-tile64"))
for part, rs in (("reduced", reduced), ("full, run 1", run1), ("full, run 2", run2)):
    ok = sum(1 for r in rs.values() if "error" not in r and r["rel_err"] <= compiled_check.REL_TOL)
    print(f"{part}: {ok} of {len(rs)} models within 1e-3 of PyTorch (CPU eager)")
ms = lambda rs, m, k="opencl_ms": f"{rs[m][k]:.2f}" if m in rs and k in rs[m] else "-"
display(md_table(["model (full size)", "launches", "run 1: untiled ms", "run 1: tiled ms", "run 1: eager ms",
                  "run 2: dnnfusion ms", "run 2: 64-wide tiles forced ms", "run 2: eager ms", "rel. error"],
                 [[m, r["launches"], ms(untiled, m), ms(run1, m), ms(run1, m, "torch_ms"), ms(run2, m), ms(tile64, m),
                   ms(run2, m, "torch_ms"), f"{r['rel_err']:.1e}"] for m, r in run1.items()]))"""),
    ("code", """viz.plot_latencies({m: {"dnnfusion opencl": r["opencl_ms"], "eager": r["torch_ms"]} for m, r in run2.items()},
                   title="Full-size models on an NVIDIA H100 (run 2): dnnfusion (OpenCL) vs PyTorch eager (CUDA)")"""),
    ("code", """faster = [m for m, r in run2.items() if r["opencl_ms"] < r["torch_ms"]]
slower = [m for m, r in run2.items() if r["opencl_ms"] >= r["torch_ms"]]
print("run 2, full size: faster than PyTorch eager on the H100:", ", ".join(faster) or "none")
print("run 2, full size: slower:", ", ".join(slower) or "none")
print("reduced (run 1): faster:", ", ".join(m for m, r in reduced.items() if r["opencl_ms"] < r["torch_ms"]) or "none")"""),
    ("md", """What the rows say: eager launches one CUDA kernel per operator and the fused plan far
fewer, so the transformers (at 128 tokens) and the MobileNet-like models, many small
operators, run faster through the fused OpenCL plan than eager, and in run 2 so does ResNet-50
(the convolution's index arithmetic had cost it a third); most of that for the
transformers came from the 32-wide tiles (the forced 64-wide column: 24 work-groups for a
128 x 768 GEMM on 132 SMs). The plain convolution networks (VGG-16, U-Net, YOLOv4) are still
slower than cuDNN by 1.2x to 9x: a 64 x 64 tile with 4 x 4 outputs per item, scalar local
loads and no double buffering is far from cuDNN's kernels (and TF32 tensor cores)."""),
]
