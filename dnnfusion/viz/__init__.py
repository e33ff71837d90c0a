"""Pictures of dnnfusion's decisions (issue 16): the mapping-type fusion table (paper Table 3)
and fusion plans (Graphviz), as SVG that shows inline in Jupyter; result plots are to come."""
from dnnfusion.viz.figure import SvgFigure
from dnnfusion.viz.fusion_table import draw_fusion_table
from dnnfusion.viz.plan_drawing import PALETTE, draw_plan

__all__ = ["PALETTE", "SvgFigure", "draw_fusion_table", "draw_plan"]
