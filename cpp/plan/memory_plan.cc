// Buffer reuse by liveness (see memory_plan.h): lifetimes from the fusion plan's block
// order, then offsets by a greedy best-fit over tensors sorted by size.
//
// The algorithm ("greedy by size" offset assignment):
//   1. Each intermediate gets a live range [first, last] of block positions: the block that
//      writes it to the last block that reads it.
//   2. Tensors are placed one at a time, largest first (ties: earlier first, then lower id),
//      because big tensors are the hardest to fit and small ones fill the holes they leave.
//   3. To place a tensor, look only at the already-placed tensors whose live ranges overlap
//      its own, in offset order. The holes between them (starting at 0, each start rounded
//      up to the alignment) are candidates; the smallest hole that fits wins (best fit),
//      which keeps large holes for large tensors. If none fits, the tensor goes after the
//      highest end among them. Tensors not live at the same time may thus share bytes.
//   4. The arena is the highest end, rounded up to the alignment.
// Placing at the end of the overlapping tensors never exceeds the sum of all aligned sizes
// placed so far, so the arena is at most the naive one-buffer-per-tensor size; it is at
// least the peak of bytes live at one time. On a chain of equal-sized tensors the two ends
// meet: two slots.
#include "plan/memory_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf {

namespace {

int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

bool overlaps_in_time(const BufferSlot& a, const BufferSlot& b) {
  return a.first <= b.last && b.first <= a.last;
}

// The bytes from a tensor's first to its last (rows in a Concat: the gaps between them too).
int64_t extent(const BufferSlot& s) {
  if (s.row <= 0 || s.size == 0) return s.size;
  return (s.size / s.row - 1) * s.stride + s.row;
}

bool overlaps_in_space(const BufferSlot& a, const BufferSlot& b) {
  return a.size > 0 && b.size > 0 && a.offset < b.offset + extent(b) && b.offset < a.offset + extent(a);
}

std::vector<int> block_positions(const Graph& g, const FusionPlan& p) {
  int max_id = -1;
  for (const Block& b : p.blocks) max_id = std::max(max_id, b.id);
  std::vector<int> pos(size_t(max_id + 1), -1);
  for (size_t i = 0; i < p.blocks.size(); ++i) {
    int id = p.blocks[i].id;
    if (id < 0 || pos[size_t(id)] != -1) throw InternalError("memory plan: block ids are not distinct and >= 0");
    pos[size_t(id)] = int(i);
  }
  if (p.block_of.size() != g.nodes().size())
    throw InternalError("memory plan: the fusion plan does not cover this graph's nodes");
  return pos;
}

int64_t bytes_of(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (!val.type.is_static())
    throw ShapeError("memory plan needs static shapes: %" + val.name + " has type " + val.type.str() +
                     "; specialize dynamic dimensions before compiling");
  return int64_t(val.type.nbytes());
}

std::string name_of(const Graph& g, ValueId v) { return "%" + g.value(v).name; }

}  // namespace

bool flat_view(const Node& n) {
  switch (n.op) {
    case OpKind::Reshape:
    case OpKind::Flatten:
    case OpKind::Squeeze:
    case OpKind::Unsqueeze:
    case OpKind::Identity:
      return n.outputs.size() == 1 && !n.inputs.empty() && n.inputs[0] != kNoValue;
    default:
      return false;
  }
}

namespace {

// Whether `v` is `u`, or a chain of flat views of it (the same bytes in the same order).
bool views_bytes_of(const Graph& g, ValueId v, ValueId u) {
  while (v != u) {
    const NodeId p = g.value(v).producer;
    if (p < 0 || !flat_view(g.node(p))) return false;
    v = g.node(p).inputs[0];
  }
  return true;
}

}  // namespace

ConcatPart part_in_concat(const Graph& g, ValueId x, ValueId u) {
  const NodeId p = g.value(x).producer;
  if (p < 0 || g.node(p).op != OpKind::Concat || !g.value(x).type.is_static()) return {};
  const Node& cat = g.node(p);
  const std::vector<Dim>& xd = g.value(x).type.shape;
  int64_t axis = InferCtx(g, cat).attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(xd.size());
  if (axis < 0 || axis >= static_cast<int64_t>(xd.size())) return {};
  int64_t outer = 1, inner = int64_t(dtype_size(g.value(x).type.dtype));  // rows; bytes per index of the axis
  for (int64_t d = 0; d < axis; ++d) outer *= xd[static_cast<size_t>(d)].value;
  for (size_t d = static_cast<size_t>(axis) + 1; d < xd.size(); ++d) inner *= xd[d].value;
  const int64_t stride = xd[static_cast<size_t>(axis)].value * inner;
  int64_t at = 0;
  ConcatPart found;
  for (ValueId i : cat.inputs) {
    if (i == kNoValue || !g.value(i).type.is_static() || g.value(i).type.dtype != g.value(x).type.dtype) return {};
    const std::vector<Dim>& id = g.value(i).type.shape;
    if (id.size() != xd.size()) return {};
    // A flat view of u stands for u only where the parts are single runs.
    if (outer == 1 ? views_bytes_of(g, i, u) : i == u) {
      if (found.at >= 0) return {};  // read twice: two parts
      found.at = at;
      if (outer > 1) {
        found.row = id[static_cast<size_t>(axis)].value * inner;
        found.stride = stride;
      }
    }
    at += id[static_cast<size_t>(axis)].value * inner;
  }
  return at == stride ? found : ConcatPart{};
}


MemoryPlan plan_memory(const Graph& g, const FusionPlan& p, int64_t alignment, bool concats_in_block,
                       const std::vector<std::pair<ValueId, ValueId>>& in_place, int64_t run_alignment,
                       const std::vector<ValueId>& row_writers) {
  const std::set<ValueId> writes_rows(row_writers.begin(), row_writers.end());
  if (run_alignment == 0) run_alignment = alignment;
  for (int64_t a : {alignment, run_alignment})
    if (a <= 0 || (a & (a - 1)) != 0)
      throw Error("memory plan: alignment must be a power of two, got " + std::to_string(a));
  std::vector<int> pos = block_positions(g, p);
  auto position_of_node = [&](NodeId n) { return pos.at(size_t(p.block_of.at(size_t(n)))); };

  MemoryPlan m;
  m.alignment = alignment;
  m.run_alignment = run_alignment;
  // 1. Live ranges, from the graph's producer/consumer edges mapped to blocks.
  for (const Block& b : p.blocks)
    for (ValueId v : b.outputs) {
      if (g.is_graph_output(v)) continue;  // lives in the caller's buffer
      BufferSlot s;
      s.value = v;
      s.size = bytes_of(g, v);
      s.first = s.last = position_of_node(g.value(v).producer);
      for (NodeId c : g.consumers(v)) s.last = std::max(s.last, position_of_node(c));
      m.buffers.push_back(s);
      m.intermediate_bytes += s.size;
      m.naive_bytes += align_up(s.size, alignment);
    }
  std::sort(m.buffers.begin(), m.buffers.end(),
            [](const BufferSlot& a, const BufferSlot& b) { return a.value < b.value; });
  for (size_t i = 1; i < m.buffers.size(); ++i)
    if (m.buffers[i].value == m.buffers[i - 1].value)
      throw InternalError("memory plan: " + name_of(g, m.buffers[i].value) + " is an output of two blocks");

  // 1b. Concats assembled in place: a Concat whose inputs are arena tensors (other blocks'
  // outputs) or values of its own block, each placed at its part of the Concat's bytes, so
  // its block writes it there and the Concat's block copies nothing (in_place.cc's
  // find_assembly places the block's own values). With only ones before the axis (a batch-1
  // channel Concat) each part is one run; otherwise (channels last) rows, which only the
  // kernels named in `row_writers` write, for values only the Concat reads. A Concat its own
  // block consumes (feeding a convolution there) gets a buffer for this too, live from its
  // first input's block to its own. A tensor holds or lies in one Concat at most; runs start
  // on the run alignment.
  std::map<ValueId, size_t> slot_of;
  for (size_t i = 0; i < m.buffers.size(); ++i) slot_of[m.buffers[i].value] = i;
  std::set<ValueId> taken;
  for (const Node& n : g.nodes()) {  // topological order
    if (n.op != OpKind::Concat || n.outputs.size() != 1) continue;
    const ValueId x = n.outputs[0];
    auto xs = slot_of.find(x);
    if (taken.count(x) ||
        (xs == slot_of.end() && (!concats_in_block || g.is_graph_output(x) || !g.value(x).type.is_static())))
      continue;
    std::vector<std::pair<size_t, int64_t>> runs;
    bool ok = true;
    for (ValueId u : n.inputs) {
      const ConcatPart part = u == kNoValue ? ConcatPart{} : part_in_concat(g, x, u);
      const int64_t at = part.at;
      if (at < 0) {
        ok = false;
        break;
      }
      if (part.row > 0) {  // rows of u's last dim (a Concat along it): written so by u's kernel, read by the Concat alone
        const TensorType& ut = g.value(u).type;
        bool alone = !g.is_graph_output(u) && writes_rows.count(u) &&
                     part.row == ut.shape.back().value * int64_t(dtype_size(ut.dtype));
        for (NodeId c : g.consumers(u)) alone = alone && c == n.id;
        if (!alone || part.stride % run_alignment != 0) {
          ok = false;
          break;
        }
      }
      // A flat view made in the Concat's block (a Reshape of another block's output) is read
      // where its root lies: that root is what to place.
      for (ValueId w = u; !slot_of.count(w);) {
        const NodeId pr = g.value(w).producer;
        if (pr < 0 || !flat_view(g.node(pr)) || g.is_graph_output(w) ||
            p.block_of.at(size_t(pr)) != p.block_of.at(size_t(n.id)))
          break;
        w = g.node(pr).inputs[0];
        if (slot_of.count(w)) u = w;
      }
      auto us = slot_of.find(u);
      if (us != slot_of.end()) {
        if (taken.count(u) || at % run_alignment != 0) ok = false;
        runs.emplace_back(us->second, at);
        continue;
      }
      // Not in the arena: a value of the Concat's own block, or nothing to place.
      const NodeId pr = g.value(u).producer;
      if (pr < 0 || g.is_graph_output(u) || p.block_of.at(size_t(pr)) != p.block_of.at(size_t(n.id))) ok = false;
    }
    if (!ok || runs.empty()) continue;
    if (xs == slot_of.end()) {  // consumed inside its block: a buffer of its own from now on
      BufferSlot s;
      s.value = x;
      s.size = bytes_of(g, x);
      s.first = s.last = position_of_node(n.id);
      m.buffers.push_back(s);
      m.intermediate_bytes += s.size;
      m.naive_bytes += align_up(s.size, alignment);
      xs = slot_of.emplace(x, m.buffers.size() - 1).first;
    }
    BufferSlot& xb = m.buffers[xs->second];
    for (const auto& [i, at] : runs) {
      m.buffers[i].within = x;
      taken.insert(m.buffers[i].value);
      xb.first = std::min(xb.first, m.buffers[i].first);
      xb.last = std::max(xb.last, m.buffers[i].last);
    }
    taken.insert(x);
  }

  std::sort(m.buffers.begin(), m.buffers.end(),
            [](const BufferSlot& a, const BufferSlot& b) { return a.value < b.value; });
  slot_of.clear();
  for (size_t i = 0; i < m.buffers.size(); ++i) slot_of[m.buffers[i].value] = i;

  // 1c. Results in place of an input: y takes r's bytes. A chain (r <- y1 <- y2: a ResNet
  // stage's residual stream) is one buffer, placed by its root and live over the union of
  // its members' ranges; the members get the root's offset after placement.
  std::set<ValueId> shared;  // r's already taken over
  for (const auto& [y, r] : in_place) {
    auto ys = slot_of.find(y), rs = slot_of.find(r);
    if (ys == slot_of.end() || rs == slot_of.end() || y == r || taken.count(y) || taken.count(r) ||
        shared.count(r))
      continue;
    BufferSlot &yb = m.buffers[ys->second], &rb = m.buffers[rs->second];
    if (yb.shares != kNoValue || yb.size != rb.size || rb.last != yb.first) continue;
    yb.shares = r;
    shared.insert(r);
  }
  auto root_of = [&](size_t i) {
    while (m.buffers[i].shares != kNoValue) i = slot_of.at(m.buffers[i].shares);
    return i;
  };
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    if (m.buffers[i].shares == kNoValue) continue;
    BufferSlot& root = m.buffers[root_of(i)];
    root.first = std::min(root.first, m.buffers[i].first);
    root.last = std::max(root.last, m.buffers[i].last);
  }

  // 2. Placement order: largest first (a Concat's inputs in its bytes are placed with it, a
  // result in place of an input with the chain's root).
  std::vector<size_t> order;
  for (size_t i = 0; i < m.buffers.size(); ++i)
    if (m.buffers[i].within == kNoValue && m.buffers[i].shares == kNoValue) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const BufferSlot &x = m.buffers[a], &y = m.buffers[b];
    if (x.size != y.size) return x.size > y.size;
    if (x.first != y.first) return x.first < y.first;
    return x.value < y.value;
  });

  // 3. Best fit among the holes left by tensors live at the same time.
  std::vector<const BufferSlot*> placed, live;
  for (size_t i : order) {
    BufferSlot& t = m.buffers[i];
    live.clear();
    for (const BufferSlot* q : placed)
      if (overlaps_in_time(*q, t) && q->size > 0) live.push_back(q);
    std::sort(live.begin(), live.end(), [](const BufferSlot* a, const BufferSlot* b) {
      return a->offset < b->offset;
    });
    int64_t cursor = 0, best = -1, best_hole = 0;
    for (const BufferSlot* q : live) {
      int64_t start = align_up(cursor, alignment);
      if (start + t.size <= q->offset && (best < 0 || q->offset - start < best_hole)) {
        best = start;
        best_hole = q->offset - start;
      }
      cursor = std::max(cursor, q->offset + q->size);
    }
    t.offset = best >= 0 ? best : align_up(cursor, alignment);
    m.arena_bytes = std::max(m.arena_bytes, align_up(t.offset + t.size, alignment));
    placed.push_back(&t);
  }

  for (BufferSlot& t : m.buffers)
    if (t.within != kNoValue) {
      const BufferSlot& x = m.buffers[slot_of.at(t.within)];
      const ConcatPart part = part_in_concat(g, t.within, t.value);
      t.offset = x.offset + part.at;
      t.row = part.row;
      t.stride = part.stride;
    }
  for (size_t i = 0; i < m.buffers.size(); ++i)
    if (m.buffers[i].shares != kNoValue) m.buffers[i].offset = m.buffers[root_of(i)].offset;

  // The lower bound: bytes live during each block (a Concat's inputs in its bytes are its, a
  // chain of in-place results is its root's).
  std::vector<int64_t> live_at(p.blocks.size() + 1, 0);
  for (const BufferSlot& s : m.buffers)
    if (s.within == kNoValue && s.shares == kNoValue)
      for (int t = s.first; t <= s.last; ++t) live_at[size_t(t)] += s.size;
  for (int64_t b : live_at) m.peak_bytes = std::max(m.peak_bytes, b);

#ifndef NDEBUG
  check_memory_plan(g, p, m);
#endif
  return m;
}

void check_memory_plan(const Graph& g, const FusionPlan& p, const MemoryPlan& m) {
  auto fail = [](const std::string& why) { throw InternalError("memory plan check: " + why); };
  std::vector<int> pos = block_positions(g, p);
  for (int64_t a : {m.alignment, m.run_alignment})
    if (a <= 0 || (a & (a - 1)) != 0) fail("alignment is not a power of two");
  // True lifetimes from the blocks' own lists: written where it is a block output, read
  // wherever it is a block input.
  std::map<ValueId, BufferSlot> truth;
  for (size_t i = 0; i < p.blocks.size(); ++i)
    for (ValueId v : p.blocks[i].outputs) {
      if (g.is_graph_output(v)) continue;
      if (truth.count(v)) fail(name_of(g, v) + " is written by two blocks");
      BufferSlot s;
      s.value = v;
      s.size = bytes_of(g, v);
      s.first = s.last = int(i);
      truth[v] = s;
    }
  for (size_t i = 0; i < p.blocks.size(); ++i)
    for (ValueId v : p.blocks[i].inputs) {
      auto it = truth.find(v);
      if (it == truth.end()) continue;
      if (int(i) < it->second.first) fail(name_of(g, v) + " is read by block " + std::to_string(i) + " before it is written");
      it->second.last = std::max(it->second.last, int(i));
    }

  // A Concat its own block consumes holds a buffer when inputs lie in it: live in that block.
  for (const BufferSlot& s : m.buffers) {
    const ValueId x = s.within;
    if (x == kNoValue || truth.count(x) || x < 0 || size_t(x) >= g.values().size()) continue;
    const NodeId pr = g.value(x).producer;
    if (pr < 0 || g.node(pr).op != OpKind::Concat || g.is_graph_output(x)) continue;
    BufferSlot t;
    t.value = x;
    t.size = bytes_of(g, x);
    t.first = t.last = pos.at(size_t(p.block_of.at(size_t(pr))));
    truth[x] = t;
  }
  std::map<ValueId, const BufferSlot*> given;
  for (const BufferSlot& s : m.buffers) {
    if (s.value < 0 || size_t(s.value) >= g.values().size()) fail("a buffer names value " + std::to_string(s.value) + ", not in the graph");
    if (!truth.count(s.value)) fail(name_of(g, s.value) + " has a buffer but is not an intermediate block output");
    if (!given.emplace(s.value, &s).second) fail(name_of(g, s.value) + " has two buffers");
  }
  std::vector<BufferSlot> actual;  // recorded offsets, true sizes and lifetimes
  for (const auto& [v, t] : truth) {
    auto it = given.find(v);
    if (it == given.end()) fail(name_of(g, v) + " has no buffer");
    const BufferSlot& s = *it->second;
    std::string who = name_of(g, v);
    if (s.size < t.size) fail(who + " needs " + std::to_string(t.size) + " bytes, its buffer has " + std::to_string(s.size));
    const int64_t align = s.within != kNoValue ? m.run_alignment : m.alignment;  // a run of a Concat: its own
    if (s.offset < 0 || s.offset % align != 0) fail(who + " has offset " + std::to_string(s.offset) + ", not aligned to " + std::to_string(align));
    BufferSlot rows = t;  // its true size, laid out as recorded
    rows.row = s.row;
    rows.stride = s.stride;
    if (s.row < 0 || (s.row > 0 && (t.size % s.row != 0 || s.stride < s.row)))
      fail(who + " is laid out in rows of " + std::to_string(s.row) + " bytes, " + std::to_string(s.stride) +
           " apart, which do not hold its " + std::to_string(t.size) + " bytes");
    if (s.offset + extent(rows) > m.arena_bytes) fail(who + " ends at " + std::to_string(s.offset + extent(rows)) + ", past the arena (" + std::to_string(m.arena_bytes) + " bytes)");
    if (s.first > t.first || s.last < t.last)
      fail(who + " is live in blocks [" + std::to_string(t.first) + ", " + std::to_string(t.last) + "] but recorded as [" +
           std::to_string(s.first) + ", " + std::to_string(s.last) + "]");
    if (s.row > 0 && s.within == kNoValue) fail(who + " is laid out in rows outside any Concat");
    if (s.within != kNoValue) {  // in a Concat's bytes: at its part, while the Concat's buffer is kept
      auto x = given.find(s.within);
      const ConcatPart part = part_in_concat(g, s.within, v);
      if (x == given.end() || part.at < 0)
        fail(who + " is placed in " + name_of(g, s.within) + ", which is not a buffered Concat of it");
      if (s.offset != x->second->offset + part.at || s.row != part.row || s.stride != part.stride)
        fail(who + " is placed at " + std::to_string(s.offset) + " (rows " + std::to_string(s.row) + "/" +
             std::to_string(s.stride) + "), not at its part of " + name_of(g, s.within) + " (" +
             std::to_string(x->second->offset + part.at) + ", rows " + std::to_string(part.row) + "/" +
             std::to_string(part.stride) + ")");
      if (part.row > 0)
        for (NodeId c : g.consumers(v))
          if (c != g.value(s.within).producer) fail(who + " lies in rows of " + name_of(g, s.within) + " but is read by another operator");
      if (x->second->within != kNoValue || x->second->row != 0) fail(name_of(g, s.within) + " holds " + who + " but lies in another Concat itself");
      if (x->second->first > t.first || x->second->last < t.last)
        fail(name_of(g, s.within) + "'s buffer is not kept while " + who + ", in it, is live");
    }
    if (s.shares != kNoValue) {  // in place of r: r's bytes, handed over in r's last block
      auto r = given.find(s.shares);
      auto rt = truth.find(s.shares);
      if (r == given.end() || rt == truth.end())
        fail(who + " shares the bytes of " + name_of(g, s.shares) + ", which has no buffer");
      for (const BufferSlot& o : m.buffers)
        if (o.shares == s.shares && o.value != s.value)
          fail(name_of(g, s.shares) + "'s bytes are taken over by two tensors");
      if (r->second->offset != s.offset || rt->second.size != t.size)
        fail(who + " shares the bytes of " + name_of(g, s.shares) + " but not its offset and size");
      if (rt->second.last != t.first)
        fail(who + " takes over the bytes of " + name_of(g, s.shares) + " in block " + std::to_string(t.first) +
             ", but that tensor's last reader is block " + std::to_string(rt->second.last));
      if (s.within != kNoValue || r->second->within != kNoValue)
        fail(who + " shares the bytes of " + name_of(g, s.shares) + " inside a Concat's");
    }
    BufferSlot a = t;
    a.offset = s.offset;
    a.within = s.within;
    a.shares = s.shares;
    a.row = s.row;
    a.stride = s.stride;
    actual.push_back(a);
  }
  // No two tensors live at the same time share a byte. Sweep in order of first use so each
  // tensor is compared only with those still live.
  std::sort(actual.begin(), actual.end(), [](const BufferSlot& a, const BufferSlot& b) { return a.first < b.first; });
  for (size_t i = 0; i < actual.size(); ++i)
    for (size_t j = i + 1; j < actual.size() && actual[j].first <= actual[i].last; ++j)
      if (overlaps_in_space(actual[i], actual[j]) && actual[i].within != actual[j].value &&
          actual[j].within != actual[i].value && actual[i].shares != actual[j].value &&
          actual[j].shares != actual[i].value &&
          // parts of one Concat, each checked at its own part above (rows interleave)
          !(actual[i].within != kNoValue && actual[i].within == actual[j].within))
        fail(name_of(g, actual[i].value) + " [" + std::to_string(actual[i].offset) + ", +" + std::to_string(actual[i].size) +
             ") and " + name_of(g, actual[j].value) + " [" + std::to_string(actual[j].offset) + ", +" +
             std::to_string(actual[j].size) + ") overlap in memory while both are live (blocks " +
             std::to_string(std::max(actual[i].first, actual[j].first)) + ".." +
             std::to_string(std::min(actual[i].last, actual[j].last)) + ")");
}

}  // namespace dnnf
