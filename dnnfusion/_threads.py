"""The default thread count (a leaf module: the compiler and the planner, which keys its
profiling database by threads, both read it without importing each other)."""

from __future__ import annotations

import os

from dnnfusion.errors import Error


def default_threads() -> int:
    """``$DNNF_NUM_THREADS``, else the cores this process may run on."""
    env = os.environ.get("DNNF_NUM_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise Error(f"DNNF_NUM_THREADS={env!r} is not a number") from None
        if n >= 1:
            return n
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
