"""Kernel-level A/B of two versions of the prelude in ONE process: a git revision's
cpp/codegen/prelude against this checkout's, each copy included inside a namespace of its own
(benchmarks/kernel_ab/*.cc), timed in alternating rounds. On a shared 2-vCPU VM single runs
moved 10-30% between minutes; the per-round ratio new/old holds within 1-2%, which is what
a GEMM or convolution change needs to be judged by (benchmarks/prelude_ab.py does the same
for whole models, a process per cell).

    python benchmarks/kernel_ab.py gemm --old-rev HEAD~1 --threads 1,2 16,3072,768 128,768,3072
    python benchmarks/kernel_ab.py gemm --old-rev HEAD --warm 256,256,256
    python benchmarks/kernel_ab.py conv --old-rev HEAD~1 1,1024,14,2048,2 1,256,56,512,2
    python benchmarks/kernel_ab.py gemm --old-rev HEAD --isa avx2 64,3072,768

gemm shapes are M,N,K with a pre-packed B (weights): "cold" (default) cycles through copies of
it spanning about 250 MB, as a model's layers each read their own weights; --warm reuses one.
conv shapes are N,C,H,M,S: a 1x1 convolution of an HxH channels-last input, C -> M channels,
stride S. Each line: both versions' GFLOP/s (median of the rounds) and the median and
quartiles of the per-round time ratios new/old, and the largest difference between their
outputs. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRELUDE = ROOT / "cpp" / "codegen" / "prelude"
DRIVERS = {"gemm": ("gemm_ab.cc", "gemm.h"), "conv": ("conv_ab.cc", "conv_nhwc.h")}


def _copy(dst: Path, files: dict[str, bytes], tag: str) -> None:
    """Writes one prelude copy. Every header gets a line naming its copy (GCC's #pragma once
    may take two files of equal content and time for one), and a fully qualified ::dnnf::
    becomes relative, since the copy lives inside a namespace."""
    dst.mkdir(parents=True)
    for name, text in files.items():
        body = text.decode().replace("::dnnf::", "dnnf::")
        (dst / name).write_text(body + f"\n// kernel_ab copy: {tag}\n")


def _rev_files(rev: str) -> dict[str, bytes]:
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "cpp/codegen/prelude"],
                         check=True, capture_output=True).stdout
    out = {}
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        for m in t.getmembers():
            if m.isfile() and m.name.endswith(".h"):
                out[Path(m.name).name] = t.extractfile(m).read()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=sorted(DRIVERS))
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--old-rev", default="HEAD", help="git revision whose prelude is the baseline")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--warm", action="store_true", help="gemm: one packed copy of B (it stays in cache)")
    ap.add_argument("--isa", help="instruction set to build for (default: this CPU's best)")
    args = ap.parse_args(argv)
    from dnnfusion import _core

    isa = args.isa or _core.cpu_features()["isa"]
    flags = ["-std=c++17", "-O3", "-ffp-contract=off", "-pthread", *_core.isa_flags(isa)]
    driver, header = DRIVERS[args.kind]
    new = {p.name: p.read_bytes() for p in PRELUDE.glob("*.h")}
    with tempfile.TemporaryDirectory(prefix="dnnf-kab-") as tmp:
        _copy(Path(tmp) / "old", _rev_files(args.old_rev), "old")
        _copy(Path(tmp) / "new", new, "new")
        exe = Path(tmp) / "ab"
        cxx = os.environ.get("CXX", "g++")
        subprocess.run([cxx, *flags, f'-DVA_H="{tmp}/old/{header}"', f'-DVB_H="{tmp}/new/{header}"',
                        str(ROOT / "benchmarks" / "kernel_ab" / driver), "-o", str(exe)], check=True)
        print(f"# {args.kind}: old = {args.old_rev}, new = this checkout; isa {isa}; {os.cpu_count()} CPUs; "
              f"load {os.getloadavg()}", flush=True)
        for t in args.threads.split(","):
            cmd = [str(exe), t, str(args.rounds)]
            if args.kind == "gemm":
                cmd.append("warm" if args.warm else "cold")
            subprocess.run(cmd + args.shapes, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
