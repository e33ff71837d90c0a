// The canonical text form of the ECG: printed and parsed back to an equal graph.
//
//   graph main(%x: f32[1,3,8,8]) {
//     %w: f32[4,3,3,3] = const 0x0000803f...      (hex of the little-endian bytes)
//     %s: f32[] = const [0.5]                      (16 elements or fewer: a value list)
//     %y: f32[1,4,6,6] = Conv(%x, %w, _) {strides=[1,1]} @"conv1"
//     return %y
//   }
//
// Names that are not plain identifiers are quoted: %"onnx::Add_3". `_` is an absent input.
#pragma once
#include <map>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace dnnf {

// elide_constants: print large constants as `const <elided>` (for humans, and for the
// import cache, which keeps the data apart).
std::string print_graph(const Graph& g, bool elide_constants = false);

// Constants given apart from the text, by value name: what `const <elided>` stands for.
using ElidedConstants = std::map<std::string, TensorPtr>;

// Throws ModelFormatError with the line and column of the first problem. An elided
// constant is an error unless `elided` holds a tensor of exactly its type under its name.
Graph parse_graph(std::string_view text, const ElidedConstants* elided = nullptr);

}  // namespace dnnf
