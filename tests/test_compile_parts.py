"""A generated CPU module compiles as several translation units in parallel
(cpp/runtime/compile_parts.cc, codegen.h kPartsGuard): the parts together compute bit for bit
what the module compiled whole computes, every kernel lands in exactly one part, a part that
fails costs time (the whole compile runs and reports), and the time spent building the
machine-wide prelude caches is counted apart (profiling's budget)."""

from __future__ import annotations

import os
import re
import stat

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core
from dnnfusion._paths import prelude_dir
from dnnfusion.builtin import tiny_convnet


@pytest.fixture
def logged_cxx(tmp_path, monkeypatch, own_prelude):
    """DNNF_CXX: the real compiler behind a script that logs each command line; the kernel cache
    holds its own prelude (own_prelude), so what a fresh cache builds shows in the log."""
    real = _core.find_compiler()["argv"]
    log = tmp_path / "cxx.log"
    script = tmp_path / "cxx.sh"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec {" ".join(real)} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("DNNF_CXX", str(script))
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path / "cache"))
    return log


def _module_compiles(log) -> list[tuple[str, str]]:
    """(kind, command) of each module compile the log shows: "part" (-c to a .so.partN.o),
    "link" (the parts into the .so), "whole" (the source into the .so)."""
    out = []
    for line in log.read_text().splitlines():
        words = line.split()
        if "-o" not in words:
            continue
        target = words[words.index("-o") + 1]
        if ".so.part" in target:
            out.append(("part", line))
        elif target.endswith(".so"):
            out.append(("link" if ".so.part" in line else "whole", line))
    return out


def test_kernels_are_guarded_once_each():
    m = df.compile(tiny_convnet(), threads=1, profile="off")
    src = m.source()
    assert "#ifndef DNNF_PARTS\n#define DNNF_PARTS 1\n#define DNNF_PART 0\n#endif\n" in src
    defined = re.findall(r"#if DNNF_PART == (\d+) \* DNNF_PARTS / (\d+)\n// block \d+: \d+ operators\nvoid (k\d+)\(", src)
    assert [k for _, _, k in defined] == [k["function"] for k in m.generated.kernels]
    starts = [int(s) for s, _, _ in defined]
    assert starts == sorted(starts) and starts[0] == 0 and len({t for _, t, _ in defined}) == 1
    assert int(defined[0][1]) > starts[-1]  # every start below the total: parts 0..P-1
    assert src.count("#if DNNF_PART == 0\nusing namespace dnnf_module;") == 1  # the entry points: part 0


@pytest.mark.parametrize("parts", [3])  # an uneven split (3 parts of the kernels); 2 adds nothing
def test_a_module_in_parts_computes_what_it_computes_whole(parts, logged_cxx, monkeypatch, tmp_path):
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    monkeypatch.setenv("DNNF_COMPILE_PARTS", str(parts))
    split = df.compile(tiny_convnet(), threads=1, profile="off")
    cmds = _module_compiles(logged_cxx)
    assert sorted(re.search(r"-DDNNF_PART=(\d+)", c).group(1) for k, c in cmds if k == "part") == \
        [str(i) for i in range(parts)]
    assert all(f"-DDNNF_PARTS={parts}" in c for k, c in cmds if k == "part")
    assert [k for k, _ in cmds].count("link") == 1 and [k for k, _ in cmds].count("whole") == 0
    monkeypatch.setenv("DNNF_COMPILE_PARTS", "1")
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path / "whole"))
    logged_cxx.write_text("")
    whole = df.compile(tiny_convnet(), threads=1, profile="off")
    # one translation unit, compiled beside the units this fresh cache builds, then linked
    cmds = _module_compiles(logged_cxx)
    assert [k for k, _ in cmds] == ["part", "link"] and not any("-DDNNF_PART" in c for _, c in cmds)
    assert whole.source() == split.source()
    for a, b in zip(split(x), whole(x)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


KERNEL = """// dnnf-prelude-units: roi.0
#include "module_common.h"
#ifndef DNNF_PARTS
#define DNNF_PARTS 1
#define DNNF_PART 0
#endif
extern "C" void square_plus_one(const float* x, float* y, int64_t n);
#if DNNF_PART == 0 * DNNF_PARTS / 10
extern "C" void square_plus_one(const float* x, float* y, int64_t n) {{
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i] + 1.0f;
}}
#endif
{part1}
"""


@pytest.mark.parametrize("broken", [False, True])
def test_a_part_that_fails_falls_back_to_the_whole_compile(broken, logged_cxx, monkeypatch):
    """Part 1 holds a line that fails only when the source is compiled in parts (a stand-in for
    any failure of a part or of the link): the module still builds, by the whole compile."""
    monkeypatch.setenv("DNNF_COMPILE_PARTS", "2")
    part1 = "#if DNNF_PART == 5 * DNNF_PARTS / 10\n" + \
            ("#if DNNF_PARTS > 1\n#error in parts\n#endif\n" if broken else "int unused_in_part1;\n") + "#endif"
    flags = ["-std=c++17", "-O1", f"-I{prelude_dir()}", f"-DDNNF_PRELUDE_HASH={_core.prelude_hash(prelude_dir())}"]
    lib = _core.compile_shared(KERNEL.format(part1=part1), flags,
                               pch_header=os.path.join(prelude_dir(), "module_common.h"))
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    y = np.zeros_like(x)
    lib.call_f32_unary("square_plus_one", x, y)
    np.testing.assert_allclose(y, x * x + 1, rtol=2e-7)
    kinds = [k for k, _ in _module_compiles(logged_cxx)]
    assert kinds == (["part", "part", "whole"] if broken else ["part", "part", "link"])


def test_prelude_build_time_is_counted_apart(tmp_path, monkeypatch, own_prelude):
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path / "cache"))
    before = _core.prelude_build_seconds()
    df.compile(tiny_convnet(), threads=1, profile="off")  # a fresh cache: header and units built
    built = _core.prelude_build_seconds() - before
    assert built > 0
    df.compile(tiny_convnet(), threads=1, profile="off")  # a cache hit: nothing built
    assert _core.prelude_build_seconds() - before == built
