"""Compile time of zoo models, with and without prelude units (cpp/codegen/prelude/prelude_units.h),
and the latency of what each builds.

Per model and mode (`units`: the default; `whole`: DNNF_PRELUDE_UNITS=0), each in a fresh
process and a fresh kernel cache:
  * first: a compile into an empty cache (it also builds the precompiled header and, with
    units, the units this model names);
  * cold: a compile of the model into a cache that holds only the precompiled header and the
    units (another model compiled before: what every later model of a user meets);
  * warm: the same compile again (kernel cache hit; `profile="auto"` may measure candidates
    the first compile left estimated).
Then the latency of one plan (profile="off") built each way (median of --runs calls per
round, interleaved rounds, median of the rounds), to show that linking the units costs no speed.

    python benchmarks/compile_bench.py --models mobilenetv2,resnet50,bert_base --profile auto
    python benchmarks/compile_bench.py --models yolov4 --ab --rounds 8 --runs 8
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys, time
import numpy as np
import dnnfusion as df
from dnnfusion import zoo
name, profile, runs, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
zm = zoo.get(name)
path = zoo.export_onnx(name)
xs = [x.numpy() for x in zm.example_inputs]
t = time.perf_counter()
cm = df.compile(str(path), example_inputs=xs, profile=profile, threads=threads)
cold = time.perf_counter() - t
t = time.perf_counter()
df.compile(str(path), example_inputs=xs, profile=profile, threads=threads)
warm = time.perf_counter() - t
out = {"compile_s": cold, "warm_s": warm, "cc_s": cm.stats["cc_seconds"],
       "profile_s": cm.stats.get("profile", {}).get("seconds", 0.0)}
if runs:
    for _ in range(3):
        cm(*xs)
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        cm(*xs)
        ts.append(time.perf_counter() - t)
    out["latency_ms"] = 1e3 * float(np.median(ts))
print("RESULT " + json.dumps(out))
"""


AB = r"""
import os, sys, tempfile, time
import numpy as np
import dnnfusion as df
from dnnfusion import zoo
name, rounds, runs, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
zm = zoo.get(name)
path = zoo.export_onnx(name)
xs = [x.numpy() for x in zm.example_inputs]
os.environ.pop("DNNF_PRELUDE_UNITS", None)
os.environ.pop("DNNF_PRELUDE_CACHE_DIR", None)  # cold: the prelude in each fresh cache
os.environ["DNNF_CACHE_DIR"] = tempfile.mkdtemp()
units = df.compile(str(path), example_inputs=xs, profile="off", threads=threads)
os.environ["DNNF_PRELUDE_UNITS"] = "0"
os.environ["DNNF_CACHE_DIR"] = tempfile.mkdtemp()
whole = df.compile(str(path), example_inputs=xs, profile="off", threads=threads)
assert units.source() == whole.source()
res = {"units": [], "whole": []}
for r in range(rounds):
    order = [("units", units), ("whole", whole)]
    for tag, m in order if r % 2 == 0 else order[::-1]:
        for _ in range(2):
            m(*xs)
        ts = []
        for _ in range(runs):
            t = time.perf_counter()
            m(*xs)
            ts.append(time.perf_counter() - t)
        res[tag].append(1e3 * float(np.median(ts)))
for tag, v in res.items():
    print(f"{name}: {tag} {float(np.median(v)):.2f} ms (rounds {' '.join(f'{x:.1f}' for x in v)})")
"""


def child(model: str, mode: str, cache: str, profile: str, runs: int, threads: int) -> dict:
    env = dict(os.environ, DNNF_CACHE_DIR=cache)
    env.pop("DNNF_PRELUDE_CACHE_DIR", None)  # the prelude built in (or read from) `cache`
    env.pop("DNNF_OPT_LEVEL", None)  # the shipped -O3
    if mode == "whole":
        env["DNNF_PRELUDE_UNITS"] = "0"
    else:
        env.pop("DNNF_PRELUDE_UNITS", None)
    r = subprocess.run([sys.executable, "-c", CHILD, model, profile, str(runs), str(threads)], env=env,
                       capture_output=True, text=True)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    if r.returncode != 0 or not line:
        raise SystemExit(f"{model} ({mode}) failed:\n{r.stderr[-3000:]}")
    return json.loads(line[0][len("RESULT "):])


def seed_cache(src: str, dst: str) -> None:
    """dst/kernels gets src's precompiled headers and unit objects only."""
    os.makedirs(os.path.join(dst, "kernels"), mode=0o700)
    for d in glob.glob(os.path.join(src, "kernels", "pch-*")) + glob.glob(os.path.join(src, "kernels", "units-*")):
        shutil.copytree(d, os.path.join(dst, "kernels", os.path.basename(d)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mobilenetv2,resnet50,bert_base,yolov4")
    ap.add_argument("--profile", default="auto", choices=["auto", "off"])
    ap.add_argument("--runs", type=int, default=30, help="latency runs per round (0: no latency)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ab", action="store_true",
                    help="only the latency A/B, in one process: one plan built with units and whole, "
                         "--rounds alternating rounds of --runs calls each")
    args = ap.parse_args()
    if args.ab:
        env = {k: v for k, v in os.environ.items() if k != "DNNF_OPT_LEVEL"}  # the shipped -O3
        for model in args.models.split(","):
            subprocess.run([sys.executable, "-c", AB, model, str(args.rounds), str(args.runs), str(args.threads)],
                           env=env, check=True)
        return
    root = tempfile.mkdtemp(prefix="dnnf_compile_bench_")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"DNNF_ISA={os.environ.get('DNNF_ISA', '(best)')}, profile={args.profile}, threads={args.threads}")
    for model in args.models.split(","):
        res = {}
        for mode in ("whole", "units"):
            first = os.path.join(root, f"{model}-{mode}-first")
            res[mode, "first"] = child(model, mode, first, args.profile, 0, args.threads)
            seeded = os.path.join(root, f"{model}-{mode}-cold")
            seed_cache(first, seeded)
            res[mode, "cold"] = child(model, mode, seeded, args.profile, 0, args.threads)
        print(f"{model}: first compile whole {res['whole', 'first']['compile_s']:.1f} s, with units "
              f"{res['units', 'first']['compile_s']:.1f} s; cold (PCH and units cached) whole "
              f"{res['whole', 'cold']['compile_s']:.1f} s, with units {res['units', 'cold']['compile_s']:.1f} s "
              f"(final module's compile {res['whole', 'cold']['cc_s']:.1f} -> {res['units', 'cold']['cc_s']:.1f} s, "
              f"profiling {res['whole', 'cold']['profile_s']:.1f} -> {res['units', 'cold']['profile_s']:.1f} s); "
              f"warm {res['whole', 'cold']['warm_s']:.2f} / {res['units', 'cold']['warm_s']:.2f} s", flush=True)
        if args.runs:
            lat = {"whole": [], "units": []}
            for _ in range(args.rounds):  # interleaved; the same plan (profile off), linked or whole
                for mode in ("whole", "units"):
                    lat[mode].append(child(model, mode, os.path.join(root, f"{model}-{mode}-latency"), "off",
                                           args.runs, args.threads)["latency_ms"])
            med = {m: sorted(v)[len(v) // 2] for m, v in lat.items()}
            print(f"{model}: latency whole {med['whole']:.3f} ms, with units {med['units']:.3f} ms "
                  f"(rounds {', '.join(f'{a:.3f}/{b:.3f}' for a, b in zip(lat['whole'], lat['units']))})", flush=True)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
