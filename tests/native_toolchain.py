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
