// The stages whose rows follow the runtime sequence length (seq_rows.h).
#include "codegen/seq_rows.h"

#include "codegen/anchors.h"
#include "codegen/expr.h"

namespace dnnf::cg {

namespace {

// Whether `p` stores a value other than `own` (an epilogue that also stores an operator's
// result, a loop computing two values): stopping the stage early would leave those short too,
// and one of them may be a masked operand that must be complete.
bool stores_other(const Program& p, ValueId own) {
  for (const Instr& i : p.code)
    if (i.kind == Instr::Kind::Store && i.value != own) return true;
  return false;
}

// The dim of `axes` a stage can stop along: the first (outermost) one.
std::pair<int, int64_t> first_axis(const std::map<int, int64_t>& axes) { return *axes.begin(); }

SeqRows loop_rows(const LoopStage& l, const std::vector<int64_t>& d, int dim, int64_t offset) {
  SeqRows s;
  s.offset = offset, s.size = d[dim];
  if (prod(d, 0, d.size()) != l.total || stores_other(l.body, l.value)) return {};
  if (l.flat) {
    if (prod(d, 0, dim) != 1) return {};
    s.how = SeqRows::How::Flat, s.per = prod(d, dim + 1, d.size());
    return s;
  }
  for (const LoopStage::IndexVar& v : l.index_vars) {
    if (v.k != dim || v.zero) continue;
    if (v.mod != d[dim]) return {};
    if (v.div * v.mod == l.rows) {
      s.how = SeqRows::How::Rows, s.per = v.div;
    } else {
      s.how = SeqRows::How::Guard, s.var = v.k;
    }
    return s;
  }
  return {};  // the dim is the inner one (or collapsed away): every position
}

SeqRows anchor_rows(const AnchorStage& a, const std::map<ValueId, std::map<int, int64_t>>& rows,
                    const std::vector<int64_t>& d, int dim, int64_t offset) {
  SeqRows s;
  s.offset = offset, s.size = d[dim];
  const size_t r = d.size();
  if (a.ep.stores || !a.expand.empty() || a.y == kNoValue || (a.ep.present && stores_other(a.ep.prog, a.y)))
    return {};
  if (a.kind == AnchorKind::MatMul || a.kind == AnchorKind::Gemm) {
    const GemmCall& gc = a.gemm;
    if (gc.dtype != DType::F32 || r < 2 || dim != static_cast<int>(r) - 2) return {};
    if (gc.M != d[r - 2] || gc.N != d[r - 1] || prod(d, 0, r - 2) != (gc.batched ? a.batch : 1)) return {};
    s.how = SeqRows::How::GemmM;
    auto last = rows.at(a.y).find(static_cast<int>(r) - 1);
    if (last != rows.at(a.y).end() && !gc.a_computed && gc.packed_b < 0)  // the keys of attention scores
      s.n = true, s.n_offset = last->second, s.n_size = d[r - 1];
    return s;
  }
  if (a.kind == AnchorKind::Softmax || a.kind == AnchorKind::LogSoftmax || a.kind == AnchorKind::LayerNorm) {
    if (a.args.empty() || a.args[0].kind != AnchorArg::Kind::Int) return {};
    if (a.kind != AnchorKind::LayerNorm && a.args.size() > 3 && a.args[3].dtype != DType::F32) return {};
    if (a.kind == AnchorKind::LayerNorm)  // its mean and inverse deviation outputs: uncomputed rows too
      for (size_t i = 7; i < 9 && i < a.args.size(); ++i)
        if (a.args[i].kind == AnchorArg::Kind::Buffer && a.args[i].value != kNoValue && !rows.count(a.args[i].value))
          return {};
    const int64_t outer = a.args[0].i;
    // outer = prod(dims before the normalised axis), which the sequence is one of
    int64_t before = 1;
    size_t ax = 0;
    while (ax < r && before < outer) before *= d[ax++];
    if (before != outer || static_cast<int>(ax) <= dim) return {};
    s.per = prod(d, dim + 1, ax);
    if (prod(d, 0, dim) == 1) {
      s.how = SeqRows::How::Outer;
      return s;
    }
    s.heads = prod(d, 0, dim), s.stride = prod(d, dim, r);
    // (an epilogue's rows continue from head to head: R rows in all, R / heads a head)
    if (a.kind == AnchorKind::LayerNorm || (a.ep.present && a.ep.R % s.heads != 0)) return {};
    s.how = SeqRows::How::Heads;
    return s;
  }
  return {};
}

}  // namespace

int limit_sequence_rows(const Graph& g, ModulePlan& mp, const std::map<ValueId, std::map<int, int64_t>>& rows,
                        int length_input, bool length_f32) {
  if (rows.empty() || length_input < 0) return 0;
  int n = 0;
  for (BlockPlan& b : mp.blocks) {
    for (Stage& st : b.stages) {
      ValueId v = st.kind == Stage::Kind::Loop     ? st.loop.value
                  : st.kind == Stage::Kind::Anchor ? st.anchor.y
                                                   : kNoValue;
      auto it = v == kNoValue ? rows.end() : rows.find(v);
      if (it == rows.end() || it->second.empty()) continue;
      const std::vector<int64_t> d = dims_of(g, v);
      const auto [dim, offset] = first_axis(it->second);
      if (dim < 0 || dim >= static_cast<int>(d.size())) continue;
      st.seq = st.kind == Stage::Kind::Loop ? loop_rows(st.loop, d, dim, offset) : anchor_rows(st.anchor, rows, d, dim, offset);
      if (st.seq.how == SeqRows::How::None) continue;
      b.length_input = length_input;
      b.length_f32 = length_f32;
      ++n;
    }
  }
  return n;
}

}  // namespace dnnf::cg
