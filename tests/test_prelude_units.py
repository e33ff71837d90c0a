"""Prelude units (cpp/codegen/prelude/prelude_units.h; compile_shared in
cpp/runtime/compiler.cc): the anchor kernels' template instances a module calls are compiled
once per compiler and flags into the kernel cache and linked into every module that names
them on its second line, which then declares them extern and compiles only its own kernels.
Checked here: a module links exactly the units it names and computes bit for bit what the
same module compiled whole computes; every unit's declarations match the prelude's templates
in every x86 dialect; a damaged unit object or a malformed units line costs time, never a
failure; DNNF_PRELUDE_UNITS=0 turns the units off."""

from __future__ import annotations

import ctypes
import os
import platform
import re
import subprocess

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core
from dnnfusion._paths import prelude_dir
from dnnfusion.builtin import tiny_convnet

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

UNITS = {  # group -> what it holds (prelude_units.h)
    "gemm": "MatMul/Gemm with packed B, NHWC pointwise Conv", "gemmb": "MatMul with strided B",
    "gemmpro": "MatMul/Gemm with a prologue", "gemmall": "gemm, gemmb and gemmpro in one", "conv": "NCHW Conv", "nhwcdirect": "NHWC direct Conv",
    "nhwcwino": "NHWC Winograd Conv", "nhwcdw": "NHWC depthwise Conv", "nhwcexp": "NHWC expansion + depthwise",
    "pool": "NCHW pools", "poolnhwc": "NHWC pools", "rows": "Softmax/LayerNorm/...",
    **{f"reduce{k}": f"float Reduce{k}" for k in ("sum", "mean", "max", "min", "prod", "norm")},
    "resize": "Resize", "roi": "RoiAlign", "pack": "weights packed at setup (PackedB, PackedNhwcWeights)",
}
KINDS = {"pack": "0"}  # the epilogue kinds of a group that has not all three (pack has no epilogue)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Kernel caches the tests of this file share (each cold cache builds its own units)."""
    return tmp_path_factory.mktemp("units")


@pytest.fixture
def cache(shared, monkeypatch, own_prelude):
    """The shared kernel cache, units on (built in it: own_prelude)."""
    monkeypatch.setenv("DNNF_CACHE_DIR", str(shared / "cache"))
    monkeypatch.delenv("DNNF_PRELUDE_UNITS", raising=False)
    return shared / "cache" / "kernels"


@pytest.fixture
def own_cache(tmp_path, monkeypatch, own_prelude):
    """A kernel cache of this test's own, units on (built in it: own_prelude)."""
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DNNF_PRELUDE_UNITS", raising=False)
    return tmp_path / "cache" / "kernels"


def units_of(source: str) -> list[str]:
    line = source.splitlines()[1]
    assert line.startswith("// dnnf-prelude-units:"), line
    return line.split(":", 1)[1].split()


def outputs(result) -> list[np.ndarray]:
    return [np.asarray(r) for r in (result if isinstance(result, (list, tuple)) else [result])]


def linked_units(path: str) -> set[str]:
    """The units a compiled module links, from the symbols each unit object exports."""
    lib = ctypes.CDLL(path)
    return {f"{g}.{e}" for g in UNITS for e in "012" if hasattr(lib, f"dnnf_unit_{g}_{e}")}


def served(units: list[str], cache) -> set[str]:
    """The unit objects a module naming `units` links (runtime/prelude_units.cc served_units):
    a GEMM unit of one kind is served by gemmall of its epilogue where the cache holds that."""
    built = {p.stem for p in cache.glob("units-*/*.o")}
    out = set()
    for u in units:
        group, ep = u.split(".")
        out.add(f"gemmall.{ep}" if group in ("gemm", "gemmb", "gemmpro") and f"gemmall.{ep}" in built else u)
    return out


def transformer_block() -> str:
    """MatMul + bias -> Softmax, LayerNormalization, ReduceMean: the gemm, rows and reduce units."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [32, 32], rng.standard_normal((32, 32)).astype(np.float32).ravel())
    b = helper.make_tensor("b", TensorProto.FLOAT, [32], rng.standard_normal(32).astype(np.float32))
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [32], np.ones(32, np.float32))
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [32], np.zeros(32, np.float32))
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["h"]),
        helper.make_node("Softmax", ["h"], ["sm"], axis=-1),
        helper.make_node("LayerNormalization", ["h", "scale", "bias"], ["ln"], axis=-1),
        helper.make_node("Add", ["sm", "ln"], ["y"]),
        helper.make_node("ReduceMean", ["y"], ["m"], axes=[-1], keepdims=1),
    ]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 32]),
                               helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 16, 1])],
                              initializer=[w, b, scale, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def inverted_residual() -> bytes:
    """MobileNetV2's block (1x1 expansion + ReLU, depthwise 3x3 + ReLU, 1x1 projection, residual
    Add), planned channels last: the nhwc unit, with the expansion computed inside the depthwise
    kernel (conv_nhwc_expand.h) or, below its size bound, apart from it."""
    rng = np.random.default_rng(2)

    def t(name, *shape):
        return helper.make_tensor(name, TensorProto.FLOAT, list(shape),
                                  (0.3 * rng.standard_normal(shape)).astype(np.float32).ravel())
    nodes = [  # a stem first, so that the expansion reads a channels-last tensor as in a network
        helper.make_node("Conv", ["x", "ws"], ["s0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["s0"], ["s"]),
        helper.make_node("Conv", ["s", "we", "be"], ["e"]),
        helper.make_node("Relu", ["e"], ["er"]),
        helper.make_node("Conv", ["er", "wd", "bd"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=64),
        helper.make_node("Relu", ["d"], ["dr"]),
        helper.make_node("Conv", ["dr", "wp", "bp"], ["p"]),
        helper.make_node("Add", ["p", "s"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "inverted_residual",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 24, 24])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 24, 24])],
                              initializer=[t("ws", 16, 3, 3, 3), t("we", 64, 16, 1, 1), t("be", 64), t("wd", 64, 1, 3, 3), t("bd", 64),
                                           t("wp", 16, 64, 1, 1), t("bp", 16)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def matmul_kinds(prologue: bool = True) -> bytes:
    """x @ x^T (both operands strided: the gemmb unit) and, with `prologue`, Sigmoid(x) @ W (A
    computed by a fused prologue: gemmpro)."""
    rng = np.random.default_rng(3)
    w = helper.make_tensor("w", TensorProto.FLOAT, [32, 48], rng.standard_normal((32, 48)).astype(np.float32).ravel())
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]), helper.make_node("MatMul", ["x", "xt"], ["s"])]
    outs = [helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 16, 16])]
    if prologue:
        nodes += [helper.make_node("Sigmoid", ["x"], ["sx"]), helper.make_node("MatMul", ["sx", "w"], ["p"])]
        outs.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 16, 48]))
    graph = helper.make_graph(nodes, "matmuls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32])],
                              outs, initializer=[w] if prologue else [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


# name -> (model, input shapes, unit groups it must link, compile options, whether the 1x1
# expansion is computed inside the depthwise kernel: DNNF_EXPAND_MIN_BYTES 0, else far above it)
CHANNELS_LAST = {"layout": "nhwc"}
MODELS = {
    "tiny_convnet": (lambda path: tiny_convnet(), [(1, 3, 32, 32)], {"conv", "gemm", "pool", "rows", "pack"}, {}, False),
    # the stem direct (3 channels: no Winograd), the 1x1s the gemm unit, the 3x3 depthwise
    "inverted_residual": (lambda path: _write(path, inverted_residual()), [(1, 3, 24, 24)],
                          {"nhwcdirect", "gemm", "nhwcdw", "pack"}, CHANNELS_LAST, False),
    "inverted_residual_expanded": (lambda path: _write(path, inverted_residual()), [(1, 3, 24, 24)],
                                   {"nhwcdirect", "gemm", "nhwcexp", "pack"}, CHANNELS_LAST, True),
    "transformer_block": (lambda path: _write(path, transformer_block()), [(1, 16, 32)],
                          {"gemm", "rows", "reducemean", "pack"}, {}, False),
    # gemmb and gemmpro of one epilogue: the one unit of all GEMM kinds instead
    "matmul_kinds": (lambda path: _write(path, matmul_kinds()), [(1, 16, 32)], {"gemmall", "pack"}, {}, False),
    "matmul_strided": (lambda path: _write(path, matmul_kinds(False)), [(1, 16, 32)], {"gemmb"}, {}, False),
}


def _write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("name", list(MODELS))
def test_a_module_links_its_units_and_computes_what_it_computes_whole(name, cache, shared, tmp_path, monkeypatch):
    make, shapes, groups, options, expanded = MODELS[name]
    model = make(tmp_path / f"{name}.onnx")
    monkeypatch.setenv("DNNF_EXPAND_MIN_BYTES", "0" if expanded else str(1 << 30))
    xs = [np.random.default_rng(1).standard_normal(s).astype(np.float32) for s in shapes]
    linked = df.compile(model, profile="off", **options)
    units = units_of(linked.source())
    assert groups == {u.split(".")[0] for u in units}, units  # the paths it takes, no others
    assert ('#include "conv_nhwc_expand.h"' in linked.source()) == expanded
    assert linked_units(linked.library_path) == served(units, cache)
    assert {p.stem for p in cache.glob("units-*/*.o")} >= served(units, cache)

    monkeypatch.setenv("DNNF_PRELUDE_UNITS", "0")
    monkeypatch.setenv("DNNF_CACHE_DIR", str(shared / "whole"))
    whole = df.compile(model, profile="off", **options)
    assert whole.source() == linked.source()
    assert linked_units(whole.library_path) == set()
    assert not list((shared / "whole").glob("kernels/units-*"))
    got, want = outputs(linked(*xs)), outputs(whole(*xs))
    assert len(got) == len(want) == (2 if name in ("transformer_block", "matmul_kinds") else 1)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_a_second_module_reuses_the_unit_objects(cache):
    first = df.compile(tiny_convnet(), profile="off")
    stamps = {p: p.stat().st_mtime_ns for p in cache.glob("units-*/*.o")}
    second = df.compile(tiny_convnet(), profile="off", planner="tvm")
    assert second.source() != first.source()
    shared = set(units_of(first.source())) & set(units_of(second.source()))
    assert shared
    for p, stamp in stamps.items():  # none rebuilt
        assert p.stat().st_mtime_ns == stamp
    assert linked_units(second.library_path) == served(units_of(second.source()), cache)


@pytest.mark.prelude_unit_problems
def test_a_damaged_unit_object_is_rebuilt_and_the_module_still_compiles(own_cache):
    cache = own_cache
    first = df.compile(tiny_convnet(), profile="off")
    assert first.stats["prelude_units"] == {"named": units_of(first.source()),
                                            "linked": units_of(first.source()), "problems": []}
    damaged = list(cache.glob("units-*/*.o"))
    for p in damaged:
        p.write_bytes(b"not an object file")
    x = np.random.default_rng(2).standard_normal((1, 3, 32, 32)).astype(np.float32)
    with pytest.warns(df.CompileWarning, match="did not compile with its prelude units") as said:
        again = df.compile(tiny_convnet(), profile="off", planner="tvm")  # a module not compiled yet
    assert set(units_of(again.source())) & {p.stem for p in damaged}
    assert linked_units(again.library_path) == set()  # compiled whole, and it says so
    units = again.stats["prelude_units"]
    assert units["named"] == units_of(again.source()) and units["linked"] == []
    # the linker's complaint names the damaged object
    assert len(units["problems"]) == 1 and any(str(p) in units["problems"][0] for p in damaged)
    assert str(said[0].message).endswith(units["problems"][0])
    assert not any(p.exists() for p in damaged)  # and the damaged objects are gone
    third = df.compile(tiny_convnet(), profile="off", planner="patterns")  # built again, linked
    assert linked_units(third.library_path) == served(units_of(third.source()), cache)
    assert third.stats["prelude_units"]["linked"] == units_of(third.source())
    want = tiny_convnet().run_reference(x)
    for got in (outputs(again(x)), outputs(third(x))):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.prelude_unit_problems
def test_a_unit_the_compiler_rejects_is_said_and_the_module_compiles_whole(own_cache, tmp_path, monkeypatch):
    """The other fallback: a unit that does not compile (a broken prelude, a compiler that
    rejects it) leaves the module to compile whole, correct and slower, with a CompileWarning
    that quotes the compiler."""
    real = _core.find_compiler()["argv"]
    script = tmp_path / "cxx.sh"  # the real compiler, except for unit sources
    script.write_text('#!/bin/sh\ncase "$*" in *tmp.unit.*) echo "unit.cc:3:1: error: injected" >&2; exit 1;; esac\n'
                      f'exec {" ".join(real)} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("DNNF_CXX", str(script))
    with pytest.warns(df.CompileWarning, match="did not compile, so modules naming it compile whole") as said:
        m = df.compile(tiny_convnet(), profile="off")
    units = m.stats["prelude_units"]
    assert units["named"] == units_of(m.source()) and units["named"] and units["linked"] == []
    assert units["problems"] and all(p.endswith("unit.cc:3:1: error: injected") for p in units["problems"])
    assert len(said) == len(units["problems"])
    assert linked_units(m.library_path) == set()
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    for a, b in zip(outputs(m(x)), tiny_convnet().run_reference(x)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


KERNEL = """{line}
#include "module_common.h"
extern "C" void square_plus_one(const float* x, float* y, int64_t n) {{
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i] + 1.0f;
}}
"""


def test_a_malformed_units_line_compiles_whole(own_cache):
    flags = ["-std=c++17", "-O1", f"-I{prelude_dir()}", f"-DDNNF_PRELUDE_HASH={_core.prelude_hash(prelude_dir())}"]
    for line in ["// dnnf-prelude-units: gemm.7", "// dnnf-prelude-units: ../x.1",
                 "// dnnf-prelude-units: $(reboot).0", "// dnnf-prelude-units: gemm.1x", "// another comment"]:
        lib = _core.compile_shared(f"// header\n{KERNEL.format(line=line)}", flags,
                                   pch_header=os.path.join(prelude_dir(), "module_common.h"))
        x = np.linspace(-2, 2, 9, dtype=np.float32)
        y = np.zeros_like(x)
        lib.call_f32_unary("square_plus_one", x, y)
        np.testing.assert_allclose(y, x * x + 1, rtol=2e-7)
        assert not list(own_cache.glob("units-*")), line
    # The same kernel with a well-formed line links the unit it names.
    lib = _core.compile_shared(f"// header\n{KERNEL.format(line='// dnnf-prelude-units: roi.0')}", flags,
                               pch_header=os.path.join(prelude_dir(), "module_common.h"))
    assert linked_units(lib.path) == {"roi.0"}


def test_every_unit_can_be_declared_by_a_module_that_includes_only_what_it_needs(tmp_path):
    """A module declares its units (DNNF_UNIT_EXTERN) after module_common.h and the headers its
    stages need (cpu/render_module.cc headers(): conv_nhwc.h for an NHWC conv without an
    expansion, pool_nhwc.h, irregular.h, resize.h). A unit declaring a template those headers do
    not (the expansion kernels before conv_nhwc_expand.h defined DNNF_UNIT_NHWC_EXPAND) made such
    modules fail with their units and compile whole, twice as slowly, with no other sign."""
    src = tmp_path / "module_like.cc"
    src.write_text('#include "module_common.h"\n' +
                   "".join(f'#include "{h}"\n' for h in ("conv_nhwc.h", "pool_nhwc.h", "irregular.h", "resize.h")) +
                   "".join(f"DNNF_UNIT_EXTERN({g}, {e})\n" for g in UNITS for e in "012"))
    cxx = _core.find_compiler()["argv"]
    r = subprocess.run(cxx + ["-fsyntax-only", "-std=c++17", "-DDNNF_LINK_UNITS", f"-I{prelude_dir()}", str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 dialects")
def test_every_unit_matches_the_prelude_in_every_x86_dialect(tmp_path):
    """Each unit's explicit instantiations name templates and signatures the prelude has: a
    unit that stopped matching would fail to build, and every module naming it would compile
    whole (slowly) without a word. Syntax only: the dialects need not run here."""
    # Two sources: gemmall defines what gemm, gemmb and gemmpro do (a second definition in one
    # source is an error); nhwcexp first, as it declares the gemm unit's driver extern, which
    # may precede the definition in one source but not follow it.
    together = sorted((g for g in UNITS if g != "gemmall"), key=lambda g: g != "nhwcexp")
    sources = []
    for i, groups in enumerate([together, ["nhwcexp", "gemmall"]]):
        src = tmp_path / f"units_{i}.cc"
        src.write_text('#include "prelude_unit_sources.h"\n' +
                       "".join(f"DNNF_UNIT_DEFINE({g}, {e})\n" for g in groups for e in KINDS.get(g, "012")))
        sources.append(src)
    header = open(os.path.join(prelude_dir(), "prelude_units.h")).read()
    assert set(re.findall(r"#define DNNF_UNIT_([a-z]+)\(EP, D\)", header)) == set(UNITS)
    cxx = _core.find_compiler()["argv"]
    for isa in _core.isas():
        if isa["arch"] not in ("x86_64", "any"):
            continue
        for src in sources:
            r = subprocess.run(cxx + ["-fsyntax-only", "-std=c++17", f"-I{prelude_dir()}", str(src)] + isa["flags"],
                               capture_output=True, text=True)
            assert r.returncode == 0, f"{isa['name']}, {src.name}: {r.stderr[-3000:]}"


def test_hinted_units_are_built_beside_the_missing_ones(own_cache):
    """compile() hints its first plan's units while profiling compiles candidates: a compile
    that builds a unit it lacks builds the hinted ones in the same batch (invalid names are
    ignored), and a compile that lacks none builds nothing."""
    flags = ["-std=c++17", "-O1", f"-I{prelude_dir()}", f"-DDNNF_PRELUDE_HASH={_core.prelude_hash(prelude_dir())}"]
    header = os.path.join(prelude_dir(), "module_common.h")
    try:
        _core.hint_prelude_units(["resize.0", "../x.1", "roi.0"])
        _core.compile_shared(f"// a\n{KERNEL.format(line='// dnnf-prelude-units: roi.0')}", flags, pch_header=header)
        assert sorted(p.name for p in own_cache.glob("units-*/*.o")) == ["resize.0.o", "roi.0.o"]
        _core.hint_prelude_units(["pool.0"])
        _core.compile_shared(f"// b\n{KERNEL.format(line='// dnnf-prelude-units: roi.0')}", flags, pch_header=header)
        assert sorted(p.name for p in own_cache.glob("units-*/*.o")) == ["resize.0.o", "roi.0.o"]
    finally:
        _core.hint_prelude_units([])


def test_a_gemm_unit_of_one_kind_is_served_by_gemmall_where_the_cache_has_it(own_cache):
    """gemmall.E holds every GEMM kind of epilogue E: a module naming gemmb.E in a cache that
    holds gemmall.E (built for another module) links that and builds nothing; with neither
    built nor hinted, gemmb.E is built itself."""
    flags = ["-std=c++17", "-O1", f"-I{prelude_dir()}", f"-DDNNF_PRELUDE_HASH={_core.prelude_hash(prelude_dir())}"]
    header = os.path.join(prelude_dir(), "module_common.h")
    _core.hint_prelude_units([])
    lib = _core.compile_shared(f"// a\n{KERNEL.format(line='// dnnf-prelude-units: gemmpro.1')}", flags,
                               pch_header=header)
    assert linked_units(lib.path) == {"gemmpro.1"}
    lib = _core.compile_shared(f"// b\n{KERNEL.format(line='// dnnf-prelude-units: gemmall.0')}", flags,
                               pch_header=header)
    lib = _core.compile_shared(f"// c\n{KERNEL.format(line='// dnnf-prelude-units: gemmb.0 roi.0')}", flags,
                               pch_header=header)
    assert linked_units(lib.path) == {"gemmall.0", "roi.0"}
    assert sorted(p.name for p in own_cache.glob("units-*/*.o")) == ["gemmall.0.o", "gemmpro.1.o", "roi.0.o"]
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    y = np.zeros_like(x)
    lib.call_f32_unary("square_plus_one", x, y)
    np.testing.assert_allclose(y, x * x + 1, rtol=2e-7)


def test_warmup_builds_what_a_later_compile_uses(own_cache, capsys, tmp_path, monkeypatch):
    """`python -m dnnfusion warmup` builds the precompiled header and the units a machine's
    first compile would (for this CPU's ISA, with the modules' flags): a model naming them then
    builds nothing but its own module. Unknown unit names are a clear error."""
    from dnnfusion import cli

    g = tiny_convnet()
    with monkeypatch.context() as mp:  # the units its module names, from a compile without them
        mp.setenv("DNNF_CACHE_DIR", str(tmp_path / "whole"))
        mp.setenv("DNNF_PRELUDE_UNITS", "0")
        units = units_of(df.compile(g, profile="off").source())
    assert cli.main(["warmup", "--units", *units]) == 0
    assert f"the precompiled header and {len(units)} prelude units are in {own_cache}" in capsys.readouterr().out
    assert sorted(p.stem for p in own_cache.glob("units-*/*.o")) == sorted(units)
    assert list(own_cache.glob("pch-*/*.gch"))
    before = _core.prelude_build_seconds()
    m = df.compile(g, profile="off")
    assert _core.prelude_build_seconds() == before  # nothing of the prelude built again
    assert linked_units(m.library_path) == set(units)
    assert cli.main(["warmup", "--units", "gemm.1", "nosuch.1"]) == 2
    assert "no such prelude unit: nosuch.1" in capsys.readouterr().err
    assert set(cli.prelude_units()) == {f"{g}.{k}" for g in UNITS for k in KINDS.get(g, "012")}


def _conv_model(weights_as_input: bool) -> bytes:
    """A 3x3 convolution, 32 -> 32 channels at 16x16 (Winograd's shape), then ReLU; its weights
    an initializer or an input of the graph (packed per call then)."""
    rng = np.random.default_rng(4)
    w = (0.1 * rng.standard_normal((32, 32, 3, 3))).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 16, 16])
    inputs = [x] + ([helper.make_tensor_value_info("w", TensorProto.FLOAT, [32, 32, 3, 3])] if weights_as_input else [])
    init = [] if weights_as_input else [helper.make_tensor("w", TensorProto.FLOAT, [32, 32, 3, 3], w.ravel())]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "conv", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 16, 16])],
                              initializer=init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(), w


@pytest.mark.parametrize("winograd,weights_as_input,want", [
    ("", False, {"nhwcwino", "pack"}), ("0", False, {"nhwcdirect", "pack"}),
    ("", True, {"nhwcwino", "nhwcdirect", "nhwcdw", "gemm", "pack"})])
def test_a_module_links_the_convolution_paths_it_takes(winograd, weights_as_input, want, cache, tmp_path, monkeypatch):
    """A channels-last convolution with packed weights calls the one path they were packed for
    (conv_shape.h nhwc_path: Winograd here, the direct kernel with DNNF_WINOGRAD=0) and its
    module names that path's unit only; weights computed in the run may take any path."""
    if winograd:
        monkeypatch.setenv("DNNF_WINOGRAD", winograd)
    else:
        monkeypatch.delenv("DNNF_WINOGRAD", raising=False)
    data, w = _conv_model(weights_as_input)
    m = df.compile(_write(tmp_path / "conv.onnx", data), profile="off", layout="nhwc")
    units = units_of(m.source())
    assert {u.split(".")[0] for u in units} == want, units
    assert linked_units(m.library_path) == served(units, cache)
    x = np.random.default_rng(5).standard_normal((1, 32, 16, 16)).astype(np.float32)
    feeds = {"x": x, "w": w} if weights_as_input else {"x": x}
    got = outputs(m(**feeds))[0]
    ref = df.load(data).run_reference(*feeds.values())
    np.testing.assert_allclose(got, outputs(ref)[0], rtol=1e-4, atol=1e-4)
