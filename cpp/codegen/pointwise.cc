// Pointwise lowering with composed index maps (paper §4.4, intra-block optimisation).
#include "codegen/pointwise.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

void Code::line(const std::string& s) {
  text.append(static_cast<size_t>(indent) * 2, ' ');
  text += s;
  text += '\n';
}

const char* ctype(DType t) {
  switch (t) {
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::I8: return "int8_t";
    case DType::I16: return "int16_t";
    case DType::I32: return "int32_t";
    case DType::I64: return "int64_t";
    case DType::U8: return "uint8_t";
    case DType::U16: return "uint16_t";
    case DType::U32: return "uint32_t";
    case DType::U64: return "uint64_t";
    case DType::Bool: return "bool";
    default: break;
  }
  throw UnsupportedOperatorError(std::string("code generation does not support the element type ") +
                                 dtype_name(t) + " yet");
}

std::string literal(double v, DType t) {
  if (t == DType::Bool) return v != 0 ? "true" : "false";
  if (is_float(t)) {
    if (std::isnan(v)) return t == DType::F32 ? "NAN" : "double(NAN)";
    if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + (t == DType::F32 ? "INFINITY" : "double(INFINITY)");
    char buf[64];
    if (t == DType::F32) {
      std::snprintf(buf, sizeof buf, "%.9gf", static_cast<double>(static_cast<float>(v)));
    } else {
      std::snprintf(buf, sizeof buf, "%.17g", v);
    }
    std::string s = buf;
    if (s.find_first_of(".eEn") == std::string::npos) s.insert(s.size() - (t == DType::F32), ".0");
    return s;
  }
  return std::string("static_cast<") + ctype(t) + ">(" + std::to_string(static_cast<int64_t>(v)) + "LL)";
}

std::vector<int64_t> dims_of(const Graph& g, ValueId v) {
  const TensorType& t = g.value(v).type;
  if (!t.is_static())
    throw ShapeError("code generation needs static shapes; '" + g.value(v).name + "' is " +
                     t.str() + ": specialize with input_shapes=");
  return t.dims();
}

PointwiseEmitter::PointwiseEmitter(const Graph& g, const Leaves& leaves, VarTable& vt, int inner,
                                   Mode mode, Code& code)
    : g_(g), leaves_(leaves), vt_(vt), inner_(inner), mode_(mode), code_(code) {
  scopes_.emplace_back();
}

std::string PointwiseEmitter::fresh(const char* prefix) {
  return prefix + std::to_string(counter_++);
}

std::string PointwiseEmitter::vtype(DType t, Mode m) const {
  return m == Mode::Vector ? "V::vf" : ctype(t);
}

std::string PointwiseEmitter::bind(const std::string& expr, const std::string& type) {
  std::string name = fresh();
  code_.line("const " + type + " " + name + " = " + expr + ";");
  return name;
}

std::string PointwiseEmitter::conditional(const std::string& cond, const std::string& type,
                                          const std::function<std::string()>& then_fn,
                                          const std::function<std::string()>& else_fn) {
  std::string name = fresh();
  code_.line(type + " " + name + ";");
  code_.open("if (" + cond + ")");
  scopes_.emplace_back();
  code_.line(name + " = " + then_fn() + ";");
  scopes_.pop_back();
  code_.close("} else {");
  ++code_.indent;
  scopes_.emplace_back();
  code_.line(name + " = " + else_fn() + ";");
  scopes_.pop_back();
  code_.close();
  return name;
}

std::string PointwiseEmitter::load(const Leaf& leaf, const IExpr& flat, Mode m) {
  if (leaf.constant && leaf.constant->type.numel() == 1) {
    std::string lit = literal(leaf.constant->to_doubles().at(0), leaf.dtype);
    return m == Mode::Vector ? "V::v_set1(" + lit + ")" : lit;
  }
  std::string off = render(flat, vt_);
  if (m == Mode::Scalar) return leaf.ptr + "[" + off + "]";
  switch (stride_along(flat, inner_)) {
    case Stride::Contiguous: return "cg::ld(" + leaf.ptr + " + (" + off + "), n)";
    case Stride::Broadcast: return "V::v_set1(" + leaf.ptr + "[" + off + "])";
    case Stride::Gather: break;
  }
  ++gathers;
  return "cg::gather(j, n, [&](long j) { return " + leaf.ptr + "[" + off + "]; })";
}

void PointwiseEmitter::store(const std::string& ptr, DType t, const IExpr& flat,
                             const std::string& value) {
  std::string off = render(flat, vt_);
  if (mode_ == Mode::Scalar) {
    code_.line(ptr + "[" + off + "] = " + value + ";");
  } else if (stride_along(flat, inner_) == Stride::Contiguous) {
    code_.line("cg::st(" + ptr + " + (" + off + "), " + value + ", n);");
  } else {
    ++gathers;
    code_.line("cg::scatter(j, n, " + value + ", [&](long j, float e) { " + ptr + "[" + off +
               "] = e; });");
  }
  (void)t;
}

std::vector<IExpr> PointwiseEmitter::broadcast_index(ValueId in, const std::vector<IExpr>& idx,
                                                     const std::vector<int64_t>& out_dims) {
  std::vector<int64_t> d = dims_of(g_, in);
  std::vector<IExpr> r(d.size());
  size_t lead = out_dims.size() - d.size();
  for (size_t k = 0; k < d.size(); ++k)
    r[k] = d[k] == 1 ? IExpr::constant(0) : idx.at(lead + k);
  return r;
}

void PointwiseEmitter::define(ValueId v, const std::vector<IExpr>& idx, const std::string& expr) {
  std::string key = std::to_string(v) + (mode_ == Mode::Vector ? "v" : "s");
  for (const IExpr& e : idx) key += "|" + render(e, vt_);
  scopes_.front()[key] = expr;
}

std::string PointwiseEmitter::eval(ValueId v, const std::vector<IExpr>& idx) {
  return eval_in(v, idx, mode_);
}

std::string PointwiseEmitter::eval_scalar(ValueId v, const std::vector<IExpr>& idx) {
  if (mode_ == Mode::Vector)
    for (const IExpr& e : idx)
      if (e.uses(inner_)) throw NeedScalar{"a data-dependent index varies along the vector"};
  return eval_in(v, idx, Mode::Scalar);
}

std::string PointwiseEmitter::eval_in(ValueId v, const std::vector<IExpr>& idx, Mode m) {
  const Value& val = g_.value(v);
  if (m == Mode::Vector && val.type.dtype != DType::F32)
    throw NeedScalar{std::string("a ") + dtype_name(val.type.dtype) + " value"};
  std::string key = std::to_string(v) + (m == Mode::Vector ? "v" : "s");
  for (const IExpr& e : idx) key += "|" + render(e, vt_);
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(key);
    if (f != it->end()) return f->second;
  }
  std::string out;
  auto leaf = leaves_.find(v);
  if (leaf != leaves_.end()) {
    std::string e = load(leaf->second, linearize(idx, leaf->second.shape, vt_), m);
    out = leaf->second.constant && leaf->second.constant->type.numel() == 1
              ? e : bind(e, vtype(val.type.dtype, m));
  } else if (val.producer >= 0) {
    out = eval_node(g_.node(val.producer), val.producer_index, idx, m);
  } else {
    throw InternalError("codegen: value '" + val.name + "' is neither in memory nor computed");
  }
  scopes_.back()[key] = out;
  return out;
}

namespace {

int64_t norm_axis(int64_t a, int64_t r) { return a < 0 ? a + r : a; }

}  // namespace

std::string PointwiseEmitter::eval_node(const Node& n, int out, const std::vector<IExpr>& idx,
                                        Mode m) {
  const std::vector<int64_t> od = dims_of(g_, n.outputs.at(out));
  const DType ot = g_.value(n.outputs[out]).type.dtype;
  InferCtx c(g_, n);
  auto in_dims = [&](size_t i) { return dims_of(g_, n.inputs.at(i)); };
  auto same_flat = [&](size_t i) {
    return delinearize(linearize(idx, od, vt_), in_dims(i), vt_);
  };
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
      return "true";
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
    case OpKind::Tile: {
      std::vector<int64_t> d = in_dims(0);
      std::vector<IExpr> in(d.size());
      for (size_t k = 0; k < d.size(); ++k) in[k] = mod(idx[k], d[k], vt_);
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
        in[a] = add(scale(idx[a], st, vt_), IExpr::constant(s), vt_);
      }
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::Split: {
      int64_t a = norm_axis(c.attr_int("axis", 0), od.size());
      int64_t off = 0;
      for (int k = 0; k < out; ++k) off += dims_of(g_, n.outputs[k])[a];
      std::vector<IExpr> in = idx;
      in[a] = add(idx[a], IExpr::constant(off), vt_);
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::Concat: {
      int64_t a = norm_axis(c.attr_int("axis", 0), od.size());
      if (m == Mode::Vector && idx[a].uses(inner_)) {
        // Along the vector, each vector must come from one input: where the vectors start at
        // multiples of the width (which divides kMaxVecWidth in every dialect), that holds
        // when the index is the inner var plus multiples of kMaxVecWidth and every boundary
        // between inputs is a multiple of it (a channels-last Concat of 64 + 128 channels).
        bool aligned = aligned_vectors;
        for (const Term& t : idx[a].terms)
          aligned = aligned && (t.var == inner_ ? t.coef == 1 && t.div == 1 && t.mod == 0
                                                 : t.coef % kMaxVecWidth == 0);
        aligned = aligned && idx[a].affine() && idx[a].c % kMaxVecWidth == 0;
        for (size_t k = 0; k + 1 < n.inputs.size() && aligned; ++k)
          aligned = dims_of(g_, n.inputs[k])[a] % kMaxVecWidth == 0;
        if (!aligned) throw NeedScalar{"Concat along the vector"};
      }
      std::string ia = render(idx[a], vt_);
      std::function<std::string(size_t, int64_t)> part = [&](size_t k, int64_t base) {
        std::vector<IExpr> in = idx;
        in[a] = add(idx[a], IExpr::constant(-base), vt_);
        if (k + 1 == n.inputs.size()) return eval_in(n.inputs[k], in, m);
        int64_t len = dims_of(g_, n.inputs[k])[a];
        if (len == 0) return part(k + 1, base);
        return conditional("(" + ia + ") < " + std::to_string(base + len) + "L", vtype(ot, m),
                           [&] { return eval_in(n.inputs[k], in, m); },
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
      std::string cond;
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = axes[i], b = pads[i], D = d[a];
        in[a] = add(idx[a], IExpr::constant(-b), vt_);
        if (b == 0 && pads[i + axes.size()] == 0) continue;
        std::string x = render(in[a], vt_);
        if (mode == "constant") {
          if (m == Mode::Vector && idx[a].uses(inner_)) throw NeedScalar{"Pad along the vector"};
          cond += std::string(cond.empty() ? "" : " && ") + "(" + x + ") >= 0L && (" + x +
                  ") < " + std::to_string(D) + "L";
        } else if (mode == "edge") {
          in[a] = opaque("std::min<long>(std::max<long>(" + x + ", 0L), " + std::to_string(D - 1) +
                         "L)", idx[a].opaque_vars);
          for (const Term& t : idx[a].terms) in[a].opaque_vars.push_back(t.var);
        } else if (mode == "reflect") {
          std::string Dm = std::to_string(D - 1);
          in[a] = opaque("(" + x + ") < 0L ? -(" + x + ") : ((" + x + ") > " + Dm + "L ? 2L * " +
                         Dm + "L - (" + x + ") : (" + x + "))", idx[a].opaque_vars);
          for (const Term& t : idx[a].terms) in[a].opaque_vars.push_back(t.var);
        } else {
          throw UnsupportedOperatorError("Pad mode '" + mode + "' is not supported by code generation");
        }
      }
      if (cond.empty()) return eval_in(n.inputs[0], in, m);
      std::string pad = literal(0, ot);
      if (c.has_input(2)) {
        TensorPtr cv = c.const_input(2);
        if (!cv) throw UnsupportedOperatorError("Pad with a computed constant_value");
        pad = literal(cv->to_doubles().at(0), ot);
      }
      if (m == Mode::Vector) pad = "V::v_set1(" + pad + ")";
      return conditional(cond, vtype(ot, m), [&] { return eval_in(n.inputs[0], in, m); },
                         [&] { return pad; });
    }
    case OpKind::Gather: {
      std::vector<int64_t> d = in_dims(0), id = in_dims(1);
      int64_t a = norm_axis(c.attr_int("axis", 0), d.size());
      std::vector<IExpr> sub(idx.begin() + a, idx.begin() + a + static_cast<long>(id.size()));
      std::string iv = eval_scalar(n.inputs[1], sub);
      std::string k = fresh("g");
      code_.line("const long " + k + " = cg::wrap_index(static_cast<long>(" + iv + "), " +
                 std::to_string(d[a]) + "L, \"Gather\");");
      std::vector<IExpr> in(idx.begin(), idx.begin() + a);
      std::vector<int> vs;
      if (m == Mode::Scalar)
        for (const IExpr& e : sub) {
          for (const Term& t : e.terms) vs.push_back(t.var);
          vs.insert(vs.end(), e.opaque_vars.begin(), e.opaque_vars.end());
        }
      in.push_back(opaque(k, vs));
      in.insert(in.end(), idx.begin() + a + static_cast<long>(id.size()), idx.end());
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::GatherElements: {
      std::vector<int64_t> d = in_dims(0);
      int64_t a = norm_axis(c.attr_int("axis", 0), d.size());
      std::string iv = eval_scalar(n.inputs[1], idx);
      std::string k = fresh("g");
      code_.line("const long " + k + " = cg::wrap_index(static_cast<long>(" + iv + "), " +
                 std::to_string(d[a]) + "L, \"GatherElements\");");
      std::vector<IExpr> in = idx;
      std::vector<int> vs;
      for (const IExpr& e : idx) {
        for (const Term& t : e.terms) vs.push_back(t.var);
        vs.insert(vs.end(), e.opaque_vars.begin(), e.opaque_vars.end());
      }
      in[a] = opaque(k, vs);
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
        IExpr bh = mod(idx[2], b, vt_), bw = mod(idx[3], b, vt_);
        bool crd = c.attr_string("mode", "DCR") == "CRD";
        in[1] = crd ? add(scale(idx[1], b * b, vt_), add(scale(bh, b, vt_), bw, vt_), vt_)
                    : add(scale(bh, b * cp, vt_), add(scale(bw, cp, vt_), idx[1], vt_), vt_);
        in[2] = floordiv(idx[2], b, vt_);
        in[3] = floordiv(idx[3], b, vt_);
      } else {
        int64_t C = d[1];
        // DCR: channel (bh * b + bw) * C + c; CRD (opset 25): c * b * b + bh * b + bw.
        const bool crd = c.attr_string("mode", "DCR") == "CRD";
        IExpr bh = crd ? mod(floordiv(idx[1], b, vt_), b, vt_) : floordiv(idx[1], b * C, vt_);
        IExpr bw = crd ? mod(idx[1], b, vt_) : mod(floordiv(idx[1], C, vt_), b, vt_);
        in[1] = crd ? floordiv(idx[1], b * b, vt_) : mod(idx[1], C, vt_);
        in[2] = add(scale(idx[2], b, vt_), bh, vt_);
        in[3] = add(scale(idx[3], b, vt_), bw, vt_);
      }
      return eval_in(n.inputs[0], in, m);
    }
    case OpKind::ConstantOfShape: {
      double v = 0;
      DType t = ot;
      if (TensorPtr tv = c.attr_tensor("value")) v = tv->to_doubles().at(0);
      std::string lit = literal(v, t);
      return m == Mode::Vector ? "V::v_set1(" + lit + ")" : lit;
    }
    case OpKind::Range: {
      if (m == Mode::Vector) throw NeedScalar{"Range"};
      TensorPtr s = c.const_input(0), dl = c.const_input(2);
      if (!s || !dl) throw UnsupportedOperatorError("Range with computed start or delta");
      std::string i = render(idx.at(0), vt_);
      if (is_float(ot))
        return "static_cast<" + std::string(ctype(ot)) + ">(" + literal(s->to_doubles()[0], DType::F64) +
               " + static_cast<double>(" + i + ") * " + literal(dl->to_doubles()[0], DType::F64) + ")";
      return "static_cast<" + std::string(ctype(ot)) + ">(" + std::to_string(s->to_ints()[0]) +
             "LL + (" + i + ") * " + std::to_string(dl->to_ints()[0]) + "LL)";
    }
    case OpKind::Trilu: {
      int64_t k = 0;
      if (c.has_input(1)) {
        TensorPtr kv = c.const_input(1);
        if (!kv) throw UnsupportedOperatorError("Trilu with a computed k");
        k = kv->to_ints().at(0);
      }
      size_t r = od.size();
      if (m == Mode::Vector && (idx[r - 1].uses(inner_) || idx[r - 2].uses(inner_)))
        throw NeedScalar{"Trilu along the vector"};
      std::string diff = "(" + render(idx[r - 1], vt_) + ") - (" + render(idx[r - 2], vt_) + ")";
      bool upper = c.attr_int("upper", 1) != 0;
      std::string cond = diff + (upper ? " >= " : " <= ") + std::to_string(k) + "L";
      std::string zero = m == Mode::Vector ? "V::v_zero()" : literal(0, ot);
      return conditional(cond, vtype(ot, m), [&] { return eval_in(n.inputs[0], idx, m); },
                         [&] { return zero; });
    }
    case OpKind::BatchNormalization: {
      std::vector<IExpr> ch{idx.size() > 1 ? idx[1] : IExpr::constant(0)};
      std::vector<std::string> args{eval_in(n.inputs[0], idx, m)};
      std::vector<DType> types{g_.value(n.inputs[0]).type.dtype};
      for (size_t i = 1; i < 5; ++i) {
        args.push_back(eval_in(n.inputs[i], ch, m));
        types.push_back(g_.value(n.inputs[i]).type.dtype);
      }
      std::string e = elementwise_expr(g_, n, args, types, m);
      return bind(e, vtype(ot, m));
    }
    default:
      break;
  }
  if (op_info(n.op).mapping != MappingType::OneToOne || n.op == OpKind::Constant)
    throw InternalError(std::string("codegen: ") + op_info(n.op).name +
                        " is not a pointwise operator");
  std::vector<std::string> args;
  std::vector<DType> types;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == kNoValue) {
      args.emplace_back();
      types.push_back(DType::F32);
      continue;
    }
    DType t = g_.value(n.inputs[i]).type.dtype;
    // In vector mode every operand is f32 except Where's condition, which forces scalar.
    args.push_back(eval_in(n.inputs[i], broadcast_index(n.inputs[i], idx, od), m));
    types.push_back(t);
  }
  std::string e = elementwise_expr(g_, n, args, types, m);
  if (e.empty())
    throw UnsupportedOperatorError(std::string("code generation does not support ") +
                                   op_info(n.op).name + " on " + dtype_name(types.at(0)) +
                                   " (node '" + n.name + "')");
  return bind(e, vtype(ot, m));
}

}  // namespace dnnf::cg
