// Rows of the anchor table (paper §4.4) for row kernels (Softmax, LayerNorm, reductions,
// InstanceNorm, CumSum, ArgMax) and irregular ones (TopK, RoiAlign, GridSample, Resize): their views and
// the lowering of each call into the kernel's arguments.
#include <algorithm>

#include "codegen/anchors.h"
#include "codegen/resize_index.h"
#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

namespace {

int64_t axis_attr(const InferCtx& c, int64_t dflt, int64_t r) {
  int64_t a = c.attr_int("axis", dflt);
  return a < 0 ? a + r : a;
}

// CumSum's (and CumProd's) axis is its second input.
int64_t cumsum_axis(const InferCtx& c, const Node& n, int64_t r) {
  TensorPtr t = c.const_input(1);
  if (!t) throw UnsupportedOperatorError(
      std::string(op_info(n.op).name) + " with a computed axis (node '" + n.name +
      "'): code generation needs it as a constant in the model (an initializer, or computed only "
      "from shapes, which compile folds)");
  int64_t a = t->to_ints().at(0);
  return a < 0 ? a + r : a;
}

// [outer, len, inner] of the rows along axis a.
void push_rows(std::vector<AnchorArg>& args, const std::vector<int64_t>& id, int64_t a) {
  args.push_back(int_arg(prod(id, 0, a)));
  args.push_back(int_arg(id[a]));
  args.push_back(int_arg(prod(id, a + 1, id.size())));
}

}  // namespace

// Softmax, LogSoftmax, CumSum: [outer * axis, inner], or [outer, axis] when inner == 1.
std::pair<int64_t, int64_t> view_axis(const Graph& g, const Node& n) {
  const std::vector<int64_t> od = dims_of(g, n.outputs.at(0));
  InferCtx c(g, n);
  const int64_t r = static_cast<int64_t>(od.size());
  int64_t a = axis_attr(c, -1, r);
  if (n.op == OpKind::CumSum) {
    TensorPtr t = c.const_input(1);
    a = t ? t->to_ints().at(0) : r - 1;
    if (a < 0) a += r;
  }
  int64_t inner = prod(od, a + 1, od.size());
  if (inner == 1) return {numel(od) / std::max<int64_t>(od.empty() ? 1 : od[a], 1), od.empty() ? 1 : od[a]};
  return {numel(od) / inner, inner};
}

// Reductions: [out / C, C], C = the last input dim when it is kept, else 1.
std::pair<int64_t, int64_t> view_reduce(const Graph& g, const Node& n) {
  // As reduce_f32 sees it: the last input axis is kept unless reduced, whatever keepdims says
  // (keepdims=0 drops reduced axes, the kept ones keep their order, so the flat output index
  // is still row * C + col).
  const std::vector<int64_t> od = dims_of(g, n.outputs.at(0)), id = dims_of(g, n.inputs.at(0));
  bool last_kept = !id.empty();
  InferCtx c(g, n);
  std::vector<int64_t> axes;
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) axes = const_vector(c, 1, "axes");
  else axes = c.attr_ints("axes");
  int64_t r = static_cast<int64_t>(id.size());
  if (axes.empty() && !c.attr_int("noop_with_empty_axes", 0)) last_kept = false;
  for (int64_t a : axes)
    if ((a < 0 ? a + r : a) == r - 1) last_kept = false;
  int64_t C = last_kept ? id.back() : 1;
  return {numel(od) / std::max<int64_t>(C, 1), C};
}

// LayerNormalization: [rows, norm], norm = the product of the dims from `axis` on, as the
// kernel runs it (one row per normalized group, even when axis is not the last dim).
std::pair<int64_t, int64_t> view_layer_norm(const Graph& g, const Node& n) {
  const std::vector<int64_t> id = dims_of(g, n.inputs.at(0));
  InferCtx c(g, n);
  const int64_t ax = axis_attr(c, -1, static_cast<int64_t>(id.size()));
  const int64_t norm = std::max<int64_t>(prod(id, ax, id.size()), 1);
  return {numel(id) / norm, norm};
}

// LayerNormalization fuses an epilogue only when its Mean/InvStdDev outputs are not asked for.
bool layer_norm_epilogue(const Node& n) { return n.outputs.size() == 1; }

// Softmax, LogSoftmax: [outer, len, inner, x, y, ep].
void lower_softmax(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  const DType dt = g.value(n.inputs[0]).type.dtype;  // f32, or f64 (rowops::softmax_f64, no epilogue)
  if (dt != DType::F64) need_f32_library(g, n);
  InferCtx c(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  AnchorStage& a = st.anchor;
  push_rows(a.args, id, axis_attr(c, -1, static_cast<int64_t>(id.size())));
  a.args.push_back(buffer_arg(n.inputs[0]));
  a.args.back().dtype = dt;
  a.args.push_back(kind_arg(AnchorArg::Kind::Y));
  a.args.push_back(kind_arg(AnchorArg::Kind::Ep));
  bl.epilogue(n, a);
  st.label = std::string(op_info(n.op).name) + " rows" + epilogue_label(bl, n, false);
}

// LayerNormalization: [rows, norm, x, scale?, bias?, epsilon, y, mean?, inv_std_dev?, ep].
void lower_layer_norm(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  need_f32_library(g, n);
  InferCtx c(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  const int64_t ax = axis_attr(c, -1, static_cast<int64_t>(id.size()));
  const int64_t norm = prod(id, ax, id.size());
  auto full = [&](size_t i) {
    if (n.inputs.size() <= i || n.inputs[i] == kNoValue) return buffer_arg(kNoValue);
    if (g.value(n.inputs[i]).type.numel() != norm)
      throw UnsupportedOperatorError("LayerNormalization with a broadcast scale or bias (node '" + n.name + "')");
    return buffer_arg(n.inputs[i]);
  };
  auto opt_out = [&](size_t i) { return buffer_arg(n.outputs.size() <= i ? kNoValue : n.outputs[i]); };
  AnchorStage& a = st.anchor;
  a.args = {int_arg(prod(id, 0, ax)), int_arg(norm), buffer_arg(n.inputs[0]), full(1), full(2),
            float_arg(c.attr_float("epsilon", 1e-5)), kind_arg(AnchorArg::Kind::Y), opt_out(1), opt_out(2),
            kind_arg(AnchorArg::Kind::Ep)};
  bl.epilogue(n, a);
  st.label = std::string("LayerNormalization rows") + epilogue_label(bl, n, false);
}

// Reduce*: [kind, rank (int), shape (array), axis mask, x, y, ep].
void lower_reduce(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  const DType dt = g.value(n.inputs[0]).type.dtype;
  // reduce_int: exact, no epilogue (epilogues are f32); bool: Max/Min (any/all) only
  const bool integer = is_integer(dt) ||
                       (dt == DType::Bool && (n.op == OpKind::ReduceMax || n.op == OpKind::ReduceMin));
  if (integer && n.op != OpKind::ReduceSum && n.op != OpKind::ReduceMax && n.op != OpKind::ReduceMin &&
      n.op != OpKind::ReduceProd)
    throw UnsupportedOperatorError(std::string("code generation reduces integers with ReduceSum, ReduceMax, "
                                               "ReduceMin and ReduceProd; node '") + n.name + "' (" +
                                   op_info(n.op).name + ") reads " + dtype_name(dt) +
                                   " (Cast it to float first)");
  if (!integer && dt != DType::F64) need_f32_library(g, n);  // f64: reduce_f64, in double
  InferCtx c(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  const int64_t r = static_cast<int64_t>(id.size());
  std::vector<int64_t> axes;
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) axes = const_vector(c, 1, "axes");
  else axes = c.attr_ints("axes");
  unsigned mask = 0;
  if (axes.empty()) mask = c.attr_int("noop_with_empty_axes", 0) ? 0 : (1u << r) - 1u;
  for (int64_t x : axes) mask |= 1u << (x < 0 ? x + r : x);
  if (r > 8) throw UnsupportedOperatorError("reductions of rank > 8");
  const char* kind = n.op == OpKind::ReduceMean ? "Mean" : n.op == OpKind::ReduceSum ? "Sum"
                     : n.op == OpKind::ReduceMax ? "Max" : n.op == OpKind::ReduceMin ? "Min"
                     : n.op == OpKind::ReduceProd ? "Prod" : "L2";
  if (is_integer(dt) && (n.op == OpKind::ReduceMax || n.op == OpKind::ReduceMin)) {
    int64_t count = 1;
    for (int64_t a = 0; a < r; ++a)
      if ((mask >> a) & 1u) count *= id[static_cast<size_t>(a)];
    if (count == 0)
      throw UnsupportedOperatorError(std::string(op_info(n.op).name) + " of an empty set of " + dtype_name(dt) +
                                     " (node '" + n.name + "'): integers have no infinity to return");
  }
  AnchorArg e;
  e.kind = AnchorArg::Kind::Enum;
  e.name = std::string("ReduceKind::") + kind;
  e.dtype = dt;  // the element type: F32, F64 (reduce_f64), or an integer type (reduce_int)
  AnchorArg shape;
  shape.kind = AnchorArg::Kind::Ints;
  shape.name = "shape";
  shape.ints = id.empty() ? std::vector<int64_t>{1} : id;
  AnchorArg m = int_arg(mask, true);
  m.name = "unsigned";
  AnchorStage& a = st.anchor;
  a.args = {e, int_arg(r, true), shape, m, buffer_arg(n.inputs[0]), kind_arg(AnchorArg::Kind::Y),
            kind_arg(AnchorArg::Kind::Ep)};
  bl.epilogue(n, a);
  st.label = std::string(op_info(n.op).name) + epilogue_label(bl, n, false);
}

// InstanceNormalization: [N, C, spatial, x, scale, bias, epsilon, y, ep].
void lower_instance_norm(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  need_f32_library(g, n);
  InferCtx c(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  const int64_t C = id.size() > 1 ? id[1] : 1;
  for (size_t i = 1; i < 3; ++i)
    if (g.value(n.inputs[i]).type.numel() != C)
      throw UnsupportedOperatorError("InstanceNormalization whose scale or bias is not [C] (node '" + n.name + "')");
  AnchorStage& a = st.anchor;
  a.args = {int_arg(id[0]), int_arg(C), int_arg(prod(id, 2, id.size())), buffer_arg(n.inputs[0]),
            buffer_arg(n.inputs[1]), buffer_arg(n.inputs[2]), float_arg(c.attr_float("epsilon", 1e-5)),
            kind_arg(AnchorArg::Kind::Y), kind_arg(AnchorArg::Kind::Ep)};
  bl.epilogue(n, a);
  st.label = std::string("InstanceNormalization rows") + epilogue_label(bl, n, false);
}

// CumSum: [outer, len, inner, x, y, exclusive, reverse, ep].
void lower_cumsum(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  const DType dt = g.value(n.inputs[0]).type.dtype;
  if (dt != DType::F64 && dt != DType::I32 && dt != DType::I64 && dt != DType::U32 && dt != DType::U64)
    need_f32_library(g, n);  // f32 (with an epilogue: CumSum), or the other types ONNX allows
  InferCtx c(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  AnchorStage& a = st.anchor;
  push_rows(a.args, id, cumsum_axis(c, n, static_cast<int64_t>(id.size())));
  a.args.push_back(buffer_arg(n.inputs[0]));
  a.args.back().dtype = dt;
  a.args.push_back(kind_arg(AnchorArg::Kind::Y));
  a.args.push_back(bool_arg(c.attr_int("exclusive", 0) != 0));
  a.args.push_back(bool_arg(c.attr_int("reverse", 0) != 0));
  a.args.push_back(kind_arg(AnchorArg::Kind::Ep));
  bl.epilogue(n, a);
  st.label = std::string(op_info(n.op).name) + epilogue_label(bl, n, false);
}

// ArgMax, ArgMin: [is_max, outer, len, inner, x, indices, select_last_index]; no epilogue.
void lower_arg_reduce(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  const DType dt = g.value(n.inputs[0]).type.dtype;
  if (!is_integer(dt)) need_f32_library(g, n);  // f32, or any integer type
  InferCtx c(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  AnchorStage& a = st.anchor;
  a.args.push_back(bool_arg(n.op == OpKind::ArgMax));
  push_rows(a.args, id, axis_attr(c, 0, static_cast<int64_t>(id.size())));
  a.args.push_back(buffer_arg(n.inputs[0]));
  a.args.back().dtype = dt;
  a.args.push_back(buffer_arg(n.outputs[0]));
  a.args.push_back(bool_arg(c.attr_int("select_last_index", 0) != 0));
  st.label = op_info(n.op).name;
}

// TopK: [outer, len, inner, k, largest, sorted, x, values, indices]; no epilogue.
void lower_topk(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  const DType dt = g.value(n.inputs[0]).type.dtype;
  if (!is_integer(dt) || dt == DType::Bool) need_f32_library(g, n);  // f32, or any integer type
  InferCtx c(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  const int64_t ax = axis_attr(c, -1, static_cast<int64_t>(id.size()));
  TensorPtr kt = c.const_input(1);
  if (!kt) throw UnsupportedOperatorError(
      "TopK with a computed K (node '" + n.name +
      "'): code generation needs it as a constant in the model (an initializer, or computed only "
      "from shapes, which compile folds)");
  AnchorStage& a = st.anchor;
  push_rows(a.args, id, ax);
  a.args.push_back(int_arg(kt->to_ints().at(0)));
  a.args.push_back(bool_arg(c.attr_int("largest", 1) != 0));
  a.args.push_back(bool_arg(c.attr_int("sorted", 1) != 0));
  a.args.push_back(buffer_arg(n.inputs[0]));
  a.args.back().dtype = dt;
  a.args.push_back(buffer_arg(n.outputs[0]));
  a.args.push_back(buffer_arg(n.outputs[1]));
  st.label = "TopK";
}

// RoiAlign and NhwcRoiAlign: [N, C, H, W, x, rois count, rois, batch indices, out h, out w,
// sampling ratio, spatial scale, half pixel, max mode, x strides (n, c, h, w), y, ep]. The
// kernel reads x through the strides: NhwcRoiAlign's channels-last map in place, or a view
// (a Transpose of a value in memory) as GEMM operands are.
void lower_roi_align(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  need_f32_library(g, n);
  InferCtx c(g, n);
  std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  const std::vector<int64_t> od = dims_of(g, n.outputs[0]);
  const std::string ctm = c.attr_string("coordinate_transformation_mode", "half_pixel");
  ValueId x = n.inputs[0];
  std::vector<int64_t> xs = {id[1] * id[2] * id[3], id[2] * id[3], id[3], 1};
  if (n.op == OpKind::NhwcRoiAlign) {  // [N, H, W, C]
    xs = {id[1] * id[2] * id[3], 1, id[2] * id[3], id[3]};
    id = {id[0], id[3], id[1], id[2]};
  } else if (const StridedView* v = bl.strided(x)) {
    std::tie(x, xs) = std::make_pair(v->root, v->strides);
  }
  AnchorStage& a = st.anchor;
  a.args = {int_arg(id[0]), int_arg(id[1]), int_arg(id[2]), int_arg(id[3]), buffer_arg(x),
            int_arg(od[0]), buffer_arg(n.inputs[1]), buffer_arg(n.inputs[2]), int_arg(od[2]), int_arg(od[3]),
            int_arg(c.attr_int("sampling_ratio", 0)), float_arg(c.attr_float("spatial_scale", 1.0)),
            bool_arg(ctm == "half_pixel"), bool_arg(c.attr_string("mode", "avg") == "max"),
            int_arg(xs[0]), int_arg(xs[1]), int_arg(xs[2]), int_arg(xs[3]),
            kind_arg(AnchorArg::Kind::Y), kind_arg(AnchorArg::Kind::Ep)};
  bl.epilogue(n, a);
  st.label = std::string("RoiAlign") + epilogue_label(bl, n, false);
}

// GridSample: [N, C, nd, in dims (3, padded with 1), out dims (3), x, grid, mode, padding,
// align_corners, y, ep], the modes as grid_sample.h's GridMode / GridPad. x and grid are read
// from memory, contiguous.
void lower_grid_sample(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  need_f32_library(g, n);
  InferCtx c(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]), od = dims_of(g, n.outputs[0]);
  const int64_t nd = static_cast<int64_t>(id.size()) - 2;
  const std::string mode = c.attr_string("mode", "linear"), pad = c.attr_string("padding_mode", "zeros");
  const int64_t m = mode == "nearest" ? 1 : (mode == "cubic" || mode == "bicubic") ? 2 : 0;
  const int64_t p = pad == "border" ? 1 : pad == "reflection" ? 2 : 0;
  AnchorStage& a = st.anchor;
  a.args = {int_arg(id[0]), int_arg(id[1]), int_arg(nd)};
  for (int64_t k = 0; k < 3; ++k) a.args.push_back(int_arg(k < nd ? id[2 + k] : 1));
  for (int64_t k = 0; k < 3; ++k) a.args.push_back(int_arg(k < nd ? od[2 + k] : 1));
  a.args.push_back(buffer_arg(n.inputs[0]));
  a.args.push_back(buffer_arg(n.inputs[1]));
  a.args.push_back(int_arg(m, true));
  a.args.push_back(int_arg(p, true));
  a.args.push_back(bool_arg(c.attr_int("align_corners", 0) != 0));
  a.args.push_back(kind_arg(AnchorArg::Kind::Y));
  a.args.push_back(kind_arg(AnchorArg::Kind::Ep));
  bl.epilogue(n, a);
  st.label = std::string("GridSample") + epilogue_label(bl, n, false);
}

// Resize: [roi? (array), in_shape, out_shape (arrays), scales (array), rank (int), mode,
// coordinate transform, nearest mode (enums), cubic a, exclude outside, antialias,
// extrapolation value, x, y, ep].
void lower_resize(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  need_f32_library(g, n);
  InferCtx c(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]), od = dims_of(g, n.outputs[0]);
  const int64_t r = static_cast<int64_t>(id.size());
  std::vector<int64_t> axes;
  for (int64_t a : c.has_attr("axes") ? c.attr_ints("axes") : std::vector<int64_t>{}) axes.push_back(a < 0 ? a + r : a);
  if (!c.has_attr("axes"))
    for (int64_t a = 0; a < r; ++a) axes.push_back(a);
  const std::vector<double> scale = resize_scales(g, n);
  const std::string ctm = c.attr_string("coordinate_transformation_mode", "half_pixel");
  const std::string mode = c.attr_string("mode", "nearest");
  const std::string nm = c.attr_string("nearest_mode", "round_prefer_floor");
  auto pick = [&](const std::string& v, std::initializer_list<std::pair<const char*, const char*>> table) {
    for (auto& [k, e] : table)
      if (v == k) {
        AnchorArg x;
        x.kind = AnchorArg::Kind::Enum;
        x.name = e;
        return x;
      }
    throw UnsupportedOperatorError("Resize attribute value '" + v + "' (node '" + n.name + "')");
  };
  AnchorArg e_mode = pick(mode, {{"nearest", "ResizeMode::Nearest"}, {"linear", "ResizeMode::Linear"},
                                 {"cubic", "ResizeMode::Cubic"}});
  AnchorArg e_ctm = pick(ctm, {{"half_pixel", "ResizeCoord::HalfPixel"},
                               {"pytorch_half_pixel", "ResizeCoord::PytorchHalfPixel"},
                               {"half_pixel_symmetric", "ResizeCoord::HalfPixelSymmetric"},
                               {"align_corners", "ResizeCoord::AlignCorners"},
                               {"asymmetric", "ResizeCoord::Asymmetric"},
                               {"tf_crop_and_resize", "ResizeCoord::TfCropAndResize"}});
  AnchorArg e_nm = pick(nm, {{"round_prefer_floor", "NearestMode::RoundPreferFloor"},
                             {"round_prefer_ceil", "NearestMode::RoundPreferCeil"},
                             {"floor", "NearestMode::Floor"}, {"ceil", "NearestMode::Ceil"}});
  AnchorStage& a = st.anchor;
  // roi: [starts..., ends...] over all axes; only tf_crop_and_resize reads it. A constant roi
  // is baked in as that array; one computed at run time (a graph input, say) is read from its
  // buffer, its entries put in place by the kernel (`ints`: the axis of each start).
  AnchorArg roi = buffer_arg(kNoValue);
  if (ctm == "tf_crop_and_resize" && n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
    const size_t given = static_cast<size_t>(g.value(n.inputs[1]).type.numel());
    if (given != 0 && given != 2 * axes.size())
      throw ShapeError("Resize roi of " + std::to_string(given) + " values (node '" + n.name + "'): it needs 2 * " +
                       std::to_string(axes.size()) + " (a start and an end for each resized axis)");
    if (TensorPtr rt = c.const_input(1)) {
      std::vector<double> rv = rt->to_doubles();
      if (!rv.empty()) {
        roi.kind = AnchorArg::Kind::Floats;
        roi.name = "roi";
        roi.dtype = DType::F32;
        roi.floats.assign(2 * static_cast<size_t>(r), 0.0);
        for (int64_t k = 0; k < r; ++k) roi.floats[k] = 0.0, roi.floats[k + r] = 1.0;
        for (size_t i = 0; i < axes.size(); ++i) roi.floats[axes[i]] = rv[i], roi.floats[axes[i] + r] = rv[i + axes.size()];
      }
    } else if (given != 0) {
      roi = buffer_arg(n.inputs[1]);
      roi.ints = axes;
    }
  }
  AnchorArg ins, outs, scs;
  ins.kind = outs.kind = AnchorArg::Kind::Ints;
  ins.name = "in_shape";
  ins.ints = id;
  outs.name = "out_shape";
  outs.ints = od;
  outs.joined = true;
  scs.kind = AnchorArg::Kind::Floats;
  scs.name = "scales";
  scs.dtype = DType::F64;
  scs.floats = scale;
  a.args = {roi, ins, outs, scs, int_arg(r, true), e_mode, e_ctm, e_nm,
            float_arg(c.attr_float("cubic_coeff_a", -0.75)), bool_arg(c.attr_int("exclude_outside", 0) != 0),
            bool_arg(c.attr_int("antialias", 0) != 0), float_arg(c.attr_float("extrapolation_value", 0.0)),
            buffer_arg(n.inputs[0]), kind_arg(AnchorArg::Kind::Y), kind_arg(AnchorArg::Kind::Ep)};
  bl.epilogue(n, a);
  st.label = "Resize " + mode + epilogue_label(bl, n, false);
}

// ScatterND: [m, k, s, dims, strides, data, n, indices, updates, y, reduction];
// ScatterElements: [rank, udims, dstrides, axis, axis size, data, n, indices, updates, y,
// reduction] (irregular.h); no epilogue. Any element type but f16.
void lower_scatter(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  const DType dt = g.value(n.inputs[0]).type.dtype;
  if (is_half(dt))
    throw UnsupportedOperatorError(std::string(op_info(n.op).name) + " on f16 or bf16 (node '" + n.name +
                                   "'): compile with float16='f32' (the default) computes it in float32");
  InferCtx c(g, n);
  const std::vector<int64_t> d = dims_of(g, n.inputs[0]), id = dims_of(g, n.inputs[1]);
  const int64_t r = static_cast<int64_t>(d.size());
  std::vector<int64_t> strides(d.size(), 1);
  for (int64_t i = r - 1; i > 0; --i) strides[i - 1] = strides[i] * d[i];
  const std::string red = c.attr_string("reduction", "none");
  const int64_t red_code = red == "add" ? 1 : red == "mul" ? 2 : red == "max" ? 3 : red == "min" ? 4 : 0;
  AnchorArg dims, strs;
  dims.kind = strs.kind = AnchorArg::Kind::Ints;
  dims.name = "sc_dims";
  strs.name = "sc_strides";
  strs.joined = true;
  AnchorStage& a = st.anchor;
  if (n.op == OpKind::ScatterND) {
    const int64_t k = id.back();
    dims.ints.assign(d.begin(), d.begin() + static_cast<long>(k));
    strs.ints.assign(strides.begin(), strides.begin() + static_cast<long>(k));
    a.args = {int_arg(prod(id, 0, id.size() - 1)), int_arg(k), int_arg(prod(d, static_cast<size_t>(k), d.size())), dims,
              strs};
  } else {
    const int64_t ax = axis_attr(c, 0, r);
    dims.ints = id;  // the updates' shape, indices' too
    strs.ints = strides;
    a.args = {int_arg(r), dims, strs, int_arg(ax), int_arg(d[ax])};
  }
  a.args.push_back(buffer_arg(n.inputs[0]));
  a.args.back().dtype = dt;
  a.args.push_back(int_arg(numel(d)));
  a.args.push_back(buffer_arg(n.inputs[1]));
  a.args.back().dtype = g.value(n.inputs[1]).type.dtype;
  a.args.push_back(buffer_arg(n.inputs[2]));
  a.args.push_back(buffer_arg(n.outputs[0]));
  a.args.push_back(int_arg(red_code, true));
  st.label = std::string(op_info(n.op).name) + (red == "none" ? "" : " " + red);
}

}  // namespace dnnf::cg
