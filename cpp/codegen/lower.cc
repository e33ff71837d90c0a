// Lowering of one fused block to its kernel plan (paper §4.4); see lower.h.
#include "codegen/lower.h"
#include "codegen/resize_index.h"

#include <algorithm>

#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

int ModuleState::constant(ValueId v) {
  auto it = const_index.find(v);
  if (it != const_index.end()) return it->second;
  int k = static_cast<int>(constants.size());
  constants.push_back(v);
  const_index[v] = k;
  return k;
}

int ModuleState::pack(PackedConstant p) {
  p.constant = constant(p.value);
  // One slot per constant and layout: a weight that several anchors read the same way
  // (ALBERT's 12 layers share theirs) is packed once, stays one copy in memory and in cache.
  for (size_t i = 0; i < packed.size(); ++i)
    if (packed[i].kind == p.kind && packed[i].constant == p.constant && packed[i].ints == p.ints)
      return static_cast<int>(i);
  packed.push_back(std::move(p));
  return static_cast<int>(packed.size()) - 1;
}

namespace {

bool same(const std::vector<IExpr>& a, const std::vector<IExpr>& b, const VarTable& vt) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (render(a[i], vt) != render(b[i], vt)) return false;
  return true;
}

bool is_flat_preserving(OpKind k) {
  return k == OpKind::Reshape || k == OpKind::Flatten || k == OpKind::Squeeze ||
         k == OpKind::Unsqueeze;
}

}  // namespace

// The index of n's output as a function of the anchor's index, when n can run in the
// anchor's epilogue: an elementwise op whose fused operand is not broadcast, a
// flat-preserving reshape, or a transpose (its store goes through the permuted index).
bool forward_index(const Graph& g, const Node& n, const std::map<ValueId, std::vector<IExpr>>& idx,
                   VarTable& vt, std::vector<IExpr>& out) {
  if (n.outputs.size() != 1 && n.op != OpKind::Dropout) return false;
  if (n.op == OpKind::Dropout && !g.consumers(n.outputs[1]).empty()) return false;
  const std::vector<int64_t> od = dims_of(g, n.outputs[0]);
  if (g.value(n.outputs[0]).type.dtype != DType::F32) return false;
  const std::vector<IExpr>* in = nullptr;
  size_t which = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    auto it = n.inputs[i] == kNoValue ? idx.end() : idx.find(n.inputs[i]);
    if (it == idx.end()) continue;
    if (in && !same(*in, it->second, vt)) return false;
    in = &it->second;
    which = i;
  }
  if (!in) return false;
  const std::vector<int64_t> id = dims_of(g, n.inputs[which]);
  if (is_flat_preserving(n.op)) {
    out = delinearize(linearize(*in, id, vt), od, vt);
    return same(delinearize(linearize(out, od, vt), id, vt), *in, vt);
  }
  if (n.op == OpKind::Transpose) {
    InferCtx c(g, n);
    std::vector<int64_t> perm = c.attr_ints("perm");
    if (perm.empty())
      for (int64_t k = static_cast<int64_t>(od.size()) - 1; k >= 0; --k) perm.push_back(k);
    out.assign(od.size(), IExpr{});
    for (size_t k = 0; k < perm.size(); ++k) out[k] = (*in)[perm[k]];
    return true;
  }
  if (op_info(n.op).mapping != MappingType::OneToOne || n.op == OpKind::Constant) return false;
  if (n.op == OpKind::BatchNormalization && which != 0) return false;
  // Every fused operand must have the output's shape (a broadcast one would need its
  // value at several output positions).
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (n.inputs[i] != kNoValue && idx.count(n.inputs[i]) && dims_of(g, n.inputs[i]) != od) return false;
  out = *in;
  return true;
}

BlockLowerer::BlockLowerer(const Graph& g, const Block& b, ModuleState& ms, LocateFn locate, LowerOptions opt)
    : g_(g), b_(b), ms_(ms), locate_(std::move(locate)), opt_(opt) {
  inside_.insert(b.nodes.begin(), b.nodes.end());
  block_outputs_.insert(b.outputs.begin(), b.outputs.end());
}

bool BlockLowerer::is_anchor(const Node& n) const {
  if (op_info(n.op).mapping == MappingType::ManyToMany) return true;
  if (n.op != OpKind::Resize) return false;
  // A nearest integer upsampling is an index map (expr.cc) read where it is used (YOLOv4's
  // upsample into its route Concat: one pass, not the kernel's and then the Concat's), unless
  // an elementwise op of this block reads it (through Transposes and Reshapes): then its kernel
  // runs, taking that op as its epilogue (FPN's top-down Add, whose other operand, the lateral
  // convolution, it reads through the layout's transposes). Read by nothing in its block (a
  // block output only), the kernel runs too: it copies rows, where a loop over the output
  // would read a gather per vector when the innermost axis is the one repeated.
  if (nearest_upsample_factors(g_, n).empty()) return true;
  bool read_here = false;
  for (NodeId c : g_.consumers(n.outputs[0])) read_here = read_here || inside_.count(c) > 0;
  if (!read_here) return true;
  std::vector<ValueId> todo{n.outputs[0]};
  while (!todo.empty()) {
    const ValueId v = todo.back();
    todo.pop_back();
    for (NodeId c : g_.consumers(v)) {
      if (!inside_.count(c)) continue;
      const MappingType t = op_info(g_.node(c).op).mapping;
      if (t == MappingType::OneToOne) return true;
      if (t == MappingType::Reorganize || t == MappingType::Shuffle) todo.insert(todo.end(), g_.node(c).outputs.begin(), g_.node(c).outputs.end());
    }
  }
  return false;
}

int BlockLowerer::fused_ops(const Node& n) const {
  auto it = epilogues_.find(n.id);
  return it == epilogues_.end() ? 0 : static_cast<int>(it->second.nodes.size());
}

int64_t BlockLowerer::scratch(int64_t bytes) {
  int64_t off = plan_.scratch_bytes;
  plan_.scratch_bytes += (bytes + 63) / 64 * 64;
  return off;
}

// A Transpose of a value in memory that moves its innermost dim, on 4-byte elements: the
// blocked copy (the pointwise loop would gather along the vector).
bool BlockLowerer::emit_transpose(ValueId v) {
  const NodeId p = g_.value(v).producer;
  if (p < 0 || !inside_.count(p)) return false;
  const Node& n = g_.node(p);
  if (n.op != OpKind::Transpose || !leaves_.count(n.inputs[0])) return false;
  const DType t = g_.value(v).type.dtype;
  if (t != DType::F32 && t != DType::I32) return false;
  const std::vector<int64_t> id = dims_of(g_, n.inputs[0]);
  const int r = static_cast<int>(id.size());
  InferCtx c(g_, n);
  std::vector<int64_t> perm = c.attr_ints("perm");
  if (perm.empty())
    for (int k = r - 1; k >= 0; --k) perm.push_back(k);
  if (r < 2 || r > 8 || perm.back() == r - 1 || numel(id) == 0) return false;
  Stage st;
  st.kind = Stage::Kind::Transpose;
  st.transpose.in = n.inputs[0];
  st.transpose.out = v;
  st.transpose.dtype = t;
  st.transpose.dims = id;
  st.transpose.perm = perm;
  st.label = std::string("transpose ") + dtype_name(t) + "[" + std::to_string(numel(id)) + "]";
  plan_.stages.push_back(std::move(st));
  return true;
}

void BlockLowerer::emit_pointwise(ValueId v) {
  const std::vector<int64_t> d = dims_of(g_, v);
  const int64_t total = numel(d);
  if (total == 0) return;
  const DType t = g_.value(v).type.dtype;
  if (emit_transpose(v)) return;
  // Tries, in order: one flat vector loop (elementwise chains, reshapes), vector loops over
  // rows of the last dim (broadcasts, transposes), scalar loops (other element types,
  // data-dependent indices, conditions along the vector).
  for (int attempt = 0; attempt < 3; ++attempt) {
    const bool flat = attempt == 0, vec = attempt < 2;
    if (vec && t != DType::F32) continue;
    // (A 1-D value is one row in the row form: past one flat chunk it takes the flat form,
    // whose chunks par_rows can share out.)
    if (flat && (d.empty() || (d.size() == 1 && total <= 4096))) continue;
    Stage st;
    st.kind = Stage::Kind::Loop;
    LoopStage& loop = st.loop;
    loop.value = v;
    loop.total = total;
    loop.flat = flat;
    Program& prog = loop.body;
    prog.mode = vec ? Mode::Vector : Mode::Scalar;
    VarTable& vt = prog.vars;
    std::vector<IExpr> idx;
    int inner;
    // The row form puts the vector on the last dim longer than 1: trailing dims of 1 (an
    // SE gate times weights [M, C, 1, 1]) would otherwise make rows of one element.
    size_t last = d.empty() ? 0 : d.size() - 1;
    while (!flat && last > 0 && d[last] == 1) --last;
    loop.row_len = flat ? std::min<int64_t>(total, 4096) : (d.empty() ? 1 : d[last]);
    loop.rows = (total + loop.row_len - 1) / loop.row_len;
    try {
      if (flat) {
        inner = vt.add("j", total);
        idx = delinearize(IExpr::var(inner), d, vt);
      } else {
        std::vector<int64_t> strides(d.size(), 1);
        for (int k = static_cast<int>(d.size()) - 2; k >= 0; --k) strides[k] = strides[k + 1] * d[k + 1];
        for (size_t k = 0; k < last; ++k) {
          int var = vt.add("i" + std::to_string(k), d[k]);
          idx.push_back(IExpr::var(var));
          // Declared even for a dim of 1: conditions (Trilu) may name it.
          loop.index_vars.push_back({static_cast<int>(k), strides[k] / strides[last] / (d.empty() ? 1 : d[last]),
                                     d[k], false});
        }
        inner = vt.add("j", d.empty() ? 1 : d[last]);
        if (!d.empty()) idx.push_back(IExpr::var(inner));
        for (size_t k = last + 1; k < d.size(); ++k) {  // trailing dims of 1
          int var = vt.add("i" + std::to_string(k), 1);
          idx.push_back(IExpr::var(var));
          loop.index_vars.push_back({static_cast<int>(k), 1, 1, true});
        }
      }
      prog.inner = vec ? inner : -1;
      ExprBuilder em(g_, leaves_, prog);
      em.aligned_vectors = true;  // j starts at 0 (row form) or at a multiple of 4096 (flat)
      Ref val = em.eval(v, idx);
      em.store(v, linearize(idx, d, vt), val);
      if (flat && em.gathers > 0) continue;
    } catch (const NeedScalar&) {
      continue;
    }
    st.label = std::string(vec ? "vector" : "scalar") + " loop " + dtype_name(t) + "[" + std::to_string(total) + "]";
    plan_.stages.push_back(std::move(st));
    return;
  }
  throw InternalError("codegen: no loop form for a pointwise value");
}

void BlockLowerer::choose_epilogue(const Node& L) {
  const AnchorRow* row = anchor_row(L.op);
  if (!row || !row->takes_epilogue || !row->takes_epilogue(L)) return;
  const ValueId o = L.outputs[0];
  if (g_.value(o).type.dtype != DType::F32) return;
  const std::vector<int64_t> od = dims_of(g_, o);
  if (numel(od) == 0) return;  // nothing to compute, nothing to fuse
  const auto [R, C] = row->view(g_, L);
  Program trial_prog;
  trial_prog.mode = Mode::Vector;
  VarTable& vt = trial_prog.vars;
  int rowv = vt.add("row", R);
  int j = vt.add("j", C);
  trial_prog.inner = j;
  std::map<ValueId, std::vector<IExpr>> idx;
  idx[o] = delinearize(add(scale(IExpr::var(rowv), C, vt), IExpr::var(j), vt), od, vt);
  const auto pos = [&](NodeId id) { return std::find(b_.nodes.begin(), b_.nodes.end(), id) - b_.nodes.begin(); };
  const long lpos = pos(L.id);
  // A trial build decides whether each candidate runs on vectors: an operand of another
  // element type, or a Concat/Pad/gather along the vector, keeps the op out of the epilogue.
  Leaves trial_leaves;
  auto add_leaf = [&](ValueId v) {  // values in memory before the anchor runs
    const Value& val = g_.value(v);
    if (v == o || (val.producer >= 0 && inside_.count(val.producer) && pos(val.producer) >= lpos)) return;
    Leaf l;
    l.dtype = g_.value(v).type.dtype;
    l.shape = dims_of(g_, v);
    l.constant = g_.value(v).constant;
    trial_leaves[v] = l;
  };
  for (ValueId v : b_.inputs) add_leaf(v);
  for (ValueId v : materialised_) add_leaf(v);
  ExprBuilder trial(g_, trial_leaves, trial_prog);
  trial.define(o, idx[o], "a0");
  EpiloguePlan plan;
  for (size_t i = static_cast<size_t>(lpos) + 1; i < b_.nodes.size(); ++i) {
    const Node& n = g_.node(b_.nodes[i]);
    if (is_anchor(n)) continue;
    bool touches = false, ok = true;
    for (ValueId x : n.inputs) {
      if (x == kNoValue) continue;
      if (idx.count(x)) {
        touches = true;
        continue;
      }
      const Value& xv = g_.value(x);
      // Other operands are recomputed from memory inside the epilogue: only values that
      // exist before the anchor runs qualify.
      if (xv.producer >= 0 && inside_.count(xv.producer) && pos(xv.producer) > lpos) ok = false;
    }
    if (!touches || !ok) continue;
    std::vector<IExpr> out;
    if (!forward_index(g_, n, idx, vt, out)) continue;
    idx[n.outputs[0]] = out;
    try {
      trial.eval(n.outputs[0], out);
    } catch (const NeedScalar&) {
      idx.erase(n.outputs[0]);
      continue;
    }
    plan.nodes.push_back(n.id);
  }
  if (plan.nodes.empty()) return;
  epilogues_[L.id] = plan;
}

void BlockLowerer::epilogue(const Node& n, AnchorStage& st, const std::function<void(ExprBuilder&)>& pre) {
  const ValueId o = n.outputs[0];
  const std::vector<int64_t> od = dims_of(g_, o);
  // (a pointwise convolution's output that a depthwise one computes rows at a time is stored by
  // the convolution's own store, into that call's ring: expand_rows.cc)
  const bool o_mem = materialised_.count(o) > 0 || streamed_.count(o) > 0;
  auto it = epilogues_.find(n.id);
  if (it == epilogues_.end() && !pre) {
    if (!o_mem) throw InternalError("codegen: an anchor output with no epilogue is not in memory");
    st.y = o;
    return;
  }
  Epilogue& ep = st.ep;
  ep.present = true;
  ep.fused_ops = fused_ops(n);
  const AnchorRow* row = anchor_row(n.op);
  std::tie(ep.R, ep.C) = row->view(g_, n);
  Program& prog = ep.prog;
  prog.mode = Mode::Vector;
  VarTable& vt = prog.vars;
  int rowv = vt.add("row", ep.R);
  int j = vt.add("j", ep.C);
  prog.inner = j;
  ExprBuilder em(g_, leaves_, prog);
  std::map<ValueId, std::vector<IExpr>> idx;
  idx[o] = delinearize(add(scale(IExpr::var(rowv), ep.C, vt), IExpr::var(j), vt), od, vt);
  if (pre) pre(em);
  const Ref a0 = em.define(o, idx[o], "a0");
  ValueId y_value = kNoValue;  // the stored value the kernel's own store can write
  if (it != epilogues_.end()) {
    for (NodeId e : it->second.nodes) {
      const Node& en = g_.node(e);
      std::vector<IExpr> out;
      if (!forward_index(g_, en, idx, vt, out))
        throw InternalError("codegen: epilogue index changed between planning and emission");
      idx[en.outputs[0]] = out;
    }
    const std::string o_flat = render(linearize(idx[o], od, vt), vt);
    for (ValueId s : it->second.stores) try {
        Ref val = em.eval(s, idx[s]);
        IExpr flat = linearize(idx[s], dims_of(g_, s), vt);
        if (!o_mem && y_value == kNoValue && render(flat, vt) == o_flat) {
          em.accumulate("", val);
          y_value = s;
          continue;
        }
        em.store(s, flat, val);
      } catch (const NeedScalar& e) {
        std::string ops;
        for (NodeId x : it->second.nodes) ops += " " + g_.node(x).name;
        throw InternalError("codegen: the epilogue of '" + n.name + "' (" + ops + " ) cannot store '" +
                            g_.value(s).name + "' on vectors: " + e.what());
      }
  }
  if (o_mem) {
    st.y = o;
    if (pre) em.accumulate("", a0);
  } else if (y_value != kNoValue) {
    st.y = y_value;
  } else {
    ep.stores = true;
    st.y = kNoValue;
    st.y_scratch = scratch(numel(od) * 4);
  }
}

void BlockLowerer::emit_anchor(const Node& n) {
  const AnchorRow* row = anchor_row(n.op);
  if (!row) {
    if (n.op == OpKind::NonMaxSuppression || n.op == OpKind::NonZero || n.op == OpKind::Unique)
      throw UnsupportedOperatorError(std::string("code generation does not support ") + op_info(n.op).name +
                                     " yet: the length of its output depends on the data, and the memory plan "
                                     "needs static shapes (node '" + n.name +
                                     "'); compile() runs it and what follows on the host (host_tail.py)");
    throw UnsupportedOperatorError(std::string("code generation does not support ") + op_info(n.op).name +
                                   " yet (node '" + n.name + "')");
  }
  Stage st;
  st.kind = Stage::Kind::Anchor;
  st.anchor.kind = row->kind;
  st.anchor.node = &n;
  row->lower(*this, n, st);
  plan_.stages.push_back(std::move(st));
}

BlockPlan BlockLowerer::lower() {
  plan_.block = b_.id;
  plan_.operators = b_.nodes.size();
  // 1. What must be in memory.
  for (ValueId v : b_.outputs) materialised_.insert(v);
  for (NodeId id : b_.nodes) {
    const Node& n = g_.node(id);
    if (!is_anchor(n)) continue;
    for (ValueId x : n.inputs)
      if (x != kNoValue && g_.value(x).producer >= 0 && inside_.count(g_.value(x).producer)) materialised_.insert(x);
    for (ValueId y : n.outputs) materialised_.insert(y);
  }
  // 2. Epilogues: an anchor output only its epilogue reads leaves memory.
  for (NodeId id : b_.nodes) {
    const Node& n = g_.node(id);
    if (!is_anchor(n)) continue;
    choose_epilogue(n);
    auto it = epilogues_.find(id);
    if (it == epilogues_.end()) continue;
    EpiloguePlan& plan = it->second;
    std::set<NodeId> in_e(plan.nodes.begin(), plan.nodes.end());
    std::vector<ValueId> vals{n.outputs[0]};
    for (NodeId e : plan.nodes) vals.push_back(g_.node(e).outputs[0]);
    for (ValueId v : vals) {
      bool needed = block_outputs_.count(v) > 0;
      for (NodeId c : g_.consumers(v))
        if (inside_.count(c) && !in_e.count(c)) needed = true;
      if (v == n.outputs[0]) {
        if (!needed) materialised_.erase(v);
        continue;
      }
      if (needed) {
        plan.stores.push_back(v);
        materialised_.insert(v);
        stored_by_epilogue_.insert(v);
      } else {
        materialised_.erase(v);
      }
    }
  }
  std::set<NodeId> in_epilogue;
  for (auto& [id, plan] : epilogues_) in_epilogue.insert(plan.nodes.begin(), plan.nodes.end());
  // 2b. Anchor inputs read in place: views of a value in memory (Reshape, Transpose, ...)
  // and channel Concats feeding channels-last convolutions.
  for (NodeId id : b_.nodes) {
    const Node& n = g_.node(id);
    if (!is_anchor(n)) continue;
    for (ValueId x : n.inputs)
      if (x != kNoValue && materialised_.count(x) && !block_outputs_.count(x) && !stored_by_epilogue_.count(x) &&
          !views_.count(x) && !segments_.count(x)) {
        find_view(x, in_epilogue);
        if (!views_.count(x)) find_segments(x, in_epilogue);
      }
    find_planar(n, in_epilogue);
  }
  // 2c. GEMM operands computed while they are packed.
  for (NodeId id : b_.nodes) {
    const Node& n = g_.node(id);
    if (is_anchor(n)) find_prologue(n, in_epilogue);
  }
  // 2d. Concats whose inputs are made in place (find_assembly).
  for (NodeId id : b_.nodes) find_assembly(g_.node(id), in_epilogue);
  // 2e. Pointwise convolutions computed rows at a time by the depthwise one they feed.
  find_expansions();
  // 3. Buffers: block inputs and outputs live where the module put them; an assembled
  // Concat's inputs in its bytes; other materialised values get kernel-local scratch; a
  // contiguous view is its root's bytes.
  std::map<ValueId, Location>& where = where_;
  for (ValueId v : b_.inputs) where[v] = locate_(v);
  for (ValueId v : b_.outputs) where[v] = locate_(v);
  for (const auto& [x, runs] : assembled_) {
    if (!where.count(x)) where[x] = locate_(x);  // a Concat this block consumes, in the arena
    for (const auto& [u, part] : runs) where[u] = {Location::Kind::Arena, where.at(x).at + part.at, part.row, part.stride};
  }
  // A scatter updating its data in place (scatter_in_place): one buffer for both, its output's
  // where the block stores it (irregular.h's kernels then copy nothing).
  for (NodeId id : b_.nodes) {
    const Node& n = g_.node(id);
    if (!scatter_in_place(n)) continue;
    const ValueId data = n.inputs[0], y = n.outputs[0];
    if (!where.count(y)) where[y] = {Location::Kind::Scratch, scratch(static_cast<int64_t>(g_.value(y).type.nbytes()))};
    where[data] = where.at(y);
  }
  for (ValueId v : materialised_)
    if (!where.count(v)) where[v] = {Location::Kind::Scratch, scratch(static_cast<int64_t>(g_.value(v).type.nbytes()))};
  for (const auto& [x, v] : views_)
    if (v.contiguous) where[x] = where.at(v.root);
  for (ValueId v : b_.inputs) {
    Leaf l;
    l.dtype = g_.value(v).type.dtype;
    l.shape = dims_of(g_, v);
    l.constant = g_.value(v).constant;
    leaves_[v] = l;
  }
  // 4. Stages in topological order.
  auto materialise = [&](ValueId v) {
    Leaf l;
    l.dtype = g_.value(v).type.dtype;
    l.shape = dims_of(g_, v);
    leaves_[v] = l;
  };
  for (NodeId id : b_.nodes) {
    const Node& n = g_.node(id);
    if (is_anchor(n)) {
      bool empty = true;
      for (ValueId y : n.outputs) empty = empty && g_.value(y).type.is_static() && g_.value(y).type.numel() == 0;
      // (an empty result needs no code, nor its inputs; a spatial mean a convolution of the
      // block takes as it stores its rows runs in that call)
      if (!empty && !mean_by_conv(n)) {
        emit_anchor(n);
        expand_into(n);
      }
      for (ValueId y : n.outputs)
        if (materialised_.count(y)) materialise(y);
      auto it = epilogues_.find(id);
      if (it != epilogues_.end())
        for (ValueId s : it->second.stores) materialise(s);
      continue;
    }
    if (in_epilogue.count(id)) continue;
    for (ValueId y : n.outputs) {
      if (!materialised_.count(y) || stored_by_epilogue_.count(y)) continue;
      if (!assembled_.count(y)) emit_pointwise(y);  // an assembled Concat is in memory already
      materialise(y);
    }
  }
  // 5. The buffers the block's code names: its inputs and what it materialises.
  std::set<ValueId> named(b_.inputs.begin(), b_.inputs.end());
  named.insert(materialised_.begin(), materialised_.end());
  for (const auto& [x, v] : views_)
    if (v.contiguous) named.insert(x);
  for (ValueId v : named) {
    auto w = where.find(v);
    if (w == where.end()) throw InternalError("codegen: value without a buffer");
    Buffer buf;
    buf.value = v;
    buf.dtype = g_.value(v).type.dtype;
    // (an assembled Concat is written through its inputs' buffers)
    buf.written = materialised_.count(v) && std::find(b_.inputs.begin(), b_.inputs.end(), v) == b_.inputs.end() &&
                  !assembled_.count(v);
    buf.where = w->second;
    plan_.buffers.push_back(buf);
  }
  check_rows();
  return std::move(plan_);
}

const Location& BlockLowerer::location(ValueId v) const {
  auto it = where_.find(v);
  if (it == where_.end()) throw InternalError("codegen: '" + g_.value(v).name + "' has no buffer in this block");
  return it->second;
}

// A value in rows of a Concat's bytes is stored there by a channels-last convolution's own
// store (which gets the rows' stride as its output pixel stride), and read by nothing of this
// block but the Concat, assembled here: any other reader or writer would take it for dense.
void BlockLowerer::check_rows() const {
  for (const auto& [v, l] : where_) {
    if (l.row == 0) continue;
    const std::string who = "codegen: '" + g_.value(v).name + "', in rows of a Concat's bytes, ";
    bool assembled = false;
    for (const auto& [x, runs] : assembled_) {
      const NodeId c = g_.value(x).producer;
      for (ValueId u : g_.node(c).inputs) assembled = assembled || u == v;
    }
    for (NodeId c : g_.consumers(v))
      if (inside_.count(c) && !(g_.node(c).op == OpKind::Concat && assembled))
        throw InternalError(who + "is read by '" + g_.node(c).name + "' as if dense");
    if (std::find(b_.inputs.begin(), b_.inputs.end(), v) != b_.inputs.end()) continue;
    int writers = 0;
    for (const Stage& st : plan_.stages) {
      if (st.kind != Stage::Kind::Anchor) continue;
      const AnchorStage& a = st.anchor;
      if (a.y != v) continue;
      const std::vector<int64_t>& shape = a.args.at(0).ints;
      if (a.kind != AnchorKind::NhwcConv || a.ep.stores || shape.size() != 25 || shape[23] * 4 != l.stride ||
          shape[3] * 4 != l.row)
        throw InternalError(who + "is stored by a kernel that does not write rows");
      ++writers;
    }
    if (writers != 1) throw InternalError(who + "is not stored by its convolution");
  }
}

}  // namespace dnnf::cg
