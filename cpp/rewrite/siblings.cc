// Horizontal fusion as a rewrite: sibling MatMuls that read one input with constant weights
// (attention's Q, K and V projections) become one MatMul over the weights side by side, so
// the shared input is read once, by one wider GEMM. The elementwise operators each sibling
// applies next (the bias Add, an activation) move onto the wide result when every sibling
// applies the same one with constants that line up, and a Slice per sibling gives back its
// part: a view, which the anchors reading it read in place (codegen/views.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "rewrite/passes.h"
#include "rewrite/rebuild.h"

namespace dnnf {

namespace {

// Constants side by side along `axis`: every other dim equal.
TensorPtr concat_constants(const std::vector<TensorPtr>& parts, size_t axis) {
  const TensorType& t0 = parts[0]->type;
  std::vector<int64_t> dims = t0.dims();
  const size_t esize = dtype_size(t0.dtype);
  int64_t outer = 1, inner = 1, total = 0;
  for (size_t k = 0; k < axis; ++k) outer *= dims[k];
  for (size_t k = axis + 1; k < dims.size(); ++k) inner *= dims[k];
  for (const TensorPtr& p : parts) total += p->type.dims()[axis];
  std::vector<uint8_t> bytes(static_cast<size_t>(outer * total * inner) * esize);
  uint8_t* dst = bytes.data();
  for (int64_t o = 0; o < outer; ++o)
    for (const TensorPtr& p : parts) {
      const size_t run = static_cast<size_t>(p->type.dims()[axis] * inner) * esize;
      std::memcpy(dst, p->as<uint8_t>() + static_cast<size_t>(o) * run, run);
      dst += run;
    }
  Shape shape;
  for (size_t k = 0; k < dims.size(); ++k) shape.push_back(Dim(k == axis ? total : dims[k]));
  return TensorData::copy_of(TensorType{t0.dtype, shape}, bytes.data());
}

// How the siblings' operand at one input position of a hoisted operator becomes the wide
// operator's: the same value for all (it broadcasts along the axis), or constants put side
// by side along the axis.
struct Operand {
  enum Kind { Chain, Shared, Concat } kind = Shared;
  size_t axis = 0;  // Concat: the constant's own axis
};

// One group: the siblings' anchors and the elementwise steps hoisted onto the wide result.
struct Group {
  ValueId x = kNoValue;
  std::vector<NodeId> anchors;                // sibling order (topological)
  size_t axis = 0;                            // the output axis they are side by side along
  std::vector<int64_t> sizes;                 // per sibling, along axis
  std::vector<std::vector<NodeId>> steps;     // steps[k][i]: sibling i's k-th hoisted node
  std::vector<std::vector<Operand>> operands; // per step, per input position
};

class Combiner {
 public:
  explicit Combiner(const Graph& g) : g_(g), readers_(reader_counts(g)) {}

  std::vector<Group> groups() {
    std::vector<Group> out;
    for (const Value& v : g_.values()) {
      if (v.constant || v.type.dtype != DType::F32 || v.type.shape.size() < 2) continue;
      Group grp;
      grp.x = v.id;
      for (NodeId r : g_.consumers(v.id)) {
        const Node& n = g_.node(r);
        if (n.op != OpKind::MatMul || n.inputs.size() != 2 || n.inputs[0] != v.id || n.inputs[1] == v.id) continue;
        const Value& w = g_.value(n.inputs[1]);
        if (!w.constant || w.type.dtype != DType::F32 || w.type.shape.size() != 2) continue;
        if (!g_.value(n.outputs[0]).type.is_static()) continue;
        grp.anchors.push_back(r);
      }
      if (grp.anchors.size() < 2) continue;
      grp.axis = g_.value(g_.node(grp.anchors[0]).outputs[0]).type.shape.size() - 1;
      for (NodeId a : grp.anchors) grp.sizes.push_back(g_.value(g_.node(a).inputs[1]).type.dims()[1]);
      hoist(grp);
      out.push_back(std::move(grp));
    }
    return out;
  }

 private:
  ValueId out_of(const Group& grp, size_t i) const {
    const NodeId n = grp.steps.empty() ? grp.anchors[i] : grp.steps.back()[i];
    return g_.node(n).outputs[0];
  }

  // Moves the next elementwise operator of every sibling onto the wide result while all
  // siblings apply the same one.
  void hoist(Group& grp) {
    const size_t k = grp.anchors.size();
    for (;;) {
      std::vector<NodeId> next;
      for (size_t i = 0; i < k; ++i) {
        const ValueId cur = out_of(grp, i);
        if (g_.is_graph_output(cur) || readers_[cur] != 1) return;
        next.push_back(g_.consumers(cur)[0]);
      }
      const Node& n0 = g_.node(next[0]);
      if (n0.info().mapping != MappingType::OneToOne || n0.outputs.size() != 1) return;
      std::vector<Operand> ops(n0.inputs.size());
      for (size_t i = 0; i < k; ++i) {
        const Node& n = g_.node(next[i]);
        const ValueId cur = out_of(grp, i);
        if (n.op != n0.op || n.attrs != n0.attrs || n.inputs.size() != n0.inputs.size() || n.outputs.size() != 1)
          return;
        // The result has the sibling's shape (nothing broadcasts it wider), in one dtype.
        const TensorType& ct = g_.value(cur).type;
        const TensorType& ot = g_.value(n.outputs[0]).type;
        if (ot.shape != ct.shape || ot.dtype != g_.value(n0.outputs[0]).type.dtype) return;
        for (size_t p = 0; p < n.inputs.size(); ++p) {
          const bool chain = n.inputs[p] == cur, chain0 = n0.inputs[p] == out_of(grp, 0);
          if (chain != chain0) return;
          if (chain) ops[p].kind = Operand::Chain;
        }
      }
      const size_t rank = g_.value(out_of(grp, 0)).type.shape.size();
      for (size_t p = 0; p < n0.inputs.size(); ++p) {
        if (ops[p].kind == Operand::Chain) continue;
        if (!operand(grp, next, p, rank, ops[p])) return;
      }
      grp.steps.push_back(next);
      grp.operands.push_back(ops);
    }
  }

  // Whether the siblings' inputs at position p line up, and how.
  bool operand(const Group& grp, const std::vector<NodeId>& next, size_t p, size_t rank, Operand& op) const {
    const Node& n0 = g_.node(next[0]);
    const ValueId v0 = n0.inputs[p];
    if (v0 == kNoValue) {
      for (NodeId n : next)
        if (g_.node(n).inputs[p] != kNoValue) return false;
      op.kind = Operand::Shared;
      return true;
    }
    const TensorType& t0 = g_.value(v0).type;
    if (!t0.is_static() || t0.shape.size() > rank) return false;
    // Where the axis falls in the operand once it is aligned to the right; past its start
    // it does not reach the axis and broadcasts along it.
    const size_t lead = rank - t0.shape.size();
    const bool reaches = grp.axis >= lead;
    const int64_t along = reaches ? t0.dims()[grp.axis - lead] : 1;
    if (along == 1) {
      // Broadcast along the axis: one value serves every sibling if all are the same one or
      // equal constants. A computed one must exist where the wide chain is emitted.
      if (!g_.value(v0).constant && g_.value(v0).producer >= grp.anchors[0]) return false;
      for (NodeId n : next) {
        const Value& v = g_.value(g_.node(n).inputs[p]);
        if (v.id == v0) continue;
        const Value& a = g_.value(v0);
        if (!(a.constant && v.constant && a.constant->same_as(*v.constant))) return false;
      }
      op.kind = Operand::Shared;
      return true;
    }
    // Per-sibling constants, each as long as its sibling along the axis.
    for (size_t i = 0; i < next.size(); ++i) {
      const Value& v = g_.value(g_.node(next[i]).inputs[p]);
      if (!v.constant || v.type.dtype != t0.dtype || v.type.shape.size() != t0.shape.size()) return false;
      const std::vector<int64_t> d = v.type.dims(), d0 = t0.dims();
      for (size_t a = 0; a < d.size(); ++a)
        if (a == grp.axis - lead ? d[a] != grp.sizes[i] : d[a] != d0[a]) return false;
    }
    op.kind = Operand::Concat;
    op.axis = grp.axis - lead;
    return true;
  }

  const Graph& g_;
  std::vector<int> readers_;
};

TensorPtr i64_constant_of(const std::vector<int64_t>& xs) {
  return TensorData::copy_of(TensorType{DType::I64, {Dim(static_cast<int64_t>(xs.size()))}}, xs.data());
}

bool f32_constant(const Graph& g, ValueId v) {
  return v != kNoValue && g.value(v).constant && g.value(v).type.dtype == DType::F32;
}

// The part [start, start + len) of `whole` along the axis in `axes`, as a Slice node named
// `node_name` whose output is named `value_name` (the value it stands for).
ValueId emit_part(Rebuilder& rb, ValueId whole, ValueId axes, int64_t start, int64_t len,
                  const std::string& node_name, const std::string& value_name) {
  const ValueId starts = rb.constant(i64_constant_of({start}), "part_start");
  const ValueId ends = rb.constant(i64_constant_of({start + len}), "part_end");
  return rb.dst().add_node(OpKind::Slice, {whole, starts, ends, axes}, {}, 1, node_name, {value_name})[0];
}

}  // namespace

Graph fold_matmul_scale(const Graph& g) {
  const std::vector<int> readers = reader_counts(g);
  // Per MatMul/Gemm and bias Add to scale: a factor per output column (the last axis).
  std::map<NodeId, std::vector<float>> cols;
  std::vector<ValueId> drop(g.nodes().size(), kNoValue);  // Mul node -> its data input
  auto private_value = [&](ValueId x) {
    return g.value(x).producer >= 0 && readers[x] == 1 && !g.is_graph_output(x);
  };
  auto producer = [&](ValueId x) -> const Node& { return g.node(g.value(x).producer); };
  auto relayout = [](OpKind k) { return is_reshape_view(k) || k == OpKind::Transpose; };
  auto last_dim = [&](ValueId x) {
    const Shape& s = g.value(x).type.shape;
    return s.empty() || !s.back().is_static() ? int64_t{-1} : s.back().value;
  };
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::Mul || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
    for (size_t i : {size_t{0}, size_t{1}}) {
      const ValueId c = n.inputs[1 - i], data = n.inputs[i];
      if (!f32_constant(g, c) || g.value(c).type.numel() != 1 || data == c) continue;
      if (g.value(data).type != g.value(n.outputs[0]).type || g.value(data).type.dtype != DType::F32) continue;
      const float k = g.value(c).constant->as<float>()[0];
      if (!std::isfinite(k)) continue;
      // Up through layout operators, at most one Split along the last axis (which scales one
      // range of columns: GPT-2's fused Q/K/V projection), at most one Add of a constant (the
      // bias), to a MatMul or Gemm with constant weights; every value on the way read only by
      // the next.
      ValueId v = data;
      while (private_value(v) && relayout(producer(v).op)) v = producer(v).inputs[0];
      int64_t lo = 0, hi = -1;  // the columns scaled; hi -1: all
      if (private_value(v) && producer(v).op == OpKind::Split && producer(v).inputs.size() == 2 &&
          private_value(producer(v).inputs[0])) {
        const Node& sp = producer(v);
        const ValueId u = sp.inputs[0];
        const int64_t rank = static_cast<int64_t>(g.value(u).type.shape.size());
        int64_t axis = sp.has_attr("axis") ? sp.attrs.at("axis").i : 0;
        if (axis < 0) axis += rank;
        const Value& sizes = g.value(sp.inputs[1]);
        if (axis != rank - 1 || !sizes.constant || last_dim(u) < 0) continue;
        const std::vector<int64_t> parts = sizes.constant->to_ints();
        if (parts.size() != sp.outputs.size()) continue;
        for (int p = 0; p < g.value(v).producer_index; ++p) lo += parts[static_cast<size_t>(p)];
        hi = lo + parts[static_cast<size_t>(g.value(v).producer_index)];
        v = u;
        // Reshapes that keep the last axis keep the columns.
        while (private_value(v) && is_reshape_view(producer(v).op) && last_dim(producer(v).inputs[0]) == last_dim(v))
          v = producer(v).inputs[0];
      }
      const int64_t columns = last_dim(v);
      if (columns < 0 || (hi >= 0 && hi > columns)) continue;
      if (hi < 0) hi = columns;
      const bool all = lo == 0 && hi == columns;
      // A constant operand scaled per column: it must run along the columns, unless all are.
      auto per_column = [&](ValueId x) { return all || last_dim(x) == columns; };
      NodeId bias = -1;
      if (private_value(v) && producer(v).op == OpKind::Add) {
        const Node& a = producer(v);
        const int ci = f32_constant(g, a.inputs[0]) ? 0 : f32_constant(g, a.inputs[1]) ? 1 : -1;
        if (ci >= 0 && !f32_constant(g, a.inputs[1 - ci]) &&
            g.value(a.outputs[0]).type == g.value(a.inputs[1 - ci]).type) {
          if (!per_column(a.inputs[ci])) continue;
          bias = a.id;
          v = a.inputs[1 - ci];
        }
      }
      if (!private_value(v)) continue;
      const Node& mm = producer(v);
      const bool matmul = mm.op == OpKind::MatMul && mm.inputs.size() == 2;
      const bool gemm = mm.op == OpKind::Gemm && mm.inputs.size() >= 2 &&
                        (mm.inputs.size() < 3 || mm.inputs[2] == kNoValue || (f32_constant(g, mm.inputs[2]) &&
                                                                              per_column(mm.inputs[2])));
      if (!(matmul || gemm) || !f32_constant(g, mm.inputs[1]) || g.value(mm.inputs[1]).type.shape.size() != 2) continue;
      for (NodeId t : {mm.id, bias}) {
        if (t < 0) continue;
        auto& f = cols[t];
        if (f.empty()) f.assign(static_cast<size_t>(columns), 1.0f);
        for (int64_t j = lo; j < hi; ++j) f[static_cast<size_t>(j)] *= k;
      }
      drop[n.id] = data;
      break;
    }
  }
  // Scales constant `t` per column: along its last axis, or along its rows for a Gemm's
  // transposed B ([N, K]). A constant that does not run along the columns (a scalar bias)
  // was only accepted where every column has the same factor, f[0].
  auto scale_columns = [](const TensorData& t, const std::vector<float>& f, bool rows) {
    std::vector<float> xs(t.as<float>(), t.as<float>() + t.type.numel());
    const size_t n = xs.size(), cn = f.size();
    for (size_t e = 0; e < n; ++e) {
      const size_t j = rows ? e / (n / cn) : (n % cn == 0 && !t.type.shape.empty() &&
                                               t.type.shape.back().value == static_cast<int64_t>(cn)) ? e % cn : 0;
      xs[e] *= f[j];
    }
    return TensorData::copy_of(t.type, xs.data());
  };
  Rebuilder rb(g);
  for (const Node& n : g.nodes()) {
    auto it = cols.find(n.id);
    if (drop[n.id] != kNoValue) {
      rb.replace(n, {rb.map(drop[n.id])});
    } else if (it != cols.end()) {
      std::vector<ValueId> ins = rb.map(n.inputs);
      const std::vector<float>& f = it->second;
      if (n.op == OpKind::Add) {
        const size_t w = f32_constant(g, n.inputs[0]) ? 0 : 1;
        ins[w] = rb.constant(scale_columns(*g.value(n.inputs[w]).constant, f, false), "scaled");
      } else {
        const bool trans_b = n.op == OpKind::Gemm && n.has_attr("transB") && n.attrs.at("transB").i != 0;
        ins[1] = rb.constant(scale_columns(*g.value(n.inputs[1]).constant, f, trans_b), "scaled");
        if (n.op == OpKind::Gemm && n.inputs.size() > 2 && n.inputs[2] != kNoValue)
          ins[2] = rb.constant(scale_columns(*g.value(n.inputs[2]).constant, f, false), "scaled");
      }
      rb.replace(n, rb.dst().add_node(n.op, ins, n.attrs, 1, n.name, {g.value(n.outputs[0]).name}));
    } else {
      rb.copy(n);
    }
  }
  return eliminate_dead_code(rb.finish());
}

Graph split_to_slices(const Graph& g) {
  Rebuilder rb(g);
  for (const Node& n : g.nodes()) {
    // Each part's size along the axis, from the outputs' inferred types; a Split with a
    // symbolic or empty part stays as it is.
    std::vector<int64_t> parts;
    int64_t axis = n.has_attr("axis") ? n.attrs.at("axis").i : 0;
    if (n.op == OpKind::Split && !n.inputs.empty()) {
      const int64_t rank = static_cast<int64_t>(g.value(n.inputs[0]).type.shape.size());
      if (axis < 0) axis += rank;
      for (ValueId o : n.outputs) {
        const TensorType& ot = g.value(o).type;
        if (axis < 0 || axis >= rank || !ot.is_static() || ot.dims()[static_cast<size_t>(axis)] == 0) {
          parts.clear();
          break;
        }
        parts.push_back(ot.dims()[static_cast<size_t>(axis)]);
      }
    }
    if (parts.empty()) {
      rb.copy(n);
      continue;
    }
    const ValueId axes = rb.constant(i64_constant_of({axis}), "split_axis");
    std::vector<ValueId> outs;
    int64_t at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      outs.push_back(emit_part(rb, rb.map(n.inputs[0]), axes, at, parts[i], n.name + "." + std::to_string(i),
                               g.value(n.outputs[i]).name));
      at += parts[i];
    }
    rb.replace(n, outs);
  }
  return eliminate_dead_code(rb.finish());
}

Graph combine_sibling_matmuls(const Graph& g) {
  std::vector<Group> groups = Combiner(g).groups();
  if (groups.empty()) return g;
  std::vector<int> group_at(g.nodes().size(), -1);  // the first anchor's node -> group
  std::vector<char> absorbed(g.nodes().size(), 0);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    group_at[groups[gi].anchors[0]] = static_cast<int>(gi);
    for (NodeId a : groups[gi].anchors) absorbed[a] = 1;
    for (const auto& step : groups[gi].steps)
      for (NodeId n : step) absorbed[n] = 1;
  }
  Rebuilder rb(g);
  for (const Node& n : g.nodes()) {
    if (group_at[n.id] < 0) {
      if (!absorbed[n.id]) rb.copy(n);
      continue;
    }
    // All anchors read x and constants, and every hoisted step reads constants or values
    // from before them, so the wide chain can be emitted here, at the first anchor.
    const Group& grp = groups[group_at[n.id]];
    std::vector<TensorPtr> ws;
    for (NodeId a : grp.anchors) ws.push_back(g.value(g.node(a).inputs[1]).constant);
    ValueId wide = rb.emit(OpKind::MatMul, {rb.map(grp.x), rb.constant(concat_constants(ws, 1), "siblings_w")}, {},
                           n.name + ".siblings");
    for (size_t k = 0; k < grp.steps.size(); ++k) {
      const Node& s0 = g.node(grp.steps[k][0]);
      std::vector<ValueId> ins;
      for (size_t p = 0; p < s0.inputs.size(); ++p) {
        const Operand& op = grp.operands[k][p];
        if (op.kind == Operand::Chain) {
          ins.push_back(wide);
        } else if (op.kind == Operand::Shared) {
          ins.push_back(s0.inputs[p] == kNoValue ? kNoValue : rb.map(s0.inputs[p]));
        } else {
          std::vector<TensorPtr> parts;
          for (NodeId s : grp.steps[k]) parts.push_back(g.value(g.node(s).inputs[p]).constant);
          ins.push_back(rb.constant(concat_constants(parts, op.axis), "siblings_c"));
        }
      }
      wide = rb.emit(s0.op, ins, s0.attrs, s0.name + ".siblings");
    }
    const ValueId axes = rb.constant(i64_constant_of({static_cast<int64_t>(grp.axis)}), "siblings_axis");
    int64_t at = 0;
    for (size_t i = 0; i < grp.anchors.size(); ++i) {
      const Node& last = g.node(grp.steps.empty() ? grp.anchors[i] : grp.steps.back()[i]);
      rb.replace(last, {emit_part(rb, wide, axes, at, grp.sizes[i], last.name, g.value(last.outputs[0]).name)});
      at += grp.sizes[i];
    }
  }
  return eliminate_dead_code(rb.finish());
}

}  // namespace dnnf
