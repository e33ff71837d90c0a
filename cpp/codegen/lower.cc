// Lowering of one fused block to one C++ function (paper §4.4); see lower.h.
#include "codegen/lower.h"

#include <algorithm>

#include "codegen/cpu/spell.h"
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

namespace {

int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

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
bool forward_index(const Graph& g, const Node& n,
                          const std::map<ValueId, std::vector<IExpr>>& idx, VarTable& vt,
                          std::vector<IExpr>& out) {
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
    if (n.inputs[i] != kNoValue && idx.count(n.inputs[i]) && dims_of(g, n.inputs[i]) != od)
      return false;
  out = *in;
  return true;
}

BlockLowerer::BlockLowerer(const Graph& g, const Block& b, ModuleState& ms, LocateFn locate)
    : g_(g), b_(b), ms_(ms), locate_(std::move(locate)) {
  inside_.insert(b.nodes.begin(), b.nodes.end());
  block_outputs_.insert(b.outputs.begin(), b.outputs.end());
}

bool BlockLowerer::is_anchor(const Node& n) const {
  return op_info(n.op).mapping == MappingType::ManyToMany || n.op == OpKind::Resize;
}

std::string BlockLowerer::ptr(ValueId v) {
  auto it = ptrs_.find(v);
  if (it != ptrs_.end()) return it->second;
  std::string name = "p" + std::to_string(v);
  ptrs_[v] = name;
  return name;
}

std::string BlockLowerer::scratch(int64_t bytes) {
  int64_t off = scratch_bytes_;
  scratch_bytes_ += (bytes + 63) / 64 * 64;
  return "(x.scratch + " + std::to_string(off) + ")";
}

// A Transpose of a value in memory that moves its innermost dim, on 4-byte elements: the
// blocked copy of cg::transpose (the pointwise loop would gather along the vector).
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
  std::string dims, ps;
  for (int k = 0; k < r; ++k) {
    dims += (k ? ", " : "") + std::to_string(id[k]) + "L";
    ps += (k ? ", " : "") + std::to_string(perm[k]);
  }
  code_.open("");
  code_.line("static const long dims[] = {" + dims + "};");
  code_.line("static const int perm[] = {" + ps + "};");
  code_.line("cg::transpose(" + ptr(n.inputs[0]) + ", " + ptr(v) + ", " + std::to_string(r) + ", dims, perm);");
  code_.close();
  stages_.push_back(std::string("transpose ") + dtype_name(t) + "[" + std::to_string(numel(id)) + "]");
  return true;
}

void BlockLowerer::emit_pointwise(ValueId v) {
  const std::vector<int64_t> d = dims_of(g_, v);
  const int64_t total = numel(d);
  if (total == 0) return;
  const DType t = g_.value(v).type.dtype;
  ptr(v);
  if (emit_transpose(v)) return;
  // Tries, in order: one flat vector loop (elementwise chains, reshapes), vector loops over
  // rows of the last dim (broadcasts, transposes), scalar loops (other element types,
  // data-dependent indices, conditions along the vector).
  for (int attempt = 0; attempt < 3; ++attempt) {
    const bool flat = attempt == 0, vec = attempt < 2;
    if (vec && t != DType::F32) continue;
    if (flat && d.size() <= 1) continue;
    Code body;
    body.indent = code_.indent + 1;
    Program prog;
    prog.mode = vec ? Mode::Vector : Mode::Scalar;
    VarTable& vt = prog.vars;
    std::vector<IExpr> idx;
    int inner;
    // The row form puts the vector on the last dim longer than 1: trailing dims of 1 (an
    // SE gate times weights [M, C, 1, 1]) would otherwise make rows of one element.
    size_t last = d.empty() ? 0 : d.size() - 1;
    while (!flat && last > 0 && d[last] == 1) --last;
    const int64_t L = flat ? std::min<int64_t>(total, 4096) : (d.empty() ? 1 : d[last]);
    const int64_t rows = (total + L - 1) / L;
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
          body.line("const long i" + std::to_string(k) + " = (o / " +
                      std::to_string(strides[k] / strides[last] / (d.empty() ? 1 : d[last])) + "L) % " +
                      std::to_string(d[k]) + "L;");
        }
        inner = vt.add("j", d.empty() ? 1 : d[last]);
        if (!d.empty()) idx.push_back(IExpr::var(inner));
        for (size_t k = last + 1; k < d.size(); ++k) {  // trailing dims of 1
          int var = vt.add("i" + std::to_string(k), 1);
          idx.push_back(IExpr::var(var));
          body.line("const long i" + std::to_string(k) + " = 0;");
        }
      }
      if (flat) {
        body.open("for (long j = o * " + std::to_string(L) + "L, je = std::min<long>(j + " +
                  std::to_string(L) + "L, " + std::to_string(total) + "L); j < je; j += " +
                  (vec ? "cg::W" : "1") + ")");
        body.line("const int n = static_cast<int>(std::min<long>(cg::W, je - j));");
      } else {
        body.open("for (long j = 0; j < " + std::to_string(L) + "L; j += " +
                  std::string(vec ? "cg::W" : "1") + ")");
        if (vec) body.line("const int n = static_cast<int>(std::min<long>(cg::W, " +
                           std::to_string(L) + "L - j));");
      }
      prog.inner = vec ? inner : -1;
      ExprBuilder em(g_, leaves_, prog);
      em.aligned_vectors = true;  // j starts at 0 (row form) or at a multiple of 4096 (flat)
      Ref val = em.eval(v, idx);
      em.store(v, linearize(idx, d, vt), val);
      if (flat && em.gathers > 0) continue;
      cpu::render_program(prog, body);
      body.close();
    } catch (const NeedScalar&) {
      continue;
    }
    code_.open("cg::par_rows(" + std::to_string(rows) + "L, " + std::to_string(L) +
               "L, [&](long o0, long o1)");
    code_.open("for (long o = o0; o < o1; ++o)");
    code_.text += body.text;
    code_.close();
    code_.close("});");
    stages_.push_back(std::string(vec ? "vector" : "scalar") + " loop " + dtype_name(t) +
                      "[" + std::to_string(total) + "]");
    return;
  }
  throw InternalError("codegen: no loop form for a pointwise value");
}

void BlockLowerer::choose_epilogue(const Node& L) {
  if (!has_epilogue(L)) return;
  const ValueId o = L.outputs[0];
  if (g_.value(o).type.dtype != DType::F32) return;
  const std::vector<int64_t> od = dims_of(g_, o);
  if (numel(od) == 0) return;  // nothing to compute, nothing to fuse
  const auto [R, C] = anchor_view(L);
  Program trial_prog;
  trial_prog.mode = Mode::Vector;
  VarTable& vt = trial_prog.vars;
  int row = vt.add("row", R);
  int j = vt.add("j", C);
  trial_prog.inner = j;
  std::map<ValueId, std::vector<IExpr>> idx;
  idx[o] = delinearize(add(scale(IExpr::var(row), C, vt), IExpr::var(j), vt), od, vt);
  const auto pos = [&](NodeId id) {
    return std::find(b_.nodes.begin(), b_.nodes.end(), id) - b_.nodes.begin();
  };
  const long lpos = pos(L.id);
  // A trial emission decides whether each candidate runs on vectors: an operand of another
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
      if (idx.count(x)) { touches = true; continue; }
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

std::string BlockLowerer::lower(const std::string& name, KernelInfo& info) {
  // 1. What must be in memory.
  for (ValueId v : b_.outputs) materialised_.insert(v);
  for (NodeId id : b_.nodes) {
    const Node& n = g_.node(id);
    if (!is_anchor(n)) continue;
    for (ValueId x : n.inputs)
      if (x != kNoValue && g_.value(x).producer >= 0 && inside_.count(g_.value(x).producer))
        materialised_.insert(x);
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
  // 3. Buffers: block inputs and outputs live where the module put them; other
  // materialised values get kernel-local scratch.
  std::map<ValueId, std::string> where;
  for (ValueId v : b_.inputs) where[v] = locate_(v);
  for (ValueId v : b_.outputs) where[v] = locate_(v);
  for (ValueId v : materialised_)
    if (!where.count(v)) where[v] = scratch(static_cast<int64_t>(g_.value(v).type.nbytes()));
  for (ValueId v : b_.inputs) {
    ptr(v);
    Leaf l;
    l.dtype = g_.value(v).type.dtype;
    l.shape = dims_of(g_, v);
    l.constant = g_.value(v).constant;
    leaves_[v] = l;
  }
  // 4. Stages in topological order.
  std::set<NodeId> in_epilogue;
  for (auto& [id, plan] : epilogues_) in_epilogue.insert(plan.nodes.begin(), plan.nodes.end());
  auto materialise = [&](ValueId v) {
    ptr(v);
    Leaf l;
    l.dtype = g_.value(v).type.dtype;
    l.shape = dims_of(g_, v);
    leaves_[v] = l;
  };
  for (NodeId id : b_.nodes) {
    const Node& n = g_.node(id);
    if (is_anchor(n)) {
      bool empty = true;
      for (ValueId y : n.outputs)
        empty = empty && g_.value(y).type.is_static() && g_.value(y).type.numel() == 0;
      if (!empty) emit_anchor(n);  // an empty result needs no code (nor its inputs)
      for (ValueId y : n.outputs) if (materialised_.count(y)) materialise(y);
      auto it = epilogues_.find(id);
      if (it != epilogues_.end())
        for (ValueId s : it->second.stores) materialise(s);
      continue;
    }
    if (in_epilogue.count(id)) continue;
    for (ValueId y : n.outputs) {
      if (!materialised_.count(y) || stored_by_epilogue_.count(y)) continue;
      emit_pointwise(y);
      materialise(y);
    }
  }
  // 5. The function: pointer declarations, then the stages.
  std::string fn = "// block " + std::to_string(b_.id) + ": " + std::to_string(b_.nodes.size()) +
                   " operators\nstatic void " + name + "(const Ctx& x) {\n";
  for (auto& [v, p] : ptrs_) {
    auto w = where.find(v);
    if (w == where.end()) throw InternalError("codegen: value without a buffer");
    std::string t = cpu::ctype(g_.value(v).type.dtype);
    bool input = !materialised_.count(v) || std::find(b_.inputs.begin(), b_.inputs.end(), v) != b_.inputs.end();
    fn += "  " + std::string(input ? "const " : "") + t + "* const " + p + " = reinterpret_cast<" +
          (input ? "const " : "") + t + "*>(" + w->second + ");\n";
  }
  fn += code_.text + "}\n";
  info.function = name;
  info.block = b_.id;
  info.stages = stages_;
  info.scratch_bytes = scratch_bytes_;
  return fn;
}

}  // namespace dnnf::cg
