// Building expressions with composed index maps (paper §4.4, intra-block optimisation); see
// expr.h. The builder decides everything a renderer needs: which loads are contiguous,
// broadcast or gathered along the vector, which conditions guard which loads, and which
// values are computed once and reused.
#include "codegen/expr.h"

#include <algorithm>
#include <cmath>

#include "codegen/refuse.h"
#include "codegen/resize_index.h"
#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

std::vector<int64_t> dims_of(const Graph& g, ValueId v) {
  const TensorType& t = g.value(v).type;
  if (!t.is_static())
    throw ShapeError("code generation needs static shapes; '" + g.value(v).name + "' is " +
                     t.str() + ": specialize with input_shapes=");
  return t.dims();
}

void require_dtype(DType t) {
  switch (t) {
    case DType::F32: case DType::F64: case DType::I8: case DType::I16: case DType::I32: case DType::I64:
    case DType::U8: case DType::U16: case DType::U32: case DType::U64: case DType::Bool:
      return;
    default:
      break;
  }
  refuse_dtype("code generation", t);
}

ExprBuilder::ExprBuilder(const Graph& g, const Leaves& leaves, Program& prog)
    : g_(g), leaves_(leaves), prog_(prog) {
  scopes_.emplace_back();
}

std::string ExprBuilder::fresh(const char* prefix) { return prefix + std::to_string(counter_++); }

std::string ExprBuilder::wrap_index(Ref iv, int64_t extent, const char* what, const Node& n) {
  Instr w;
  w.kind = Instr::Kind::WrapIndex;
  w.mode = Mode::Scalar;
  w.name = fresh("g");
  w.args = {iv};
  w.extent = extent;
  w.what = what;
  w.node = &n;
  const std::string name = w.name;
  push(std::move(w));
  return name;
}

Ref ExprBuilder::push(Instr i) {
  prog_.code.push_back(std::move(i));
  return static_cast<Ref>(prog_.code.size()) - 1;
}

Ref ExprBuilder::bind(Instr i) {
  i.name = fresh();
  return push(std::move(i));
}

std::string ExprBuilder::key(ValueId v, Mode m, const std::vector<IExpr>& idx) const {
  std::string k = std::to_string(v) + (m == Mode::Vector ? "v" : "s");
  for (const IExpr& e : idx) k += "|" + render(e, prog_.vars);
  return k;
}

Ref ExprBuilder::constant_literal(double v, DType t, Mode m, bool zero) {
  Instr i;
  i.kind = Instr::Kind::Literal;
  i.mode = m;
  i.dtype = t;
  i.number = v;
  i.inline_ = true;
  i.what = zero ? "zero" : "";
  return push(std::move(i));
}

Ref ExprBuilder::literal(double v) { return constant_literal(v, DType::F32, prog_.mode); }

Ref ExprBuilder::compute_inline(Ew ew, std::vector<Ref> args) {
  Instr i;
  i.kind = Instr::Kind::Compute;
  i.mode = prog_.mode;
  i.inline_ = true;
  i.ew = std::move(ew);
  i.args = std::move(args);
  return push(std::move(i));
}

Ref ExprBuilder::conditional(std::vector<IndexCmp> conds, DType t, Mode m,
                             const std::function<Ref()>& then_fn, const std::function<Ref()>& else_fn) {
  Instr begin;
  begin.kind = Instr::Kind::IfBegin;
  begin.mode = m;
  begin.dtype = t;
  begin.conds = std::move(conds);
  begin.name = fresh();
  const std::string name = begin.name;
  const Ref result = push(std::move(begin));
  auto assign = [&](Ref value) {
    Instr a;
    a.kind = Instr::Kind::Assign;
    a.mode = m;
    a.target = name;
    a.args = {value};
    push(std::move(a));
  };
  scopes_.emplace_back();
  assign(then_fn());
  scopes_.pop_back();
  Instr e;
  e.kind = Instr::Kind::Else;
  push(std::move(e));
  scopes_.emplace_back();
  assign(else_fn());
  scopes_.pop_back();
  Instr end;
  end.kind = Instr::Kind::IfEnd;
  push(std::move(end));
  return result;
}

void ExprBuilder::store(ValueId v, const IExpr& flat, Ref value) {
  Instr i;
  i.kind = Instr::Kind::Store;
  i.mode = prog_.mode;
  i.value = v;
  i.index = flat;
  i.args = {value};
  if (prog_.mode == Mode::Vector) {
    i.stride = stride_along(flat, prog_.inner, aligned_vectors);
    if (i.stride != Stride::Contiguous) {
      i.stride = Stride::Gather;
      ++gathers;
    }
  }
  push(std::move(i));
}

Ref ExprBuilder::define(ValueId v, const std::vector<IExpr>& idx, const std::string& name) {
  Instr i;
  i.kind = Instr::Kind::Define;
  i.mode = prog_.mode;
  i.name = name;
  Ref r = push(std::move(i));
  scopes_.front()[key(v, prog_.mode, idx)] = r;
  return r;
}

void ExprBuilder::accumulate(const std::string& op, Ref x) {
  Instr i;
  i.kind = Instr::Kind::Acc;
  i.mode = prog_.mode;
  i.acc_op = op;
  i.args = {x};
  push(std::move(i));
}

std::vector<IExpr> ExprBuilder::broadcast_index(ValueId in, const std::vector<IExpr>& idx,
                                                const std::vector<int64_t>& out_dims) {
  std::vector<int64_t> d = dims_of(g_, in);
  std::vector<IExpr> r(d.size());
  size_t lead = out_dims.size() - d.size();
  for (size_t k = 0; k < d.size(); ++k) r[k] = d[k] == 1 ? IExpr::constant(0) : idx.at(lead + k);
  return r;
}

// A Concat input's index along the axis. Where the output's index is a loop var i, the
// input's is a var of its own, "(i - base)" with the input's length as its range (the
// branch that reads the input has checked base <= i < base + len), so that the index
// algebra keeps its terms: idx - base as a constant offset made every div/mod of a
// reshaped input opaque (SSD's heads, [1, 126, 10, 10] -> [1, 600, 21] after the first
// part, were read by gathers of an identity index).
IExpr ExprBuilder::shifted(const IExpr& idx, int64_t base, int64_t len) {
  VarTable& vt = prog_.vars;
  if (base == 0 || !idx.affine() || idx.c != 0 || idx.terms.size() != 1) return add(idx, IExpr::constant(-base), vt);
  const Term& t = idx.terms[0];
  if (t.coef != 1 || t.div != 1 || (t.mod != 0 && t.mod < vt[t.var].range) || t.var == prog_.inner)
    return add(idx, IExpr::constant(-base), vt);
  // Keyed by the length too: two Concats of one loop nest may cut the same var at the same
  // base into parts of different lengths, and the range is what the algebra relies on.
  const auto key = std::make_tuple(t.var, base, len);
  auto it = shifted_.find(key);
  if (it == shifted_.end()) it = shifted_.emplace(key, vt.add("(" + vt[t.var].name + " - " + std::to_string(base) + "L)", len)).first;
  return IExpr::var(it->second);
}

Ref ExprBuilder::eval(ValueId v, const std::vector<IExpr>& idx) { return eval_in(v, idx, prog_.mode); }

Ref ExprBuilder::eval_scalar(ValueId v, const std::vector<IExpr>& idx) {
  if (prog_.mode == Mode::Vector)
    for (const IExpr& e : idx)
      if (e.uses(prog_.inner)) throw NeedScalar{"a data-dependent index varies along the vector"};
  return eval_in(v, idx, Mode::Scalar);
}

Ref ExprBuilder::eval_in(ValueId v, const std::vector<IExpr>& idx, Mode m) {
  const Value& val = g_.value(v);
  if (m == Mode::Vector && val.type.dtype != DType::F32)
    throw NeedScalar{std::string("a ") + dtype_name(val.type.dtype) + " value"};
  require_dtype(val.type.dtype);
  const std::string k = key(v, m, idx);
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(k);
    if (f != it->end()) return f->second;
  }
  Ref out;
  auto leaf = leaves_.find(v);
  if (leaf != leaves_.end()) {
    const Leaf& l = leaf->second;
    // A one-element constant is spelled as a literal, which goes through a double: an
    // integer beyond 2^53 would lose its low bits, so such a constant is loaded instead.
    bool literal_ok = l.constant && l.constant->type.numel() == 1;
    if (literal_ok && is_integer(l.dtype)) {
      const double d = l.constant->to_doubles().at(0);
      literal_ok = std::fabs(d) < 9007199254740992.0;  // 2^53: every integer below is exact
    }
    if (literal_ok) {
      out = constant_literal(l.constant->to_doubles().at(0), l.dtype, m);
    } else {
      Instr i;
      i.kind = Instr::Kind::Load;
      i.mode = m;
      i.dtype = val.type.dtype;
      i.value = v;
      i.index = linearize(idx, l.shape, prog_.vars);
      if (m == Mode::Vector) {
        i.stride = stride_along(i.index, prog_.inner, aligned_vectors);
        if (i.stride == Stride::Gather) ++gathers;
      }
      out = bind(std::move(i));
    }
  } else if (val.producer >= 0) {
    out = eval_node(g_.node(val.producer), val.producer_index, idx, m);
  } else {
    throw InternalError("codegen: value '" + val.name + "' is neither in memory nor computed");
  }
  scopes_.back()[k] = out;
  return out;
}

namespace {

int64_t norm_axis(int64_t a, int64_t r) { return a < 0 ? a + r : a; }

std::vector<int> vars_in(const std::vector<IExpr>& idx) {
  std::vector<int> vs;
  for (const IExpr& e : idx) {
    for (const Term& t : e.terms) vs.push_back(t.var);
    vs.insert(vs.end(), e.opaque_vars.begin(), e.opaque_vars.end());
  }
  return vs;
}

}  // namespace

Ref ExprBuilder::eval_node(const Node& n, int out, const std::vector<IExpr>& idx, Mode m) {
  VarTable& vt = prog_.vars;
  const std::vector<int64_t> od = dims_of(g_, n.outputs.at(out));
  const DType ot = g_.value(n.outputs[out]).type.dtype;
  InferCtx c(g_, n);
  auto in_dims = [&](size_t i) { return dims_of(g_, n.inputs.at(i)); };
  auto same_flat = [&](size_t i) { return delinearize(linearize(idx, od, vt), in_dims(i), vt); };
  switch (n.op) {
    case OpKind::Reshape:
    case OpKind::Flatten:
    case OpKind::Squeeze:
    case OpKind::Unsqueeze:
      return eval_in(n.inputs[0], same_flat(0), m);
    case OpKind::Identity:
      return eval_in(n.inputs[0], idx, m);
    case OpKind::Dropout:
      if (out == 0) return eval_in(n.inputs[0], idx, m);
      if (m == Mode::Vector) throw NeedScalar{"Dropout mask"};
      return constant_literal(1, DType::Bool, m);
    case OpKind::Transpose: {
      std::vector<int64_t> perm = c.attr_ints("perm");
      if (perm.empty())
        for (int64_t k = static_cast<int64_t>(od.size()) - 1; k >= 0; --k) perm.push_back(k);
      std::vector<IExpr> in(od.size());
      for (size_t k = 0; k < perm.size(); ++k) in[perm[k]] = idx[k];
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::Expand:
      return eval_in(n.inputs[0], broadcast_index(n.inputs[0], idx, od), m);
    case OpKind::Resize: {  // a nearest integer upsampling only (lower.cc runs the rest as anchors)
      const std::vector<int64_t> k = nearest_upsample_factors(g_, n);
      if (k.size() != idx.size()) throw InternalError("codegen: Resize '" + n.name + "' is not an index map");
      std::vector<IExpr> in(idx.size());
      for (size_t a = 0; a < idx.size(); ++a) in[a] = k[a] == 1 ? idx[a] : floordiv(idx[a], k[a], vt);
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::Tile: {
      std::vector<int64_t> d = in_dims(0);
      std::vector<IExpr> in(d.size());
      for (size_t k = 0; k < d.size(); ++k) in[k] = mod(idx[k], d[k], vt);
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::Slice: {
      std::vector<int64_t> d = in_dims(0);
      std::vector<int64_t> starts = const_vector(c, 1, "starts");
      std::vector<int64_t> axes = c.has_input(3) ? const_vector(c, 3, "axes") : std::vector<int64_t>{};
      std::vector<int64_t> steps = c.has_input(4) ? const_vector(c, 4, "steps") : std::vector<int64_t>{};
      std::vector<IExpr> in = idx;
      for (size_t i = 0; i < starts.size(); ++i) {
        int64_t a = axes.empty() ? static_cast<int64_t>(i) : norm_axis(axes[i], d.size());
        int64_t st = steps.empty() ? 1 : steps[i], s = starts[i], D = d[a];
        if (s < 0) s += D;
        s = st > 0 ? std::clamp<int64_t>(s, 0, D) : std::clamp<int64_t>(s, 0, D - 1);
        in[a] = add(scale(idx[a], st, vt), IExpr::constant(s), vt);
      }
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::Split: {
      int64_t a = norm_axis(c.attr_int("axis", 0), od.size());
      int64_t off = 0;
      for (int k = 0; k < out; ++k) off += dims_of(g_, n.outputs[k])[a];
      std::vector<IExpr> in = idx;
      in[a] = add(idx[a], IExpr::constant(off), vt);
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::Concat: {
      int64_t a = norm_axis(c.attr_int("axis", 0), od.size());
      if (m == Mode::Vector && idx[a].uses(prog_.inner)) {
        // Along the vector, each vector must come from one input: where the vectors start at
        // multiples of the width (which divides kMaxVecWidth in every dialect), that holds
        // when the index is the inner var plus multiples of kMaxVecWidth and every boundary
        // between inputs is a multiple of it (a channels-last Concat of 64 + 128 channels).
        bool aligned = aligned_vectors;
        for (const Term& t : idx[a].terms)
          aligned = aligned && (t.var == prog_.inner ? t.coef == 1 && t.div == 1 && t.mod == 0
                                                     : t.coef % kMaxVecWidth == 0);
        aligned = aligned && idx[a].affine() && idx[a].c % kMaxVecWidth == 0;
        for (size_t k = 0; k + 1 < n.inputs.size() && aligned; ++k)
          aligned = dims_of(g_, n.inputs[k])[a] % kMaxVecWidth == 0;
        if (!aligned) throw NeedScalar{"Concat along the vector"};
      }
      std::function<Ref(size_t, int64_t)> part = [&](size_t k, int64_t base) {
        const int64_t len = dims_of(g_, n.inputs[k])[a];
        std::vector<IExpr> in = idx;
        in[a] = shifted(idx[a], base, len);
        if (k + 1 == n.inputs.size()) return eval_in(n.inputs[k], in, m);
        if (len == 0) return part(k + 1, base);
        IndexCmp below;
        below.a = idx[a];
        below.op = "<";
        below.rhs = base + len;
        return conditional({below}, ot, m, [&] { return eval_in(n.inputs[k], in, m); },
                           [&] { return part(k + 1, base + len); });
      };
      return part(0, 0);
    }
    case OpKind::Pad: {
      std::vector<int64_t> d = in_dims(0);
      std::vector<int64_t> pads = const_vector(c, 1, "pads");
      std::vector<int64_t> axes;
      if (c.has_input(3)) {
        for (int64_t x : const_vector(c, 3, "axes")) axes.push_back(norm_axis(x, d.size()));
      } else {
        for (size_t k = 0; k < d.size(); ++k) axes.push_back(static_cast<int64_t>(k));
      }
      std::string mode = c.attr_string("mode", "constant");
      std::vector<IExpr> in = idx;
      std::vector<IndexCmp> conds;
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = axes[i], b = pads[i], D = d[a];
        in[a] = add(idx[a], IExpr::constant(-b), vt);
        if (b == 0 && pads[i + axes.size()] == 0) continue;
        std::string x = render(in[a], vt);
        if (mode == "constant") {
          if (m == Mode::Vector && idx[a].uses(prog_.inner)) throw NeedScalar{"Pad along the vector"};
          IndexCmp lo, hi;
          lo.a = hi.a = in[a];
          lo.op = ">=";
          lo.rhs = 0;
          hi.op = "<";
          hi.rhs = D;
          conds.push_back(lo);
          conds.push_back(hi);
        } else if (mode == "edge") {
          // @min/@max: the renderer's spelling of integer min and max (index.h).
          in[a] = opaque("@min(@max(" + x + ", 0L), " + std::to_string(D - 1) + "L)", idx[a].opaque_vars);
          for (const Term& t : idx[a].terms) in[a].opaque_vars.push_back(t.var);
        } else if (mode == "reflect") {
          std::string Dm = std::to_string(D - 1);
          in[a] = opaque("(" + x + ") < 0L ? -(" + x + ") : ((" + x + ") > " + Dm + "L ? 2L * " + Dm +
                         "L - (" + x + ") : (" + x + "))", idx[a].opaque_vars);
          for (const Term& t : idx[a].terms) in[a].opaque_vars.push_back(t.var);
        } else if (mode == "wrap") {  // index modulo D, into [0, D)
          const std::string Ds = std::to_string(D) + "L";
          in[a] = opaque("((" + x + ") % " + Ds + " + " + Ds + ") % " + Ds, idx[a].opaque_vars);
          for (const Term& t : idx[a].terms) in[a].opaque_vars.push_back(t.var);
        } else {
          throw UnsupportedOperatorError("Pad mode '" + mode + "' is not supported by code generation");
        }
      }
      if (conds.empty()) return eval_in(n.inputs[0], in, m);
      double pad = 0;
      TensorPtr cv = c.has_input(2) ? c.const_input(2) : nullptr;
      if (cv) pad = cv->to_doubles().at(0);
      // A computed constant_value (one element) is read where the padding is written.
      const bool computed = c.has_input(2) && !cv;
      const std::vector<IExpr> at(g_.value(computed ? n.inputs[2] : n.inputs[0]).type.dims().size(), IExpr::constant(0));
      return conditional(conds, ot, m, [&] { return eval_in(n.inputs[0], in, m); },
                         [&] { return computed ? eval_in(n.inputs[2], at, m) : constant_literal(pad, ot, m); });
    }
    case OpKind::Gather: {
      std::vector<int64_t> d = in_dims(0), id = in_dims(1);
      int64_t a = norm_axis(c.attr_int("axis", 0), d.size());
      std::vector<IExpr> sub(idx.begin() + a, idx.begin() + a + static_cast<long>(id.size()));
      const std::string k = wrap_index(eval_scalar(n.inputs[1], sub), d[a], "Gather", n);
      std::vector<IExpr> in(idx.begin(), idx.begin() + a);
      in.push_back(opaque(k, m == Mode::Scalar ? vars_in(sub) : std::vector<int>{}));
      in.insert(in.end(), idx.begin() + a + static_cast<long>(id.size()), idx.end());
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::GatherElements: {
      std::vector<int64_t> d = in_dims(0);
      int64_t a = norm_axis(c.attr_int("axis", 0), d.size());
      const std::string k = wrap_index(eval_scalar(n.inputs[1], idx), d[a], "GatherElements", n);
      std::vector<IExpr> in = idx;
      in[a] = opaque(k, vars_in(idx));
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::GatherND: {
      // data[idx[0..b), indices[idx[0..q-1), j] for j < k, idx[q-1..)]: each coordinate one
      // scalar read of indices, wrapped and range-checked as Gather's.
      const std::vector<int64_t> d = in_dims(0), id = in_dims(1);
      const int64_t b = c.attr_int("batch_dims", 0), q = static_cast<int64_t>(id.size()), k = id.back();
      std::vector<IExpr> in(idx.begin(), idx.begin() + b);
      std::vector<IExpr> at(idx.begin(), idx.begin() + (q - 1));
      at.push_back(IExpr::constant(0));
      for (int64_t j = 0; j < k; ++j) {
        at.back() = IExpr::constant(j);
        const std::string nm = wrap_index(eval_scalar(n.inputs[1], at), d[b + j], "GatherND", n);
        std::vector<IExpr> used(idx.begin(), idx.begin() + (q - 1));
        in.push_back(opaque(nm, m == Mode::Scalar ? vars_in(used) : std::vector<int>{}));
      }
      in.insert(in.end(), idx.begin() + (q - 1), idx.end());
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::DepthToSpace:
    case OpKind::SpaceToDepth: {
      int64_t b = c.attr_int("blocksize", 1);
      std::vector<int64_t> d = in_dims(0);
      std::vector<IExpr> in(4);
      in[0] = idx[0];
      if (n.op == OpKind::DepthToSpace) {
        int64_t cp = od[1];
        IExpr bh = mod(idx[2], b, vt), bw = mod(idx[3], b, vt);
        bool crd = c.attr_string("mode", "DCR") == "CRD";
        in[1] = crd ? add(scale(idx[1], b * b, vt), add(scale(bh, b, vt), bw, vt), vt)
                    : add(scale(bh, b * cp, vt), add(scale(bw, cp, vt), idx[1], vt), vt);
        in[2] = floordiv(idx[2], b, vt);
        in[3] = floordiv(idx[3], b, vt);
      } else {
        int64_t C = d[1];
        // DCR: channel (bh * b + bw) * C + c; CRD (opset 25): c * b * b + bh * b + bw.
        const bool crd = c.attr_string("mode", "DCR") == "CRD";
        IExpr bh = crd ? mod(floordiv(idx[1], b, vt), b, vt) : floordiv(idx[1], b * C, vt);
        IExpr bw = crd ? mod(idx[1], b, vt) : mod(floordiv(idx[1], C, vt), b, vt);
        in[1] = crd ? floordiv(idx[1], b * b, vt) : mod(idx[1], C, vt);
        in[2] = add(scale(idx[2], b, vt), bh, vt);
        in[3] = add(scale(idx[3], b, vt), bw, vt);
      }
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::ConstantOfShape: {
      double v = 0;
      if (TensorPtr tv = c.attr_tensor("value")) v = tv->to_doubles().at(0);
      return constant_literal(v, ot, m);
    }
    case OpKind::Range: {
      if (m == Mode::Vector) throw NeedScalar{"Range"};
      TensorPtr s = c.const_input(0), dl = c.const_input(2);
      if (!s || !dl) throw UnsupportedOperatorError("Range with computed start or delta");
      Instr i;
      i.kind = Instr::Kind::Range;
      i.mode = m;
      i.dtype = ot;
      i.inline_ = true;
      i.index = idx.at(0);
      i.range_float = is_float(ot);
      i.range_start = i.range_float ? s->to_doubles()[0] : static_cast<double>(s->to_ints()[0]);
      i.range_delta = i.range_float ? dl->to_doubles()[0] : static_cast<double>(dl->to_ints()[0]);
      return push(std::move(i));
    }
    case OpKind::Trilu: {
      int64_t k = 0;
      size_t r = od.size();
      const bool upper = c.attr_int("upper", 1) != 0;
      if (c.has_input(1)) {
        TensorPtr kv = c.const_input(1);
        if (!kv) {
          // A computed k (one int64, read at run time): keep x where (col - row) >= k (upper)
          // or <= k (lower), element by element.
          if (m == Mode::Vector) throw NeedScalar{"Trilu with a computed k"};
          auto position = [&](const IExpr& e) {
            Instr i;
            i.kind = Instr::Kind::Range;
            i.mode = m;
            i.dtype = DType::I64;
            i.inline_ = true;
            i.index = e;
            i.range_delta = 1;
            return push(std::move(i));
          };
          const Ref col = position(idx[r - 1]), row = position(idx[r - 2]);
          const Ref kk = eval_in(n.inputs[1], std::vector<IExpr>(g_.value(n.inputs[1]).type.dims().size(),
                                                                 IExpr::constant(0)), m);
          const Ref x = eval_in(n.inputs[0], idx, m);
          Instr i;
          i.kind = Instr::Kind::Compute;
          i.mode = m;
          i.dtype = ot;
          i.node = &n;
          i.args = {col, row, kk, x};
          i.arg_types = {DType::I64, DType::I64, DType::I64, ot};
          i.ew = trilu_select(upper, ot);
          return bind(std::move(i));
        }
        k = kv->to_ints().at(0);
      }
      if (m == Mode::Vector && (idx[r - 1].uses(prog_.inner) || idx[r - 2].uses(prog_.inner)))
        throw NeedScalar{"Trilu along the vector"};
      IndexCmp cmp;
      cmp.a = idx[r - 1];
      cmp.b = idx[r - 2];
      cmp.diff = true;
      cmp.op = upper ? ">=" : "<=";
      cmp.rhs = k;
      return conditional({cmp}, ot, m, [&] { return eval_in(n.inputs[0], idx, m); },
                         [&] { return constant_literal(0, ot, m, true); });
    }
    case OpKind::BatchNormalization: {
      std::vector<IExpr> ch{idx.size() > 1 ? idx[1] : IExpr::constant(0)};
      Instr i;
      i.kind = Instr::Kind::Compute;
      i.mode = m;
      i.dtype = ot;
      i.node = &n;
      i.args.push_back(eval_in(n.inputs[0], idx, m));
      i.arg_types.push_back(g_.value(n.inputs[0]).type.dtype);
      for (size_t k = 1; k < 5; ++k) {
        i.args.push_back(eval_in(n.inputs[k], ch, m));
        i.arg_types.push_back(g_.value(n.inputs[k]).type.dtype);
      }
      i.ew = elementwise(g_, n, i.arg_types, std::vector<bool>(5, true), m);
      return bind(std::move(i));
    }
    default:
      break;
  }
  return eval_pointwise(n, out, idx, od, m);
}

}  // namespace dnnf::cg
