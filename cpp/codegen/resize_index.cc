#include "codegen/resize_index.h"

#include <algorithm>
#include <string>

#include "codegen/expr.h"
#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

std::vector<double> resize_scales(const Graph& g, const Node& n) {
  InferCtx c(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  const int64_t r = static_cast<int64_t>(id.size());
  std::vector<int64_t> axes;
  for (int64_t a : c.has_attr("axes") ? c.attr_ints("axes") : std::vector<int64_t>{}) axes.push_back(a < 0 ? a + r : a);
  if (!c.has_attr("axes"))
    for (int64_t a = 0; a < r; ++a) axes.push_back(a);
  std::vector<double> scale(static_cast<size_t>(r), 1.0);
  TensorPtr sc = n.inputs.size() > 2 && n.inputs[2] != kNoValue ? c.const_input(2) : nullptr;
  TensorPtr sz = n.inputs.size() > 3 && n.inputs[3] != kNoValue ? c.const_input(3) : nullptr;
  if (sc && sc->type.numel() > 0) {
    std::vector<double> s = sc->to_doubles();
    for (size_t i = 0; i < axes.size() && i < s.size(); ++i) scale[axes[i]] = s[i];
  } else if (sz && sz->type.numel() > 0) {
    std::vector<int64_t> s = sz->to_ints();
    for (size_t i = 0; i < axes.size() && i < s.size(); ++i)
      scale[axes[i]] = static_cast<double>(s[i]) / static_cast<double>(id[axes[i]]);
    const std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && !axes.empty()) {
      double common = scale[axes[0]];
      for (int64_t a : axes) common = policy == "not_larger" ? std::min(common, scale[a]) : std::max(common, scale[a]);
      for (int64_t a : axes) scale[a] = common;
    }
  } else {
    throw UnsupportedOperatorError("Resize with computed scales or sizes (node '" + n.name +
                                   "'): code generation needs them as constants in the model");
  }
  return scale;
}

std::vector<int64_t> nearest_upsample_factors(const Graph& g, const Node& n) {
  if (n.op != OpKind::Resize || n.inputs.empty() || n.outputs.size() != 1 || !g.value(n.inputs[0]).type.is_static() ||
      !g.value(n.outputs[0]).type.is_static())
    return {};
  InferCtx c(g, n);
  if (c.attr_string("mode", "nearest") != "nearest" || c.attr_int("antialias", 0) != 0) return {};
  const std::string ctm = c.attr_string("coordinate_transformation_mode", "half_pixel");
  const std::string nm = c.attr_string("nearest_mode", "round_prefer_floor");
  const bool floor_of = ctm == "asymmetric" && nm == "floor";
  const bool rounded = (ctm == "half_pixel" || ctm == "pytorch_half_pixel") &&
                       (nm == "round_prefer_floor" || nm == "round_prefer_ceil");
  if (!floor_of && !rounded) return {};
  std::vector<double> scale;
  try {
    scale = resize_scales(g, n);
  } catch (const UnsupportedOperatorError&) {
    return {};
  }
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]), od = dims_of(g, n.outputs[0]);
  if (scale.size() != id.size() || od.size() != id.size()) return {};
  std::vector<int64_t> k(id.size(), 1);
  for (size_t a = 0; a < id.size(); ++a) {
    if (id[a] < 1 || od[a] % id[a] != 0) return {};
    k[a] = od[a] / id[a];
    // The formula reads the given scale: it must be the factor itself (a size-given scale is).
    if (scale[a] != static_cast<double>(k[a])) return {};
  }
  return k;
}

}  // namespace dnnf::cg
