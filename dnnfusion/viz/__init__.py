"""Pictures of dnnfusion's decisions (issue 16): the mapping-type fusion table (paper Table 3)
and fusion plans (Graphviz), as SVG that shows inline in Jupyter; charts over the benchmark
harness's results and a compiled model's profile (matplotlib)."""
from dnnfusion.viz.figure import SvgFigure
from dnnfusion.viz.fusion_table import draw_fusion_table
from dnnfusion.viz.plan_drawing import PALETTE, draw_plan
from dnnfusion.viz.result_plots import (geomean, kernel_counts, latest_results, load_results, plot_kernel_profile,
                                        plot_latencies,
                                        plot_layer_counts, plot_roofline, plot_speedups,
                                        result_origin, roofline_inputs, roofline_points,
                                        speedups)
from dnnfusion.viz.zoo_counts import model_counts, planner_counts

__all__ = ["PALETTE", "SvgFigure", "draw_fusion_table", "draw_plan", "geomean", "kernel_counts",
           "latest_results", "load_results", "model_counts", "planner_counts", "plot_kernel_profile", "plot_latencies", "plot_layer_counts", "plot_roofline",
           "plot_speedups", "result_origin", "roofline_inputs", "roofline_points", "speedups"]
