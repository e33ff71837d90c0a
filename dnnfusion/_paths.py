"""Where the package's files are: the prelude headers generated code includes and the shipped
profiling database. A leaf module (it imports nothing of dnnfusion's but the errors), so that
the compiler, the planner and the profiler can all read it without importing each other."""

from __future__ import annotations

import os
from pathlib import Path

from dnnfusion.errors import CompileError

DEFAULT_DB = Path(__file__).resolve().parent / "data" / "profile_db.jsonl"


def prelude_dir() -> str:
    """The directory of the prelude headers generated code includes: ``$DNNF_PRELUDE_DIR``,
    else ``prelude/`` inside the installed package, else ``cpp/codegen/prelude`` of the
    source checkout this package was imported from (editable installs), so a developer's
    edits to the prelude take effect without reinstalling."""
    given = os.environ.get("DNNF_PRELUDE_DIR")
    if given:
        return given
    here = Path(__file__).resolve().parent
    for d in (here / "prelude", here.parent / "cpp" / "codegen" / "prelude"):
        if (d / "simd.h").is_file():
            return str(d)
    raise CompileError(f"the prelude headers (simd.h, gemm.h, ...) are neither in {here / 'prelude'} "
                       "nor in a source checkout; reinstall dnnfusion or set DNNF_PRELUDE_DIR")


def default_db() -> str | None:
    """The database shipped with the package; ``$DNNF_PROFILE_DB`` overrides it (an empty
    value means none). None when there is none."""
    env = os.environ.get("DNNF_PROFILE_DB")
    if env is not None:
        return env or None
    return str(DEFAULT_DB) if DEFAULT_DB.is_file() else None
