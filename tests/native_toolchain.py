"""What the native-code tests need from the machine: the host compiler, per-ISA flags, the
aarch64 cross toolchain with qemu, and CPU feature checks. Each helper returns a reason
string when something is missing, so tests can skip with it (a failure under
DNNF_REQUIRE_ALL=1)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRELUDE = ROOT / "cpp" / "codegen" / "prelude"
CXX = os.environ.get("CXX_HOST", "g++")
AVX512_FLAGS = ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mfma"]
ARM_CXX, QEMU, ARM_SYSROOT = "aarch64-linux-gnu-g++", "qemu-aarch64", "/usr/aarch64-linux-gnu"


def cpu_has(flag: str) -> bool:
    try:
        return flag in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def neon_missing() -> str | None:
    """Why NEON code cannot be cross-compiled and run here, or None."""
    missing = [t for t in (ARM_CXX, QEMU) if shutil.which(t) is None]
    if missing:
        return (f"{' and '.join(missing)} not found: install with `apt-get install -y "
                "g++-aarch64-linux-gnu qemu-user` to test the NEON dialect")
    if not Path(ARM_SYSROOT).is_dir():
        return f"{ARM_SYSROOT} (the aarch64 sysroot qemu needs) is missing"
    return None


ISA_DEFINES = {
    "scalar": [],
    "avx2": ["-DDNNF_ISA_AVX2", "-mavx2", "-mfma"],
    "avx512": ["-DDNNF_ISA_AVX512", *AVX512_FLAGS],
}


def dialect_commands(src: Path, common: list[str], scalar_flags: tuple[str, ...] = ()
                     ) -> dict[str, tuple[list[str], list[str]] | str]:
    """Per dialect (scalar, avx2, avx512, neon): the command compiling `src` (output path
    appended by the caller) and the runner prefix of the binary, or why it cannot run here."""
    out: dict[str, tuple[list[str], list[str]] | str] = {}
    for isa, flags in ISA_DEFINES.items():
        need = {"avx2": "avx2", "avx512": "avx512bw"}.get(isa)
        if shutil.which(CXX) is None:
            out[isa] = f"no C++ compiler ({CXX}) on PATH"
        elif need and not cpu_has(need):
            out[isa] = f"this CPU lacks {need}"
        else:
            extra = list(scalar_flags) if isa == "scalar" else []
            out[isa] = ([CXX, *common, *flags, *extra, str(src)], [])
    reason = neon_missing()
    out["neon"] = reason or ([ARM_CXX, *common, "-DDNNF_ISA_NEON", str(src)],
                             [QEMU, "-L", ARM_SYSROOT])
    return out


def build_and_run(workdir: Path, isa: str, cmd: list[str], runner: list[str], payload: bytes,
                  timeout: float = 600, env: dict | None = None) -> tuple[bytes, str]:
    """Compiles a test driver, runs it as `driver <in> <out>` on `payload`, and returns the
    bytes it wrote and its stdout."""
    import subprocess

    inp, exe, out = workdir / f"{isa}.in", workdir / isa, workdir / f"{isa}.out"
    inp.write_bytes(payload)
    r = subprocess.run([*cmd, "-o", str(exe)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"compiling the {isa} driver failed:\n{r.stderr[-4000:]}")
    r = subprocess.run([*runner, str(exe), str(inp), str(out)], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, **(env or {})})
    assert r.returncode == 0, f"{isa} driver failed ({r.returncode}): {r.stderr[-2000:]}"
    return out.read_bytes(), r.stdout
