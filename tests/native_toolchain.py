"""What the native-code tests need from the machine: the host compiler, per-ISA flags, the
aarch64 cross toolchain with qemu. A missing tool gives a reason string, so tests can skip
with it (a failure under DNNF_REQUIRE_ALL=1); a dialect this CPU lacks is compiled, not run
(dialects.py)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from dialects import compile_only, table, why_not

ROOT = Path(__file__).resolve().parents[1]
PRELUDE = ROOT / "cpp" / "codegen" / "prelude"
CXX = os.environ.get("CXX_HOST", "g++")
ARM_CXX, QEMU, ARM_SYSROOT = "aarch64-linux-gnu-g++", "qemu-aarch64", "/usr/aarch64-linux-gnu"

# The opening of every case driver's main, the protocol of build_and_run: `driver <in> <out>`,
# `in` starting with the case count; each driver then reads its cases from `in`.
DRIVER_MAIN_OPEN = r"""
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  FILE* in = std::fopen(argv[1], "rb");
  FILE* out = std::fopen(argv[2], "wb");
  int n_cases = 0;
  if (!in || !out || std::fread(&n_cases, 4, 1, in) != 1) return 3;
"""


def neon_missing() -> str | None:
    """Why NEON code cannot be cross-compiled and run here, or None."""
    missing = [t for t in (ARM_CXX, QEMU) if shutil.which(t) is None]
    if missing:
        return (f"{' and '.join(missing)} not found: install with `apt-get install -y "
                "g++-aarch64-linux-gnu qemu-user` to test the NEON dialect")
    if not Path(ARM_SYSROOT).is_dir():
        return f"{ARM_SYSROOT} (the aarch64 sysroot qemu needs) is missing"
    return None


@dataclass
class Job:
    """How to build a dialect's test driver (output path appended by the caller) and run it.
    ``run`` False: this machine cannot run the dialect (``lacks`` says why); the driver is
    compiled and nothing is run."""
    cmd: list[str]
    runner: list[str] = field(default_factory=list)
    run: bool = True
    lacks: str = ""


@dataclass
class CompiledOnly:
    """The result for a dialect this machine cannot run: its driver compiled, to `binary`."""
    isa: str
    binary: Path
    lacks: str

    def check(self) -> None:
        assert self.binary.is_file() and self.binary.stat().st_size > 0, \
            f"the {self.isa} driver was not built"


def dialect_commands(src: Path, common: list[str], scalar_flags: tuple[str, ...] = ()
                     ) -> dict[str, Job | str]:
    """Per dialect (scalar, avx2, avx512, neon): the Job building and running `src`, or why
    it cannot even be built here (a missing toolchain: a skip, a failure under
    DNNF_REQUIRE_ALL=1). The flags are the ISA table's (cpp/target/isa.h)."""
    out: dict[str, Job | str] = {}
    isas = table()
    for isa in ("scalar", "avx2", "avx512"):
        flags = isas[isa]["flags"]
        if shutil.which(CXX) is None:
            out[isa] = f"no C++ compiler ({CXX}) on PATH"
            continue
        extra = list(scalar_flags) if isa == "scalar" else []
        job = Job([CXX, *common, *flags, *extra, str(src)])
        if compile_only(isa):  # compiled, never run: -O0 checks the same source in a third of the time
            job.cmd = ["-O0" if f.startswith("-O") else f for f in job.cmd]
            job.run, job.lacks = False, why_not(isa)
        out[isa] = job
    reason = neon_missing()
    out["neon"] = reason or Job([ARM_CXX, *common, *isas["neon"]["flags"], str(src)],
                                [QEMU, "-L", ARM_SYSROOT])
    return out


def compile_driver(workdir: Path, isa: str, job: Job) -> Path:
    import subprocess

    exe = workdir / isa
    r = subprocess.run([*job.cmd, "-o", str(exe)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"compiling the {isa} driver failed:\n{r.stderr[-4000:]}")
    return exe


def build_and_run(workdir: Path, isa: str, job: Job, payload: bytes, timeout: float = 600,
                  env: dict | None = None) -> tuple[bytes, str] | CompiledOnly:
    """Compiles a test driver, runs it as `driver <in> <out>` on `payload`, and returns the
    bytes it wrote and its stdout; for a dialect this machine cannot run, compiles it only."""
    import subprocess

    exe = compile_driver(workdir, isa, job)
    if not job.run:
        return CompiledOnly(isa, exe, job.lacks)
    inp, out = workdir / f"{isa}.in", workdir / f"{isa}.out"
    inp.write_bytes(payload)
    r = subprocess.run([*job.runner, str(exe), str(inp), str(out)], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, **(env or {})})
    assert r.returncode == 0, f"{isa} driver failed ({r.returncode}): {r.stderr[-2000:]}"
    return out.read_bytes(), r.stdout
