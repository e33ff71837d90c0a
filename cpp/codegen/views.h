// Views (paper §4.3, index composition): Reshape, Flatten, Squeeze, Unsqueeze and Transpose
// change how a tensor's bytes are indexed, not the bytes; Split and constant Slices (positive
// steps) pick a part of them, at an offset. An anchor input made from a value in memory by a
// chain of them is read where that value is, through strides (and the offset), instead of
// being copied to scratch first.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace dnnf::cg {

// A tensor read in place from `root`'s memory: element i of the view is at
// root + offset + sum_k i[k] * strides[k] (elements). Dims of 1 have stride 0.
struct StridedView {
  ValueId root = kNoValue;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  bool contiguous = false;  // the same bytes in the same order (offset 0): any kernel can read it
};

// Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity; Split and Slice (view_step says
// whether a given one is a view).
bool is_view_op(OpKind k);
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);
bool is_contiguous(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);
// The strides of `to` as a reshape of a tensor with dims `from` and `strides`, when the
// reshape only splits and merges runs of dims laid out one after another; else nullopt.
std::optional<std::vector<int64_t>> reshape_strides(const std::vector<int64_t>& from,
                                                    const std::vector<int64_t>& strides,
                                                    const std::vector<int64_t>& to);
// The strides of n's output given its data input's strides, or nullopt.
std::optional<std::vector<int64_t>> view_strides(const Graph& g, const Node& n, const std::vector<int64_t>& in);
// Output `out` of view op n given its data input's strides: its strides and the offset (in
// elements) it adds, or nullopt where n does not view its input (a Slice with a negative
// step or non-constant bounds).
std::optional<std::pair<std::vector<int64_t>, int64_t>> view_step(const Graph& g, const Node& n, ValueId out,
                                                                  const std::vector<int64_t>& in);

}  // namespace dnnf::cg
