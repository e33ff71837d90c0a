"""What the generated kernels derive from this machine, read from the kernels' own code.

The prelude (cpp/codegen/prelude) sizes its GEMM and convolution blocking from the caches the
OS reports and picks its register tile by instruction set; nothing of it is a constant from
one machine. This module compiles a small probe against the same prelude headers with a
generated module's flags (`_core.module_flags`) (so it cannot drift from what the kernels do), and
returns what they will use: `python -m dnnfusion info --machine` prints it. The probe is
compiled once per prelude, ISA and compiler into the kernel cache, like any module.
"""

from __future__ import annotations

import ctypes

from dnnfusion import _core
from dnnfusion._paths import prelude_dir
from dnnfusion.errors import CompileError

# The probe's report: (name, C++ expression) in order; every value is an integer.
_FIELDS = [
    ("l1d_bytes", "gemm::cache_bytes(1)"),
    ("l2_bytes", "gemm::cache_bytes(2)"),
    ("vector_floats", "simd::kVecWidth"),
    ("mr", "gemm::kMR"),
    ("nr", "gemm::kNR"),
    ("ku", "gemm::kKU"),
    ("unroll", "DNNF_GEMM_UNROLL"),
    ("in_tile_prefetch", "gemm::kInTilePrefetch ? 1 : 0"),
    ("mc", "b.mc"),
    ("kc", "b.kc"),
    ("nc", "b.nc"),
    ("nc_by_kc", "b.nc_by_kc ? 1 : 0"),
    ("nc_for_k64", "gemm::nc_for_kc(64)"),
    ("conv_chunk_channels_3x3", "conv::direct::chunk_channels(9, 1 << 20)"),
    ("threads", "default_num_threads()"),
    # the smallest square plane (one image, 64 -> 64 channels) on which a Winograd 3x3 takes
    # F(4x4) (conv_winograd.h tile(); 0: none up to 1024, as $DNNF_WINOGRAD_TILE=2 makes it)
    ("winograd_f4_min_side", "f4_min_side()"),
]

_PROBE = """// dnnfusion tuning probe
#include "conv_direct.h"
#include "conv_winograd.h"
#include "gemm.h"
#include "parallel.h"

static int f4_min_side() {{
  using namespace dnnf;
  for (int hw = 8; hw <= 1024; ++hw) {{
    conv::ConvShape s{{}};
    s.nd = 2; s.N = 1; s.C = 64; s.M = 64; s.group = 1;
    for (int i = 0; i < 3; ++i) {{ s.in[i] = s.out[i] = s.k[i] = s.stride[i] = s.dil[i] = 1; s.pad_begin[i] = 0; }}
    s.in[0] = s.in[1] = s.out[0] = s.out[1] = hw; s.k[0] = s.k[1] = 3; s.pad_begin[0] = s.pad_begin[1] = 1;
    if (conv::wino::chosen(s) && conv::wino::tile(s) == 4) return hw;
  }}
  return 0;
}}

extern "C" __attribute__((visibility("default"))) int dnnf_tuning_probe(long* out, int n) {{
  using namespace dnnf;
  const gemm::Blocking b = gemm::cache_blocking();
  const long v[] = {{{values}}};
  const int count = static_cast<int>(sizeof(v) / sizeof(v[0]));
  for (int i = 0; i < count && i < n; ++i) out[i] = v[i];
  return count;
}}
"""


def machine_tuning(isa: str | None = None) -> dict:
    """The register tile, blocking and thread count the generated CPU kernels use for `isa`
    (default: this CPU's best) on this machine, as the prelude computes them at run time
    ($DNNF_GEMM_BLOCKING and $DNNF_NUM_THREADS included). Raises dnnfusion.Error when the
    ISA is unknown or lacking here, or no C++ compiler is found."""
    isa = isa or _core.cpu_features()["isa"]
    pdir = prelude_dir()
    source = _PROBE.format(values=", ".join(f"static_cast<long>({e})" for _, e in _FIELDS))
    # A generated module's own flags (their prelude hash keys the cache; hidden symbols, so the
    # probe's statics never stand in for a module's).
    lib = _core.compile_shared(source, _core.module_flags(isa, pdir))
    fn = ctypes.CDLL(lib.path).dnnf_tuning_probe
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.POINTER(ctypes.c_long), ctypes.c_int]
    buf = (ctypes.c_long * len(_FIELDS))()
    if fn(buf, len(_FIELDS)) != len(_FIELDS):
        raise CompileError("the tuning probe reported a different number of values than asked for")
    out = {"isa": isa}
    out.update({name: int(buf[i]) for i, (name, _) in enumerate(_FIELDS)})
    # the planner's estimate for expansions no measurement settles, from the same L2 (plan.h expand_min_bytes)
    out["expand_min_bytes"] = int(_core.expand_min_bytes())
    return out


def describe(t: dict) -> list[str]:
    """`machine_tuning`'s answer as the lines `info --machine` prints."""
    return [
        f"gemm       {t['isa']}: register tile {t['mr']} x {t['nr']} floats "
        f"({t['nr'] // t['vector_floats']} vectors of {t['vector_floats']}), k-chunk {t['ku']}, "
        f"unroll {t['unroll']}, in-tile prefetch {'on' if t['in_tile_prefetch'] else 'off'}",
        (f"           blocking from L1d {t['l1d_bytes'] >> 10} KiB / L2 {t['l2_bytes'] >> 10} KiB: "
         f"kc {t['kc']} (A panel in ~60% of L1), nc {t['nc']} at kc {t['kc']}, {t['nc_for_k64']} "
         f"at k 64 (packed B in half of L2), mc {t['mc']} rows a task" if t["nc_by_kc"] else
         f"           blocking fixed by $DNNF_GEMM_BLOCKING: mc {t['mc']}, kc {t['kc']}, nc {t['nc']}"),
        f"           weights (pre-packed B, unless the caller loops over them: Winograd, 1x1 expansions) under at "
        f"most {t['l2_bytes'] // 16 // max(1, t['kc']) // t['mr'] * t['mr']} rows a task at kc {t['kc']} (their A in a "
        f"quarter of L2): read once, in memory order",
        f"conv       direct 3x3: at most {t['conv_chunk_channels_3x3']} input channels a chunk "
        f"(one m-block's weights in 3/4 of L2); default threads {t['threads']}",
        (f"           Winograd 3x3 (>= 32 channels, >= 8x8 outputs): F(4x4) on planes from "
         f"{t['winograd_f4_min_side']}x{t['winograd_f4_min_side']} (at least {t['mr']} of its 4x4 "
         f"tiles a thread), F(2x2) below ($DNNF_WINOGRAD_TILE forces one)"
         if t["winograd_f4_min_side"] else
         "           Winograd 3x3 (>= 32 channels, >= 8x8 outputs): F(2x2) only ($DNNF_WINOGRAD_TILE=2)"),
        f"           1x1 expansions computed inside the depthwise conv that reads them: as measured "
        f"(profile=\"auto\", this machine's profiling database), else estimated when larger "
        f"than {t['expand_min_bytes'] >> 10} KiB (twice the L2; $DNNF_EXPAND_MIN_BYTES decides every one)",
        f"           strided 1x1: a GEMM over the output pixels where the weights fill {t['l2_bytes'] >> 11} KiB "
        f"or more (half of L2), else the direct kernel",
    ]
