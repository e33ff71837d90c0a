"""Kernel by kernel: one zoo model compiled twice in one process, with an environment switch
set (the baseline, e.g. DNNF_CONCAT_ROWS=0) and without it, then profiled in alternating
rounds (``CompiledModel.profile``: per-kernel medians); each kernel keeps its lowest median
over the rounds. Prints the totals and every kernel whose stages differ or whose time moved
by more than ``--show-ms``. For a change that touches a few kernels of a large model, where a
whole-model A/B (prelude_ab.py --old-env) drowns in a shared VM's noise.

    python benchmarks/env_kernel_ab.py DNNF_CONCAT_ROWS=0 yolov4 --threads 2 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import models  # noqa: E402

import dnnfusion as df  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("switch", help="NAME=VALUE: the baseline's environment variable")
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10, help="runs per profile")
    ap.add_argument("--show-ms", type=float, default=0.3)
    ap.add_argument("--reduced", action="store_true")
    args = ap.parse_args(argv)
    name, _, value = args.switch.partition("=")
    if not name or not value:
        ap.error("switch must be NAME=VALUE")
    work = Path(os.environ.get("DNNF_BENCH_DIR", "/tmp/dnnf-env-kernel-ab"))
    work.mkdir(parents=True, exist_ok=True)
    path = models.export_onnx(args.model, args.reduced, str(work))
    x = [t.numpy() for t in models.load(args.model, args.reduced).example_inputs]
    old_env = os.environ.get(name)
    os.environ[name] = value
    base = df.compile(str(path), threads=args.threads)
    if old_env is None:
        os.environ.pop(name)
    else:
        os.environ[name] = old_env
    new = df.compile(str(path), threads=args.threads)
    runs: dict[str, list] = {"base": [], "new": []}
    for _ in range(args.rounds):
        for key, m in (("base", base), ("new", new)):
            runs[key].append([r["ms"] for r in m.profile(*x, repeat=args.repeat).rows])
    b, n = (np.min(np.array(runs[k]), axis=0) for k in ("base", "new"))
    kb, kn = base.kernels, new.kernels
    print(f"# {args.model}, {args.threads} threads, base = {args.switch}, new = unset; {platform.machine()}, "
          f"{os.cpu_count()} CPUs, ISA {base.stats.get('isa', '?')}; lowest of {args.rounds} per-kernel medians "
          f"({args.repeat} runs each); load {os.getloadavg()}")
    print(f"total ms: base {b.sum():.2f}, new {n.sum():.2f} (new/base {n.sum() / b.sum():.3f}); "
          f"kernels {len(kb)} / {len(kn)}, passes {base.stats['passes']} / {new.stats['passes']}")
    if len(kb) != len(kn):
        print("the plans differ in kernel count: no per-kernel comparison")
        return 0
    changed_b = changed_n = 0.0
    for i, (sb, sn) in enumerate(zip(kb, kn)):
        if sb["stages"] != sn["stages"]:
            changed_b += b[i]
            changed_n += n[i]
        if sb["stages"] != sn["stages"] or abs(b[i] - n[i]) > args.show_ms:
            mark = "*" if sb["stages"] != sn["stages"] else " "
            print(f"{mark}{i:3d} base {b[i]:8.2f} {sb['stages']}\n      new  {n[i]:8.2f} {sn['stages']}")
    print(f"kernels whose stages differ (*): base {changed_b:.2f} ms, new {changed_n:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
