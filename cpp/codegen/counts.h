// What the generated code does per inference, counted from the kernel plan it is spelled from
// (issue: "a number describes what runs"): the kernels that run, the passes over memory (each
// loop nest, blocked transpose and anchor call reads or writes whole tensors) and the bytes
// stored to memory that is not a graph output. The fusion plan's own figures are estimates of
// what fusion intends; these are what the code does, on every target that renders the plan.
#pragma once
#include <cstdint>

#include "codegen/kernel.h"
#include "ir/graph.h"

namespace dnnf::cg {

struct Counts {
  int64_t kernels = 0;                     // block functions with at least one stage
  int64_t passes = 0;                      // loop stages + transposes + anchor calls + output copies
  int64_t intermediate_bytes_written = 0;  // stores to the arena and block scratch
  int64_t output_bytes_written = 0;        // stores to graph outputs
};

Counts count_block(const Graph& g, const BlockPlan& b);
// Whether scatter a of block b writes its output in its data's bytes (one offset of the arena
// or of the block's scratch): it then copies nothing, on every target.
bool scatter_in_place(const BlockPlan& b, const AnchorStage& a);
Counts count_module(const Graph& g, const ModulePlan& mp);

}  // namespace dnnf::cg
