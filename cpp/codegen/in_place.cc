// Anchor inputs and Concats in place (issue 13 part 2, paper §4.3 index composition): a view
// (Reshape, Transpose, a Split part, ...) of a value in memory read through strides or as the
// same bytes; a channel Concat feeding convolutions read a pointer per input; a batch-1 Concat
// whose inputs are made in its block assembled in its own bytes. Part of BlockLowerer (lower.h):
// lower() calls these after choosing epilogues and before placing buffers.
#include <algorithm>

#include "codegen/lower.h"
#include "ir/window.h"
#include "plan/memory_plan.h"
#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

const StridedView* BlockLowerer::strided(ValueId v) const {
  auto it = views_.find(v);
  return it == views_.end() || it->second.contiguous ? nullptr : &it->second;
}

// Whether every anchor reading x inside the block takes it through strides: a GEMM operand
// (MatMul's A or B, Gemm's A or B) of rank 2 or more, RoiAlign's feature map.
static bool strided_readers_only(const Graph& g, const std::set<NodeId>& inside, ValueId x) {
  if (dims_of(g, x).size() < 2) return false;
  for (NodeId c : g.consumers(x)) {
    if (!inside.count(c)) continue;
    const Node& n = g.node(c);
    if (op_info(n.op).mapping != MappingType::ManyToMany && n.op != OpKind::Resize) continue;
    if (n.op == OpKind::RoiAlign) {
      if (n.inputs[0] != x || n.inputs[1] == x) return false;
      continue;
    }
    if (n.op != OpKind::MatMul && n.op != OpKind::Gemm) return false;
    if (n.inputs.size() > 2 && n.inputs[2] == x) return false;
    for (ValueId o : {n.inputs[0], n.inputs[1]})
      if (dims_of(g, o).size() < 2) return false;
  }
  return true;
}

// Anchor input x, made in this block by a chain of view ops from a value in memory (or from
// a pointwise value this block then materialises instead of x), is read where that value is.
bool BlockLowerer::in_memory(ValueId v) const {
  return materialised_.count(v) > 0 || std::find(b_.inputs.begin(), b_.inputs.end(), v) != b_.inputs.end();
}

bool BlockLowerer::can_materialise(ValueId v, const std::set<NodeId>& in_epilogue) const {
  if (in_memory(v)) return true;
  const NodeId p = g_.value(v).producer;
  return p >= 0 && inside_.count(p) && !is_anchor(g_.node(p)) && !in_epilogue.count(p);
}

void BlockLowerer::find_view(ValueId x, const std::set<NodeId>& in_epilogue) {
  std::vector<std::pair<const Node*, ValueId>> chain;  // (view op, the output of it taken)
  ValueId cur = x;
  while (cur == x || !in_memory(cur)) {
    const NodeId p = g_.value(cur).producer;
    if (p < 0 || !inside_.count(p) || in_epilogue.count(p)) break;
    const Node& pn = g_.node(p);
    if (!is_view_op(pn.op) || (pn.outputs.size() != 1 && pn.op != OpKind::Split)) break;
    chain.push_back({&pn, cur});
    cur = pn.inputs[0];
  }
  if (chain.empty() || g_.value(cur).type.dtype != g_.value(x).type.dtype || !can_materialise(cur, in_epilogue)) return;
  const std::vector<int64_t> rd = dims_of(g_, cur);
  if (numel(rd) == 0) return;
  std::vector<int64_t> strides = contiguous_strides(rd);
  int64_t offset = 0;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    auto s = view_step(g_, *it->first, it->second, strides);
    if (!s) return;
    strides = std::move(s->first);
    offset += s->second;
  }
  StridedView v;
  v.root = cur;
  v.offset = offset;
  v.contiguous = offset == 0 && is_contiguous(dims_of(g_, x), strides);
  v.strides = std::move(strides);
  if (!v.contiguous && !strided_readers_only(g_, inside_, x)) return;
  // An offset reaches the GEMM through the batched call's operand offsets (MatMul); Gemm
  // and RoiAlign calls have none, so a part of a tensor read by one is still copied.
  if (offset != 0)
    for (NodeId c : g_.consumers(x))
      if (inside_.count(c) && (g_.node(c).op == OpKind::Gemm || g_.node(c).op == OpKind::RoiAlign)) return;
  materialised_.insert(cur);
  materialised_.erase(x);
  views_[x] = std::move(v);
}

const std::vector<ValueId>* BlockLowerer::segments(ValueId v) const {
  auto it = segments_.find(v);
  return it == segments_.end() ? nullptr : &it->second;
}

// Whether every anchor reading x in the block is a convolution of one group (channels last
// with packed weights, or channels first), x its data input.
static bool segment_readers_only(const Graph& g, const std::set<NodeId>& inside, ValueId x, bool channels_last) {
  for (NodeId c : g.consumers(x)) {
    if (!inside.count(c)) continue;
    const Node& n = g.node(c);
    if (op_info(n.op).mapping != MappingType::ManyToMany && n.op != OpKind::Resize) continue;
    if (n.inputs[0] != x) return false;
    if (channels_last ? n.op != OpKind::NhwcConv || !g.value(n.inputs[1]).constant : n.op != OpKind::Conv) return false;
    if (InferCtx(g, n).attr_int("group", 1) != 1) return false;
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i] == x) return false;
  }
  return true;
}

// x = Concat(u...) along the channels (the last dim of a channels-last value; dim 1 of a
// channels-first one where LowerOptions::nchw_conv_segments) feeding convolutions: they read
// the u in place, one pointer per segment; no concatenated copy.
void BlockLowerer::find_segments(ValueId x, const std::set<NodeId>& in_epilogue) {
  const NodeId p = g_.value(x).producer;
  if (p < 0 || !inside_.count(p) || in_epilogue.count(p)) return;
  const Node& cat = g_.node(p);
  const std::vector<int64_t> xd = dims_of(g_, x);
  if (cat.op != OpKind::Concat || xd.size() < 3 || g_.value(x).type.dtype != DType::F32) return;
  int64_t axis = InferCtx(g_, cat).attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(xd.size());
  const bool last = axis == static_cast<int64_t>(xd.size()) - 1;
  if (!(last || (axis == 1 && opt_.nchw_conv_segments)) || cat.inputs.size() < 2 || cat.inputs.size() > 8) return;
  // Values in memory, and at most one computed here: that one costs a loop of its own, as
  // the Concat's loop did, but writes only its own channels; two would cost a pass more.
  int computed = 0;
  for (ValueId u : cat.inputs) {
    if (u == kNoValue || u == x || !can_materialise(u, in_epilogue)) return;
    // A part placed in rows of x's bytes is read there, through x (find_assembly).
    if (std::find(b_.inputs.begin(), b_.inputs.end(), u) != b_.inputs.end() && locate_(u).row != 0) return;
    if (!in_memory(u) && ++computed > 1) return;
    std::vector<int64_t> ud = dims_of(g_, u);
    if (ud.size() != xd.size() || ud[static_cast<size_t>(axis)] == 0) return;
    for (size_t d = 0; d < xd.size(); ++d)
      if (d != static_cast<size_t>(axis) && ud[d] != xd[d]) return;
  }
  if (!segment_readers_only(g_, inside_, x, last)) return;
  for (ValueId u : cat.inputs) materialised_.insert(u);
  materialised_.erase(x);
  segments_[x] = cat.inputs;
}

// x = Concat(u...) in the arena (a block output, or a Concat this block consumes whose inputs
// the memory plan placed in it), every u either placed at its part of x's bytes by the memory
// plan (another block's output, BufferSlot::within, or this block's) or made in this block and
// read nowhere after it: each such u is materialised at its part of x's bytes (an anchor or
// its epilogue stores it there, a pointwise loop computes it there), and x needs no loop: no
// concatenated copy. A part is one run where x has only ones before its axis (a batch-1
// channel Concat), rows otherwise (channels last: conv_stores_rows). At most one u not
// otherwise in memory (its loop replaces the Concat's; an epilogue value it does not store
// cannot be); runs start where the memory plan lets them (LowerOptions::concat_run_alignment:
// any element on the CPU, 64 bytes on OpenCL). A u that is a flat view (Reshape, Flatten,
// Squeeze, Unsqueeze) made here of a value in memory stands for that value: SSD's heads,
// Concat(Reshape(conv_k)...), place each conv_k's output.
void BlockLowerer::find_assembly(const Node& cat, const std::set<NodeId>& in_epilogue) {
  if (cat.op != OpKind::Concat || in_epilogue.count(cat.id) || cat.outputs.size() != 1) return;
  const ValueId x = cat.outputs[0];
  if (!materialised_.count(x) || segments_.count(x) || assembled_.count(x)) return;
  // x in the arena: a block output, or a Concat this block consumes that the memory plan gave
  // a buffer because other blocks' outputs lie in it (BufferSlot::within).
  Location xl;
  if (block_outputs_.count(x)) {
    xl = locate_(x);
  } else {
    try {
      xl = locate_(x);
    } catch (const InternalError&) {  // no buffer in the memory plan: block scratch, as before
      return;
    }
  }
  if (xl.kind != Location::Kind::Arena || xl.row != 0 || !g_.value(x).type.is_static()) return;
  std::set<ValueId> seen;
  std::vector<std::pair<ValueId, ConcatPart>> runs;  // the inputs this block places
  int computed = 0;  // inputs that get a loop of their own: one replaces the Concat's, two add a pass
  for (ValueId u : cat.inputs) {
    if (u == kNoValue || !seen.insert(u).second || g_.value(u).type.dtype != g_.value(x).type.dtype) return;
    if (g_.value(u).type.nbytes() == 0) return;
    const ConcatPart part = part_in_concat(g_, x, u);
    if (part.at < 0) return;
    auto placed = [&](const Location& l) {
      return l.kind == Location::Kind::Arena && l.at == xl.at + part.at && l.row == part.row && l.stride == part.stride;
    };
    const bool input = std::find(b_.inputs.begin(), b_.inputs.end(), u) != b_.inputs.end();
    if (input || block_outputs_.count(u)) {  // where the memory plan put it: in place or not at all
      if (!placed(locate_(u))) return;
      continue;
    }
    // A flat view of a value (Reshape, ...; SSD's heads) made here and not copied is that
    // value's bytes: place the value, or find it placed.
    for (ValueId w = u; part.row == 0 && !materialised_.count(w) && !views_.count(w);) {
      const NodeId q = g_.value(w).producer;
      if (q < 0 || !inside_.count(q) || !flat_view(g_.node(q))) break;
      w = g_.node(q).inputs[0];
      if (std::find(b_.inputs.begin(), b_.inputs.end(), w) != b_.inputs.end() || block_outputs_.count(w)) {
        if (!placed(locate_(w))) return;
        u = kNoValue;
        break;
      }
      if (materialised_.count(w)) u = w;
    }
    if (u == kNoValue) continue;  // placed by the memory plan
    const NodeId p = g_.value(u).producer;
    if (p < 0 || !inside_.count(p) || views_.count(u) || segments_.count(u) || part.at % opt_.concat_run_alignment != 0)
      return;
    if (part.row > 0 && (part.row != dims_of(g_, u).back() * 4 || !conv_stores_rows(u))) return;
    if (!materialised_.count(u) && (!can_materialise(u, in_epilogue) || ++computed > 1)) return;
    for (const auto& [y, rs] : assembled_)
      for (const auto& r : rs)
        if (r.first == u) return;
    runs.emplace_back(u, part);
  }
  for (const auto& r : runs) materialised_.insert(r.first);
  assembled_[x] = std::move(runs);
}

ValueId BlockLowerer::planar(ValueId x) const {
  auto it = planar_.find(x);
  return it == planar_.end() ? kNoValue : it->second;
}

// A stem: NhwcConv(Transpose(v, perm [0, 2, .., 1])) with v channels first in memory (the
// model's input): the convolution gathers each tile's window from v's planes (conv_direct.h),
// so the transposed copy, a pass over the whole input, is not made. Where the direct kernel's
// fixed-stride path serves it: one group, few channels (one chunk of them: C * taps <= 512), no
// x dilation, C * x stride one of its strides; the Transpose read by nothing else here.
void BlockLowerer::find_planar(const Node& conv, const std::set<NodeId>& in_epilogue) {
  if (conv.op != OpKind::NhwcConv || conv.inputs.size() < 2 || !g_.value(conv.inputs[1]).constant) return;
  const ValueId x = conv.inputs[0];
  if (!materialised_.count(x) || block_outputs_.count(x) || views_.count(x) || segments_.count(x) ||
      g_.value(x).type.dtype != DType::F32)
    return;
  const NodeId t = g_.value(x).producer;
  if (t < 0 || !inside_.count(t) || in_epilogue.count(t) || g_.node(t).op != OpKind::Transpose) return;
  const ValueId v = g_.node(t).inputs[0];
  if (std::find(b_.inputs.begin(), b_.inputs.end(), v) == b_.inputs.end() || g_.value(v).type.dtype != DType::F32) return;
  for (NodeId c : g_.consumers(x))
    if (c != conv.id) return;
  const std::vector<int64_t> xd = dims_of(g_, x);
  const size_t r = xd.size();
  std::vector<int64_t> to_last{0};
  for (size_t i = 2; i < r; ++i) to_last.push_back(static_cast<int64_t>(i));
  to_last.push_back(1);
  InferCtx c(g_, g_.node(t));
  if (r < 3 || r > 5 || c.attr_ints("perm", {}) != to_last) return;
  InferCtx cc(g_, conv);
  const int64_t C = xd.back(), nd = static_cast<int64_t>(r) - 2;
  Window w = read_window(cc, static_cast<size_t>(nd), 1);
  int64_t taps = 1;
  for (int64_t k : w.kernel) taps *= k;
  const int64_t sx = w.strides.back(), planes = taps / w.kernel.back();
  const bool fixed_stride = C * sx == 1 || C * sx == 2 || C * sx == 3 || C * sx == 4 || C * sx == 6 || C * sx == 8;
  if (cc.attr_int("group", 1) != 1 || C * taps > 512 || w.dilations.back() != 1 || planes > 64 || !fixed_stride) return;
  planar_[x] = v;
  materialised_.erase(x);
}

bool BlockLowerer::conv_stores_rows(ValueId u) const {
  if (g_.value(u).type.dtype != DType::F32) return false;
  for (NodeId id : b_.nodes) {
    const Node& n = g_.node(id);
    if (n.op != OpKind::NhwcConv || !is_anchor(n) || !g_.value(n.inputs[1]).constant) continue;
    const std::vector<int64_t> xd = dims_of(g_, n.inputs[0]), od = dims_of(g_, n.outputs[0]);
    const int64_t group = InferCtx(g_, n).attr_int("group", 1);
    if (group == xd.back() && od.back() == xd.back()) continue;  // the depthwise path: dense output only
    if (n.outputs[0] == u) return true;  // materialised: the kernel stores it (BlockLowerer::epilogue)
    auto it = epilogues_.find(id);
    if (it == epilogues_.end() || materialised_.count(n.outputs[0]) || it->second.stores != std::vector<ValueId>{u})
      continue;
    // Elementwise ops only: u's index is the output's, so the kernel's own store writes it.
    bool elementwise = dims_of(g_, u) == od;
    for (NodeId e : it->second.nodes) elementwise = elementwise && op_info(g_.node(e).op).mapping == MappingType::OneToOne;
    if (elementwise) return true;
  }
  return false;
}

bool BlockLowerer::scatter_in_place(const Node& n) const {
  if (!opt_.scatters_in_place || (n.op != OpKind::ScatterND && n.op != OpKind::ScatterElements)) return false;
  const ValueId data = n.inputs.at(0), y = n.outputs.at(0);
  if (n.inputs.at(1) == data || n.inputs.at(2) == data || !materialised_.count(data) || block_outputs_.count(data))
    return false;
  if (views_.count(data) || segments_.count(data) || assembled_.count(data) || planar_.count(data) ||
      views_.count(y) || assembled_.count(y) || g_.is_graph_output(data))
    return false;
  for (const auto& [x, runs] : assembled_)
    for (const auto& run : runs)
      if (run.first == data || run.first == y) return false;
  const std::vector<NodeId> readers = g_.consumers(data);
  return readers.size() == 1 && &g_.node(readers[0]) == &n;
}

}  // namespace dnnf::cg
