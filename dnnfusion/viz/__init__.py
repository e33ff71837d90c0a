"""Pictures of dnnfusion's decisions (issue 16): for now the mapping-type fusion table (paper
Table 3) as a self-contained SVG; plan drawings and result plots are still to come."""
from dnnfusion.viz.figure import SvgFigure
from dnnfusion.viz.fusion_table import draw_fusion_table

__all__ = ["SvgFigure", "draw_fusion_table"]
