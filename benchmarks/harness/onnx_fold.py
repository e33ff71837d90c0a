"""Constant folding of an ONNX model with ONNX's reference evaluator (no fusion).

Used only as a fallback input for front-ends that fail on constant shape plumbing (the TVM
Relax ONNX importer fails on ``ConstantOfShape`` with a 0-d shape, as the TorchScript
exporter emits for BERT's attention mask).  It evaluates nodes whose inputs are all
constants (initializers, ``Constant`` nodes, or ``Shape``/``Size`` of statically shaped
tensors) and replaces them by initializers; it never merges or rewrites compute nodes.
"""
from __future__ import annotations

from typing import Any

NON_DETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                               "RandomUniformLike", "Multinomial", "Bernoulli"})


def fold_constants(model: Any) -> tuple[Any, int]:
    """Return (folded model, number of nodes folded away)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    model = onnx.shape_inference.infer_shapes(model)
    g = model.graph
    static: dict[str, list[int]] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            static[vi.name] = [d.dim_value for d in t.shape.dim]
    consts: dict[str, Any] = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    kept, folded = [], 0
    for n in g.node:
        ins = [x for x in n.input if x]
        has_sub = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute)
        value = None
        if n.domain not in ("", "ai.onnx") or has_sub or n.op_type in NON_DETERMINISTIC:
            pass
        elif n.op_type in ("Shape", "Size") and ins and ins[0] in static:
            shape = np.array(static[ins[0]], dtype=np.int64)
            if n.op_type == "Size":
                value = [np.array(int(np.prod(shape)), dtype=np.int64)]
            else:
                attrs = {a.name: a.i for a in n.attribute}
                value = [shape[attrs.get("start", 0): attrs.get("end", len(shape))]]
        elif all(x in consts for x in ins):
            try:
                value = ReferenceEvaluator(n).run(None, {x: consts[x] for x in ins})
            except Exception:  # noqa: BLE001 - keep the node if the evaluator cannot run it
                value = None
        if value is None:
            kept.append(n)
            continue
        for name, v in zip(n.output, value):
            if name:
                consts[name] = np.asarray(v)
        folded += 1
    used = {x for n in kept for x in n.input} | {o.name for o in g.output}
    # nested subgraphs may use outer-scope constants
    for n in kept:
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                used |= {x for sn in sub.node for x in sn.input}
    new_inits = [numpy_helper.from_array(v, k) for k, v in consts.items() if k in used]
    del g.node[:]
    g.node.extend(kept)
    del g.initializer[:]
    g.initializer.extend(new_inits)
    graph_inputs = [i for i in g.input if i.name not in consts or i.name in {x.name for x in new_inits}]
    del g.input[:]
    g.input.extend(graph_inputs)
    del g.value_info[:]
    return model, folded
