// Strides of views; see views.h.
#include "codegen/views.h"

#include <algorithm>

#include "codegen/expr.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

bool is_view_op(OpKind k) {
  return k == OpKind::Reshape || k == OpKind::Flatten || k == OpKind::Squeeze || k == OpKind::Unsqueeze ||
         k == OpKind::Transpose || k == OpKind::Identity || k == OpKind::Split || k == OpKind::Slice;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 0);
  int64_t at = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    s[k] = dims[k] == 1 ? 0 : at;
    at *= dims[k];
  }
  return s;
}

bool is_contiguous(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  const std::vector<int64_t> c = contiguous_strides(dims);
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] != 1 && strides[k] != c[k]) return false;
  return true;
}

std::optional<std::vector<int64_t>> reshape_strides(const std::vector<int64_t>& from,
                                                    const std::vector<int64_t>& strides,
                                                    const std::vector<int64_t>& to) {
  // Runs of dims (ignoring dims of 1) each laid out right after the next: a run can be split
  // and merged freely; a new dim may not straddle two runs.
  struct Run {
    int64_t numel, stride;  // elements, stride of the innermost dim
  };
  std::vector<Run> runs;
  for (size_t k = 0; k < from.size(); ++k) {
    if (from[k] == 0) return std::nullopt;
    if (from[k] == 1) continue;
    if (!runs.empty() && runs.back().stride == strides[k] * from[k]) {
      runs.back().numel *= from[k];
      runs.back().stride = strides[k];
    } else {
      runs.push_back({from[k], strides[k]});
    }
  }
  std::vector<int64_t> out(to.size(), 0);
  size_t r = 0;
  int64_t left = runs.empty() ? 1 : runs[0].numel;
  for (size_t k = 0; k < to.size(); ++k) {
    if (to[k] == 1) continue;
    if (r >= runs.size() || to[k] <= 0 || left % to[k] != 0) return std::nullopt;
    left /= to[k];
    out[k] = runs[r].stride * left;
    if (left == 1 && ++r < runs.size()) left = runs[r].numel;
  }
  if (r != runs.size()) return std::nullopt;
  return out;
}

std::optional<std::vector<int64_t>> view_strides(const Graph& g, const Node& n, const std::vector<int64_t>& in) {
  if (!is_view_op(n.op) || n.op == OpKind::Split || n.op == OpKind::Slice || n.inputs.empty() ||
      n.outputs.size() != 1)
    return std::nullopt;
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]), od = dims_of(g, n.outputs[0]);
  if (n.op != OpKind::Transpose) return reshape_strides(id, in, od);
  InferCtx c(g, n);
  std::vector<int64_t> perm = c.attr_ints("perm");
  if (perm.empty())
    for (int64_t k = static_cast<int64_t>(id.size()) - 1; k >= 0; --k) perm.push_back(k);
  if (perm.size() != in.size()) return std::nullopt;
  std::vector<int64_t> out(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) out[k] = od[k] == 1 ? 0 : in[perm[k]];
  return out;
}

std::optional<std::pair<std::vector<int64_t>, int64_t>> view_step(const Graph& g, const Node& n, ValueId out,
                                                                  const std::vector<int64_t>& in) {
  if (n.inputs.empty()) return std::nullopt;
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  if (in.size() != id.size()) return std::nullopt;
  auto axis_of = [&](int64_t a) { return a < 0 ? a + static_cast<int64_t>(id.size()) : a; };
  if (n.op == OpKind::Split) {  // output k starts after the sizes of outputs 0 .. k-1 along the axis
    InferCtx c(g, n);
    const int64_t a = axis_of(c.attr_int("axis", 0));
    if (a < 0 || a >= static_cast<int64_t>(id.size())) return std::nullopt;
    int64_t off = 0;
    for (ValueId o : n.outputs) {
      const std::vector<int64_t> od = dims_of(g, o);
      if (o == out) {
        std::vector<int64_t> s = in;
        for (size_t k = 0; k < od.size(); ++k)
          if (od[k] == 1) s[k] = 0;
        return std::make_pair(s, off * in[a]);
      }
      off += od[a];
    }
    return std::nullopt;
  }
  if (n.op == OpKind::Slice) {
    if (n.outputs.size() != 1 || n.outputs[0] != out) return std::nullopt;
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i] != kNoValue && !g.value(n.inputs[i]).constant) return std::nullopt;
    InferCtx c(g, n);
    const std::vector<int64_t> starts = const_vector(c, 1, "starts");
    const std::vector<int64_t> axes = c.has_input(3) ? const_vector(c, 3, "axes") : std::vector<int64_t>{};
    const std::vector<int64_t> steps = c.has_input(4) ? const_vector(c, 4, "steps") : std::vector<int64_t>{};
    const std::vector<int64_t> od = dims_of(g, out);
    std::vector<int64_t> s = in;
    int64_t off = 0;
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t a = axes.empty() ? static_cast<int64_t>(i) : axis_of(axes[i]);
      if (a < 0 || a >= static_cast<int64_t>(id.size())) return std::nullopt;
      const int64_t st = steps.empty() ? 1 : steps[i], D = id[a];
      if (st <= 0) return std::nullopt;
      int64_t b = starts[i] < 0 ? starts[i] + D : starts[i];
      b = std::clamp<int64_t>(b, 0, D);
      if (od[a] > 0) off += b * in[a];
      s[a] = in[a] * st;
    }
    for (size_t k = 0; k < od.size(); ++k)
      if (od[k] == 1) s[k] = 0;
    return std::make_pair(s, off);
  }
  std::optional<std::vector<int64_t>> s = view_strides(g, n, in);
  if (!s) return std::nullopt;
  return std::make_pair(*s, int64_t{0});
}

}  // namespace dnnf::cg
