// Fused GEMM prologues (issue 13, paper §4.3-4.4): a GEMM's A operand that pointwise
// producers make in its block is computed while the GEMM packs it, through the producers'
// composed index maps, and never written; see lower.h (LowerOptions) for when.
#include <algorithm>

#include "codegen/lower.h"
#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {


// A of GEMM anchor n at vars (b, row, j) of a program (j along K): MatMul's batch var b
// broadcast over A's batch dims, Gemm's transA. Returns the index; *inner is j.
static std::vector<IExpr> gemm_a_index(const Graph& g, const Node& n, VarTable& vt, int* inner) {
  const std::vector<int64_t> ad = dims_of(g, n.inputs[0]), od = dims_of(g, n.outputs[0]);
  std::vector<IExpr> idx;
  if (n.op == OpKind::Gemm) {
    const bool ta = InferCtx(g, n).attr_int("transA", 0) != 0;
    const int row = vt.add("row", od[0]);
    *inner = vt.add("j", ta ? ad[0] : ad[1]);  // "j": the inner var of every program
    idx = ta ? std::vector<IExpr>{IExpr::var(*inner), IExpr::var(row)}
             : std::vector<IExpr>{IExpr::var(row), IExpr::var(*inner)};
    return idx;
  }
  const bool a1 = ad.size() == 1, b1 = dims_of(g, n.inputs[1]).size() == 1;
  const std::vector<int64_t> batch_dims(od.begin(), od.end() - (a1 ? 0 : 1) - (b1 ? 0 : 1));
  const int b = vt.add("b", numel(batch_dims));
  const std::vector<IExpr> bidx = delinearize(IExpr::var(b), batch_dims, vt);
  const size_t nb = ad.size() - (a1 ? 1 : 2), lead = batch_dims.size() - nb;
  for (size_t k = 0; k < nb; ++k) idx.push_back(ad[k] == 1 ? IExpr::constant(0) : bidx[lead + k]);
  const int row = vt.add("row", a1 ? 1 : ad[ad.size() - 2]);
  *inner = vt.add("j", ad.back());
  if (!a1) idx.push_back(IExpr::var(row));
  idx.push_back(IExpr::var(*inner));
  return idx;
}

// The program computing n's A while it is packed, over `leaves` (what is in memory when n
// runs): on vectors, or one element at a time where it needs per-lane control flow or
// another element type (as the loop it replaces would). *ops: the elementwise operators
// it evaluates.
bool BlockLowerer::build_prologue(const Node& n, const Leaves& leaves, Program& prog, int* ops) const {
  for (Mode mode : {Mode::Vector, Mode::Scalar}) {
    prog = Program{};
    prog.mode = mode;
    int inner = -1;
    std::vector<IExpr> idx = gemm_a_index(g_, n, prog.vars, &inner);
    prog.inner = mode == Mode::Vector ? inner : -1;
    ExprBuilder em(g_, leaves, prog);
    em.aligned_vectors = true;  // the packing steps j by whole vectors from multiples of KU
    try {
      em.accumulate("", em.eval(n.inputs[0], idx));
    } catch (const NeedScalar&) {
      continue;  // per-lane control flow (a Concat along K off the vector grid) or a cast
    }
    *ops = 0;
    for (const Instr& i : prog.code) *ops += i.kind == Instr::Kind::Compute;
    return true;
  }
  return false;
}

// GEMM n's A, made in this block by pointwise operators and read by nothing else, is
// computed while the GEMM packs it (each element once: gemm.h packs A once per call), so it
// is never written: one pass over memory less. A view of a value in memory stays a view
// (strides cost nothing); a view whose root this block would materialise only for it
// becomes a prologue instead.
void BlockLowerer::find_prologue(const Node& n, const std::set<NodeId>& in_epilogue) {
  if (!opt_.gemm_prologues || (n.op != OpKind::MatMul && n.op != OpKind::Gemm)) return;
  const ValueId x = n.inputs[0];
  if (x == kNoValue || g_.value(x).type.dtype != DType::F32 || numel(dims_of(g_, x)) == 0) return;
  if (block_outputs_.count(x) || stored_by_epilogue_.count(x) || segments_.count(x) || prologues_.count(x)) return;
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (n.inputs[i] == x) return;
  // Every value from x back to the first one in memory feeds only the next: nothing else
  // needs it in memory.
  auto only_feeds_next = [&](ValueId v) {
    if (block_outputs_.count(v) || stored_by_epilogue_.count(v) || segments_.count(v)) return false;
    int readers = 0;
    for (NodeId c : g_.consumers(v)) readers += inside_.count(c) > 0;
    return readers == 1;
  };
  if (!only_feeds_next(x)) return;
  int64_t evaluations = 1, N = 1;  // how many times the GEMM evaluates each A[m, k]; C's columns
  if (opt_.gemm_a_evaluations) {
    const std::vector<int64_t> c = dims_of(g_, n.outputs[0]);
    const size_t r = c.size();
    N = r ? c[r - 1] : 1;
    const int64_t M = r >= 2 ? c[r - 2] : 1;
    int64_t batch = 1;
    for (size_t i = 0; i + 2 < r; ++i) batch *= c[i];
    evaluations = opt_.gemm_a_evaluations(M, N, batch);
  }
  ValueId root = kNoValue;  // the view's root, materialised only for this view
  auto view = views_.find(x);
  if (view != views_.end()) {
    if (evaluations > 1) return;
    root = view->second.root;
    for (ValueId v = x; v != root; v = g_.node(g_.value(v).producer).inputs[0]) {
      if (v != x && !only_feeds_next(v)) return;
      // A Split part: the root also holds the other parts, which other views may read.
      if (g_.node(g_.value(v).producer).outputs.size() > 1) return;
    }
    if (!only_feeds_next(root)) return;
  } else if (!materialised_.count(x)) {
    return;
  }
  const ValueId made = root == kNoValue ? x : root;
  const NodeId p = g_.value(made).producer;
  if (p < 0 || !inside_.count(p) || is_anchor(g_.node(p)) || in_epilogue.count(p)) return;
  Leaves trial;
  for (ValueId v : b_.inputs) trial[v] = {g_.value(v).type.dtype, dims_of(g_, v), g_.value(v).constant};
  for (ValueId v : materialised_)
    if (v != x && v != root && !trial.count(v)) trial[v] = {g_.value(v).type.dtype, dims_of(g_, v), nullptr};
  Program prog;
  int ops = 0;
  if (!build_prologue(n, trial, prog, &ops)) return;
  if ((evaluations - 1) * ops * 4 > N) return;  // the recomputation would cost over 1/8 of the GEMM
  if (root != kNoValue) {
    views_.erase(x);
    materialised_.erase(root);
  }
  materialised_.erase(x);
  prologues_.insert(x);
}

void BlockLowerer::gemm_prologue(const Node& n, GemmCall& gc) {
  if (!prologues_.count(n.inputs[0])) return;
  if (!build_prologue(n, leaves_, gc.a_prog, &gc.a_fused_ops))
    throw InternalError("codegen: the prologue of '" + n.name + "' changed between planning and emission");
  gc.a_computed = true;
  gc.a = kNoValue;
}

}  // namespace dnnf::cg
