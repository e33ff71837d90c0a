"""Cells of 05_opencl.ipynb (build_notebooks.py writes and runs it): the OpenCL target on this
machine's OpenCL device, and the committed results of the lent NVIDIA GPUs (H100, H200)."""

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
# CI: two models tests/test_opencl.py also builds with the default options (its PoCL build
# is then a cache hit), and MobileNetV2 for the one model shown below
MODELS = ["mobilenetv2", "tinybert"] if REDUCED else registry.list()
SHOWN = "mobilenetv2" if REDUCED else "resnet50"
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
Compiled from the reduced ResNet-50 (MobileNetV2 in CI's reduced run): every output is
checked against PyTorch eager; the
kernels' times come from OpenCL profiling events. Below, the start of one tiled convolution
kernel as generated (sizes are literals: shapes are static)."""),
    ("code", """path, inputs, ref_torch, _ = compiled_check.references(SHOWN, True)
m = df.compile(path, inputs, target="opencl")
print(m)
print("kernels", m.stats["kernels"], "launches", len(m.generated.launches), "passes", m.stats["passes"])
print("max relative error vs PyTorch:", compiled_check._rel_err(m.run(*inputs), ref_torch))
src = m.source()
start = src.find("__local float dn_As")
kernel_start = src.rfind("__kernel", 0, start if start >= 0 else len(src))
print("\\n".join(src[kernel_start:].splitlines()[:24]))"""),
    ("code", """viz.plot_kernel_profile(m.profile(*inputs, repeat=5), n=12,
                        title=f"{SHOWN} (reduced) on {m.stats['device']}: the slowest kernels")"""),
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
    ("md", """## The GEMM tile, layer by layer, on an H200 (runs 7 to 9)
`benchmarks/opencl_tile_bench.py` compiles single layers at the zoo's sizes under each
configuration of the tile and times them by OpenCL events beside PyTorch's own layer (cuDNN or
cuBLAS, strict fp32 and TF32). Run 7 compared the tile's features (`DNNF_OPENCL_TILE_FEATURES`:
`float4` reads from local memory, the next K step prefetched into registers, loads along the
contiguous axis, tap-major convolutions) with run 6's plain tile (`none`); run 8 forced tile
sides and K splits; run 9 timed the choice made from them. GFLOP/s below.
"""),
    ("code", """def bench(run):
    with open(ROOT / "benchmarks" / "results" / f"20261127-opencl-h200-{run}-tile-bench.json") as f:
        return {r["layer"]: r for r in json.load(f)["rows"]}


def gflops(r, ms):
    return r["gflop"] / ms * 1e3 if ms else None


def best_forced(r):  # run 8's fastest configuration of the layer
    cfg = max((c for c in r["ms"] if r["ms"][c]), key=lambda c: gflops(r, r["ms"][c]))
    return f"{gflops(r, r['ms'][cfg]):.0f} ({cfg})"


r7, r8, r9 = bench("run7"), bench("run8"), bench("run9")
f = lambda v: "-" if v is None else f"{v:.0f}"
display(md_table(["layer", "GFLOP", "run 6's tile", "run 7: features", "run 8: fastest forced", "run 9: chosen",
                  "cuDNN/cuBLAS fp32", "TF32"],
                 [[name, f"{r['gflop']:.2f}",
                   f(gflops(r, r7[name]["ms"]["none"])) if name in r7 else "-",
                   f(gflops(r, r7[name]["ms"]["all"])) if name in r7 else "-",
                   best_forced(r8[name]) if name in r8 else "-",
                   f(gflops(r, r["ms"]["all"])), f(gflops(r, r["torch_fp32_ms"])), f(gflops(r, r["torch_tf32_ms"]))]
                  for name, r in r9.items()]))
"""),
    ("code", """def full(run):
    with open(ROOT / "benchmarks" / "results" / f"20261127-opencl-{run}-full.json") as f:
        return {r["model"]: r for r in json.load(f)["rows"]}

h100, h200_7, h200_9 = full("h100-run6"), full("h200-run7"), full("h200-run9")
ms = lambda rs, m, k="kernel_ms": f"{rs[m][k]:.2f}" if m in rs and k in rs[m] else "-"
display(md_table(["model (full size)", "H100 run 6 ms", "H200 run 7 ms", "H200 run 9 ms", "eager TF32 ms (run 9)",
                  "eager strict fp32 ms (run 9)", "rel. error (run 9)"],
                 [[m, ms(h100, m), ms(h200_7, m), ms(h200_9, m), ms(h200_9, m, "torch_ms"),
                   ms(h200_9, m, "torch_fp32_ms"), f"{r['rel_err']:.1e}"] for m, r in h200_9.items()]))
"""),
    ("md", """The kernels' event times. The `float4` reads were the largest single gain (the inner loop had
one local load per four FMAs); loading a Linear layer's weights along K halved BERT's FFN;
U-Net went from 6.2 ms to 4.6 with its up-convolutions as tiled GEMMs and the tile chosen per
layer, about cuDNN's strict-fp32 time; VGG-16 matches it. The TF32 tensor cores PyTorch uses
for convolutions by default stay 2-4x ahead of any fp32 kernel. Run 9's split rule left
VGG's 256-channel layer at half speed (50 groups on 132 compute units, one wave) and ResNet-50
slower than run 7; `benchmarks/README.md` has how the choice now fills the waves and keeps
ResNet-50 on run 7's tiles: run 10 timed it, below.
"""),
    ("md", """## Runs 10 to 12 (H200): the choice timed, small images, TopK
**Run 10** timed the tile choice made after run 9 (128-wide tiles only where a K split into
pieces of 12 steps or more fills the compute units' waves, the prefetch written once) over the
layers above, all 18 reduced models and 7 full-size ones. **Run 11** added a work-group per
output element for GEMMs and convolutions too small to tile whose outputs are too few to keep
the GPU busy one work-item each (under 256 per compute unit, `DNNF_OPENCL_BUSY_ITEMS`) and whose
K is 128 or more: the reduced ResNet-50 (64 x 64 images: 2 x 2 and 4 x 4 pixels in its last
stages, K up to 4608) had run each output's K on one work-item, 3.0 ms against 1.2 for the
full-size model. **Run 12** added TopK by selection (a work-group per row finds the k-th best
key by radix selection, then only the elements at or above it are ranked; each element had
compared itself with its whole row: Faster R-CNN's TopK over 160K anchors took 36 ms), and ran
reduced models with the work-group rule switched off (`DNNF_OPENCL_BUSY_ITEMS=0`) beside."""),
    ("code", """r10 = bench("run10")
display(md_table(["layer", "GFLOP", "run 9: chosen then", "run 10: chosen now", "cuDNN/cuBLAS fp32", "TF32"],
                 [[name, f"{r['gflop']:.2f}", f(gflops(r, r9[name]["ms"]["all"])) if name in r9 else "-",
                   f(gflops(r, r["ms"]["all"])), f(gflops(r, r["torch_fp32_ms"])), f(gflops(r, r["torch_tf32_ms"]))]
                  for name, r in r10.items()]))"""),
    ("code", """runs = {n: full(f"h200-{n}") for n in ("run10", "run11", "run12", "run13", "run14")}
latest = {}
for n in ("run10", "run11", "run12", "run13", "run14"):  # each model from the last run that timed it
    latest.update({m: (n, r) for m, r in runs[n].items()})
display(md_table(["model (full size)", "run 9: kernels ms", "latest: kernels ms", "latest: whole call ms", "run",
                  "launches", "eager TF32 ms", "eager strict fp32 ms", "rel. error"],
                 [[m, ms(h200_9, m), f"{r['kernel_ms']:.2f}", f"{r['opencl_ms']:.2f}", n, r["launches"],
                   f"{r['torch_ms']:.2f}", f"{r['torch_fp32_ms']:.2f}", f"{r['rel_err']:.1e}"]
                  for m, (n, r) in latest.items()]))
for col, what in (("torch_fp32_ms", "eager in strict fp32"), ("torch_ms", "eager as it comes (TF32)")):
    faster = [m for m, (_, r) in latest.items() if r["opencl_ms"] < r[col]]  # whole calls against whole calls
    print(f"faster than {what} on {len(faster)} of {len(latest)}; slower on:",
          ", ".join(m for m in latest if m not in faster) or "none")"""),
    ("code", """def reduced(name):
    with open(ROOT / "benchmarks" / "results" / f"20261127-opencl-h200-{name}.json") as f:
        return {r["model"]: r for r in json.load(f)["rows"]}


red = {n: reduced(n) for n in ("run10-reduced", "run11-reduced", "run12-reduced", "run12-reduced-alt")}
display(md_table(["model (reduced)", "run 10 ms", "run 11 ms", "run 12 ms", "run 12, BUSY_ITEMS=0 ms",
                  "rel. error (run 11)"],
                 [[m, ms(red["run10-reduced"], m), ms(red["run11-reduced"], m), ms(red["run12-reduced"], m),
                   ms(red["run12-reduced-alt"], m), f"{r['rel_err']:.1e}"] for m, r in red["run11-reduced"].items()]))
print(sum(r["rel_err"] < 1e-3 for r in red["run11-reduced"].values()), "of 18 reduced models within 1e-3 of PyTorch",
      "(run 11)")"""),
    ("md", """Kernel times are OpenCL events; a whole call adds the host's launches and copies, and is
what eager's times (CUDA-synchronised wall time) compare with. With the choice of run 9's
notes the tiles reached cuDNN's strict-fp32 speed or passed it on every measured layer but
U-Net's 128 -> 64 one (run 10: VGG's 256-channel layer 12.5 -> 28.7 TFLOP/s, U-Net's
1024-channel one 22 -> 30), and every full-size model got faster than in run 9: U-Net 4.55 ->
3.55 ms of kernels, VGG-16 2.13 -> 1.44, both now ahead of eager in strict fp32 though not of
eager as it comes (TF32 tensor cores, which OpenCL on NVIDIA cannot reach). Faster R-CNN's
59.6 ms (36 in one TopK) became 12.1. The work-group rule took the reduced ResNet-50 from 3.0
to 1.1 ms and EfficientNet-B0 from 1.3 to 0.85; the transformers moved within the runs' noise
with it on or off (0.17-0.24 ms)."""),
    ("md", """## Run 13 (H200): the Q/K/V projections as one GEMM
Six zoo transformers project each layer's input three times, once each for queries, keys and
values. The rewrite `combine_sibling_matmuls` makes the three one GEMM over the weights side by
side (its bias Add moved onto it), whose parts the attention GEMMs read in place, and
`fold_matmul_scale` puts the attention scale into the query weights. Run 13 timed the full-size
models with both passes and, in the same run, with them left out (`DNNF_DISABLE_PASSES`)."""),
    ("code", """# the same run's pass with DNNF_DISABLE_PASSES=combine_sibling_matmuls,fold_matmul_scale
with open(ROOT / "benchmarks" / "results" / "20261127-opencl-h200-run13-full-alt.json") as f:
    alt = {r["model"]: r for r in json.load(f)["rows"]}
r13 = runs["run13"]
display(md_table(["model (full size)", "combined: kernels ms", "launches", "apart: kernels ms", "launches",
                  "eager strict fp32 ms", "rel. error"],
                 [[m, f"{r['kernel_ms']:.2f}", r["launches"], ms(alt, m), alt[m]["launches"] if m in alt else "-",
                   f"{r['torch_fp32_ms']:.2f}", f"{r['rel_err']:.1e}"] for m, r in r13.items()]))"""),
    ("md", """One GEMM instead of three, and the bias and the transposes no longer separate launches:
BERT-base 209 -> 161 launches and 2.36 -> 2.03 ms of kernels, DistilBERT 1.29 -> 0.99, ViT-B/16
3.44 -> 3.05, TinyBERT 0.66 -> 0.52, ALBERT 2.35 -> 2.02 (MobileBERT's second pass did not fit
the run's time limit). **Run 14** did the same for GPT-2, whose one projection is split in three:
with the Split as a Slice per part (`split_to_slices`), each attention GEMM reads its part in
place, and the scale goes into the query's columns of the weights."""),
    ("code", """with open(ROOT / "benchmarks" / "results" / "20261127-opencl-h200-run14-full-alt.json") as f:
    alt14 = {r["model"]: r for r in json.load(f)["rows"]}
r = runs["run14"]["gpt2"]
print(f"GPT-2: {r['kernel_ms']:.2f} ms of kernels in {r['launches']} launches; with split_to_slices and "
      f"fold_matmul_scale left out {alt14['gpt2']['kernel_ms']:.2f} ms in {alt14['gpt2']['launches']}")"""),
]
