// Anchors on the prelude's convolution, pooling, row and irregular kernels (paper §4.4).
#include "codegen/lower.h"
#include "ir/errors.h"

namespace dnnf::cg {

void BlockLowerer::emit_library(const Node& n) {
  throw UnsupportedOperatorError(std::string("code generation does not support ") +
                                 op_info(n.op).name + " yet (node '" + n.name + "')");
}

}  // namespace dnnf::cg
