// Strides of views; see views.h.
#include "codegen/views.h"

#include "codegen/expr.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

bool is_view_op(OpKind k) {
  return k == OpKind::Reshape || k == OpKind::Flatten || k == OpKind::Squeeze || k == OpKind::Unsqueeze ||
         k == OpKind::Transpose || k == OpKind::Identity;
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
  if (!is_view_op(n.op) || n.inputs.empty() || n.outputs.size() != 1) return std::nullopt;
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

}  // namespace dnnf::cg
