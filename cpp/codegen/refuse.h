// The refusal of an element type that code generation (lowering, or a renderer as a backstop)
// does not compute on, with what the user can do about it.
#pragma once
#include <string>

#include "ir/errors.h"
#include "ir/types.h"

namespace dnnf::cg {

// `who`: "code generation", "the OpenCL target".
[[noreturn]] inline void refuse_dtype(const std::string& who, DType t) {
  throw UnsupportedOperatorError(who + " does not support the element type " + dtype_name(t) + " yet" +
                                 (is_half(t) ? ": dnnfusion.compile computes float16 models in float32 "
                                                    "(float16='f32', its default); on a loaded graph, "
                                                    "dnnfusion.rewrite.float16_to_float32 does the same"
                                                  : ": Cast the value to float32 in the model"));
}

}  // namespace dnnf::cg
