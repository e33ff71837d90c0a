"""The graph builder both front-ends use: adds nodes to a C++ ECG and folds shape
arithmetic on static shapes as it goes (``Shape`` of a static tensor, and any node whose
inputs are all small constants, e.g. ``Gather``/``Concat``/``Cast`` over shape vectors).

Folding happens here, once, rather than in each front-end, so that ONNX and ATen imports
of one model give the same graph. Large constants (weights) are never folded at import:
that is the rewrite stage's job (``fold_constants``)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dnnfusion import _core
from dnnfusion.dtypes import numpy_dtype
from dnnfusion.errors import InternalError, UnsupportedOperatorError

# Inputs and outputs at most this large may be folded at import: enough for any shape
# vector or index list, far below any weight tensor worth keeping symbolic.
FOLD_MAX_ELEMENTS = 4096

_OPS = {row["name"] for row in _core.op_table()}


class GraphBuilder:
    def __init__(self, name: str):
        self.graph = _core.Graph(name)
        self._n_folded = 0

    @property
    def folded(self) -> int:
        """How many nodes were folded into constants."""
        return self._n_folded

    def input(self, name: str, dtype: str, shape: Sequence[int | str]) -> Any:
        return self.graph.add_input(name, dtype, list(shape))

    def constant(self, name: str, array: np.ndarray) -> Any:
        return self.graph.add_constant(name, array)

    def node(self, op: str, inputs: Sequence[Any], attrs: dict[str, Any] | None = None,
             num_outputs: int = 1, name: str = "",
             output_names: Sequence[str] | None = None) -> list[Any]:
        """Adds ``op`` (an ECG op name), or its folded value when it is shape arithmetic
        on constants. Returns the output values."""
        if op not in _OPS:
            raise UnsupportedOperatorError(f"node '{name}': operator '{op}' is not in the ECG op table")
        attrs = attrs or {}
        names = list(output_names or [])
        folded = self._try_fold(op, inputs, attrs, num_outputs)
        if folded is not None:
            self._n_folded += 1
            outs = []
            for i, arr in enumerate(folded):
                oname = names[i] if i < len(names) and names[i] else ""
                outs.append(self.graph.add_constant(oname or self._fresh(name, i), arr))
            return outs
        return self.graph.add_node(op, list(inputs), attrs, num_outputs, name, names)

    def outputs(self, values: Sequence[Any]) -> None:
        self.graph.set_outputs(list(values))

    def _fresh(self, name: str, i: int) -> str:
        base = f"{name or 'folded'}:{i}"
        n, k = base, 0
        while self.graph.value(n) is not None:
            k += 1
            n = f"{base}.{k}"
        return n

    def _try_fold(self, op: str, inputs: Sequence[Any], attrs: dict, num_outputs: int):
        present = [v for v in inputs if v is not None]
        if op in ("Shape", "Size"):
            v = inputs[0]
            if any(isinstance(d, str) for d in v.shape):
                return None  # symbolic: a data-dependent value, kept as a node
            dims = np.asarray(v.shape, dtype=np.int64)
            if op == "Size":
                return [np.asarray(int(np.prod(dims)), dtype=np.int64)]
            r = len(dims)
            start = attrs.get("start", 0)
            end = attrs.get("end", r)
            start = min(max(start + r if start < 0 else start, 0), r)
            end = min(max(end + r if end < 0 else end, 0), r)
            return [dims[start:end].copy()]
        if not present or not all(v.is_constant for v in present):
            return None
        if any(np.prod(v.shape, dtype=np.int64) > FOLD_MAX_ELEMENTS for v in present):
            return None
        if op in ("Dropout",):  # keep training-related ops visible to the user
            return None
        from dnnfusion import reference

        arrays = [None if v is None else np.asarray(v.numpy()) for v in inputs]
        # The shape rule decides the folded values' types, exactly as for a node; a node
        # it rejects is added unfolded so that add_node raises the usual clear error.
        scratch = _core.Graph("fold")
        scratch_in = [None if a is None else scratch.add_constant(f"c{i}", a)
                      for i, a in enumerate(arrays)]
        try:
            types = scratch.add_node(op, scratch_in, attrs, num_outputs)
            outs = reference.run_node(op, arrays, attrs, num_outputs)
        except Exception:  # noqa: BLE001 - re-raised by add_node with the node's name
            return None
        if any(np.asarray(o).size > FOLD_MAX_ELEMENTS for o in outs):
            return None
        result = []
        for o, t in zip(outs, types):
            o = np.asarray(o)
            if tuple(o.shape) != tuple(t.shape):
                raise InternalError(f"folding {op}: reference gave shape {o.shape}, "
                                    f"shape rule {t.shape}")
            # not ascontiguousarray: it turns a 0-d result (a Gather of one index) into 1-d
            result.append(np.asarray(o.astype(numpy_dtype(t.dtype), copy=False), order="C"))
        return result
