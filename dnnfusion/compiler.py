"""``dnnfusion.compile``: the whole pipeline (load, rewrite §4.2, plan §4.3, generate code §4.4,
compile and load) behind one call, and :class:`CompiledModel`, which runs the result on NumPy
arrays or torch tensors."""

from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Any, Sequence

import numpy as np

from dnnfusion import _core
from dnnfusion import dynamic as _dynamic
from dnnfusion.kernel_profile import KernelProfile
from dnnfusion.frontends import onnx_random as _onnx_random
from dnnfusion import host_tail as _host_tail
from dnnfusion._paths import prelude_dir
from dnnfusion._threads import default_threads
from dnnfusion import plan as _plan
from dnnfusion import profiling as _profiling
from dnnfusion import rewrite as _rewrite
from dnnfusion import specialize as _specialize
from dnnfusion.planned import planned_graph as _planned
from dnnfusion.ecg import ECG
from dnnfusion.dtypes import numpy_dtype, to_torch, torch_numpy
from dnnfusion.errors import CompileWarning, DTypeError, Error, ShapeError

LAYOUTS = ("auto", "nchw", "nhwc")
TARGETS = ("cpu", "opencl")


def _profile_options(profile: str | None, seconds: float | None) -> tuple[str, float]:
    """compile()'s profile mode and budget: the arguments, else $DNNF_PROFILE and
    $DNNF_PROFILE_SECONDS, else "auto" and profiling.DEFAULT_SECONDS."""
    if profile is None:
        profile = os.environ.get("DNNF_PROFILE") or "auto"
    if profile not in _profiling.PROFILE_MODES:
        raise Error(f"unknown profile mode {profile!r}; choose 'auto' (measure the yellow "
                    "pairs no database settles, within a time budget) or 'off' (estimate them)")
    if seconds is None:
        env = os.environ.get("DNNF_PROFILE_SECONDS")
        try:
            seconds = float(env) if env else _profiling.DEFAULT_SECONDS
        except ValueError:
            raise Error(f"DNNF_PROFILE_SECONDS={env!r} is not a number of seconds") from None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0 \
            or seconds == float("inf"):
        raise Error(f"profile_seconds must be a finite number of seconds >= 0, got {seconds!r}")
    return profile, float(seconds)


def _check_threads(threads: Any) -> int:
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    return int(threads)


class CompiledModel:
    """A model compiled for the CPU. Call it with the graph's inputs, positionally or by
    name: NumPy arrays in give NumPy arrays out, torch tensors in give torch tensors out.
    One output is returned alone, several as a tuple. Nothing is cast: a wrong dtype is a
    DTypeError, a wrong shape a ShapeError, a wrong number of inputs a TypeError."""

    def __init__(self, graph: ECG, plan: _plan.FusionPlan, generated: Any, executable: Any,
                 stats: dict[str, Any], rewrite_report: _rewrite.RewriteReport | None):
        self.graph = graph
        self.plan = plan
        self.generated = generated
        self.rewrite_report = rewrite_report
        self.stats = stats
        self._exe = executable
        self.input_names = [v.name for v in graph.inputs]
        self.output_names = [v.name for v in graph.outputs]
        self._specializer: _specialize.Specializer | None = None  # models compiled again per shape
        self._batcher: _dynamic.Batcher | None = None  # dynamic=True: any batch through this program
        # float16 / bfloat16 inputs and outputs (their NumPy dtypes) of a model computed in
        # float32 (float16="f32")
        self._f16_inputs: dict[str, np.dtype] = {}
        self._f16_outputs: list[np.dtype | None] = [None] * len(self.output_names)
        self._tail: _host_tail.HostTail | None = None  # operators run after the kernels, on the host
        self._padder: Any = None  # dynamic=True: a padded.Padder runs any shorter sequence padded
        # RandomUniform / RandomNormal nodes: hidden inputs drawn anew before every call
        self._draws = _onnx_random.Draws(graph.inputs)
        if self._draws:
            self.input_names = [n for i, n in enumerate(self.input_names) if i not in self._draws.positions]

    # Calling -----------------------------------------------------------------------------
    def __call__(self, *args: Any, **feeds: Any) -> Any:
        outs = self.run(*args, **feeds)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run(self, *args: Any, **feeds: Any) -> list:
        """Like calling the model, but always returns a list of outputs."""
        given = self._bind(args, feeds)
        torch_like = [a for a in given if _is_torch(a)]
        arrays = self._arrays(given)
        if self._draws:
            arrays = self._draws.fill(arrays)
        if self._padder is not None:  # the call as given, before the batch is cut into chunks
            self._padder.check(arrays, any_batch=self._batcher is not None)
        if self._batcher is not None:
            outs = self._batcher.run(arrays, self.input_names, self._run_arrays)
        else:
            outs = self._run_arrays(arrays)
        if any(d is not None for d in self._f16_outputs):
            outs = [o if d is None else o.astype(d) for o, d in zip(outs, self._f16_outputs)]
        if not torch_like:
            return outs
        device = torch_like[0].device
        res = [to_torch(o) for o in outs]
        return res if device.type == "cpu" else [t.to(device) for t in res]

    def _run_arrays(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        if self._padder is not None:
            return self._padder.run(arrays)
        m = self
        if self._specializer is not None and any(
                a.shape != tuple(v.shape) for a, v in zip(arrays, self.graph.inputs)):
            shapes = {name: a.shape for name, a in zip(self.input_names, arrays)}
            m = self._specializer.get(self, shapes, arrays)
            if m.stats["threads"] != self.stats["threads"]:  # set_num_threads since it was compiled
                m.set_num_threads(self.stats["threads"])
        outs = m._exe.run(arrays)
        return outs if m._tail is None else m._tail.run(arrays, outs)

    def _bind(self, args: tuple, feeds: dict) -> list:
        names = self.input_names
        if len(args) > len(names):
            raise TypeError(f"the model takes {len(names)} input{'s' if len(names) != 1 else ''} "
                            f"({', '.join(names)}), got {len(args)}")
        bound: dict[str, Any] = dict(zip(names, args))
        for k, v in feeds.items():
            if k not in names:
                raise TypeError(f"the model has no input named {k!r}; its inputs are "
                                f"{', '.join(names)}")
            if k in bound:
                raise TypeError(f"input {k!r} given twice (by position and by name)")
            bound[k] = v
        missing = [n for n in names if n not in bound]
        if missing:
            raise TypeError(f"missing input{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(missing)} (the model takes {', '.join(names)})")
        return [bound[n] for n in names]

    def _arrays(self, given: list) -> list[np.ndarray]:
        arrays = [self._array(a, name) for a, name in zip(given, self.input_names)]
        if self._f16_inputs:  # the model's float16 / bfloat16 inputs, computed in float32, and
            # its int4 / uint4 / int2 / uint2 ones, computed in int8 / uint8
            for i, (name, v) in enumerate(zip(self.input_names, self.graph.inputs)):
                want = self._f16_inputs.get(name)
                if want is not None:
                    if arrays[i].dtype != want:
                        raise DTypeError(f"input '{name}' is {want} in the model, got "
                                         f"{arrays[i].dtype} (nothing is cast)")
                    arrays[i] = arrays[i].astype(numpy_dtype(v.dtype))
        return arrays

    @staticmethod
    def _array(a: Any, name: str) -> np.ndarray:
        if isinstance(a, np.ndarray):
            return a
        if isinstance(a, np.generic):
            return np.asarray(a)
        if _is_torch(a):
            from dnnfusion.dtypes import ecg_dtype

            try:
                ecg_dtype(a.dtype)
            except DTypeError as e:
                raise DTypeError(f"input '{name}': {e}") from None
            t = a.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            if t.is_conj() or t.is_neg():
                t = t.resolve_conj().resolve_neg()
            return torch_numpy(t)
        raise TypeError(f"input '{name}' must be a numpy array or a torch tensor, got "
                        f"{type(a).__name__}")

    def profile(self, *args: Any, repeat: int = 10, warmup: int = 2, **feeds: Any) -> KernelProfile:
        """Runs the model ``warmup + repeat`` times on the given inputs, timing every kernel,
        and returns the median time of each (:class:`KernelProfile`; print it for a table).
        Timing adds one clock read per kernel; the plain call is not instrumented."""
        if repeat < 1 or warmup < 0:
            raise ValueError(f"repeat must be >= 1 and warmup >= 0, got {repeat}, {warmup}")
        given = self._bind(args, feeds)
        arrays = self._arrays(given)
        if self._draws:
            arrays = self._draws.fill(arrays)
        if self._padder is not None:  # the program as it runs this length: padded, length appended
            arrays = self._padder.pad(arrays, self._padder.length(arrays))
        runs = []
        for i in range(warmup + repeat):
            _, seconds = self._exe.run_timed(arrays)
            if i >= warmup:
                runs.append(seconds)
        med = np.median(np.asarray(runs), axis=0)
        rows = [{"function": k["function"], "block": k["block"], "stages": list(k["stages"]),
                 "ms": float(med[i]) * 1e3} for i, k in enumerate(self.kernels)]
        rows.append({"function": "(output copies)", "block": -1, "stages": [],
                     "ms": float(med[-1]) * 1e3})
        return KernelProfile(rows, repeat, self.threads)

    # Threads -----------------------------------------------------------------------------
    @property
    def threads(self) -> int:
        return self.stats["threads"]

    def set_num_threads(self, n: int) -> None:
        """The number of threads the next calls run on."""
        n = _check_threads(n)
        self._exe.set_num_threads(n)
        self.stats["threads"] = n

    # Reading -----------------------------------------------------------------------------
    def explain(self) -> str:
        """Why each producer/consumer pair was fused or not (the plan's explanation), then
        what the generated code runs per block: its stages, passes over memory and bytes
        written, with what the fused prologues and epilogues mean and when code generation
        keeps a value in memory instead."""
        lines = [self.plan.explain(), "", "Generated code (what runs; counted from the code):"]
        for k in self.kernels:
            if not k["stages"]:
                continue
            lines.append(f"  {k['function']} (block {k['block']}): {' | '.join(k['stages'])}; "
                         f"{k['passes']} pass{'es' if k['passes'] != 1 else ''}, "
                         f"{_mb(k['intermediate_bytes_written'])} intermediates written")
        if self.stats["target"] == "opencl":
            d = self.generated.device
            lines += ["", f"OpenCL device limits ({d['name']}): at most {d['max_kernel_args']} tensors per kernel "
                      f"(CL_DEVICE_MAX_PARAMETER_SIZE {d['max_parameter_bytes']} bytes; the planner's limit, named "
                      "above where it stopped a fusion); work-groups of at most "
                      f"{d['max_work_group']} items and {d['local_mem_bytes'] >> 10} KiB of local memory: GEMMs "
                      "and convolutions are tiled where 16 x 16 items and 8.1 KiB fit, in the widest of "
                      f"{'128 x 128 (a GPU; GEMMs of 128 rows and columns or more), ' if d['type'] == 'gpu' else ''}"
                      f"64 x 64 and 32 x 32 tiles that makes as many work-groups as its {d['compute_units']} "
                      "compute units, with K split across groups (partial sums, then a summing kernel) "
                      "where even 32-wide tiles make fewer; GEMMs with too few rows to tile and B along K "
                      "(Linear layers) run a work-group per output; Softmax/LayerNorm rows, float reductions and global pools of 64 or more "
                      "get work-groups where 128 items fit, else one work-item per element or row"]
        if self._tail is not None:
            t = self._tail.stats
            lines += ["", f"On the host after the kernels ({t['operators']} operators: "
                      f"{', '.join(f'{k} x{v}' for k, v in t['ops'].items())}): {t['why']}"]
        lines += ["", _CODE_LEGEND[self.stats["target"]]]
        return "\n".join(lines)

    def source(self) -> str:
        """The generated C++ translation unit."""
        return self.generated.source

    @property
    def kernels(self) -> list[dict]:
        """One dict per generated kernel: block, function, stages, scratch_bytes, passes,
        intermediate_bytes_written."""
        return self.generated.kernels

    @property
    def library_path(self) -> str:
        return self._exe.library_path

    def __repr__(self) -> str:
        s = self.stats
        where = (f"on {s['device']}" if s.get("target") == "opencl"
                 else f"{s['threads']} thread{'s' if s['threads'] != 1 else ''}")
        return (f"<CompiledModel {self.graph.name!r} ({s['planner']}, {s['isa']}, {where}): "
                f"{s['operators_before']} operators -> {s['kernels']} kernels, "
                f"{s['passes']} passes over memory, {_mb(s['intermediate_bytes_written'])} "
                "intermediates written>")


_CODE_LEGEND = {
    "cpu": ("+prologue(n ops): the GEMM computes its A operand while it packs it, evaluating n "
            "fused elementwise operators through the composed index maps of the layout operators "
            "between them; A is never written. The CPU GEMM packs A once per call, so each element "
            "is computed once: no recomputation, one pass over memory less. A producer whose value "
            "something else also reads (another anchor, a block output) is written once instead. "
            "+epilogue(n ops): n operators applied to each output vector in registers before the "
            "store. Each 'loop' is a pass that writes a tensor an anchor reads from memory."),
    "opencl": ("+prologue(0 ops): the GEMM reads A through the composed index maps of layout "
               "operators, with no copy. +prologue(n ops): n operators compute A while the GEMM's "
               "tiles load it. The OpenCL GEMM evaluates each A element once per tile column (N/128, "
               "N/64 or N/32 times; N times where it is not tiled), so an A made by arithmetic is fused "
               "only where that recomputation adds at most an eighth of the GEMM's arithmetic, "
               "else a loop kernel writes it once. "
               "+epilogue(n ops): n operators applied to each result before the store."),
}


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} KB"


def _is_torch(a: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor)


def _is_onnx(model: Any) -> bool:
    return isinstance(model, (str, os.PathLike, bytes)) or type(model).__name__ == "ModelProto"


def opencl_devices() -> list[dict]:
    """The OpenCL devices ``compile(..., target="opencl")`` can use, one dict each: ``index``
    ("platform:device", what ``device=`` and ``$DNNF_OPENCL_DEVICE`` take, as does a part of
    the name), ``name``, ``type``, ``platform``, ``version``, ``compute_units``,
    ``global_mem_bytes``, ``local_mem_bytes``, ``max_work_group``, ``fp64`` and ``selected``
    (the one used by default: the first GPU, else the first device). Raises ``Error`` saying
    how to install an OpenCL driver where there is none."""
    return list(_core.opencl_devices())


_UNITS_LINE = "// dnnf-prelude-units:"  # a CPU module's second line (cpp/codegen/codegen.h)


def compile(model: Any, example_inputs: Sequence[Any] | None = None, target: str = "cpu",  # noqa: A001
            planner: str = "dnnfusion", threads: int | None = None,
            input_shapes: dict[str, Sequence[int]] | None = None, optimize: bool = True,
            isa: str | None = None, layout: str | None = None, device: str = "",
            max_specializations: int = 8, float16: str = "f32",
            horizontal: bool = False, profile: str | None = None,
            profile_seconds: float | None = None, dynamic: bool = False,
            sequence_buckets: bool = False) -> CompiledModel:
    """Compiles a model for the CPU (``target="cpu"``, C++ over SIMD) or an OpenCL device
    (``target="opencl"``, OpenCL C; ``device``: ``""`` = ``$DNNF_OPENCL_DEVICE``, else the
    first GPU, else the first device; ``"p:d"`` or part of its name, as
    ``python -m dnnfusion info --devices`` lists them).

    ``model``: anything :func:`dnnfusion.load` takes (an ONNX model, path or bytes; a
    ``torch.nn.Module`` or ``torch.fx.GraphModule`` with ``example_inputs``). For an ONNX
    model with symbolic dimensions, ``input_shapes`` or ``example_inputs`` fix them.
    ``planner``: ``dnnfusion`` or a baseline (``none``, ``patterns``, ``tvm``, ``dp``).
    ``horizontal`` (dnnfusion planner only): also group Many-to-Many siblings that read one
    input (parallel convolution branches) into one kernel; each keeps its own pass over the
    input (``explain()`` lists the groups). Sibling MatMuls with constant weights (the Q/K/V
    projections) need no option: the rewrites make them one wider GEMM, one pass over the
    input (``rewrite.combine_sibling_matmuls``).
    ``threads``: default ``$DNNF_NUM_THREADS`` or every core this process may use.
    ``optimize``: run the graph rewrites (§4.2) before planning (``$DNNF_DISABLE_PASSES``,
    comma-separated pass names, leaves some out). ``isa``: ``avx512``,
    ``avx2``, ``neon`` or ``scalar``; default the best this CPU has (``$DNNF_ISA`` lowers it).
    ``layout`` (inter-block layout, §4.4): ``auto`` runs regions of convolutions channels
    last where the cost model expects a gain over the transposes at their border, ``nhwc``
    wherever a region has a convolution, ``nchw`` never; default ``auto`` when ``optimize``
    (``$DNNF_LAYOUT`` overrides the default), else ``nchw``. ``stats["layout"]`` says what
    was chosen.
    Compiled objects are cached per user, so compiling the same model again skips the C++
    compiler (``stats["cache_hit"]``).

    Dynamic shapes (ONNX ``dim_param`` inputs): ``example_inputs`` or ``input_shapes`` fix the
    symbolic dimensions before any shape arithmetic is folded; calling the compiled model with
    other sizes compiles a specialization for them on the fly (at most
    ``max_specializations`` kept, least recently used dropped; ``stats["specializations"]``
    lists the shapes compiled). A dimension named the same in several inputs must agree. A
    PyTorch module called with inputs of other shapes than its examples is exported again with
    them and compiled for them the same way, as ``torch.compile`` recompiles.

    Yellow cells of the fusion table (``profile``, dnnfusion planner on the CPU): ``"auto"``
    (default; ``$DNNF_PROFILE`` overrides it) measures the pairs no profiling database settles
    as the code they become, fused and apart, within ``profile_seconds`` (default
    ``$DNNF_PROFILE_SECONDS`` or 5; the keys deciding the most data first), and caches the results per
    CPU and ISA beside the kernel cache, so later compiles use them; compiling the same model
    again with no larger budget measures nothing more (a warm compile reuses the plan and the
    kernels; ``python -m dnnfusion profile`` measures everything); ``"off"`` settles them by the analytic estimate. ``explain()`` says for each yellow pair
    whether it was measured now, cached, read from a database or estimated, and
    ``stats["profile"]`` counts them (:mod:`dnnfusion.profiling`).

    ``dynamic=True`` (an ONNX model whose inputs share a symbolic batch dimension on axis 0, or
    a ``torch.nn.Module`` with ``example_inputs``, exported to ONNX with axis 0 of every input
    and output symbolic, and axis 1 of its token inputs, rank-2 integer tensors, a symbolic
    sequence): one compile serves every batch size. The model must be proven batch-separable (each
    sample's outputs depend only on that sample, :mod:`dnnfusion.batching`; a model that mixes
    samples is refused with the operator that does); it is compiled for a representative batch,
    the batch of ``example_inputs`` or ``input_shapes`` (default 1), and a call with ``n``
    samples runs that program over ``ceil(n / batch)`` chunks, the last padded, outputs joined
    along their batch axis. One more symbolic dimension (a sequence length) becomes a runtime
    length too where :mod:`dnnfusion.sequence` proves it can: the program is compiled for the
    length of ``example_inputs`` / ``input_shapes`` (the longest a call runs without compiling
    again; a longer call compiles it again for its own length) and a shorter call runs padded to
    it, the padded positions masked wherever an operator mixes positions (Softmax, the
    contraction of a MatMul, a reduction over the sequence); the kernels whose rows no valid
    output reads past the call's length stop there (:mod:`dnnfusion.seq_extents`,
    ``stats["dynamic"]["sequence"]["runtime_rows"]``), so a short call costs about what its own
    length does. A model that reads the length itself (``x[:, -1]``, ``x * x.shape[1]``), or other
    symbolic dimensions, compile a specialization per size instead. ``stats["dynamic"]`` says
    what was proven and chosen (``stats["dynamic"]["sequence"]``: the maximum, the masked
    operands, compiles and calls, or why not). ``sequence_buckets=True`` (with ``dynamic=True``)
    trades compiles for latency: programs for half, a quarter, ... of the maximum length are
    compiled on first use and a call runs padded to the shortest that holds it (about
    ``log2(maximum)`` compiles in all, at most about twice the work of the call's own length).

    float16 and bfloat16 models (``float16``): ``"f32"`` computes them in float32 (constants
    converted exactly at import; the compiled model takes and returns float16 / bfloat16, as
    ml_dtypes' NumPy dtype or torch.bfloat16, where the model does, converting at its
    boundary, and ``stats["float16"]`` says so); ``"error"`` refuses them.
    """
    names, symbolic = _specialize.onnx_inputs(model) if _is_onnx(model) else ([], {})
    if sequence_buckets and not dynamic:
        raise Error("sequence_buckets=True is an option of dynamic=True (its runtime sequence length)")
    if dynamic:
        return _dynamic.compile_dynamic(model, _is_onnx(model), example_inputs, input_shapes, names, symbolic,
                                         max_specializations, _compile_static, sequence_buckets=sequence_buckets,
                                         target=target, planner=planner,
                                         threads=threads, optimize=optimize, isa=isa, layout=layout,
                                         device=device, float16=float16, horizontal=horizontal, profile=profile,
                                         profile_seconds=profile_seconds)
    if symbolic and input_shapes is None and example_inputs is not None:
        input_shapes = _specialize.shapes_of_examples(names, symbolic, example_inputs)
    kwargs = dict(target=target, planner=planner, threads=threads, optimize=optimize, isa=isa,
                  layout=layout, device=device, float16=float16, horizontal=horizontal,
                  profile=profile, profile_seconds=profile_seconds)
    m = _compile_static(model, example_inputs, input_shapes=input_shapes, **kwargs)
    if symbolic:
        def again(shapes: dict, arrays: list) -> CompiledModel:
            return _compile_static(model, None, input_shapes={n: list(shapes[n]) for n in symbolic}, **kwargs)
    elif _specialize.reexportable(model, example_inputs, len(m.graph.inputs)):
        symbolic = _specialize.every_axis(m.graph.inputs)

        def again(shapes: dict, arrays: list) -> CompiledModel:
            import torch
            return _compile_static(model, [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays],
                                   input_shapes=None, **kwargs)
    else:
        return m
    m._specializer = _specialize.Specializer(again, symbolic, max_specializations, m)
    m.stats["specializations"] = []
    return m


def _compile_static(model: Any, example_inputs: Sequence[Any] | None, target: str, planner: str,
                    threads: int | None, input_shapes: dict[str, Sequence[int]] | None,
                    optimize: bool, isa: str | None, layout: str | None, device: str,
                    float16: str = "f32", horizontal: bool = False, profile: str | None = None,
                    profile_seconds: float | None = None, seq_rows: Any = None) -> CompiledModel:
    """compile() for one set of shapes. `seq_rows` (dynamic=True's runtime sequence length):
    called with the planned ECG and a function that runs the same import, rewrites and layout
    on another ECG, it returns ({value id: {axis: offset}}, the length input's index) for
    generate_cpu (:mod:`dnnfusion.seq_extents`)."""
    if target not in TARGETS:
        raise Error(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if target == "opencl":  # channels-last convolutions are CPU kernels; OpenCL runs NCHW
        layout = "nchw" 
    if planner not in _plan.PLANNERS:
        raise Error(f"unknown planner {planner!r}; choose one of {', '.join(_plan.PLANNERS)}")
    if horizontal and planner != "dnnfusion":
        raise Error(f"horizontal fusion is an option of the dnnfusion planner, not of {planner!r}")
    threads = _check_threads(threads)
    profile, profile_seconds = _profile_options(profile, profile_seconds)
    if layout is None:
        layout = os.environ.get("DNNF_LAYOUT", "auto") if optimize else "nchw"
    if layout not in LAYOUTS:
        raise Error(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    if float16 not in ("f32", "error"):
        raise Error(f"unknown float16 mode {float16!r}; choose 'f32' (compute float16 models "
                    "in float32) or 'error' (refuse them)")
    if target == "cpu":
        isa = isa or _core.cpu_features()["isa"]
        _core.isa_flags(isa)  # fail now, not after the rewrites, if this CPU lacks it
        prelude = prelude_dir()
    else:
        isa = "opencl"
        # The device first: its limits bound the plan (kernel arguments) and the code
        # (work-groups, local memory), and a missing driver fails before any work.
        ocl_device = _core.opencl_select_device(device)

    t_start = time.perf_counter()
    ecg, operators_before, f16_in, f16_out, halves, t_loaded, report, layout_report, tail = _planned(
        model, example_inputs, input_shapes, optimize, layout, float16)
    t_rewritten = time.perf_counter()
    # Yellow cells measured on this machine: only the DNNFusion planner on the CPU asks for
    # them (the OpenCL target keeps the estimate: its candidates would need the device's
    # timers, see profiling.py); baselines read the same databases.
    auto = profile == "auto" and target == "cpu"
    problems_before = len(_core.prelude_unit_problems())
    dbs = [d for d in [_plan._default_db()] if d]
    if auto and os.path.isfile(_profiling.machine_db(isa)):
        dbs.append(str(_profiling.machine_db(isa)))
    plan_args = dict(planner=planner, target=target, horizontal=horizontal, threads=threads,
                     max_kernel_args=ocl_device["max_kernel_args"] if target == "opencl" else 0)
    fusion = _plan.plan(ecg, profile_db=dbs, **plan_args)
    profiled = None
    if auto and planner == "dnnfusion":
        # The prelude units this plan's module names (most survive profiling): the first
        # candidate that builds units builds these beside them, on the idle CPUs, instead of
        # this compile building them after profiling.
        first_line = _core.generate_cpu(ecg.graph, fusion, isa).source.split("\n", 2)[1]
        if first_line.startswith(_UNITS_LINE):
            _core.hint_prelude_units(first_line[len(_UNITS_LINE):].split())
        try:
            profiled, fusion = _profiling.auto_profile(
                ecg, fusion, lambda d: _plan.plan(ecg, profile_db=d, **plan_args), dbs=dbs,
                isa=isa, threads=threads, seconds=profile_seconds)
        finally:
            _core.hint_prelude_units([])
    elif auto:
        profiled = _profiling.AutoProfile(db=str(_profiling.machine_db(isa)))
    yellow = _profiling.annotate(fusion, profiled, profile_seconds)
    t_planned = time.perf_counter()
    if target == "cpu":
        rows, length_input = {}, -1
        if seq_rows is not None:
            rows, length_input = seq_rows(ecg, lambda e: _planned(e, None, None, optimize, layout, float16)[0])
        generated = _core.generate_cpu(ecg.graph, fusion, isa, seq_rows=rows, length_input=length_input)
        t_generated = time.perf_counter()
        exe = _core.CpuExecutable(ecg.graph, generated, isa, threads, prelude)
    else:
        generated = _core.generate_opencl(ecg.graph, fusion, device)
        t_generated = time.perf_counter()
        exe = _core.OpenclExecutable(generated)
    t_done = time.perf_counter()
    units = _prelude_units(exe, problems_before) if target == "cpu" else None

    plan_stats = fusion.stats
    counts = generated.counts
    stats: dict[str, Any] = {
        "operators_before": operators_before,
        "operators_after_rewrite": len(ecg),
        # What the generated code does per inference, counted from its kernel plan.
        "kernels": counts["kernels"],
        "passes": counts["passes"],
        "intermediate_bytes_written": counts["intermediate_bytes_written"],
        # What the fusion plan intends (an estimate: anchors' inputs produced in a block may
        # still go through block scratch; see the measured counts above).
        "plan_blocks": len(fusion.blocks),
        "estimated_intermediate_bytes_saved": plan_stats["intermediate_bytes_removed"],
        # Deprecated aliases of plan_blocks and estimated_intermediate_bytes_saved.
        "kernels_after": len(fusion.blocks),
        "intermediate_bytes_removed": plan_stats["intermediate_bytes_removed"],
        "arena_bytes": generated.arena_bytes,
        "compile_seconds": t_done - t_start,
        "load_seconds": t_loaded - t_start,
        "rewrite_seconds": t_rewritten - t_loaded,
        "plan_seconds": t_planned - t_rewritten,
        "codegen_seconds": t_generated - t_planned,
        "cc_seconds": t_done - t_generated,
        "cache_hit": bool(exe.cached),
        "isa": isa,
        "target": target,
        "device": generated.device["name"] if target == "opencl" else None,
        "threads": threads,
        "planner": planner,
        "horizontal": bool(horizontal),
        "layout": layout_report,
        # Where the yellow pairs' decisions came from (profile="auto" on the CPU).
        "profile": _profiling.stats(profiled, profile if target == "cpu" else "off", yellow),
        # "f32" when a float16 / bfloat16 model computes in float32 (compile's float16 option), else None
        "float16": "f32" if halves else None,
        # The prelude units the module names and links (CPU), and what went wrong with units
        # during this compile (then a CompileWarning said so too).
        "prelude_units": units,
        # operators after a data-dependent output length, run on the host (host_tail.py)
        "host_tail": tail.stats if tail else None,
    }
    m = CompiledModel(ecg, fusion, generated, exe, stats, report)
    if tail is not None:
        m._tail, m.output_names = tail, tail.output_names
    m._f16_inputs = f16_in
    m._f16_outputs = f16_out or [None] * len(m.output_names)
    return m


def _prelude_units(exe: Any, problems_before: int) -> dict[str, Any]:
    """stats["prelude_units"]: what the module names and what this compile linked (None for a
    module found in the kernel cache), and the problems noted since `problems_before` (this
    compile's, its profiling candidates' included), each also a CompileWarning."""
    problems = list(_core.prelude_unit_problems()[problems_before:])
    for p in problems:
        warnings.warn(f"dnnfusion compiled more slowly than it should: {p}", CompileWarning, stacklevel=4)
    return {"named": list(exe.prelude_units_named),
            "linked": None if exe.cached else list(exe.prelude_units_linked),
            "problems": problems}


__all__ = ["compile", "CompiledModel", "KernelProfile", "prelude_dir", "default_threads"]
