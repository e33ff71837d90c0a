// The codegen expression of every One-to-One operator (paper §4.4: One-to-One chains are
// computed in registers). f32 uses the SIMD vocabulary, as `V::` (vectors) or its scalar twin
// `S::`, so a value is bit-identical whichever way it was computed; other element types use
// plain C++ with ONNX semantics (cg_support.h for integer Div/Mod/Pow).
#include <cmath>

#include "codegen/pointwise.h"
#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

namespace {

std::string call(const std::string& f, const std::vector<std::string>& a) {
  std::string s = f + "(";
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
  return s + ")";
}

// A constant scalar operand's value (for Pow's exponent), or NaN.
double const_scalar(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (!val.constant || val.constant->type.numel() != 1) return std::nan("");
  return val.constant->to_doubles().at(0);
}

}  // namespace

std::string elementwise_expr(const Graph& g, const Node& n, const std::vector<std::string>& a,
                             const std::vector<DType>& types, Mode mode) {
  const DType ot = g.value(n.outputs.at(0)).type.dtype;
  const DType it = types.empty() ? ot : types[0];
  InferCtx c(g, n);
  const bool vec = mode == Mode::Vector;
  const std::string T = ctype(ot);
  auto cast = [&](const std::string& e) { return "static_cast<" + T + ">(" + e + ")"; };
  auto flt = [&](double v) { return literal(v, DType::F32); };

  if (it == DType::F32 && ot == DType::F32) {
    const std::string ns = vec ? "V::" : "S::";
    auto f = [&](const char* name, std::vector<std::string> args) { return call(ns + name, args); };
    auto k = [&](double v) { return vec ? "V::v_set1(" + flt(v) + ")" : flt(v); };
    auto lanes = [&](const char* fn) {  // functions outside the vocabulary
      return vec ? "cg::map1(" + a[0] + ", [](float x) { return " + fn + "(x); })"
                 : std::string(fn) + "(" + a[0] + ")";
    };
    switch (n.op) {
      case OpKind::Relu: return f("v_relu", {a[0]});
      case OpKind::LeakyRelu: return f("v_leaky_relu", {a[0], flt(c.attr_float("alpha", 0.01))});
      case OpKind::Elu: return f("v_elu", {a[0], flt(c.attr_float("alpha", 1.0))});
      case OpKind::Selu:
        return f("v_mul", {k(c.attr_float("gamma", 1.05070102214813232421875)),
                           f("v_elu", {a[0], flt(c.attr_float("alpha", 1.67326319217681884765625))})});
      case OpKind::Sigmoid: return f("v_sigmoid", {a[0]});
      case OpKind::HardSigmoid:
        return f("v_hard_sigmoid", {a[0], flt(c.attr_float("alpha", 0.2)), flt(c.attr_float("beta", 0.5))});
      case OpKind::HardSwish: return f("v_hard_swish", {a[0]});
      case OpKind::Tanh: return f("v_tanh", {a[0]});
      case OpKind::Softplus: return f("v_softplus", {a[0]});
      case OpKind::Softsign: return f("v_div", {a[0], f("v_add", {k(1), f("v_abs", {a[0]})})});
      case OpKind::Mish: return f("v_mish", {a[0]});
      case OpKind::Gelu:
        return f(c.attr_string("approximate", "none") == "tanh" ? "v_gelu_tanh" : "v_gelu_erf", {a[0]});
      case OpKind::Erf: return f("v_erf", {a[0]});
      case OpKind::Sqrt: return f("v_sqrt", {a[0]});
      case OpKind::Reciprocal: return f("v_rcp", {a[0]});
      case OpKind::Exp: return f("v_exp", {a[0]});
      case OpKind::Log: return f("v_log", {a[0]});
      case OpKind::Neg: return f("v_neg", {a[0]});
      case OpKind::Abs: return f("v_abs", {a[0]});
      case OpKind::Floor: return f("v_floor", {a[0]});
      case OpKind::Ceil: return f("v_ceil", {a[0]});
      case OpKind::Round: return f("v_round", {a[0]});
      case OpKind::Sign:
        return f("v_select", {f("v_cmp_gt", {a[0], k(0)}), k(1),
                              f("v_select", {f("v_cmp_lt", {a[0], k(0)}), k(-1), k(0)})});
      case OpKind::Sin: return lanes("std::sin");
      case OpKind::Cos: return lanes("std::cos");
      case OpKind::Identity:
      case OpKind::Dropout:
      case OpKind::Cast:
        return a[0];
      case OpKind::Clip: {
        std::string y = a[0];
        if (a.size() > 1 && !a[1].empty()) y = f("v_max", {a[1], y});
        if (a.size() > 2 && !a[2].empty()) y = f("v_min", {a[2], y});
        return y;
      }
      case OpKind::Add: return f("v_add", {a[0], a[1]});
      case OpKind::Sub: return f("v_sub", {a[0], a[1]});
      case OpKind::Mul: return f("v_mul", {a[0], a[1]});
      case OpKind::Div: return f("v_div", {a[0], a[1]});
      case OpKind::Pow: {
        double e = const_scalar(g, n.inputs[1]);
        if (e == 1.0) return a[0];
        if (e == 2.0) return f("v_mul", {a[0], a[0]});
        if (e == 3.0) return f("v_mul", {f("v_mul", {a[0], a[0]}), a[0]});
        if (e == 0.5) return f("v_sqrt", {a[0]});
        if (types[1] != DType::F32) return "";
        return f("v_pow", {a[0], a[1]});
      }
      case OpKind::Mod:
        if (c.attr_int("fmod", 0))
          return vec ? "cg::map2(" + a[0] + ", " + a[1] + ", [](float x, float y) { return std::fmod(x, y); })"
                     : "std::fmod(" + a[0] + ", " + a[1] + ")";
        return vec ? "cg::map2(" + a[0] + ", " + a[1] + ", [](float x, float y) { return cg::fmod_py(x, y); })"
                   : "cg::fmod_py(" + a[0] + ", " + a[1] + ")";
      case OpKind::PRelu:
        return f("v_select", {f("v_cmp_lt", {a[0], k(0)}), f("v_mul", {a[0], a[1]}), a[0]});
      case OpKind::Max:
      case OpKind::Min:
      case OpKind::Sum:
      case OpKind::Mean: {
        const char* fn = n.op == OpKind::Max ? "v_max" : n.op == OpKind::Min ? "v_min" : "v_add";
        std::string y = a[0];
        for (size_t i = 1; i < a.size(); ++i) y = f(fn, {a[i], y});
        if (n.op == OpKind::Mean) y = f("v_div", {y, k(static_cast<double>(a.size()))});
        return y;
      }
      case OpKind::BatchNormalization: {
        double eps = c.attr_float("epsilon", 1e-5);
        std::string xn = f("v_div", {f("v_sub", {a[0], a[3]}), f("v_sqrt", {f("v_add", {a[4], k(eps)})})});
        return f("v_add", {f("v_mul", {xn, a[1]}), a[2]});
      }
      default:
        break;
    }
  }
  if (vec) throw NeedScalar{std::string(op_info(n.op).name) + " on " + dtype_name(it)};

  // Scalar code for every element type.
  const bool fl = is_float(it);
  auto math = [&](const char* fn) { return cast(std::string("std::") + fn + "(" + a[0] + ")"); };
  switch (n.op) {
    case OpKind::Identity:
    case OpKind::Dropout:
      return a[0];
    case OpKind::Cast:
      if (ot == DType::Bool) return "(" + a[0] + " != 0)";
      if (is_integer(ot) && fl) return cast("std::trunc(" + a[0] + ")");
      return cast(a[0]);
    case OpKind::Not: return "!" + a[0];
    case OpKind::Relu: return cast(a[0] + " > 0 ? " + a[0] + " : 0");
    case OpKind::Neg: return cast("-" + a[0]);
    case OpKind::Abs: return cast(a[0] + " < 0 ? -" + a[0] + " : " + a[0]);
    case OpKind::Sign: return cast("(" + a[0] + " > 0) - (" + a[0] + " < 0)");
    case OpKind::Add: return cast(a[0] + " + " + a[1]);
    case OpKind::Sub: return cast(a[0] + " - " + a[1]);
    case OpKind::Mul: return cast(a[0] + " * " + a[1]);
    case OpKind::Div:
      return fl ? cast(a[0] + " / " + a[1]) : "cg::idiv<" + T + ">(" + a[0] + ", " + cast(a[1]) + ")";
    case OpKind::Mod:
      if (fl) return cast((c.attr_int("fmod", 0) ? "std::fmod(" : "cg::fmod_py(") + a[0] + ", " + a[1] + ")");
      return (c.attr_int("fmod", 0) ? "cg::ifmod<" : "cg::imod<") + T + ">(" + a[0] + ", " + cast(a[1]) + ")";
    case OpKind::Pow:
      if (!fl && !is_float(types[1])) return "cg::ipow<" + T + ">(" + a[0] + ", " + cast(a[1]) + ")";
      return cast("std::pow(static_cast<double>(" + a[0] + "), static_cast<double>(" + a[1] + "))");
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::Sum:
    case OpKind::Mean: {
      std::string y = a[0];
      for (size_t i = 1; i < a.size(); ++i) {
        if (n.op == OpKind::Max) y = "std::max<" + T + ">(" + y + ", " + a[i] + ")";
        else if (n.op == OpKind::Min) y = "std::min<" + T + ">(" + y + ", " + a[i] + ")";
        else y = cast(y + " + " + a[i]);
      }
      if (n.op == OpKind::Mean) y = cast(y + " / " + std::to_string(a.size()));
      return y;
    }
    case OpKind::Clip: {
      std::string y = a[0];
      if (a.size() > 1 && !a[1].empty()) y = "std::max<" + T + ">(" + y + ", " + a[1] + ")";
      if (a.size() > 2 && !a[2].empty()) y = "std::min<" + T + ">(" + y + ", " + a[2] + ")";
      return y;
    }
    case OpKind::Equal: return "(" + a[0] + " == " + a[1] + ")";
    case OpKind::Less: return "(" + a[0] + " < " + a[1] + ")";
    case OpKind::LessOrEqual: return "(" + a[0] + " <= " + a[1] + ")";
    case OpKind::Greater: return "(" + a[0] + " > " + a[1] + ")";
    case OpKind::GreaterOrEqual: return "(" + a[0] + " >= " + a[1] + ")";
    case OpKind::And: return "(" + a[0] + " && " + a[1] + ")";
    case OpKind::Or: return "(" + a[0] + " || " + a[1] + ")";
    case OpKind::Xor: return "(" + a[0] + " != " + a[1] + ")";
    case OpKind::Where: return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
    case OpKind::PRelu: return cast(a[0] + " < 0 ? " + a[0] + " * " + a[1] + " : " + a[0]);
    default:
      break;
  }
  if (!fl) return "";
  switch (n.op) {  // f64 (and f32 reached here through a non-f32 operand)
    case OpKind::Sqrt: return math("sqrt");
    case OpKind::Exp: return math("exp");
    case OpKind::Log: return math("log");
    case OpKind::Tanh: return math("tanh");
    case OpKind::Erf: return math("erf");
    case OpKind::Floor: return math("floor");
    case OpKind::Ceil: return math("ceil");
    case OpKind::Round: return math("nearbyint");
    case OpKind::Sin: return math("sin");
    case OpKind::Cos: return math("cos");
    case OpKind::Reciprocal: return cast("1 / " + a[0]);
    case OpKind::Sigmoid: return cast("1 / (1 + std::exp(-" + a[0] + "))");
    default:
      return "";
  }
}

}  // namespace dnnf::cg
