// Resize's scales resolved from its inputs, and the nearest integer upsamplings that code
// generation reads as an index map (expr.cc) instead of running the Resize kernel
// (anchors_lib.cc lower_resize; lower.cc BlockLowerer::is_anchor decides which).
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace dnnf::cg {

// Resize's scale per axis, resolved from its scales or sizes as the oracle's _resize_targets
// does (keep_aspect_ratio_policy included); UnsupportedOperatorError where they are computed.
std::vector<double> resize_scales(const Graph& g, const Node& n);
// The per-axis factors k of a nearest Resize that repeats each input element k times along
// each axis (output = input * k, integer k, coordinates that read floor(o / k): asymmetric
// with nearest_mode floor, or half_pixel / pytorch_half_pixel with a round mode, whose
// offsets stay within half a pixel), else empty. Such a Resize can be an index map (in = o / k,
// One-to-Many like Expand) read where it is used (YOLOv4's upsample read by its route
// Concat); BlockLowerer::is_anchor says where its kernel runs instead.
std::vector<int64_t> nearest_upsample_factors(const Graph& g, const Node& n);

}  // namespace dnnf::cg
