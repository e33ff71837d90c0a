// The CPU renderer (paper §4.4 code generation for CPUs): spells a kernel plan as one C++
// translation unit over the prelude, with the GENERATED-ABI of codegen.h.
#pragma once
#include <map>
#include <string>

#include "codegen/codegen.h"
#include "codegen/cpu/spell.h"
#include "codegen/kernel.h"

namespace dnnf::cg::cpu {

// The epilogue functors a module's blocks share (render_block): each distinct epilogue body,
// its buffer pointers renamed to members c0, c1, ..., is one struct at namespace scope, so
// that blocks with the same epilogue over different buffers (a bias-Mish after every
// convolution of YOLOv4, a bias-GELU after every FFN of BERT) instantiate the prelude's
// epilogue adaptors (cg_support.h make_ep) once, not once per block: most of what a module's
// own compile optimises.
struct EpilogueTypes {
  std::map<std::string, std::string> names;  // struct body -> name
  std::string text;                          // the struct definitions, in first-use order
};

// An epilogue of the form the prelude runs in registers (gemm_kernel.h EpDyn::act):
// v = act(v + bias[j] (+ res[row * res_ld + j])), act 0 none, 1 relu, 2 clip to [lo, hi].
struct AffineEpilogue {
  bool ok = false;
  ValueId bias = kNoValue, res = kNoValue;
  int64_t res_ld = 0;
  int act = 0;
  double lo = 0, hi = 0;
};
AffineEpilogue affine_form(const Program& p);

// (y, r) pairs of a module whose anchor may write y in place of its residual r (the memory
// plan then gives y r's bytes): the anchor (a channels-last convolution, a MatMul or a Gemm)
// adds r in an affine epilogue at the very index it stores y, r is read nowhere else in its
// block and by no later block, and both are arena tensors of one size.
std::vector<std::pair<ValueId, ValueId>> residuals_in_place(const Graph& g, const ModulePlan& mp,
                                                            const MemoryPlan& memory);
// (y, data) pairs of a module whose ScatterND / ScatterElements may update data in place: data
// dies at the scatter (no later block reads it), neither is read or written elsewhere in its
// block, and both are arena tensors (irregular.h's kernels then skip the copy).
std::vector<std::pair<ValueId, ValueId>> scatters_in_place(const Graph& g, const ModulePlan& mp,
                                                           const MemoryPlan& memory);

// The function `static void <name>(const Ctx& x)` of one block.
std::string render_block(const BlockPlan& b, const std::string& name, EpilogueTypes& types);
// ConvShape / PoolShape literal of a Shape argument.
std::string shape_literal(const AnchorArg& a);
// The paths (prelude conv_shape.h NhwcPath bits) a channels-last convolution's call may take:
// the one its packed weights were packed for (nhwc_path of its shape; segmented_nhwc_path for
// channel segments, depthwise for one that reduces its rows), all of them for weights computed
// in the run (packed per call).
int nhwc_paths(const AnchorStage& a);
// The module: one function per block, the State with the packed weights, and the ABI.
GeneratedModule render_module(const Graph& g, const ModulePlan& mp, const MemoryPlan& memory, const std::string& isa);

}  // namespace dnnf::cg::cpu
