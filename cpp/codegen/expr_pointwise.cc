// The arithmetic of One-to-One operators in an expression (see expr.h), split from expr.cc's
// index operators: the elementwise form of each operator over its operands, and Where with a
// condition that varies along the vector as a lane select.
#include "codegen/expr.h"

#include "ir/errors.h"

namespace dnnf::cg {

Ref ExprBuilder::eval_pointwise(const Node& n, int out, const std::vector<IExpr>& idx, const std::vector<int64_t>& od,
                                Mode m) {
  const DType ot = g_.value(n.outputs.at(out)).type.dtype;
  if (op_info(n.op).mapping != MappingType::OneToOne || n.op == OpKind::Constant)
    throw InternalError(std::string("codegen: ") + op_info(n.op).name + " is not a pointwise operator");
  if (m == Mode::Vector && n.op == OpKind::Where) {
    const Ref r = lane_select(n, idx, od);
    if (r != kNoRef) return r;
  }
  Instr i;
  i.kind = Instr::Kind::Compute;
  i.mode = m;
  i.dtype = ot;
  i.node = &n;
  std::vector<bool> present;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k] == kNoValue) {
      i.args.push_back(kNoRef);
      i.arg_types.push_back(DType::F32);
      present.push_back(false);
      continue;
    }
    // In vector mode every operand is f32, except Where's condition where the same for all
    // lanes (its index does not move along the vector: a per-row mask), evaluated once as a
    // scalar; one that varies along the vector forces scalar mode, unless it is a comparison
    // of f32 vectors (lane_select, above).
    if (m == Mode::Vector && n.op == OpKind::Where && k == 0)
      i.args.push_back(eval_scalar(n.inputs[k], broadcast_index(n.inputs[k], idx, od)));
    else
      i.args.push_back(eval_in(n.inputs[k], broadcast_index(n.inputs[k], idx, od), m));
    i.arg_types.push_back(g_.value(n.inputs[k]).type.dtype);
    present.push_back(true);
  }
  i.ew = elementwise(g_, n, i.arg_types, present, m);
  return bind(std::move(i));
}

Ref ExprBuilder::lane_select(const Node& n, const std::vector<IExpr>& idx, const std::vector<int64_t>& od) {
  const Mode m = Mode::Vector;
  const DType ot = g_.value(n.outputs.at(0)).type.dtype;
  // A condition that varies along the vector, computed in this program by a Less or a
  // Greater of f32 operands (dynamic=True's masks: position < length): the comparison's
  // operands as vectors and a lane select, instead of a scalar loop.
  const ValueId cond = n.inputs[0];
  const std::vector<IExpr> ci = broadcast_index(cond, idx, od);
  const Value& cv = g_.value(cond);
  bool varies = false;
  for (const IExpr& e : ci) varies = varies || e.uses(prog_.inner);
  if (varies && cv.producer >= 0 && ot == DType::F32 &&
      g_.value(n.inputs[1]).type.dtype == DType::F32 && g_.value(n.inputs[2]).type.dtype == DType::F32) {
    const Node& cmp = g_.node(cv.producer);
    // (its operands read where they are: a condition stored by this block or another is
    // recomputed from them only when both are in this block's memory too)
    auto here = [&](ValueId a) { return leaves_.count(a) > 0 || !leaves_.count(cond); };
    if ((cmp.op == OpKind::Less || cmp.op == OpKind::Greater) && cmp.inputs.size() == 2 &&
        g_.value(cmp.inputs[0]).type.dtype == DType::F32 && g_.value(cmp.inputs[1]).type.dtype == DType::F32 &&
        here(cmp.inputs[0]) && here(cmp.inputs[1])) {
      const std::vector<int64_t> cd = dims_of(g_, cond);
      Instr i;
      i.kind = Instr::Kind::Compute;
      i.mode = m;
      i.dtype = ot;
      i.node = &n;
      for (ValueId a : cmp.inputs) i.args.push_back(eval_in(a, broadcast_index(a, ci, cd), m));
      for (size_t k = 1; k < 3; ++k) i.args.push_back(eval_in(n.inputs[k], broadcast_index(n.inputs[k], idx, od), m));
      i.arg_types.assign(4, DType::F32);
      i.ew = select_by_compare(cmp.op);
      return bind(std::move(i));
    }
  }
  return kNoRef;
}

}  // namespace dnnf::cg
