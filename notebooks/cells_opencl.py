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
    ("md", """What runs 1 and 2 said: eager launches one CUDA kernel per operator and the fused plan far
fewer, so the transformers (at 128 tokens) and the MobileNet-like models ran faster through the
fused OpenCL plan than eager; most of that for the transformers came from the 32-wide tiles
(the forced 64-wide column: 24 work-groups for a 128 x 768 GEMM on 132 SMs). The convolution
networks were slower than cuDNN by 1.2x to 9x.

**Runs 3 to 5** (a later session, 2026-11-26, one H100 each) added, one at a time: **run 3**
128 x 128 tiles (8 x 8 outputs per item) on GPUs for GEMMs of at least 128 rows and columns
that still give every compute unit a group, beside 64-wide tiles forced; **run 4** a
work-group per output element for GEMMs too small to tile whose B lies along K (the
classifiers' Linear layers: VGG-16's 1 x 4096 x 25088 GEMV took 3.8 ms of its 8.6 as one
work-item per output walking K alone), and **split K**: where even 32-wide tiles leave compute
units idle (ResNet-50's last 3 x 3 convolutions, 512 x 49 outputs: 32 groups for 132 SMs; a
BERT 128 x 768 GEMM: 96), groups share a tile's K, store partial tiles to scratch, and a second
kernel sums them in order and runs the epilogue; the same models with the split forced off
(`DNNF_OPENCL_SPLIT_K=1`) beside; **run 5** the split aiming at four groups per compute unit
instead of two. Eager is timed twice in runs 4 and 5: as PyTorch runs by default (TF32 allowed
in cuDNN's convolutions) and in strict fp32 (TF32 off), which is what the OpenCL kernels
compute. Eager's own times moved by up to 2x between runs (host-side launch overhead on a
shared machine), so compare within a row of one run."""),
    ("code", """run3, run3_64, run4, run4_nosplit, run5 = (gpu_rows(n) for n in (
    "run3-full", "run3-full-tile64", "run4-full", "run4-full-splitk1", "run5-full"))
display(md_table(["model (full size)", "run 2 ms", "run 3: 128 tiles ms", "run 3: 64 forced ms", "run 4 ms",
                  "run 4: split off ms", "run 5 ms", "launches (latest)", "eager ms (run 4)", "eager fp32 ms (run 4)"],
                 [[m, ms(run2, m), ms(run3, m), ms(run3_64, m), ms(run4, m), ms(run4_nosplit, m), ms(run5, m),
                   (run5.get(m) or r)["launches"], ms(run4, m, "torch_ms"), ms(run4, m, "torch_fp32_ms")]
                  for m, r in run4.items()]))
latest = {m: (run5.get(m) or r) for m, r in run4.items()}
print("latest run per model, within 1e-3 of PyTorch:",
      sum(r["rel_err"] <= compiled_check.REL_TOL for r in latest.values()), "of", len(latest))"""),
    ("code", """viz.plot_latencies({m: {"dnnfusion opencl": r["opencl_ms"], "eager (TF32 allowed)": r["torch_ms"],
                        "eager strict fp32": r["torch_fp32_ms"]} for m, r in latest.items()},
                   title="Full-size models on an NVIDIA H100 (runs 4-5): dnnfusion (OpenCL) vs PyTorch eager (CUDA)")"""),
    ("code", """for col in ("torch_fp32_ms", "torch_ms"):
    faster = [m for m, r in latest.items() if r["opencl_ms"] < r[col]]
    slower = [m for m, r in latest.items() if r["opencl_ms"] >= r[col]]
    print(f"latest run, full size, against eager {'strict fp32' if col == 'torch_fp32_ms' else 'as it comes'}: "
          f"faster on {', '.join(faster) or 'none'}; slower on {', '.join(slower) or 'none'}")"""),
    ("md", """What runs 3 to 5 say: run 4's two changes took VGG-16 from 8.6 ms to 3.3 (its GEMVs left its
slowest kernels); the split K took
ResNet-50 from 4.0 ms (split off, same run) to 1.7, and in run 5 to 1.5, BERT-base from 5.2 (run
3) to 3.2, YOLOv4 from 11.5 to 8.2; the 128-wide tiles alone gained little (VGG-16 9.0 -> 8.6,
U-Net 9.0 -> 8.7 against 64-wide tiles forced). Against eager in strict fp32 the fused plan is
faster on every model but VGG-16, YOLOv4 and U-Net; against eager as it comes (TF32 tensor
cores in cuDNN) U-Net and VGG-16 stay about 3x slower: the convolution tiles still load scalars
from local memory, without vector types or double buffering, and U-Net's 256 x 256 3 x 3
convolutions run at a fraction of the GPU's fp32 peak."""),
]
