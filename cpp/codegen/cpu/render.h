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

// The function `static void <name>(const Ctx& x)` of one block.
std::string render_block(const BlockPlan& b, const std::string& name, EpilogueTypes& types);
// ConvShape / PoolShape literal of a Shape argument.
std::string shape_literal(const AnchorArg& a);
// The module: one function per block, the State with the packed weights, and the ABI.
GeneratedModule render_module(const Graph& g, const ModulePlan& mp, const MemoryPlan& memory, const std::string& isa);

}  // namespace dnnf::cg::cpu
