"""dnnfusion.viz: the fusion-table picture is well-formed SVG drawn from the C++ table."""
import xml.etree.ElementTree as ET

import pytest

import dnnfusion
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


def test_draw_plan_at_both_levels_escapes_model_names():
    import xml.dom.minidom

    import numpy as np
    from onnx import TensorProto, helper

    from dnnfusion import viz

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name='evil"<script>'),
             helper.make_node("Softmax", ["a"], ["s"], name="sm"),
             helper.make_node("Softmax", ["s"], ["y"], name="sm2")]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    plan = dnnfusion.plan.plan(dnnfusion.load(m.SerializeToString()))
    for level in ("ops", "blocks"):
        svg = viz.draw_plan(plan, level=level).svg
        xml.dom.minidom.parseString(svg)  # well-formed: the name's quote and brackets are escaped
        assert "<script>" not in svg
    blocks = viz.draw_plan(plan, level="blocks").svg
    assert "block 0" in blocks and f"{2 * 8 * 4 / 1e3:.1f} KB" in blocks  # a tensor between blocks
    with pytest.raises(ValueError, match="level"):
        viz.draw_plan(plan, level="everything")
    assert np.isfinite(len(blocks))
