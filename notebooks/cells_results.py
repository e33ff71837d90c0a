"""The cells of notebooks 02-04 (layer counts, speed, rewriting and planners); build_notebooks.py
turns them into .ipynb files and runs them."""

# Shared first cell: parameters. CI sets DNNF_NOTEBOOK_REDUCED=1 (reduced models, three of them);
# DNNF_NOTEBOOK_MEASURE=1 measures afresh on this machine instead of reading committed results.
PARAMETERS = """import os, sys, warnings
from pathlib import Path
from IPython.display import Markdown, display
import dnnfusion as df
from dnnfusion import viz
from dnnfusion.zoo import registry

REDUCED = os.environ.get("DNNF_NOTEBOOK_REDUCED") == "1"   # parameter: reduced models (CI)
MEASURE = os.environ.get("DNNF_NOTEBOOK_MEASURE") == "1"   # parameter: measure afresh here
MODELS = ["vgg16", "distilbert", "mobilenetv2"] if REDUCED else registry.list()
ROOT = Path.cwd().parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
FIGURES = Path("figures")
warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm, via transformers

def md_table(headers, rows):
    out = ["| " + " | ".join(map(str, headers)) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join("-" if v is None else str(v) for v in r) + " |" for r in rows]
    return Markdown("\\n".join(out))"""

LAYER_COUNTS = [
    ("md", """# Fused-layer counts: the paper's table for the zoo

DNNFusion's evaluation (§6.2) counts a model's **layers before fusion** and the **fused layers
after** each framework's fusion; fewer layers after means fewer passes over memory. This notebook
rebuilds that table for the 15 paper models and 3 references of `dnnfusion.zoo`:

* **ONNX ops**: operators of the exported ONNX model (before fusion);
* **ORT, torch.compile, TVM, OpenVINO**: kernels after fusion as each framework reports them
  (from the committed harness results; `benchmarks/README.md` defines each count);
* **dnnfusion** and the four baseline **planners** (`none`, `patterns`, `tvm`, `dp`): the
  passes over memory the generated CPU code makes per inference (loop nests plus anchor calls
  such as a GEMM), counted here from the kernel plan, the unit closest to a peer's kernel.

The paper publishes two unfused counts we can set beside ours (VGG-16: 51 layers, DistilBERT:
457) and claims that DNNFusion finds *up to 8.8x higher fusion opportunities* than the other
frameworks. Its other per-model figures are not reproduced here."""),
    ("code", PARAMETERS),
    ("code", """latest = viz.load_results(viz.latest_results(RESULTS_DIR))       # dnnfusion, eager, ORT, torch.compile
peers = viz.load_results(viz.latest_results(RESULTS_DIR, "tvm"))  # the last run with TVM and OpenVINO
print("ORT / torch.compile counts:", viz.latest_results(RESULTS_DIR).name, "-", viz.result_origin(latest))
print("TVM / OpenVINO counts:     ", viz.latest_results(RESULTS_DIR, "tvm").name, "-", viz.result_origin(peers))
harness = viz.kernel_counts(peers)
for m, row in viz.kernel_counts(latest).items():  # the newer run wins where both counted
    harness.setdefault(m, {}).update({k: v for k, v in row.items() if v is not None})"""),
    ("md", """## Our counts, per planner
Each model is loaded, rewritten (§4.2) and planned by every planner; the generated code's kernel
plan gives its passes over memory (no C++ compile needed)."""),
    ("code", """counts = {}
for m in MODELS:
    counts[m] = viz.model_counts(m, reduced=REDUCED)
print(f"{len(counts)} models counted ({'reduced' if REDUCED else 'full-size'}) with dnnfusion {df.__version__}")"""),
    ("code", """PEERS = [("ort", "ORT"), ("inductor", "torch.compile"), ("tvm", "TVM"), ("openvino", "OpenVINO")]
PLANNERS = ["none", "patterns", "tvm", "dp"]
paper = {m: registry.paper_layers(m) for m in MODELS}
rows = []
for m in MODELS:
    c, h = counts[m], harness.get(m, {})
    ours = c["planners"]["dnnfusion"]["passes"]
    rows.append([m, paper.get(m), c["operators"]] + [h.get(fw) for fw, _ in PEERS]
                + [ours] + [c["planners"][p]["passes"] for p in PLANNERS]
                + [f"{c['operators'] / ours:.2f}x"])
note = " (peers: full-size models; ours: reduced)" if REDUCED else ""
display(Markdown(f"**Layers before and after fusion**{note}. Peers: kernels; dnnfusion and planners: passes."))
display(md_table(["model", "paper (unfused)", "ONNX ops"] + [n for _, n in PEERS]
                 + ["dnnfusion"] + [f"planner {p}" for p in PLANNERS] + ["fusion rate"], rows))"""),
    ("md", """**Reading the table.** The paper's unfused counts are of its own model files; our ONNX
exports differ (for VGG-16 it counts layers that export drops, such as dropout, and our
DistilBERT export expresses LayerNorm and GELU as single ONNX ops), so compare the *ratios*. The
fusion rate is ONNX ops / dnnfusion passes. Below, the paper's "up to 8.8x" claim set beside
ours: for each peer, how many times more kernels it runs than dnnfusion's passes, at most and on
the geometric mean over the models both counted."""),
    ("code", """claims = []
for fw, name in PEERS:
    ratios = [harness[m][fw] / counts[m]["planners"]["dnnfusion"]["passes"]
              for m in MODELS if harness.get(m, {}).get(fw)]
    if ratios:
        worst = max(ratios)
        claims.append([name, len(ratios), f"{worst:.2f}x", f"{viz.geomean(ratios):.2f}x"])
display(md_table(["peer", "models", "peer kernels / dnnfusion passes, max", "geomean"], claims))
if REDUCED:
    print("(reduced run: the peers' counts are of full-size models, ours of reduced ones; not comparable)")
print("paper: DNNFusion finds up to 8.8x higher fusion opportunities than the frameworks it compares with")"""),
    ("code", """series = {m: {"onnx ops": counts[m]["operators"], **{fw: harness.get(m, {}).get(fw) for fw, _ in PEERS},
              "dnnfusion": counts[m]["planners"]["dnnfusion"]["passes"],
              **{f"planner {p}": counts[m]["planners"][p]["passes"] for p in PLANNERS}} for m in MODELS}
fig = viz.plot_layer_counts(series, title="Operators before and kernels/passes after fusion"
                            + (" (reduced)" if REDUCED else ""))
if not REDUCED:
    fig.save(FIGURES / "layer_counts.svg")
fig"""),
]

SPEED = [
    ("md", """# Speed across frameworks

Latency of the zoo's models under PyTorch eager, ONNX Runtime, torch.compile (Inductor), TVM
(untuned), OpenVINO and dnnfusion, at 1 and 2 threads, from the benchmark harness
(`benchmarks/run.py`; one process per cell, median of repeated runs, outputs checked against
PyTorch). The charts follow the paper's Figure 6: dnnfusion's speed-up over each framework,
log scale, geometric mean marked. Numbers from a shared 2-core VM are noisy; the tables give the
interquartile range."""),
    ("code", PARAMETERS),
    ("code", """import subprocess, tempfile
sys.path.insert(0, str(ROOT))
from benchmarks.harness import report

if MEASURE:  # a fresh run here: eager, ORT and dnnfusion only (the others take long to set up)
    out = Path(tempfile.mkdtemp())
    cmd = [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--models", ",".join(MODELS),
           "--frameworks", "eager,ort,dnnfusion", "--threads", "1,2", "--repeat", "5",
           "--budget", "5", "--quiet", "--out", str(out)] + (["--reduced"] if REDUCED else [])
    subprocess.run(cmd, check=True)
    runs = {t: viz.load_results(sorted(out.glob("2*.json"))[-1]) for t in (1, 2)}
else:
    runs = {2: viz.load_results(viz.latest_results(RESULTS_DIR, threads=2)),
            1: viz.load_results(viz.latest_results(RESULTS_DIR, "ort", threads=1))}
for t, r in runs.items():
    print(f"{t} thread{'s' if t > 1 else ''}: {r['frameworks']} - {viz.result_origin(r)}")"""),
    ("md", """## 2 threads: every table of the harness
Counts, latency (median [p25-p75] ms), compile time and peak RSS, and the error against PyTorch
eager, as `benchmarks/harness/report.py` prints them."""),
    ("code", """print(report.render(runs[2]))"""),
    ("code", """fig = viz.plot_speedups(runs[2], threads=2)
if not (REDUCED or MEASURE):
    fig.save(FIGURES / "speedups_2threads.svg")
fig"""),
    ("md", """## 1 thread
The latest run with 1-thread results for the peers; the chart shows dnnfusion's speed-up over
each when dnnfusion ran at 1 thread in that run, and the peers against PyTorch eager when not."""),
    ("code", """r1 = runs[1]
has_dnnf = any(c["framework"] == "dnnfusion" and c["status"] == "ok" and c["threads"] == 1 for c in r1["cells"])
print("dnnfusion measured at 1 thread:", has_dnnf)
rows = [[m] + [report.latency_cell(next((c for c in r1["cells"] if c["model"] == m and c["framework"] == fw
                                         and c["threads"] == 1), None)) for fw in r1["frameworks"]]
        for m in r1["models"]]
display(md_table(["model"] + r1["frameworks"], rows))
viz.plot_speedups(r1, threads=1, over="dnnfusion" if has_dnnf else "eager")"""),
    ("md", """## Compile time and peak memory
Seconds from model to runnable (dnnfusion: load, rewrite, plan, generate, C++ compile, or a
kernel-cache hit) and the cell process's peak resident memory, at 2 threads."""),
    ("code", """r = runs[2]
rows = []
for m in r["models"]:
    row = [m]
    for fw in r["frameworks"]:
        c = next((c for c in r["cells"] if c["model"] == m and c["framework"] == fw and c["threads"] == 2), None)
        row.append("-" if c is None or c.get("compile_s") is None
                   else f"{c['compile_s']:.2f} s / {c.get('peak_rss_mb') or 0:.0f} MB")
    rows.append(row)
display(md_table(["model"] + r["frameworks"], rows))"""),
    ("md", """## Roofline
Where each model sits under this machine's limits: the harness measures, in the same run, the
FMA peak (GFLOP/s of independent FMA chains) and the memory bandwidth (STREAM triad) per thread
count, and per model its FLOPs and compulsory bytes (weights read once, inputs and outputs).
No implementation can beat max(FLOPs / peak, bytes / bandwidth); "% of the bound" is how close
each framework gets. Runs from before the harness measured these carry no roofline."""),
    ("code", """for t, r in sorted(runs.items()):
    print(report.roofline_table(r, t) or f"{t} thread(s): {viz.result_origin(r)} measured no roofline")
roof = viz.roofline_inputs(runs[2], 2)
pts = [p for fw in ("ort", "openvino", "dnnfusion") for p in viz.roofline_points(runs[2], fw, 2)]
viz.plot_roofline(pts, *(roof or (None, None)), title="Roofline, 2 threads")"""),
]

REWRITING = [
    ("md", """# Rewriting and the planners

Per model: what the graph rewrites (§4.2: identities, constant folding, Conv/BN folding, input
scaling, CSE, the algebraic rules, layout chains, dead code) remove, in operators and FLOPs;
then how many passes over memory each planner leaves (and, for three models, how fast each
planner's code runs); then the yellow cells of the fusion table
(pairs whose fusion is decided by measurement) as the profiling database decides them on this
machine."""),
    ("code", PARAMETERS),
    ("code", """counts = {m: viz.model_counts(m, reduced=REDUCED) for m in MODELS}
rows = []
for m, c in counts.items():
    rep = c["rewrite"]
    removed = {}
    for p in rep.passes:  # a pass may run twice (CSE): sum what it removed
        removed[p.name] = removed.get(p.name, 0) + p.operators_before - p.operators_after
    did = ", ".join(f"{k} -{v}" for k, v in removed.items() if v) or "nothing"
    rows.append([m, rep.operators_before, rep.operators_after,
                 f"{rep.flops_before / 1e9:.3f}", f"{rep.flops_after / 1e9:.3f}",
                 f"{100 * (1 - rep.flops_after / rep.flops_before):.1f}%" if rep.flops_before else "-", did,
                 ", ".join(f"{k} x{v}" for k, v in sorted(rep.rules_fired.items())) or "-"])
display(Markdown(f"**Rewrites** ({'reduced' if REDUCED else 'full-size'} models; GFLOPs per inference)"))
display(md_table(["model", "ops before", "ops after", "GFLOPs before", "after", "FLOPs removed",
                  "operators removed by pass", "algebraic rules fired"], rows))"""),
    ("md", """## The planners
`none` (one kernel per operator), `patterns` (fixed patterns, like ORT's fusions), `tvm` (TVM's
OpPatternKind rules), `dp` (dynamic programming over the mapping-type table), `dnnfusion`
(§4.3). Passes over memory of the generated code, and megabytes of intermediates it writes."""),
    ("code", """rows = [[m] + [f"{c['planners'][p]['passes']} / {c['planners'][p]['intermediate_bytes_written'] / 1e6:.1f}"
               for p in df.plan.PLANNERS] for m, c in counts.items()]
display(md_table(["model"] + [f"{p} (passes / MB)" for p in df.plan.PLANNERS], rows))
viz.plot_layer_counts({m: {"onnx ops": c["operators"], **{p: c["planners"][p]["passes"] for p in df.plan.PLANNERS}}
                       for m, c in counts.items()}, title="Operators, and passes over memory per planner")"""),
    ("md", """### Latency per planner
Three models (one in CI) compiled with each planner (the same rewrites and layout; `profile="off"` so the
plans are the table's) and timed here in interleaved rounds after a warm-up, 2 threads.
The planners differ in passes more than in time where the time is in the anchors (GEMMs,
convolutions), which every planner runs the same way."""),
    ("code", """import time, statistics, numpy as np
LATENCY_MODELS = ["mobilenetv2"] if REDUCED else ["mobilenetv2", "tinybert", "vgg16"]  # CI: one
rows = []
for m in LATENCY_MODELS:
    # the zoo's ONNX export (the file tests/test_zoo_compiled.py compiles: in CI, cache hits)
    path = str(registry.export_onnx(m, reduced=REDUCED))
    x = [t.numpy() for t in registry.get(m, reduced=REDUCED).example_inputs]
    cms = {p: df.compile(path, x, planner=p, threads=2, profile="off")
           for p in df.plan.PLANNERS}
    for cm in cms.values():  # warm-up: page faults, the pool's threads spread over the cores
        t_end = time.perf_counter() + 0.5
        while time.perf_counter() < t_end:
            cm.run(*x)
    ts = {p: [] for p in cms}
    for r in range(15):  # interleaved rounds, the order rotating, so drift hits all alike
        order = list(cms)[r % len(cms):] + list(cms)[:r % len(cms)]
        for p in order:
            t = time.perf_counter()
            cms[p].run(*x)
            ts[p].append((time.perf_counter() - t) * 1e3)
    rows.append([m] + [f"{statistics.median(ts[p]):.2f} ({cms[p].stats['passes']})" for p in cms])
display(Markdown(f"**Latency in ms (passes)**, {'reduced' if REDUCED else 'full-size'} models, "
                 f"{df._core.cpu_features()['isa']}, 2 threads, median of 15 interleaved rounds; "
                 f"load average {os.getloadavg()[0]:.2f} (above ~1 on 2 cores: noisy)"))
display(md_table(["model"] + list(df.plan.PLANNERS), rows))"""),
    ("md", """## Yellow cells, decided on this machine
The planner settles pairs whose fusion only pays off sometimes from measurements: `compile`
(with `profile="auto"`, the default) times each such pair of the model it compiles as the code it
becomes, fused and apart, and caches the result per CPU and ISA beside the kernel cache; `python
-m dnnfusion profile` measures every pair of a list of models into a database file (one, measured
on another machine, ships with the package). A difference within the measured noise is a tie,
decided for fusion. Pairs nobody measured fall back to the analytic estimate. Below: where this
machine's measurements come from, then what they decided."""),
    ("code", """from collections import Counter
from dnnfusion import profiling
here = df.plan.profile_target("cpu")
isa = df._core.cpu_features()["isa"]
sources = {}
if profiling.default_db():
    sources["database shipped with the package"] = df.plan.read_profile_db(profiling.default_db())
if profiling.machine_db(isa).is_file():
    sources["compile-time measurements cached here"] = df.plan.read_profile_db(profiling.machine_db(isa))
if MEASURE:  # measure the yellow pairs of the first model here, into a scratch database
    import tempfile
    scratch = Path(tempfile.mkdtemp()) / "profile_db.jsonl"
    ecg, _ = df.rewrite.rewrite(df.load(str(registry.export_onnx(MODELS[0], reduced=REDUCED))))
    ecg, _ = df.rewrite.select_layout(ecg, "auto")
    profiling.profile([(MODELS[0], ecg)], scratch, threads=2, min_seconds=0.05, log=lambda s: None)
    sources[f"measured now ({MODELS[0]})"] = df.plan.read_profile_db(scratch)
print("this machine:", here, isa)
for name, entries in sources.items():
    targets = Counter(e["target"] for e in entries)
    print(f"{name}: {len(entries)} entries, {targets.get(here, 0)} for this machine")
mine = {}
for name, entries in sources.items():  # later sources replace earlier ones, as in the planner
    for e in entries:
        if e["target"] == here:
            mine[(e["producer"], e["consumer"], e["producer_type"], e["consumer_type"], e["bucket"])] = e
if not mine:
    print("no measurements for this machine yet: its yellow cells are settled by the estimate "
          "(compile a model with profile='auto', or run `python -m dnnfusion profile`)")"""),
    ("code", """groups = {}
for (p, c, pt, ct, _), e in sorted(mine.items()):
    g = groups.setdefault((p, c, pt, ct), {"fuse": 0, "tie": 0, "apart": 0, "ratios": []})
    d = e["fused_ms"] - e["unfused_ms"]
    g["fuse" if d < 0 else "tie" if d <= e.get("noise_ms", 0.0) else "apart"] += 1
    g["ratios"].append(e["fused_ms"] / e["unfused_ms"])
rows = [[f"{p} -> {c}", f"{pt} -> {ct}", g["fuse"], g["tie"], g["apart"],
         f"{min(g['ratios']):.2f} .. {max(g['ratios']):.2f}"] for (p, c, pt, ct), g in groups.items()]
display(md_table(["pair", "mapping types", "buckets: fused faster", "tie (fused)", "kept apart",
                  "fused / apart time"], rows))
open_pairs = {m: c["yellow_pairs"] for m, c in counts.items()}
print("yellow pairs per model:", open_pairs)"""),
]
