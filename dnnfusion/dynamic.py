"""``compile(..., dynamic=True)`` (issue 17): compile once for a representative batch, after
:mod:`dnnfusion.batching` proves the model batch-separable, and run a call of any batch size
over chunks of that program."""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import numpy as np

from dnnfusion import specialize
from dnnfusion.batching import ANALYSIS_BATCHES, NotSeparable, prove
from dnnfusion.ecg import load
from dnnfusion.errors import Error, ModelFormatError, ShapeError


def _count(example_inputs: Any) -> int:
    return 1 if not isinstance(example_inputs, (tuple, list)) else len(example_inputs)


def export_with_batch(module: Any, example_inputs: Any) -> tuple[bytes, list[np.ndarray]]:
    """A PyTorch module as ONNX with axis 0 of every input and output a symbolic "batch" and
    axis 1 of its token inputs (rank 2, integer) a symbolic "sequence" (TorchScript exporter, as
    the zoo's dynamic exports), and its examples as arrays."""
    import io
    import warnings

    import torch

    xs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    if any(x.dim() == 0 for x in xs):
        raise ShapeError("compile(..., dynamic=True): every input carries the batch on axis 0; "
                         f"an example is a scalar ({[tuple(x.shape) for x in xs]})")
    with torch.no_grad():
        outs = module(*xs)
    outs = [outs] if isinstance(outs, torch.Tensor) else list(outs) if isinstance(outs, (tuple, list)) else None
    if outs is None or not all(isinstance(o, torch.Tensor) for o in outs):
        raise Error("compile(..., dynamic=True): the module must return a tensor or a tuple or list of tensors")
    ins = [f"input_{i}" for i in range(len(xs))]
    outn = [f"output_{i}" for i in range(len(outs))]
    axes = {n: {0: "batch"} for n in ins}
    for n, x in zip(ins, xs):  # token inputs ([batch, sequence] integers: ids, masks) also
        # get their sequence, which compile_dynamic then makes a runtime length where it can
        if x.dim() == 2 and not x.is_floating_point() and not x.is_complex() and x.dtype != torch.bool:
            axes[n][1] = "sequence"
    axes.update({n: {0: "batch"} for n, o in zip(outn, outs) if o.dim() > 0})
    buf = io.BytesIO()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notices
            torch.onnx.export(module, xs, buf, dynamo=False, opset_version=17, input_names=ins, output_names=outn,
                              dynamic_axes=axes, do_constant_folding=True)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds; all mean "cannot export"
        raise ModelFormatError(
            f"compile(..., dynamic=True): torch.onnx.export could not export {type(module).__name__} with a "
            f"symbolic batch: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}. Export it to ONNX "
            "yourself with dynamic_axes (or torch.export dynamic_shapes) and compile the file, or compile without "
            "dynamic=True") from e
    return buf.getvalue(), [x.detach().cpu().numpy() for x in xs]


class Batcher:
    """Runs a batch of any size through programs compiled for `batch` samples: chunks of
    `batch`, the last padded with zeros, outputs joined along `out_axes`."""

    def __init__(self, batch: int, out_axes: list[int], stats: dict):
        self.batch, self.out_axes = batch, out_axes
        self.stats = stats  # the compiled model's stats["dynamic"]: calls and chunks_run counted here
        stats.setdefault("calls", 0)
        stats.setdefault("chunks_run", 0)

    def run(self, arrays: list[np.ndarray], names: Sequence[str], run_chunk) -> list[np.ndarray]:
        n = {int(a.shape[0]) if a.ndim else -1 for a in arrays}
        if len(n) != 1 or -1 in n:
            raise ShapeError("dynamic=True: every input carries the batch on axis 0 and the inputs must agree; got "
                             + ", ".join(f"'{nm}' {tuple(a.shape)}" for nm, a in zip(names, arrays)))
        n = n.pop()
        if n < 1:
            raise ShapeError(f"dynamic=True: a batch of {n} samples has nothing to compute")
        r = self.batch
        pieces: list[list[np.ndarray]] = []
        for start in range(0, n, r):
            stop = min(start + r, n)
            chunk = [a[start:stop] for a in arrays]
            if stop - start < r:  # the last chunk, padded; its padding rows are dropped
                chunk = [np.concatenate([c, np.zeros((r - (stop - start),) + c.shape[1:], c.dtype)]) for c in chunk]
            outs = run_chunk([np.ascontiguousarray(c) for c in chunk])
            if stop - start < r:
                outs = [np.take(o, np.arange(stop - start), axis=ax) for o, ax in zip(outs, self.out_axes)]
            pieces.append(outs)
            self.stats["chunks_run"] += 1
        self.stats["calls"] += 1
        if len(pieces) == 1:
            return pieces[0]
        return [np.concatenate([p[i] for p in pieces], axis=ax) for i, ax in enumerate(self.out_axes)]


def compile_dynamic(model: Any, is_onnx: bool, example_inputs: Any, input_shapes: dict | None, names: list[str],
                    symbolic: dict[str, list[tuple[int, str]]], max_specializations: int,
                    compile_static: Callable[..., Any], sequence_buckets: bool = False, **kwargs: Any) -> Any:
    """compile(..., dynamic=True): prove the model batch-separable, compile it for the
    representative batch with `compile_static` (the compiler's static compile) and run any batch
    through it. `names`, `symbolic`: the ONNX inputs as specialize.onnx_inputs gives them."""
    how = ("export it with a symbolic batch, e.g. torch.onnx.export(..., dynamic_axes={'x': {0: 'batch'}}) "
           "for every input")
    if not is_onnx:
        if not specialize.reexportable(model, example_inputs, _count(example_inputs)):
            raise Error("compile(..., dynamic=True) takes an ONNX model whose inputs share a symbolic batch "
                        f"dimension ({how}), or a torch.nn.Module with example_inputs, a tensor per input")
        model, example_inputs = export_with_batch(model, example_inputs)
        names, symbolic = specialize.onnx_inputs(model)
    batch_names = {dict(symbolic.get(n, [])).get(0) for n in names}
    if not names or None in batch_names or len(batch_names) != 1:
        raise ShapeError("compile(..., dynamic=True) needs a symbolic batch dimension on axis 0 of every input, "
                         "the same name in each; this model's inputs have "
                         + ", ".join(f"'{n}' {dict(symbolic.get(n, [])) or 'no symbolic axes'}" for n in names)
                         + f"; {how}")
    if input_shapes is None and example_inputs is not None:
        input_shapes = specialize.shapes_of_examples(names, symbolic, example_inputs)
    others = {n: [(a, d) for a, d in symbolic.get(n, []) if a != 0] for n in names}
    if input_shapes is None:
        if any(others.values()):
            raise ShapeError("compile(..., dynamic=True): the model has symbolic dimensions besides the batch ("
                             + ", ".join(f"'{n}' axis {a} '{d}'" for n in names for a, d in others[n])
                             + "); give example_inputs or input_shapes to fix them for the first compile")
        input_shapes = {n: list(specialize.static_dims(model)[n]) for n in names}
    missing = [n for n in names if n not in input_shapes]
    if missing:
        raise ShapeError(f"input_shapes lacks input(s) {', '.join(missing)}")
    batches = {int(input_shapes[n][0]) for n in names}
    if len(batches) != 1 or min(batches) < 1:
        raise ShapeError(f"the inputs' batch sizes disagree or are not positive: {sorted(batches)}")
    rep = batches.pop()

    def at(b: int) -> dict[str, list[int]]:
        return {n: [b] + [int(d) for d in input_shapes[n][1:]] for n in names}

    a, b = ANALYSIS_BATCHES
    try:
        out_axes = prove([load(model, input_shapes=at(a)), load(model, input_shapes=at(b))], (a, b))
    except NotSeparable as e:
        raise NotSeparable(
            f"compile(..., dynamic=True) cannot prove the model batch-separable: {e}. Without dynamic=True the "
            "model compiles again for each new shape instead") from None
    seq_names = sorted({d for n in names for _, d in others[n]})
    sequence: dict[str, Any] = {}
    m = None
    if len(seq_names) == 1:
        m, sequence = _compile_padded(model, names, others, at(rep), compile_static, kwargs, sequence_buckets)
    elif seq_names:
        sequence = {"runtime": False, "why": f"{len(seq_names)} symbolic dimensions besides the batch "
                                              f"({', '.join(seq_names)}); a runtime length takes one"}
    if m is None:
        m = compile_static(model, None, input_shapes=at(rep), **kwargs)
    if any(others.values()) and m._padder is None:
        def again(shapes: dict, arrays: list) -> Any:
            return compile_static(model, None, input_shapes={n: list(shapes[n]) for n in names}, **kwargs)

        m._specializer = specialize.Specializer(again, symbolic, max_specializations, m)
        m.stats["specializations"] = []
    m.stats["dynamic"] = {
        "batch": "runtime", "representative_batch": rep, "output_batch_axes": out_axes,
        "proof": f"batch-separable: the batch followed through every operator at batch {a} and {b}",
        "specialized": [] if m._padder is not None else seq_names,
    }
    if sequence:
        m.stats["dynamic"]["sequence"] = sequence
    m._batcher = Batcher(rep, out_axes, m.stats["dynamic"])
    return m


def _compile_padded(model: Any, names: list[str], others: dict[str, list[tuple[int, str]]],
                    shapes: dict[str, list[int]], compile_static: Callable[..., Any],
                    kwargs: dict, buckets: bool = False) -> tuple[Any, dict[str, Any]]:
    """The model compiled once for its sequence length in `shapes` (the longest a call runs
    without compiling again), shorter ones padded to it (:mod:`dnnfusion.sequence`); (None,
    why) when the padding cannot be proven, and each length then compiles a specialization."""
    from dnnfusion import padded as _padded
    from dnnfusion import seq_extents as _seq_extents
    from dnnfusion import sequence as _seq

    axes = {n: {a: 0 for a, _ in others[n]} for n in names}
    lengths = {shapes[n][a] for n in names for a in axes[n]}
    if len(lengths) != 1:
        raise ShapeError(f"the inputs' sequence lengths disagree: {sorted(lengths)}")

    def load_at(s: int) -> Any:
        return load(model, input_shapes={n: [s if i in axes[n] else d for i, d in enumerate(shapes[n])]
                                         for n in names})

    rows_info: dict[str, Any] = {}

    def build(s: int) -> tuple[Any, Any]:
        ga, t = _seq.analyse(load_at, s, axes)
        ecg, length_name = _padded.masked_graph(ga, t)

        def rows_of(planned: Any, prepare: Callable[[Any], Any]) -> tuple[dict, int]:
            # the planned graph's proof again, against its twin one position shorter: the
            # values whose padded positions the kernels need not compute (seq_extents)
            if os.environ.get("DNNF_SEQ_ROWS", "1") == "0":
                rows_info.update(values=0, why="off (DNNF_SEQ_ROWS=0)")
                return {}, -1
            twin = prepare(_padded.masked_graph(t.gb, t)[0])
            rows, why = _seq_extents.runtime_rows(planned, s, twin, s - 1, length_name, axes)
            rows_info.update(values=len(rows), why=why)
            names_in = [v.name for v in planned.inputs]
            return rows, names_in.index(length_name) if rows else -1

        if kwargs.get("target", "cpu") != "cpu":  # (compile_static calls rows_of for the CPU only)
            rows_info.update(values=0, why="the CPU's kernels only: target='opencl' computes every position")
        m = compile_static(ecg, None, input_shapes=None, seq_rows=rows_of, **kwargs)
        m.input_names = [n for n in m.input_names if n != length_name]
        limited = sum(int(k.get("seq_rows_stages", 0)) for k in m.kernels)
        rows_info.update(stages=limited, of=sum(len(k["stages"]) for k in m.kernels))
        return m, t

    maximum = lengths.pop()
    try:
        m, t = build(maximum)
    except _seq.NotPaddable as e:
        return None, {"runtime": False, "why": str(e)}
    in_axes = [axes[n] for n in names]
    out_axes = [t.pos.get(v.id, {}) for v in t.ga.outputs]
    stats = {"runtime": True, "dimension": next(d for n in names for _, d in others[n]), "maximum": maximum, "min_length": t.min_length,
             "masked_operands": len(t.masks) + len(t.means), "compiles": 1, "calls": 0,
             # the stages whose rows follow the call's length (of all stages), and why none if none
             "runtime_rows": rows_info,
             "how": "padded to the maximum, the positions past the call's length masked where an operator mixes "
                    "positions (dnnfusion.sequence); a longer call compiles again for its length"}

    def grow(s: int) -> Any:
        return build(s)[0]

    if buckets:
        stats["how"] += "; sequence_buckets: a shorter call runs padded to the shortest of the lengths " \
                        "maximum / 2^k that holds it, each compiled on its first call"
        stats["buckets"] = [maximum]
    m._padder = _padded.Padder(m, in_axes, out_axes, maximum, t.min_length, names, grow, stats, buckets)
    return m, stats


__all__ = ["Batcher", "compile_dynamic"]
