// The kernel plan of a whole model (paper §4.4): every block lowered in plan order, tensors
// between blocks placed by the memory plan, the constants in the order the runtime hands them
// over, and the graph outputs no block writes. Target-neutral; codegen.h's generate_* render it.
#include "codegen/module.h"

#include <map>

#include "codegen/lower.h"
#include "ir/errors.h"

namespace dnnf::cg {

ModulePlan plan_module(const Graph& g, const FusionPlan& p, const MemoryPlan& memory, const LowerOptions& opt) {
  ModulePlan mp;
  ModuleState ms;
  const std::vector<ValueId> inputs = g.inputs(), outputs = g.outputs();
  std::map<ValueId, Location> loc;
  for (size_t i = 0; i < inputs.size(); ++i) loc[inputs[i]] = {Location::Kind::GraphInput, static_cast<int64_t>(i)};
  for (size_t j = 0; j < outputs.size(); ++j) {
    ValueId v = outputs[j];
    if (!loc.count(v) && !g.value(v).constant) loc[v] = {Location::Kind::GraphOutput, static_cast<int64_t>(j)};
  }
  for (const BufferSlot& s : memory.buffers)
    if (!loc.count(s.value)) loc[s.value] = {Location::Kind::Arena, s.offset, s.row, s.stride};
  LocateFn locate = [&](ValueId v) -> Location {
    if (g.value(v).constant) return {Location::Kind::Constant, ms.constant(v)};
    auto it = loc.find(v);
    if (it == loc.end()) throw InternalError("codegen: no buffer for '" + g.value(v).name + "' in the memory plan");
    return it->second;
  };
  for (const Block& b : p.blocks) {
    BlockLowerer bl(g, b, ms, locate, opt);
    mp.blocks.push_back(bl.lower());
    mp.scratch_bytes = std::max(mp.scratch_bytes, mp.blocks.back().scratch_bytes);
  }
  // Graph outputs that no kernel writes: inputs, constants and repeated outputs.
  std::map<ValueId, int> first;
  for (size_t j = 0; j < outputs.size(); ++j) {
    ValueId v = outputs[j];
    ModulePlan::Copy c;
    c.output = static_cast<int>(j);
    c.bytes = static_cast<int64_t>(g.value(v).type.nbytes());
    if (first.count(v)) {
      c.from_output = first[v];
    } else {
      first[v] = static_cast<int>(j);
      if (loc.count(v) && loc[v].kind == Location::Kind::GraphOutput) continue;
      c.from = locate(v);
    }
    mp.copies.push_back(c);
  }
  mp.constants = ms.constants;
  mp.packed = ms.packed;
  return mp;
}

}  // namespace dnnf::cg
