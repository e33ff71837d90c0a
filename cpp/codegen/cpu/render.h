// The CPU renderer (paper §4.4 code generation for CPUs): spells a kernel plan as one C++
// translation unit over the prelude, with the GENERATED-ABI of codegen.h.
#pragma once
#include <string>

#include "codegen/codegen.h"
#include "codegen/cpu/spell.h"
#include "codegen/kernel.h"

namespace dnnf::cg::cpu {

// The function `static void <name>(const Ctx& x)` of one block.
std::string render_block(const BlockPlan& b, const std::string& name);
// ConvShape / PoolShape literal of a Shape argument.
std::string shape_literal(const AnchorArg& a);
// The module: one function per block, the State with the packed weights, and the ABI.
GeneratedModule render_module(const Graph& g, const ModulePlan& mp, const MemoryPlan& memory, const std::string& isa);

}  // namespace dnnf::cg::cpu
