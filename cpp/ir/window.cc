// Sliding-window geometry (Conv, ConvTranspose, MaxPool, AveragePool and their channels-last
// twins), written once: the shape rules read it to infer output sizes, code generation to place
// every window; see window.h.
#include "ir/window.h"

#include <algorithm>

#include "ir/shape_rules.h"

namespace dnnf {

// An ints attribute of n values in [min, 2^31] (larger ones are nonsense and would overflow).
std::vector<int64_t> sized_ints(const InferCtx& c, const char* name, size_t n, int64_t dflt,
                                int64_t min) {
  std::vector<int64_t> v = c.attr_ints(name, std::vector<int64_t>(n, dflt));
  if (v.size() != n)
    c.fail(std::string("attribute '") + name + "' must have " + std::to_string(n) +
           " values, got " + ints_str(v));
  for (int64_t x : v)
    if (x < min || x > (int64_t{1} << 31))
      c.fail(std::string("attribute '") + name + "' values must be in [" + std::to_string(min) +
             ", 2^31], got " + ints_str(v));
  return v;
}

Window read_window(const InferCtx& c, size_t n, int weight) {
  Window w;
  if (weight >= 0) {
    const Shape& ws = c.shape(weight);
    if (c.has_attr("kernel_shape")) {
      w.kernel = sized_ints(c, "kernel_shape", n, 1, 1);
      for (size_t i = 0; i < n; ++i)
        if (conflict(ws[2 + i], Dim(w.kernel[i])))
          c.fail("attribute kernel_shape " + ints_str(w.kernel) +
                 " does not match the weight's spatial dims " + c.in(weight).str());
    } else {
      for (size_t i = 0; i < n; ++i) {
        if (!ws[2 + i].is_static())
          c.fail("the weight's kernel dims must be static (or give kernel_shape), got " +
                 c.in(weight).str());
        w.kernel.push_back(ws[2 + i].value);
      }
    }
  } else {
    if (!c.has_attr("kernel_shape")) c.fail("attribute 'kernel_shape' is required");
    w.kernel = sized_ints(c, "kernel_shape", n, 1, 1);
  }
  w.strides = sized_ints(c, "strides", n, 1, 1);
  w.dilations = sized_ints(c, "dilations", n, 1, 1);
  w.pads = sized_ints(c, "pads", 2 * n, 0, 0);
  w.auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (w.auto_pad != "NOTSET" && w.auto_pad != "VALID" && !w.same())
    c.fail("attribute auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" +
           w.auto_pad + "'");
  bool any_pad = std::any_of(w.pads.begin(), w.pads.end(), [](int64_t p) { return p != 0; });
  if (w.auto_pad != "NOTSET" && any_pad)
    c.fail("attribute pads " + ints_str(w.pads) + " cannot be combined with auto_pad=" +
           w.auto_pad);
  return w;
}


WindowPlacement place_window(const Window& w, const std::vector<int64_t>& in) {
  WindowPlacement p;
  const size_t nd = in.size();
  p.begin.assign(nd, 0);
  p.end.assign(nd, 0);
  if (w.same()) {
    for (size_t i = 0; i < nd; ++i) {
      int64_t o = (in[i] + w.strides[i] - 1) / w.strides[i];
      int64_t total = std::max<int64_t>(0, (o - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - in[i]);
      int64_t small = total / 2, large = total - small;
      p.begin[i] = w.auto_pad == "SAME_UPPER" ? small : large;
      p.end[i] = total - p.begin[i];
    }
  } else if (w.auto_pad != "VALID") {
    for (size_t i = 0; i < nd; ++i) {
      p.begin[i] = w.pads[i];
      p.end[i] = w.pads[i + nd];
    }
  }
  return p;
}

}  // namespace dnnf
