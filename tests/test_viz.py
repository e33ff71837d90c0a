"""dnnfusion.viz: the fusion-table picture is well-formed SVG drawn from the C++ table."""
import xml.etree.ElementTree as ET

import pytest

from dnnfusion.plan import fusion_table
from dnnfusion.viz import draw_fusion_table
from dnnfusion.viz.fusion_table import _FILL

_NS = "{http://www.w3.org/2000/svg}"


def test_fusion_table_cells_follow_the_core_table(tmp_path):
    fig = draw_fusion_table()
    root = ET.fromstring(fig._repr_svg_())  # fails on malformed SVG
    groups = root.findall(f"{_NS}g")
    table = fusion_table()
    assert len(groups) == len(table) == 25
    for g, cell in zip(groups, table):
        assert g.find(f"{_NS}rect").get("fill") == _FILL[cell["color"]]
        assert g.find(f"{_NS}text").text == cell["fused"]
        assert cell["first"] in g.find(f"{_NS}title").text
    # All three decisions appear, so the colours really differ.
    assert {g.find(f"{_NS}rect").get("fill") for g in groups} == set(_FILL.values())
    out = tmp_path / "t.svg"
    fig.save(out)
    assert out.read_text() == fig.svg
    with pytest.raises(ValueError):
        fig.save(tmp_path / "t.png")
