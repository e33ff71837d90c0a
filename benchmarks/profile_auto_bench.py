"""compile(profile="auto") against profile="off" (issue 13 part 4): each zoo model compiled
both ways in one process, then timed in interleaved rounds (the order alternates every round)
after a warm-up of one second each, median per build. Prints the passes of each plan, how
the auto compile settled its yellow pairs (measured now / cached / estimated, and the seconds
it spent measuring) and the largest output difference between the two builds.

    python benchmarks/profile_auto_bench.py [models...] [--threads 2] [--rounds 21]
                                            [--seconds 20] [--fresh]

``--fresh`` deletes this machine's cached measurements for the ISA first (the first compile
then measures within ``--seconds``). A measurement, not a test: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dnnfusion as df  # noqa: E402
from dnnfusion import _core, profiling, zoo  # noqa: E402
from harness.machine import cpu_info, loadavg  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=["mobilenetv2", "efficientnet_b0", "resnet50",
                                                  "bert_base", "gpt2", "yolov4"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--seconds", type=float, default=20.0, help="profile_seconds of the auto compile")
    ap.add_argument("--fresh", action="store_true", help="forget this machine's cached measurements first")
    args = ap.parse_args(argv)
    isa = _core.cpu_features()["isa"]
    if args.fresh:
        profiling.machine_db(isa).unlink(missing_ok=True)
    cpu = cpu_info()
    print(f"machine: {cpu['model_name']}, {cpu['logical_cpus']} CPUs, isa {isa}, {args.threads} threads, "
          f"median of {args.rounds} interleaved rounds; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}; "
          f"load {loadavg()}")
    print(f"{'model':<16} {'passes off/auto':>15} {'ms off':>9} {'ms auto':>9} {'off/auto':>8} "
          f"{'measured/cached/estimated':>26} {'measuring s':>11} {'max |diff|':>10}")
    for name in args.models:
        zm = zoo.get(name)
        ms = {k: df.compile(zm.module, zm.example_inputs, threads=args.threads, profile=k,
                            profile_seconds=args.seconds) for k in ("off", "auto")}
        x = [t.numpy() for t in zm.example_inputs]
        for m in ms.values():  # warm-up: page faults, the pool's threads spread over the cores
            t_end = time.perf_counter() + 1.0
            while time.perf_counter() < t_end:
                m.run(*x)
        times: dict[str, list[float]] = {k: [] for k in ms}
        for r in range(args.rounds):
            for k in (("off", "auto") if r % 2 == 0 else ("auto", "off")):
                t = time.perf_counter()
                ms[k].run(*x)
                times[k].append((time.perf_counter() - t) * 1e3)
        med = {k: statistics.median(v) for k, v in times.items()}
        diff = max(float(np.abs(a - b).max()) if a.size else 0.0
                   for a, b in zip(ms["off"].run(*x), ms["auto"].run(*x)))
        p = ms["auto"].stats["profile"]
        print(f"{name:<16} {ms['off'].stats['passes']:>7}/{ms['auto'].stats['passes']:<7} {med['off']:>9.2f} "
              f"{med['auto']:>9.2f} {med['off'] / med['auto']:>7.3f}x "
              f"{p['measured']:>12}/{p['cached']}/{p['estimated']:<8} {p['seconds']:>11.1f} {diff:>10.2e}",
              flush=True)
    print(f"load at the end {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
