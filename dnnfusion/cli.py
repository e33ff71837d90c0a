"""Command line: ``python -m dnnfusion <command> [model]``. ``info`` reports on a model (default:
the built-in network, ``dnnfusion.builtin.tiny_convnet``); ``run`` compiles one (default: a zoo
model), checks it against PyTorch and ONNX Runtime, and times it beside them; ``report`` does
the same and writes one self-contained HTML page about it; ``profile`` measures yellow fusion
pairs into a database; ``warmup`` builds the prelude caches a machine's first compile needs."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import statistics
import time
from typing import Any, Callable

import numpy as np

from dnnfusion.ecg import ECG, load, numpy_dtype
from dnnfusion.errors import Error

DEFAULT_RUN_MODEL = "mobilenetv2"


def _parse_shapes(items: list[str]) -> dict[str, list[int]] | None:
    if not items:
        return None
    shapes = {}
    for item in items:
        name, _, dims = item.partition("=")
        if not dims:
            raise SystemExit(f"--input-shape expects NAME=D0,D1,..., got {item!r}")
        shapes[name] = [int(d) for d in dims.split(",")]
    return shapes


def load_model(spec: str | None, input_shapes: dict | None = None) -> ECG:
    """A model spec: nothing (the built-in network), a path to an .onnx file, or the name
    of a zoo model (needs torch)."""
    if spec is None:
        from dnnfusion.builtin import tiny_convnet

        return tiny_convnet()
    if os.path.exists(spec) or spec.endswith(".onnx"):
        return load(spec, input_shapes=input_shapes)
    try:
        from dnnfusion import zoo
    except ImportError as e:  # the zoo needs torch
        raise SystemExit(f"{spec!r} is not a file, and the model zoo is unavailable: {e}")
    z = zoo.get(spec)
    return load(z.module, z.example_inputs)


def _print_devices() -> int:
    from dnnfusion import _core
    from dnnfusion.errors import Error

    try:
        devices = _core.opencl_devices()
    except Error as e:
        print(f"OpenCL devices: none ({e})")
        return 1
    print("OpenCL devices (DNNF_OPENCL_DEVICE or compile(..., device=) picks one; * = the default):")
    for d in devices:
        print(f"  {'*' if d['selected'] else ' '} {d['index']:<5} {d['name']} [{d['type']}, {d['platform']}; "
              f"{d['version']}; {d['compute_units']} compute units, {d['global_mem_bytes'] >> 20} MiB, "
              f"local {d['local_mem_bytes'] >> 10} KiB, work-group <= {d['max_work_group']}"
              f"{', fp64' if d['fp64'] else ''}]")
    return 0


def _caches() -> str:
    """The CPU's caches as the kernel sees them (sysfs), e.g. "L1d 48K, L2 1024K, L3 32768K"."""
    out = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    def read(d: str, f: str) -> str:
        with open(os.path.join(base, d, f)) as fh:
            return fh.read().strip()

    try:
        for d in sorted(x for x in os.listdir(base) if x.startswith("index")):
            kind = read(d, "type")
            if kind != "Instruction":
                out.append(f"L{read(d, 'level')}{'d' if kind == 'Data' else ''} {read(d, 'size')}")
    except OSError:
        return "unknown (no /sys/devices/system/cpu/cpu0/cache)"
    return ", ".join(out) or "unknown"


def _print_machine() -> int:
    """What compile() will use on this machine and what it has cached."""
    from dnnfusion import _core, profiling, tuning
    from dnnfusion.compiler import default_threads
    from dnnfusion.errors import Error
    from dnnfusion.plan import profile_target, read_profile_db

    feats = _core.cpu_features()
    isa = feats["isa"]
    print(f"cpu        {profile_target('cpu')}")
    print(f"caches     {_caches()}")
    print(f"isa        {isa} (the best this CPU has, $DNNF_ISA={os.environ.get('DNNF_ISA', '')!r} lowers it); "
          f"flags {' '.join(feats['flags'])}")
    print(f"threads    {default_threads()} ($DNNF_NUM_THREADS={os.environ.get('DNNF_NUM_THREADS', '')!r})")
    try:
        cxx = _core.find_compiler()
        print(f"compiler   {' '.join(cxx['argv'])} ({cxx['version'].splitlines()[0] if cxx['version'] else '?'})")
    except Error as e:
        cxx = None
        print(f"compiler   none: {e}")
    try:
        kdir = _core.kernel_cache_dir()
        objs = [f for f in os.listdir(kdir) if f.endswith(".so")]
        size = sum(os.path.getsize(os.path.join(kdir, f)) for f in objs)
        pdir = _core.prelude_cache_dir()
        pch = [f for f in os.listdir(pdir) if f.startswith("pch-")]
        pch_mb = sum(os.path.getsize(os.path.join(pdir, d, f)) for d in pch for f in os.listdir(os.path.join(pdir, d)))
        print(f"kernels    {kdir}: {len(objs)} compiled modules, {size / 1e6:.1f} MB; "
              f"{len(pch)} precompiled headers, {pch_mb / 1e6:.1f} MB"
              + (f" in {pdir} ($DNNF_PRELUDE_CACHE_DIR, with the prelude units)" if pdir != kdir else ""))
    except Error as e:
        print(f"kernels    no cache: {e}")
    if cxx:  # what the generated kernels derive from this machine, read from the prelude itself
        try:
            for line in tuning.describe(tuning.machine_tuning(isa)):
                print(line)
        except Error as e:
            print(f"gemm       unknown: {e}")
    mode = os.environ.get("DNNF_PROFILE") or "auto"
    print(f"profiling  compile(profile=) default {mode!r}, budget {os.environ.get('DNNF_PROFILE_SECONDS') or profiling.DEFAULT_SECONDS} s per compile")
    here = profile_target("cpu")
    db = profiling.default_db()
    if db:
        rows = read_profile_db(db)
        mine = [e for e in rows if e["target"] == here]
        current = sum(e["generator"] == _core.PROFILE_GENERATOR for e in mine)
        print(f"           database {db}: {len(rows)} entries, {len(mine)} for this CPU"
              + (f", {len(mine) - current} of them measured on an older code generator's output (set aside)"
                 if current < len(mine) else ""))
    try:
        mdb = profiling.machine_db(isa)
        n = len(read_profile_db(mdb)) if mdb.is_file() else 0
        print(f"           measured here ({isa}): {mdb}: {n} entries")
    except Error as e:
        print(f"           measured here: unavailable ({e})")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    if args.devices:
        return _print_devices()
    if args.machine:
        return _print_machine()
    t0 = time.perf_counter()
    g = load_model(args.model, _parse_shapes(args.input_shape))
    elapsed = time.perf_counter() - t0
    g.verify()
    print(g.summary())
    print(f"  imported and verified in {elapsed:.2f} s")
    if args.text:
        print()
        print(g.to_text(elide_constants=True))
    return 0


# run ------------------------------------------------------------------------------------------
def _median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    for _ in range(3):  # warm-up: first-touch page faults, lazy initialisation, thread pools
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _random_inputs(g: ECG) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for v in g.inputs:
        if any(isinstance(d, str) for d in v.shape):
            raise SystemExit(f"input {v.name} has a symbolic shape {v.type}; fix it with "
                             "--input-shape NAME=D0,D1,...")
        dt = numpy_dtype(v.dtype)
        shape = [int(d) for d in v.shape]
        # Integer inputs are usually indices (token ids): keep them small and valid.
        out.append(rng.standard_normal(shape).astype(dt) if dt.kind == "f"
                   else rng.integers(0, 2, shape).astype(dt))
    return out


def _flatten_torch(out: Any) -> list[np.ndarray]:
    import torch.utils._pytree as pytree

    leaves, _ = pytree.tree_flatten(out)
    return [x.detach().cpu().numpy() for x in leaves if hasattr(x, "detach")]


def _compare(got: list, want: list) -> tuple[bool, float]:
    """Whether every output matches (relative to each output's scale) and the worst
    absolute difference."""
    if len(got) != len(want):
        return False, float("inf")
    ok, worst = True, 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return False, float("inf")
        if g.size == 0:
            continue
        g, w = g.astype(np.float64), w.astype(np.float64)
        nan = np.isnan(w)
        if not np.array_equal(np.isnan(g), nan):
            return False, float("nan")
        if nan.all():
            continue
        diff = float(np.max(np.abs(g[~nan] - w[~nan])))
        scale = float(np.max(np.abs(w[~nan]))) or 1.0
        worst = max(worst, diff)
        ok = ok and diff <= 1e-3 * scale + 1e-5
    return ok, worst


def _ort_session(path: str, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


@dataclasses.dataclass
class _Prepared:
    """A compiled model with its inputs and the references to check and time it against."""
    m: Any
    inputs: list
    title: str
    threads: int
    eager: Callable[[], Any] | None
    ort_run: Callable[[], Any] | None
    notes: list[str]


def _prepare(args: argparse.Namespace) -> _Prepared:
    """Compiles args.model (a zoo name or an .onnx path) and sets up PyTorch eager (zoo models)
    and ONNX Runtime (when installed) on the same inputs; `run` and `report` share it."""
    import dnnfusion
    from dnnfusion.compiler import default_threads

    threads = args.threads or default_threads()
    spec = args.model or DEFAULT_RUN_MODEL
    is_file = os.path.exists(spec) or spec.endswith(".onnx")
    eager: Callable[[], Any] | None = None
    onnx_path: str | None = spec if is_file else None
    notes: list[str] = []
    if is_file:
        shapes = _parse_shapes(args.input_shape)
        inputs = _random_inputs(load(spec, input_shapes=shapes))
        model, examples, title = spec, None, spec
    else:
        try:
            import torch

            from dnnfusion import zoo
        except ImportError as e:
            raise SystemExit(f"{spec!r} is not a file, and the model zoo is unavailable: {e}")
        torch.set_num_threads(threads)
        z = zoo.get(spec, reduced=args.reduced)
        model, examples = z.module, z.example_inputs
        inputs = [t.detach().numpy() for t in examples]
        title = f"{spec}{' (reduced)' if args.reduced else ''} from the zoo"

        def eager() -> Any:
            with torch.inference_mode():
                return z.module(*examples)

    m = dnnfusion.compile(model, example_inputs=examples, planner=args.planner, threads=threads,
                          input_shapes=_parse_shapes(args.input_shape) if is_file else None)

    ort_run: Callable[[], Any] | None = None
    try:
        if onnx_path is None:
            from dnnfusion import zoo

            onnx_path = str(zoo.export_onnx(spec, reduced=args.reduced))
        sess = _ort_session(onnx_path, threads)
        feeds = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}

        def ort_run() -> Any:
            return sess.run(None, feeds)
    except ImportError:
        notes.append("ONNX Runtime: not installed")
    except Exception as e:  # noqa: BLE001 - export or session failures only skip ORT
        notes.append(f"ONNX Runtime: skipped ({type(e).__name__}: {str(e).splitlines()[0][:160]})")
    return _Prepared(m, inputs, title, threads, eager, ort_run, notes)


def _checks(p: _Prepared, got: list) -> tuple[bool, list[str]]:
    """The compiled model's outputs against PyTorch eager and ONNX Runtime (or, with neither,
    the NumPy reference): whether all match, and one line per reference."""
    checks, all_ok = [], True
    references: list[tuple[str, Callable[[], list]]] = []
    if p.eager is not None:
        eager = p.eager
        references.append(("PyTorch eager", lambda: _flatten_torch(eager())))
    if p.ort_run is not None:
        references.append(("ONNX Runtime", p.ort_run))
    if not references:
        references.append(("NumPy reference", lambda: p.m.graph.run_reference(*p.inputs)))
    for name, ref in references:
        ok, worst = _compare(got, ref())
        all_ok = all_ok and ok
        checks.append(f"vs {name}: max abs diff {worst:.2e} {'OK' if ok else 'MISMATCH'}")
    return all_ok, checks


def _latencies(p: _Prepared, repeat: int) -> dict[str, float]:
    """Median seconds per inference of dnnfusion and each reference that is set up."""
    rows: list[tuple[str, Callable[[], Any]]] = [("dnnfusion", lambda: p.m.run(*p.inputs))]
    if p.eager is not None:
        rows.append(("PyTorch eager", p.eager))
    if p.ort_run is not None:
        rows.append(("ONNX Runtime", p.ort_run))
    return {name: _median_seconds(fn, repeat) for name, fn in rows}


def cmd_run(args: argparse.Namespace) -> int:
    p = _prepare(args)
    m, inputs, threads, title = p.m, p.inputs, p.threads, p.title
    s = m.stats
    all_ok, checks = _checks(p, m.run(*inputs))

    cold = "from the kernel cache" if s["cache_hit"] else f"cold, C++ compile {s['cc_seconds']:.2f} s"
    print(f"model      {title}")
    print(f"operators  {s['operators_before']} before, {s['operators_after_rewrite']} after rewrites"
          f" -> {s['kernels']} kernels, {s['passes']} passes over memory,"
          f" {s['intermediate_bytes_written'] / 1e6:.1f} MB intermediates written"
          f" ({s['plan_blocks']} plan blocks; {s['planner']} planner, {s['isa']})")
    print(f"compile    {s['compile_seconds']:.2f} s ({cold})")
    pr = s["profile"]
    if pr["mode"] == "auto" and any(pr[k] for k in ("measured", "cached", "database", "estimated")):
        print(f"yellow     {pr['measured']} pairs measured now ({pr['seconds']:.1f} s), "
              f"{pr['cached']} from earlier measurements, {pr['database']} from the database, "
              f"{pr['estimated']} estimated (explain() says which)")
    print("check      " + "; ".join(checks))
    print(f"latency    median of {args.repeat} runs, {threads} thread{'s' if threads != 1 else ''}")
    for name, sec in _latencies(p, args.repeat).items():
        print(f"  {name:<15}{sec * 1e3:>10.3f} ms")
    if args.kernels:
        print("kernels    " + m.profile(*inputs, repeat=args.repeat).table(args.kernels)
              .replace("\n", "\n           "))
    for n in p.notes:
        print(f"note       {n}")
    return 0 if all_ok else 1


def cmd_report(args: argparse.Namespace) -> int:
    from dnnfusion import html_report

    p = _prepare(args)
    ok, checks = _checks(p, p.m.run(*p.inputs))
    page = html_report.render(p.m, p.title, checks, _latencies(p, args.repeat),
                              p.m.profile(*p.inputs, repeat=args.repeat), p.notes)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(page)
    print(f"wrote {args.output} ({len(page) / 1e3:.0f} KB); " + "; ".join(checks))
    return 0 if ok else 1


def cmd_profile(args: argparse.Namespace) -> int:
    from . import profiling, rewrite, zoo
    from .plan import profile_target

    names = args.models or zoo.list()
    db = args.db or str(profiling.DEFAULT_DB)
    print(f"profiling the yellow pairs of {len(names)} model(s) on {profile_target('cpu')}, "
          f"{args.threads} threads; database {db}")

    def models():
        for name in names:
            path = zoo.export_onnx(name, reduced=args.reduced) if name in zoo.list() else name
            ecg, _ = rewrite.rewrite(load(str(path)))
            ecg, _ = rewrite.select_layout(ecg, "auto")  # the graph compile() plans
            yield name, ecg

    entries = profiling.profile(models(), db, threads=args.threads, min_seconds=args.min_seconds)
    fuse = sum(e["fused_ms"] - e["unfused_ms"] <= e["noise_ms"] for e in entries)
    print(f"{len(entries)} entries written ({fuse} fuse, ties included; {len(entries) - fuse} "
          "keep apart)")
    return 0


def prelude_units() -> list[str]:
    """Every prelude unit (group.kind) the prelude defines (prelude/prelude_units.h)."""
    import re

    from dnnfusion._paths import prelude_dir

    header = os.path.join(prelude_dir(), "prelude_units.h")
    # Each definition with its continuation lines: a group whose body names no EP takes no
    # epilogue (pack), so it has kind 0 only (its .1 and .2 would be copies).
    defs = dict(re.findall(r"#define DNNF_UNIT_([a-z]+)\(EP, D\)((?:[^\n]*\\\n)*[^\n]*)", open(header).read()))
    if not defs:
        raise Error(f"no prelude units are defined in {header}")
    return [f"{g}.{k}" for g in sorted(defs) for k in (range(3) if re.search(r"\bEP\b", defs[g]) else range(1))]


def cmd_warmup(args: argparse.Namespace) -> int:
    from dnnfusion import _core
    from dnnfusion._paths import prelude_dir

    known = prelude_units()
    units = args.units or known
    unknown = [u for u in units if u not in known]
    if unknown:
        raise Error(f"no such prelude unit: {', '.join(unknown)} (the units: {' '.join(known)})")
    for isa in args.isa or [_core.cpu_features()["isa"]]:
        before, t0 = _core.prelude_build_seconds(), time.perf_counter()
        _core.prebuild_prelude(isa, prelude_dir(), units)
        built = _core.prelude_build_seconds() - before
        print(f"{isa}: the precompiled header and {len(units)} prelude units are in {_core.prelude_cache_dir()} "
              f"({time.perf_counter() - t0:.1f} s, {built:.1f} s of it building)")
    return 0


def _compile_args(p: argparse.ArgumentParser) -> None:
    """The arguments `run` and `report` share: which model and how to compile and time it."""
    p.add_argument("model", nargs="?", help="an .onnx file or a zoo model name "
                   f"(default: {DEFAULT_RUN_MODEL})")
    p.add_argument("--reduced", action="store_true", help="the zoo model's reduced variant")
    p.add_argument("--planner", default="dnnfusion",
                   help="dnnfusion (default) or a baseline: none, patterns, tvm, dp")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for every framework (default: $DNNF_NUM_THREADS or all cores)")
    p.add_argument("--repeat", type=int, default=20, help="timed runs per framework")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="specialize a symbolic ONNX input shape")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dnnfusion", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="import a model and print its operator summary")
    info.add_argument("model", nargs="?", help="an .onnx file or a zoo model name "
                      "(default: the built-in network)")
    info.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                      help="specialize a symbolic ONNX input shape")
    info.add_argument("--text", action="store_true", help="also print the ECG text form")
    info.add_argument("--devices", action="store_true",
                      help="list the OpenCL devices (for compile(..., target='opencl')) instead")
    info.add_argument("--machine", action="store_true",
                      help="print what compile() uses on this machine instead: CPU, caches, ISA, "
                      "threads, C++ compiler, kernel cache, profiling databases")
    info.set_defaults(func=cmd_info)
    run = sub.add_parser("run", help="compile a model, check it against PyTorch / ONNX Runtime "
                         "and time it beside them")
    _compile_args(run)
    run.add_argument("--kernels", type=int, default=0, metavar="N",
                     help="also time every kernel and print the N slowest")
    run.set_defaults(func=cmd_run)
    rep = sub.add_parser("report", help="compile a model and write one self-contained HTML page "
                         "about it: summary, plan picture, explain(), kernel profile, latency")
    _compile_args(rep)
    rep.add_argument("-o", "--output", default="report.html", help="the HTML file to write")
    rep.set_defaults(func=cmd_report)
    prof = sub.add_parser("profile", help="time fused vs. unfused kernels for the yellow pairs "
                          "of the fusion table and record them in the profiling database")
    prof.add_argument("models", nargs="*", help="zoo model names or .onnx files (default: every "
                      "zoo model)")
    prof.add_argument("--reduced", action="store_true", help="the zoo models' reduced variants")
    prof.add_argument("--db", default=None, help="the database to merge into (default: the one "
                      "shipped with the package, dnnfusion/data/profile_db.jsonl)")
    prof.add_argument("--threads", type=int, default=2)
    prof.add_argument("--min-seconds", type=float, default=0.3,
                      help="time each pair at least this long (interleaved runs, median)")
    prof.set_defaults(func=cmd_profile)
    warm = sub.add_parser("warmup", help="build the precompiled header and the prelude units into "
                          "the kernel cache now (a machine's first compile builds them: most of its "
                          "time), e.g. when building a container image")
    warm.add_argument("--isa", action="append", default=[], help="an instruction set (default: the "
                      "best this CPU runs; repeat for more)")
    warm.add_argument("--units", nargs="+", default=None, metavar="GROUP.KIND",
                      help="only these units (default: all of them)")
    warm.set_defaults(func=cmd_warmup)
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except Error as e:
        print(f"dnnfusion: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
