// The arithmetic of every One-to-One operator (paper §4.4: One-to-One chains are computed in
// registers), written once as expression trees (kernel.h `Ew`) that every renderer spells.
// f32 uses the SIMD vocabulary (`v_relu`, `v_add`, ...: the CPU prelude defines it per ISA with
// a scalar twin, so a value is bit-identical however it was computed; the OpenCL prelude
// defines the same names); other element types use scalar C arithmetic with ONNX semantics
// (integer Div/Mod/Pow through the support library's idiv, imod, ifmod, ipow).
#include <cmath>

#include "codegen/expr.h"
#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

namespace {

Ew arg(int i) {
  Ew e;
  e.kind = Ew::Kind::Arg;
  e.arg = i;
  return e;
}
Ew node(Ew::Kind k, std::string name, std::vector<Ew> kids, DType t = DType::F32) {
  Ew e;
  e.kind = k;
  e.name = std::move(name);
  e.kids = std::move(kids);
  e.type = t;
  return e;
}
Ew call(std::string fn, std::vector<Ew> kids) { return node(Ew::Kind::Call, std::move(fn), std::move(kids)); }
Ew param(double v) {
  Ew e;
  e.kind = Ew::Kind::Param;
  e.value = v;
  return e;
}
Ew konst(double v) {
  Ew e;
  e.kind = Ew::Kind::Const;
  e.value = v;
  return e;
}
Ew lanes(std::string fn, std::vector<Ew> kids) { return node(Ew::Kind::Lanes, std::move(fn), std::move(kids)); }
Ew cast(DType t, Ew x) { return node(Ew::Kind::Cast, "", {std::move(x)}, t); }
Ew text(std::string fmt, std::vector<Ew> kids) { return node(Ew::Kind::Text, std::move(fmt), std::move(kids)); }
Ew typed(std::string fn, DType t, std::vector<Ew> kids) { return node(Ew::Kind::Typed, std::move(fn), std::move(kids), t); }
Ew libm(std::string fn, std::vector<Ew> kids) { return node(Ew::Kind::Libm, std::move(fn), std::move(kids)); }

// The unsigned integer type of t's width (t itself when unsigned).
DType unsigned_of(DType t) {
  switch (t) {
    case DType::I8: return DType::U8;
    case DType::I16: return DType::U16;
    case DType::I32: return DType::U32;
    case DType::I64: return DType::U64;
    default: return t;
  }
}
bool is_unsigned(DType t) { return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64; }

// A constant scalar operand's value (for Pow's exponent), or NaN.
double const_scalar(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (!val.constant || val.constant->type.numel() != 1) return std::nan("");
  return val.constant->to_doubles().at(0);
}

// f32 on the SIMD vocabulary; `ok` false when the op has no such form.
Ew f32_form(const Graph& g, const Node& n, const std::vector<DType>& types, const std::vector<bool>& present,
            bool& ok) {
  InferCtx c(g, n);
  const size_t na = types.size();
  ok = true;
  auto a = [&](size_t i) { return arg(static_cast<int>(i)); };
  switch (n.op) {
    case OpKind::Relu: return call("v_relu", {a(0)});
    case OpKind::LeakyRelu: return call("v_leaky_relu", {a(0), param(c.attr_float("alpha", 0.01))});
    case OpKind::Elu: return call("v_elu", {a(0), param(c.attr_float("alpha", 1.0))});
    case OpKind::Selu:
      return call("v_mul", {konst(c.attr_float("gamma", 1.05070102214813232421875)),
                            call("v_elu", {a(0), param(c.attr_float("alpha", 1.67326319217681884765625))})});
    case OpKind::Sigmoid: return call("v_sigmoid", {a(0)});
    case OpKind::HardSigmoid:
      return call("v_hard_sigmoid", {a(0), param(c.attr_float("alpha", 0.2)), param(c.attr_float("beta", 0.5))});
    case OpKind::HardSwish: return call("v_hard_swish", {a(0)});
    case OpKind::Tanh: return call("v_tanh", {a(0)});
    case OpKind::Softplus: return call("v_softplus", {a(0)});
    case OpKind::Softsign: return call("v_div", {a(0), call("v_add", {konst(1), call("v_abs", {a(0)})})});
    case OpKind::Mish: return call("v_mish", {a(0)});
    case OpKind::Gelu:
      return call(c.attr_string("approximate", "none") == "tanh" ? "v_gelu_tanh" : "v_gelu_erf", {a(0)});
    case OpKind::Erf: return call("v_erf", {a(0)});
    case OpKind::Sqrt: return call("v_sqrt", {a(0)});
    case OpKind::Reciprocal: return call("v_rcp", {a(0)});
    case OpKind::Exp: return call("v_exp", {a(0)});
    case OpKind::Log: return call("v_log", {a(0)});
    case OpKind::Neg: return call("v_neg", {a(0)});
    case OpKind::Abs: return call("v_abs", {a(0)});
    case OpKind::Floor: return call("v_floor", {a(0)});
    case OpKind::Ceil: return call("v_ceil", {a(0)});
    case OpKind::Round: return call("v_round", {a(0)});
    case OpKind::Sign:
      return call("v_select", {call("v_cmp_gt", {a(0), konst(0)}), konst(1),
                               call("v_select", {call("v_cmp_lt", {a(0), konst(0)}), konst(-1), konst(0)})});
    case OpKind::Sin: return lanes("sin", {a(0)});
    case OpKind::Cos: return lanes("cos", {a(0)});
    case OpKind::Tan: return lanes("tan", {a(0)});
    case OpKind::Asin: return lanes("asin", {a(0)});
    case OpKind::Acos: return lanes("acos", {a(0)});
    case OpKind::Atan: return lanes("atan", {a(0)});
    case OpKind::Sinh: return lanes("sinh", {a(0)});
    case OpKind::Cosh: return lanes("cosh", {a(0)});
    case OpKind::Asinh: return lanes("asinh", {a(0)});
    case OpKind::Acosh: return lanes("acosh", {a(0)});
    case OpKind::Atanh: return lanes("atanh", {a(0)});
    case OpKind::Identity:
    case OpKind::Dropout:
    case OpKind::Cast:
      return a(0);
    case OpKind::Clip: {
      Ew y = a(0);
      if (na > 1 && present[1]) y = call("v_max", {a(1), y});
      if (na > 2 && present[2]) y = call("v_min", {a(2), y});
      return y;
    }
    case OpKind::Add: return call("v_add", {a(0), a(1)});
    case OpKind::Sub: return call("v_sub", {a(0), a(1)});
    case OpKind::Mul: return call("v_mul", {a(0), a(1)});
    case OpKind::Div: return call("v_div", {a(0), a(1)});
    case OpKind::Pow: {
      double e = const_scalar(g, n.inputs[1]);
      if (e == 1.0) return a(0);
      if (e == 2.0) return call("v_mul", {a(0), a(0)});
      if (e == 3.0) return call("v_mul", {call("v_mul", {a(0), a(0)}), a(0)});
      if (e == 0.5) return call("v_sqrt", {a(0)});
      if (types[1] != DType::F32) break;  // an integer exponent: the scalar form (pow in f64)
      return call("v_pow", {a(0), a(1)});
    }
    case OpKind::Mod: return lanes(c.attr_int("fmod", 0) ? "fmod" : "fmod_py", {a(0), a(1)});
    case OpKind::PRelu:
      return call("v_select", {call("v_cmp_lt", {a(0), konst(0)}), call("v_mul", {a(0), a(1)}), a(0)});
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::Sum:
    case OpKind::Mean: {
      const char* fn = n.op == OpKind::Max ? "v_max" : n.op == OpKind::Min ? "v_min" : "v_add";
      Ew y = a(0);
      for (size_t i = 1; i < na; ++i) y = call(fn, {a(i), y});
      if (n.op == OpKind::Mean) y = call("v_div", {y, konst(static_cast<double>(na))});
      return y;
    }
    case OpKind::BatchNormalization: {
      double eps = c.attr_float("epsilon", 1e-5);
      Ew xn = call("v_div", {call("v_sub", {a(0), a(3)}), call("v_sqrt", {call("v_add", {a(4), konst(eps)})})});
      return call("v_add", {call("v_mul", {xn, a(1)}), a(2)});
    }
    default:
      break;
  }
  ok = false;
  return Ew{};
}

// Scalar C arithmetic for every element type; `ok` false when there is none.
Ew scalar_form(const Graph& g, const Node& n, const std::vector<DType>& types, bool& ok) {
  InferCtx c(g, n);
  const DType ot = g.value(n.outputs.at(0)).type.dtype;
  const DType it = types.empty() ? ot : types[0];
  const bool fl = is_float(it);
  const size_t na = types.size();
  ok = true;
  auto a = [&](size_t i) { return arg(static_cast<int>(i)); };
  auto math = [&](const char* fn) { return cast(ot, libm(fn, {a(0)})); };
  switch (n.op) {
    case OpKind::Identity:
    case OpKind::Dropout:
      return a(0);
    case OpKind::Cast:
      if (ot == DType::Bool) return text("($0 != 0)", {a(0)});
      if (is_integer(ot) && fl) return cast(ot, libm("trunc", {a(0)}));
      return cast(ot, a(0));
    case OpKind::Not: return text("!$0", {a(0)});
    case OpKind::BitCast:  // a bool is 0 or 1 whatever the byte held
      return ot == DType::Bool ? text("($0 != 0)", {a(0)}) : typed("bit_cast", ot, {a(0)});
    // Without -ffast-math (never in the flags): NaN is the value unequal to itself; an
    // infinity is a number whose difference with itself is NaN.
    case OpKind::IsNaN: return text("($0 != $0)", {a(0)});
    case OpKind::IsInf: {
      const bool neg = c.attr_int("detect_negative", 1) != 0, pos = c.attr_int("detect_positive", 1) != 0;
      if (!neg && !pos) return text("($0 != $0 && $0 == $0)", {a(0)});  // false, typed bool
      return text(std::string("($0 == $0 && $0 - $0 != $0 - $0") + (neg && pos ? "" : pos ? " && $0 > 0" : " && $0 < 0") +
                  ")", {a(0)});
    }
    case OpKind::Relu: return cast(ot, text("$0 > 0 ? $0 : 0", {a(0)}));
    case OpKind::Neg: return cast(ot, text("-$0", {a(0)}));
    case OpKind::Abs: return cast(ot, text("$0 < 0 ? -$0 : $0", {a(0)}));
    case OpKind::Sign: return cast(ot, text("($0 > 0) - ($0 < 0)", {a(0)}));
    case OpKind::Add: return cast(ot, text("$0 + $1", {a(0), a(1)}));
    case OpKind::Sub: return cast(ot, text("$0 - $1", {a(0), a(1)}));
    case OpKind::Mul: return cast(ot, text("$0 * $1", {a(0), a(1)}));
    case OpKind::Div:
      return fl ? cast(ot, text("$0 / $1", {a(0), a(1)})) : typed("idiv", ot, {a(0), cast(ot, a(1))});
    case OpKind::Mod:
      if (fl) return cast(ot, lanes(c.attr_int("fmod", 0) ? "fmod" : "fmod_py", {a(0), a(1)}));
      return typed(c.attr_int("fmod", 0) ? "ifmod" : "imod", ot, {a(0), cast(ot, a(1))});
    case OpKind::Pow:
      if (!fl && !is_float(types[1])) return typed("ipow", ot, {a(0), cast(ot, a(1))});
      return cast(ot, libm("pow", {cast(DType::F64, a(0)), cast(DType::F64, a(1))}));
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::Sum:
    case OpKind::Mean: {
      Ew y = a(0);
      for (size_t i = 1; i < na; ++i) {
        if (n.op == OpKind::Max) y = typed("max", ot, {y, a(i)});
        else if (n.op == OpKind::Min) y = typed("min", ot, {y, a(i)});
        else y = cast(ot, text("$0 + $1", {y, a(i)}));
      }
      if (n.op == OpKind::Mean) y = cast(ot, text("$0 / " + std::to_string(na), {y}));
      return y;
    }
    case OpKind::Clip: {
      Ew y = a(0);
      if (na > 1 && n.inputs[1] != kNoValue) y = typed("max", ot, {y, a(1)});
      if (na > 2 && n.inputs[2] != kNoValue) y = typed("min", ot, {y, a(2)});
      return y;
    }
    case OpKind::Equal: return text("($0 == $1)", {a(0), a(1)});
    case OpKind::Less: return text("($0 < $1)", {a(0), a(1)});
    case OpKind::LessOrEqual: return text("($0 <= $1)", {a(0), a(1)});
    case OpKind::Greater: return text("($0 > $1)", {a(0), a(1)});
    case OpKind::GreaterOrEqual: return text("($0 >= $1)", {a(0), a(1)});
    case OpKind::And: return text("($0 && $1)", {a(0), a(1)});
    case OpKind::Or: return text("($0 || $1)", {a(0), a(1)});
    case OpKind::Xor: return text("($0 != $1)", {a(0), a(1)});
    case OpKind::BitwiseAnd: return cast(ot, text("($0) & ($1)", {a(0), a(1)}));
    case OpKind::BitwiseOr: return cast(ot, text("($0) | ($1)", {a(0), a(1)}));
    case OpKind::BitwiseXor: return cast(ot, text("($0) ^ ($1)", {a(0), a(1)}));
    case OpKind::BitwiseNot: return cast(ot, text("~($0)", {a(0)}));
    case OpKind::BitShift: {
      // BitShift-28: a shift by a negative amount or by the width or more leaves the sign fill
      // (C leaves it undefined); a signed left shift goes through the unsigned type.
      const std::string bits = std::to_string(dtype_size(ot) * 8);
      const bool is_signed = !is_unsigned(ot);
      const std::string off = is_signed ? "($1) < 0 || ($1) >= " + bits : "($1) >= " + bits;
      if (c.attr_string("direction", "") == "LEFT")
        return cast(ot, text("(" + off + ") ? 0 : ($0) << ($1)", {cast(unsigned_of(ot), a(0)), cast(ot, a(1))}));
      return cast(ot, text("(" + off + ") ? " + (is_signed ? "(($0) < 0 ? -1 : 0)" : "0") + " : ($0) >> ($1)",
                           {a(0), cast(ot, a(1))}));
    }
    case OpKind::Where: return text("($0 ? $1 : $2)", {a(0), a(1), a(2)});
    case OpKind::PRelu: return cast(ot, text("$0 < 0 ? $0 * $1 : $0", {a(0), a(1)}));
    // The support library's quantize<T> / dequantize<float> (cg_support.h, and the OpenCL
    // prelude's twins): no zero point is a zero one.
    case OpKind::QuantizeLinear:
      return typed("quantize", ot, {a(0), a(1), na > 2 && n.inputs[2] != kNoValue ? a(2) : konst(0)});
    case OpKind::DequantizeLinear:
      return typed("dequantize", ot, {a(0), a(1), na > 2 && n.inputs[2] != kNoValue ? a(2) : konst(0)});
    default:
      break;
  }
  if (fl) {
    switch (n.op) {  // f64 (and f32 reached here through a non-f32 operand)
      case OpKind::Sqrt: return math("sqrt");
      case OpKind::Exp: return math("exp");
      case OpKind::Log: return math("log");
      case OpKind::Tanh: return math("tanh");
      case OpKind::Erf: return math("erf");
      case OpKind::Floor: return math("floor");
      case OpKind::Ceil: return math("ceil");
      case OpKind::Round: return math("rint");  // (not nearbyint: OpenCL C has only rint; both round half to even)
      case OpKind::Sin: return math("sin");
      case OpKind::Cos: return math("cos");
      case OpKind::Tan: return math("tan");
      case OpKind::Asin: return math("asin");
      case OpKind::Acos: return math("acos");
      case OpKind::Atan: return math("atan");
      case OpKind::Sinh: return math("sinh");
      case OpKind::Cosh: return math("cosh");
      case OpKind::Asinh: return math("asinh");
      case OpKind::Acosh: return math("acosh");
      case OpKind::Atanh: return math("atanh");
      case OpKind::Reciprocal: return cast(ot, text("1 / $0", {a(0)}));
      case OpKind::Sigmoid: return cast(ot, text("1 / (1 + $0)", {libm("exp", {text("-$0", {a(0)})})}));
      default:
        break;
    }
  }
  ok = false;
  return Ew{};
}

}  // namespace

Ew trilu_select(bool upper, DType t) {
  return cast(t, text(std::string("((($0) - ($1)) ") + (upper ? ">=" : "<=") + " ($2)) ? ($3) : 0",
                      {arg(0), arg(1), arg(2), arg(3)}));
}

Ew select_by_compare(OpKind cmp) {
  return call("v_select", {call(cmp == OpKind::Less ? "v_cmp_lt" : "v_cmp_gt", {arg(0), arg(1)}), arg(2), arg(3)});
}

Ew elementwise(const Graph& g, const Node& n, const std::vector<DType>& types, const std::vector<bool>& present,
               Mode mode) {
  const DType ot = g.value(n.outputs.at(0)).type.dtype;
  const DType it = types.empty() ? ot : types[0];
  bool ok = false;
  if (it == DType::F32 && ot == DType::F32) {
    Ew e = f32_form(g, n, types, present, ok);
    if (ok) return e;
  }
  // Where on f32 values with a lane-uniform bool condition (expr.cc evaluates it as a scalar).
  if (mode == Mode::Vector && n.op == OpKind::Where && ot == DType::F32 && types.size() == 3 &&
      types[1] == DType::F32 && types[2] == DType::F32)
    return text("($0 ? $1 : $2)", {arg(0), arg(1), arg(2)});
  if (mode == Mode::Vector) throw NeedScalar{std::string(op_info(n.op).name) + " on " + dtype_name(it)};
  Ew e = scalar_form(g, n, types, ok);
  if (ok) return e;
  throw UnsupportedOperatorError(std::string("code generation does not support ") + op_info(n.op).name +
                                 " on " + dtype_name(types.empty() ? ot : types.at(0)) + " (node '" + n.name +
                                 "'): Cast its inputs to float32 in the model");
}

}  // namespace dnnf::cg
