"""Graph execution of the NumPy reference interpreter (dnnfusion/reference.py): ``run`` and
``run_nodes`` on a small duck-typed graph (values, nodes and a graph as dataclasses), the
freeing of intermediates after their last reader, and the errors for feeds that do not match
the graph's inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from dnnfusion import reference

from reference_helpers import _rand

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


# --------------------------------------------------------------------------------------------
# Graph execution
# --------------------------------------------------------------------------------------------
@dataclass(eq=False)
class FakeValue:
    id: int
    name: str
    dtype: str
    shape: tuple
    data: np.ndarray | None = None

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    def numpy(self) -> np.ndarray:
        assert self.data is not None
        return self.data


@dataclass(eq=False)
class FakeNode:
    op: str
    name: str
    inputs: list
    outputs: list
    attrs: dict = field(default_factory=dict)


@dataclass(eq=False)
class FakeGraph:
    inputs: list
    outputs: list
    nodes: list


def _small_graph() -> tuple[FakeGraph, np.ndarray, np.ndarray]:
    """y = Relu(x @ w + b); z = ReduceSum(y, axes=[1]) (keepdims=0)."""
    w, b = _rand(4, 3), _rand(3)
    x = FakeValue(0, "x", "f32", ("batch", 4))
    wv = FakeValue(1, "w", "f32", (4, 3), w)
    bv = FakeValue(2, "b", "f32", (3,), b)
    mm, add = FakeValue(3, "mm", "f32", ("batch", 3)), FakeValue(4, "add", "f32", ("batch", 3))
    y = FakeValue(5, "y", "f32", ("batch", 3))
    axes = FakeValue(6, "axes", "i64", (1,), np.array([1]))
    z = FakeValue(7, "z", "f32", ("batch",))
    nodes = [FakeNode("MatMul", "mm", [x, wv], [mm]), FakeNode("Add", "add", [mm, bv], [add]),
             FakeNode("Relu", "relu", [add], [y]),
             FakeNode("ReduceSum", "sum", [y, axes], [z], {"keepdims": 0})]
    return FakeGraph([x], [y, z], nodes), w, b


def test_run_small_graph() -> None:
    graph, w, b = _small_graph()
    xs = _rand(5, 4)
    y, z = reference.run(graph, {"x": xs})
    want = np.maximum(xs.astype(np.float64) @ w + b, 0)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(z, want.sum(axis=1), rtol=1e-6, atol=1e-6)
    assert y.dtype == z.dtype == np.float32
    y2, _ = reference.run(graph, [xs])
    np.testing.assert_array_equal(y, y2)


def test_run_nodes_frees_intermediates() -> None:
    graph, _, _ = _small_graph()
    env = {0: _rand(2, 4)}
    reference.run_nodes(graph.nodes[:2], env, keep={4})  # first block: keep 'add' only
    assert set(env) == {4}
    reference.run_nodes(graph.nodes[2:], env, keep={5, 7})
    assert set(env) == {5, 7}
    env = {0: _rand(2, 4)}
    reference.run_nodes(graph.nodes, env)  # no keep: nothing is dropped
    assert {3, 4, 5, 7} <= set(env)


@pytest.mark.parametrize("feeds, message", [
    ({"x": np.zeros((2, 4), dtype=np.float64)}, "dtype"),
    ({"x": np.zeros((2, 5), dtype=np.float32)}, "shape"),
    ({"x": np.zeros((2, 4, 1), dtype=np.float32)}, "rank"),
    ({}, "no feed"),
    ({"x": np.zeros((2, 4), dtype=np.float32), "q": np.zeros(1)}, "unknown"),
])
def test_run_rejects_bad_feeds(feeds: dict, message: str) -> None:
    graph, _, _ = _small_graph()
    with pytest.raises(ValueError, match=message):
        reference.run(graph, feeds)
