// Sliding-window geometry of Conv, ConvTranspose, MaxPool, AveragePool and their channels-last
// twins (ONNX auto_pad rules), written once: the shape rules (shape_nn.cc) read a window to infer
// output sizes, code generation places every window with the same rules.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/shape_rules.h"

namespace dnnf {

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: n begins, then n ends
  std::string auto_pad;
  bool same() const { return auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"; }
};

// Reads the window attributes for n spatial axes, checked (ShapeError through c.fail).
// `weight` (Conv/ConvTranspose) is the weight input whose trailing dims are the kernel;
// pools pass -1 and need kernel_shape.
Window read_window(const InferCtx& c, size_t n, int weight);

// An ints attribute of n values in [min, 2^31] (larger ones are nonsense and would overflow).
std::vector<int64_t> sized_ints(const InferCtx& c, const char* name, size_t n, int64_t dflt, int64_t min);

// Where a forward window (Conv, pools) starts on each spatial axis of an input of size `in`:
// the padding before (`begin`) and after (`end`), SAME_UPPER putting the odd pixel at the end.
struct WindowPlacement {
  std::vector<int64_t> begin, end;
};
WindowPlacement place_window(const Window& w, const std::vector<int64_t>& in);

}  // namespace dnnf
