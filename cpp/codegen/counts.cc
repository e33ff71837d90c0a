// Counts of a kernel plan; see counts.h.
#include "codegen/counts.h"

namespace dnnf::cg {

// Whether scatter a writes its output in its data's bytes: both at one offset of the arena
// (scatters_in_place) or of the block's scratch (BlockLowerer::scatter_in_place).
bool scatter_in_place(const BlockPlan& b, const AnchorStage& a) {
  const Location *d = nullptr, *y = nullptr;
  for (const Buffer& buf : b.buffers) {
    if (buf.value == a.node->inputs.at(0)) d = &buf.where;
    if (buf.value == a.node->outputs.at(0)) y = &buf.where;
  }
  return d && y && d->kind == y->kind && (d->kind == Location::Kind::Arena || d->kind == Location::Kind::Scratch) &&
         d->at == y->at;
}

namespace {
bool in_place_scatter_output(const BlockPlan& b, ValueId v) {
  for (const Stage& s : b.stages)
    if (s.kind == Stage::Kind::Anchor && s.anchor.kind == AnchorKind::Scatter && s.anchor.node->outputs.at(0) == v)
      return scatter_in_place(b, s.anchor);
  return false;
}
}  // namespace

Counts count_block(const Graph& g, const BlockPlan& b) {
  Counts c;
  c.kernels = b.stages.empty() ? 0 : 1;
  for (const Stage& s : b.stages) {
    ++c.passes;
    if (s.kind != Stage::Kind::Anchor) continue;
    const AnchorStage& a = s.anchor;
    if (!a.second.empty()) ++c.passes;  // MaxPool's indices: a second call over the input
    // An anchor's result goes to a buffer (counted below), or nowhere: an anchor with no `y`
    // either stores to buffers of its own arguments (TopK, ArgMax, a scatter) or has an
    // epilogue that stores every value itself (lower.cc gives it scratch only then).
    // A scatter copies its data whole (counted below, with the buffers), then writes every update
    // again: a second pass. One updating its data in place (its output given the data's
    // bytes: by the memory plan, render_module.cc scatters_in_place, or in the block's scratch,
    // BlockLowerer::scatter_in_place) copies nothing: its output is not written whole (see
    // below), the updates are its one pass.
    if (a.kind == AnchorKind::Scatter) {
      if (!scatter_in_place(b, a)) ++c.passes;
      const int64_t upd = static_cast<int64_t>(g.value(a.node->inputs.at(2)).type.nbytes());
      bool out = false;
      for (const Buffer& buf : b.buffers)
        if (buf.value == a.node->outputs[0]) out = buf.where.kind == Location::Kind::GraphOutput;
      (out ? c.output_bytes_written : c.intermediate_bytes_written) += upd;
    }
  }
  // Every buffer the block writes is written whole, once: by the loop or transpose that
  // materialises it, by the anchor that stores it, or by an epilogue.
  for (const Buffer& buf : b.buffers) {
    if (!buf.written || in_place_scatter_output(b, buf.value)) continue;
    const int64_t bytes = static_cast<int64_t>(g.value(buf.value).type.nbytes());
    if (buf.where.kind == Location::Kind::GraphOutput) {
      c.output_bytes_written += bytes;
    } else {
      c.intermediate_bytes_written += bytes;
    }
  }
  return c;
}

Counts count_module(const Graph& g, const ModulePlan& mp) {
  Counts c;
  for (const BlockPlan& b : mp.blocks) {
    const Counts k = count_block(g, b);
    c.kernels += k.kernels;
    c.passes += k.passes;
    c.intermediate_bytes_written += k.intermediate_bytes_written;
    c.output_bytes_written += k.output_bytes_written;
  }
  for (const ModulePlan::Copy& cp : mp.copies) {  // outputs no kernel writes: one memcpy each
    ++c.passes;
    c.output_bytes_written += cp.bytes;
  }
  return c;
}

}  // namespace dnnf::cg
