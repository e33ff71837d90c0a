"""What the tests of the rewrite passes (tests/test_rewrite_*.py) share: the rewrite module,
graphs written in ECG text, seeded inputs for them, and the rule table of
cpp/rewrite/algebra.cc."""

from __future__ import annotations

import importlib

import numpy as np

import dnnfusion as df
from dnnfusion import _core

# The module, even if the package re-exports the function `rewrite` under the same name.
rw = importlib.import_module("dnnfusion.rewrite")

XYZ = "%x: f32[4,8], %y: f32[4,8], %z: f32[4,8]"

RULES = _core.algebra_rules()
RULE_NAMES = [r[0] for r in RULES]


def graph(body: str, inputs: str = XYZ) -> df.ECG:
    lines = "\n".join("  " + line for line in body.strip().splitlines())
    return df.parse(f"graph g({inputs}) {{\n{lines}\n}}\n")


def feeds(g: df.ECG, positive: bool, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for v in g.inputs:
        x = rng.uniform(0.5, 2.0, v.shape) if positive else rng.standard_normal(v.shape)
        out.append(x.astype(np.float32))
    return out
