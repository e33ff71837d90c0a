// The epilogue the prelude's kernels apply in registers (gemm_kernel.h EpDyn::act): which
// epilogue programs have the form v = act(v + bias[j] + res[row * ld + j]) (affine_form), and
// the anchors that may then write their output in place of that residual (residuals_in_place,
// used by the memory plan); and the scatters that may update their data in place
// (scatters_in_place), which block analysis (mentions) decides the same way.
#include <map>

#include "codegen/cpu/render.h"

namespace dnnf::cg::cpu {

namespace {

// ---- The recognised epilogue (gemm_kernel.h EpDyn::act) --------------------------------
// A literal operand of a Compute: Const in its tree, or an Arg that names a Literal.
bool literal_of(const Program& p, const Instr& in, const Ew& e, double& out) {
  if (e.kind == Ew::Kind::Const) {
    out = e.value;
    return true;
  }
  if (e.kind != Ew::Kind::Arg || e.arg < 0 || e.arg >= static_cast<int>(in.args.size())) return false;
  const Instr& l = p.code.at(in.args[e.arg]);
  if (l.kind != Instr::Kind::Literal || l.dtype != DType::F32) return false;
  out = l.number;
  return true;
}
// e is the Arg naming instruction `ref`.
bool arg_is(const Instr& in, const Ew& e, Ref ref) {
  return e.kind == Ew::Kind::Arg && e.arg >= 0 && e.arg < static_cast<int>(in.args.size()) && in.args[e.arg] == ref;
}
// index == coef * var (div 1, no modulus inside the var's range), or that plus 1 * j.
bool term_is(const Term& t, int var, int64_t coef, const VarTable& vt) {
  return t.var == var && t.coef == coef && t.div == 1 && (t.mod == 0 || t.mod >= vt[var].range);
}

}  // namespace

// The epilogue program when it is v = act(v + bias[j] + res[row * ld + j]) in vector mode
// (in that order; the residual and act optional, act v_relu, Clip's v_min(hi, v_max(lo, .)) or
// Swish's v_mul(v, v_sigmoid(v)), act 3, without a residual).
AffineEpilogue affine_form(const Program& p) {
  AffineEpilogue no;
  if (p.mode != Mode::Vector || p.inner < 0) return no;
  const int j = p.inner;
  int row = -1;
  for (int k = 0; k < p.vars.size(); ++k)
    if (p.vars[k].name == "row") row = k;
  ValueId bias = kNoValue, res = kNoValue;
  int64_t ld = 0;
  int act = 0;
  double lo = 0, hi = 0;
  Ref last = kNoRef;  // the value v is after the Define (the anchor's result, then each op)
  Ref sig = kNoRef;   // v_sigmoid(v), waiting for the v_mul that makes it Swish
  // Loads not yet added: a bias (index j) or a residual (index row * ld + j).
  struct Pending {
    Ref ref;
    bool residual;
    int64_t ld;
  };
  std::vector<Pending> loads;
  for (size_t k = 0; k < p.code.size(); ++k) {
    const Instr& in = p.code[k];
    const Ref here = static_cast<Ref>(k);
    switch (in.kind) {
      case Instr::Kind::Literal:
        break;
      case Instr::Kind::Load: {
        if (in.dtype != DType::F32 || in.stride != Stride::Contiguous || in.mode != Mode::Vector ||
            !in.index.affine() || in.index.c != 0)
          return no;
        const std::vector<Term>& t = in.index.terms;
        Pending l{here, false, 0};
        if (t.size() == 1 && term_is(t[0], j, 1, p.vars)) {
          l.residual = false;
        } else if (row >= 0 && t.size() == 2 && t[0].coef > 0 && term_is(t[0], row, t[0].coef, p.vars) &&
                   term_is(t[1], j, 1, p.vars)) {
          l.residual = true;
          l.ld = t[0].coef;
        } else {
          return no;
        }
        if (last == kNoRef) {  // a bias added to the accumulator before the Define (Conv's, Gemm's)
          const Instr* acc = k + 1 < p.code.size() ? &p.code[k + 1] : nullptr;
          if (l.residual || bias != kNoValue || !acc || acc->kind != Instr::Kind::Acc || acc->acc_op != "add" ||
              acc->args.size() != 1 || acc->args[0] != here)
            return no;
          bias = in.value;
          ++k;
        } else {
          loads.push_back(l);
        }
        break;
      }
      case Instr::Kind::Define:
        if (last != kNoRef) return no;
        last = here;
        break;
      case Instr::Kind::Compute: {
        if (last == kNoRef || in.dtype != DType::F32 || in.ew.kind != Ew::Kind::Call || act != 0) return no;
        const Ew& e = in.ew;
        if (sig != kNoRef) {  // Swish (SiLU): v * sigmoid(v), either operand order (IEEE * commutes)
          if (!(e.name == "v_mul" && e.kids.size() == 2 &&
                ((arg_is(in, e.kids[0], last) && arg_is(in, e.kids[1], sig)) ||
                 (arg_is(in, e.kids[0], sig) && arg_is(in, e.kids[1], last)))))
            return no;
          act = 3;
          sig = kNoRef;
        } else if (e.name == "v_sigmoid" && e.kids.size() == 1 && arg_is(in, e.kids[0], last)) {
          sig = here;
          break;  // v stays `last` until the v_mul
        } else if (e.name == "v_add" && e.kids.size() == 2) {  // v + a pending load, either order (IEEE + commutes)
          const int other = arg_is(in, e.kids[0], last) ? 1 : arg_is(in, e.kids[1], last) ? 0 : -1;
          if (other < 0 || e.kids[other].kind != Ew::Kind::Arg) return no;
          const Ref r = in.args.at(e.kids[other].arg);
          auto it = std::find_if(loads.begin(), loads.end(), [&](const Pending& l) { return l.ref == r; });
          if (it == loads.end() || res != kNoValue) return no;  // bias, then residual, then act
          if (it->residual) {
            res = p.code[r].value;
            ld = it->ld;
          } else {
            if (bias != kNoValue) return no;
            bias = p.code[r].value;
          }
          loads.erase(it);
        } else if (e.name == "v_relu" && e.kids.size() == 1 && arg_is(in, e.kids[0], last)) {
          act = 1;
        } else if (e.name == "v_min" && e.kids.size() == 2 && literal_of(p, in, e.kids[0], hi) &&
                   e.kids[1].kind == Ew::Kind::Call && e.kids[1].name == "v_max" && e.kids[1].kids.size() == 2 &&
                   literal_of(p, in, e.kids[1].kids[0], lo) && arg_is(in, e.kids[1].kids[1], last)) {
          act = 2;
        } else {
          return no;
        }
        last = here;
        break;
      }
      case Instr::Kind::Acc:  // the end: v = the last value
        if (!in.acc_op.empty() || in.args.size() != 1 || in.args[0] != last || k + 1 != p.code.size()) return no;
        break;
      default:
        return no;
    }
  }
  // Swish with a residual is left to the lambda: no model seen has it, and the residual
  // written in place (residuals_in_place) is kept to the forms the GEMM tile applies itself.
  if (!loads.empty() || bias == kNoValue || sig != kNoRef || (act == 3 && res != kNoValue)) return no;
  return {true, bias, res, ld, act, lo, hi};
}


namespace {

// How many times stage s names value v: loads and stores of its programs, anchor arguments,
// GEMM operands, transposes.
int mentions(const Stage& s, ValueId v) {
  int n = 0;
  auto prog = [&](const Program& p) {
    for (const Instr& in : p.code)
      if ((in.kind == Instr::Kind::Load || in.kind == Instr::Kind::Store) && in.value == v) ++n;
  };
  switch (s.kind) {
    case Stage::Kind::Loop:
      prog(s.loop.body);
      n += s.loop.value == v;
      break;
    case Stage::Kind::Transpose:
      n += (s.transpose.in == v) + (s.transpose.out == v);
      break;
    case Stage::Kind::Anchor: {
      std::vector<const AnchorStage*> calls{&s.anchor};  // and a pointwise convolution it computes
      for (const AnchorStage& e : s.anchor.expand) calls.push_back(&e);
      for (const AnchorStage* c : calls) {
        const AnchorStage& a = *c;
        for (const std::vector<AnchorArg>* args : {&a.args, &a.second})
          for (const AnchorArg& x : *args) {
            n += (x.kind == AnchorArg::Kind::Buffer && x.value == v);
            for (ValueId u : x.values) n += u == v;
          }
        n += (a.gemm.a == v) + (a.gemm.b == v) + (a.y == v);
        prog(a.gemm.a_prog);
        prog(a.ep.prog);
      }
      break;
    }
  }
  return n;
}
// How many times block b names value v.
int mentions(const BlockPlan& b, ValueId v) {
  int n = 0;
  for (const Stage& s : b.stages) n += mentions(s, v);
  return n;
}

using Slots = std::map<ValueId, const BufferSlot*>;
Slots slots(const MemoryPlan& memory) {
  Slots slot;
  for (const BufferSlot& s : memory.buffers) slot[s.value] = &s;
  return slot;
}
// Whether the memory plan may give y the bytes of r in block bi (plan_memory's in_place): both
// arena tensors of one size outside any Concat's bytes, y first written and r last read there.
bool may_share(const Slots& slot, ValueId y, ValueId r, size_t bi) {
  auto ys = slot.find(y), rs = slot.find(r);
  if (ys == slot.end() || rs == slot.end() || y == r) return false;
  const BufferSlot &yb = *ys->second, &rb = *rs->second;
  return yb.size == rb.size && rb.last == static_cast<int>(bi) && yb.first == static_cast<int>(bi) &&
         yb.within == kNoValue && rb.within == kNoValue && yb.row == 0 && rb.row == 0;
}

}  // namespace

std::vector<std::pair<ValueId, ValueId>> residuals_in_place(const Graph& g, const ModulePlan& mp,
                                                            const MemoryPlan& memory) {
  const Slots slot = slots(memory);
  std::vector<std::pair<ValueId, ValueId>> pairs;
  for (size_t bi = 0; bi < mp.blocks.size(); ++bi) {
    const BlockPlan& b = mp.blocks[bi];
    for (const Stage& s : b.stages) {
      if (s.kind != Stage::Kind::Anchor) continue;
      const AnchorStage& a = s.anchor;
      if (a.kind != AnchorKind::NhwcConv && a.kind != AnchorKind::MatMul && a.kind != AnchorKind::Gemm) continue;
      if (!a.ep.present || a.ep.stores || a.y == kNoValue) continue;
      const AffineEpilogue af = affine_form(a.ep.prog);
      if (!af.ok || af.res == kNoValue || af.res_ld != a.ep.C || !may_share(slot, a.y, af.res, bi)) continue;
      if (g.value(a.y).type.dtype != DType::F32 || g.value(af.res).type.dtype != DType::F32) continue;
      if (mentions(b, af.res) != 1) continue;  // the residual load only
      pairs.emplace_back(a.y, af.res);
    }
  }
  return pairs;
}

std::vector<std::pair<ValueId, ValueId>> scatters_in_place(const Graph& g, const ModulePlan& mp,
                                                           const MemoryPlan& memory) {
  const Slots slot = slots(memory);
  std::vector<std::pair<ValueId, ValueId>> pairs;
  for (size_t bi = 0; bi < mp.blocks.size(); ++bi) {
    const BlockPlan& b = mp.blocks[bi];
    for (size_t si = 0; si < b.stages.size(); ++si) {
      const Stage& s = b.stages[si];
      if (s.kind != Stage::Kind::Anchor || s.anchor.kind != AnchorKind::Scatter) continue;
      const Node& n = *s.anchor.node;
      const ValueId data = n.inputs.at(0), y = n.outputs.at(0);
      if (n.inputs.at(1) == data || n.inputs.at(2) == data || !may_share(slot, y, data, bi)) continue;
      if (g.value(y).type.dtype != g.value(data).type.dtype) continue;
      // Stages before it may make data (its producer fused in the block), none after it may
      // read data (it holds y's values then), and the scatter names data once.
      int later = 0;
      for (size_t k = si + 1; k < b.stages.size(); ++k) later += mentions(b.stages[k], data);
      if (later != 0 || mentions(s, data) != 1) continue;
      pairs.emplace_back(y, data);
    }
  }
  return pairs;
}

}  // namespace dnnf::cg::cpu
