"""The 5x5 mapping-type fusion table (cpp/plan/fusion_table.cc, paper §4.3 Table 3),
checked cell by cell against an expectation written independently from the paper's rules."""

import itertools

import pytest

from dnnfusion import _core
from dnnfusion.ecg import MAPPING_TYPES

O2O, REO, SHU, O2M, M2M = MAPPING_TYPES
LAYOUT = {REO, SHU}     # index maps only
HEAVY = {O2M, M2M}      # read an element more than once
# Complexity order for the fused type; Reorganize and Shuffle tie (their union is a Shuffle).
RANK = {O2O: 0, REO: 1, SHU: 1, O2M: 2, M2M: 3}
COLOR = {"fuse": "green", "reject": "red", "profile": "yellow"}


def expected_decision(first: str, second: str) -> str:
    if O2O in (first, second):
        return "fuse"                       # One-to-One with anything
    if (first, second) in {(O2M, M2M), (M2M, M2M)}:
        return "reject"                     # recomputation per read of the Many-to-Many
    if first in LAYOUT and second in LAYOUT:
        return "fuse"                       # index maps compose
    if (first, second) == (O2M, O2M):
        return "fuse"                       # broadcasts compose
    if (first in LAYOUT and second in HEAVY) or (first in HEAVY and second in LAYOUT):
        return "profile"                    # index arithmetic vs. removed tensor
    if (first, second) == (M2M, O2M):
        return "profile"                    # broadcast of a computed result
    raise AssertionError(f"the paper gives no rule for {first} -> {second}")


def expected_fused(first: str, second: str) -> str:
    if {first, second} == {REO, SHU}:
        return SHU
    return max(first, second, key=lambda t: RANK[t])


TABLE = {(c["first"], c["second"]): c for c in _core.fusion_table()}


def test_table_has_every_cell_once():
    rows = _core.fusion_table()
    assert len(rows) == 25
    assert set(TABLE) == set(itertools.product(MAPPING_TYPES, MAPPING_TYPES))


@pytest.mark.parametrize("first,second", list(itertools.product(MAPPING_TYPES, MAPPING_TYPES)),
                         ids=lambda t: t)
def test_cell(first, second):
    cell = TABLE[(first, second)]
    assert cell["decision"] == expected_decision(first, second)
    assert cell["fused"] == expected_fused(first, second)
    assert cell["color"] == COLOR[cell["decision"]]
    assert cell["why"], "every cell states its rule"


def test_fused_type_is_symmetric_and_order_independent():
    # Folding the table over a block must not depend on the order of its nodes.
    for a, b in itertools.product(MAPPING_TYPES, MAPPING_TYPES):
        assert TABLE[(a, b)]["fused"] == TABLE[(b, a)]["fused"]
    for a, b, c in itertools.product(MAPPING_TYPES, repeat=3):
        left = TABLE[(TABLE[(a, b)]["fused"], c)]["fused"]
        right = TABLE[(a, TABLE[(b, c)]["fused"])]["fused"]
        assert left == right


def test_color_counts_match_the_paper():
    colors = [c["color"] for c in TABLE.values()]
    assert colors.count("red") == 2
    assert colors.count("yellow") == 9
    assert colors.count("green") == 14
