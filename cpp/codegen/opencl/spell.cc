// The OpenCL renderer's spellings; see spell.h.
#include "codegen/opencl/spell.h"

#include <cmath>
#include <cstdio>

#include "codegen/refuse.h"
#include "ir/errors.h"

namespace dnnf::cg::opencl {

const char* cltype(DType t, const Spelling& sp) {
  switch (t) {
    case DType::F32: return "float";
    case DType::F64: return sp.fp64 ? "double" : "float";
    case DType::I8: return "char";
    case DType::I16: return "short";
    case DType::I32: return "int";
    case DType::I64: return "long";
    case DType::U8: return "uchar";
    case DType::U16: return "ushort";
    case DType::U32: return "uint";
    case DType::U64: return "ulong";
    case DType::Bool: return "uchar";
    default: break;
  }
  refuse_dtype("the OpenCL target", t);
}

std::string literal(double v, DType t, const Spelling& sp) {
  if (t == DType::Bool) return v != 0 ? "1" : "0";
  if (is_float(t)) {
    const bool f = t == DType::F32 || !sp.fp64;
    if (std::isnan(v)) return std::signbit(v) ? (f ? "(-NAN)" : "(-(double)NAN)") : (f ? "NAN" : "((double)NAN)");
    if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + (f ? "INFINITY" : "((double)INFINITY)");
    char buf[64];
    if (f) {
      std::snprintf(buf, sizeof buf, "%.9gf", static_cast<double>(static_cast<float>(v)));
    } else {
      std::snprintf(buf, sizeof buf, "%.17g", v);
    }
    std::string s = buf;
    if (s.find_first_of(".eEn") == std::string::npos) s.insert(s.size() - (f ? 1 : 0), ".0");
    return s;
  }
  return std::string("((") + cltype(t, sp) + ")" + std::to_string(static_cast<int64_t>(v)) + "L)";
}

std::string index(const IExpr& e, const VarTable& vt) { return spell_index(render(e, vt), "lmin", "lmax"); }

namespace {

std::string join(const std::vector<std::string>& a) {
  std::string s;
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
  return s;
}

std::string spell(const Ew& e, const std::vector<std::string>& args, const Spelling& sp) {
  std::vector<std::string> k;
  for (const Ew& c : e.kids) k.push_back(spell(c, args, sp));
  switch (e.kind) {
    case Ew::Kind::Arg: return args.at(static_cast<size_t>(e.arg));
    case Ew::Kind::Call: return e.name + "(" + join(k) + ")";  // the support library's v_*
    case Ew::Kind::Param:
    case Ew::Kind::Const: return literal(e.value, DType::F32, sp);
    case Ew::Kind::Lanes:
      if (e.name == "fmod_py") {  // fmod, then the divisor's sign (Python), in the operands' type
        const std::string r = "fmod(" + k[0] + ", " + k[1] + ")";
        return "(" + r + " != 0 && ((" + r + " < 0) != ((" + k[1] + ") < 0)) ? " + r + " + (" + k[1] + ") : " + r + ")";
      }
      return e.name + "(" + join(k) + ")";
    case Ew::Kind::Cast:
      if (e.type == DType::Bool) return "((uchar)((" + k[0] + ") != 0))";
      return "((" + std::string(cltype(e.type, sp)) + ")(" + k[0] + "))";
    case Ew::Kind::Text: return fill_text(e.name, k);
    case Ew::Kind::Typed: return e.name + "_" + cltype(e.type, sp) + "(" + join(k) + ")";
    case Ew::Kind::Libm: return e.name + "(" + join(k) + ")";
  }
  throw InternalError("codegen: an elementwise tree of unknown kind");
}

std::string conds_text(const std::vector<IndexCmp>& cs, const VarTable& vt) {
  std::string s;
  for (const IndexCmp& c : cs) {
    s += s.empty() ? "" : " && ";
    s += "(" + index(c.a, vt) + ")";
    if (c.diff) s += " - (" + index(c.b, vt) + ")";
    s += " " + c.op + " " + std::to_string(c.rhs) + "L";
  }
  return s;
}

std::string expr_of(const Program& p, Ref r, const Spelling& sp);

std::string compute_text(const Program& p, const Instr& i, const Spelling& sp) {
  std::vector<std::string> args;
  for (Ref a : i.args) args.push_back(expr_of(p, a, sp));
  return spell(i.ew, args, sp);
}

std::string value_type(const Instr& i, const Spelling& sp) {
  return i.mode == Mode::Vector ? "float" : cltype(i.dtype, sp);
}

std::string expr_of(const Program& p, Ref r, const Spelling& sp) {
  if (r == kNoRef) return "";
  const Instr& i = p.code.at(static_cast<size_t>(r));
  if (!i.inline_) return i.name;
  switch (i.kind) {
    case Instr::Kind::Literal:
      return i.mode == Mode::Vector ? literal(i.what == "zero" ? 0.0 : i.number, DType::F32, sp)
                                    : literal(i.number, i.dtype, sp);
    case Instr::Kind::Compute: return compute_text(p, i, sp);
    case Instr::Kind::Range: {
      const std::string t = cltype(i.dtype, sp), x = index(i.index, p.vars);
      if (i.range_float)
        return "((" + t + ")(" + literal(i.range_start, DType::F64, sp) + " + (" + cltype(DType::F64, sp) + ")(" +
               x + ") * " + literal(i.range_delta, DType::F64, sp) + "))";
      return "((" + t + ")(" + std::to_string(static_cast<int64_t>(i.range_start)) + "L + (" + x + ") * " +
             std::to_string(static_cast<int64_t>(i.range_delta)) + "L))";
    }
    default: break;
  }
  throw InternalError("codegen: an instruction spelled in place that has no expression");
}

}  // namespace

void render_program(const Program& p, const Spelling& sp, Code& out) {
  for (const Instr& i : p.code) {
    switch (i.kind) {
      case Instr::Kind::Load:
        out.line("const " + value_type(i, sp) + " " + i.name + " = p" + std::to_string(i.value) + "[" +
                 index(i.index, p.vars) + "];");
        break;
      case Instr::Kind::Compute:
        if (!i.inline_) out.line("const " + value_type(i, sp) + " " + i.name + " = " + compute_text(p, i, sp) + ";");
        break;
      case Instr::Kind::Literal:
      case Instr::Kind::Range: break;
      case Instr::Kind::WrapIndex:
        out.line("const long " + i.name + " = wrap_index((long)(" + expr_of(p, i.args[0], sp) + "), " +
                 std::to_string(i.extent) + "L, dnnf_err);");
        break;
      case Instr::Kind::IfBegin:
        out.line(value_type(i, sp) + " " + i.name + ";");
        out.open("if (" + conds_text(i.conds, p.vars) + ")");
        break;
      case Instr::Kind::Assign: out.line(i.target + " = " + expr_of(p, i.args[0], sp) + ";"); break;
      case Instr::Kind::Else:
        out.close("} else {");
        ++out.indent;
        break;
      case Instr::Kind::IfEnd: out.close(); break;
      case Instr::Kind::Store:
        out.line("p" + std::to_string(i.value) + "[" + index(i.index, p.vars) + "] = " + expr_of(p, i.args[0], sp) +
                 ";");
        break;
      case Instr::Kind::Acc:
        if (i.acc_op.empty()) {
          out.line("v = " + expr_of(p, i.args[0], sp) + ";");
        } else {
          out.line(std::string("v = v ") + (i.acc_op == "mul" ? "*" : "+") + " " + expr_of(p, i.args[0], sp) + ";");
        }
        break;
      case Instr::Kind::Define: out.line("const float " + i.name + " = v;"); break;
    }
  }
}

std::string support_library(const Spelling& sp) {
  std::string s;
  if (sp.fp64) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  s += R"CL(
// No a * b + c contracted into an FMA: the CPU target's -ffp-contract=off, the same rounding.
#pragma OPENCL FP_CONTRACT OFF
// dnnfusion's OpenCL support library: the SIMD vocabulary's scalar twins (the same formulas
// as the CPU prelude's, NaN passing through max/min as there), integer helpers, wrap_index.
inline long lmin(long a, long b) { return a < b ? a : b; }
inline long lmax(long a, long b) { return a > b ? a : b; }
inline long wrap_index(long i, long n, __global int* err) {
  if (i < 0) i += n;
  if (i < 0 || i >= n) { *err = 1; return 0; }
  return i;
}
inline float v_add(float a, float b) { return a + b; }
inline float v_sub(float a, float b) { return a - b; }
inline float v_mul(float a, float b) { return a * b; }
inline float v_div(float a, float b) { return a / b; }
inline float v_neg(float a) { return -a; }
inline float v_abs(float a) { return fabs(a); }
inline float v_max(float a, float b) { return a > b ? a : b; }
inline float v_min(float a, float b) { return a < b ? a : b; }
inline float v_sqrt(float a) { return sqrt(a); }
inline float v_rcp(float a) { return 1.0f / a; }
inline float v_floor(float a) { return floor(a); }
inline float v_ceil(float a) { return ceil(a); }
inline float v_round(float a) { return rint(a); }
inline float v_exp(float a) { return exp(a); }
inline float v_log(float a) { return log(a); }
inline float v_tanh(float a) { return tanh(a); }
inline float v_erf(float a) { return erf(a); }
inline float v_sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }
inline float v_cmp_gt(float a, float b) { return a > b ? 1.0f : 0.0f; }
inline float v_cmp_lt(float a, float b) { return a < b ? 1.0f : 0.0f; }
inline float v_select(float m, float a, float b) { return m != 0.0f ? a : b; }
inline float v_pow(float a, float b) { return pow(a, b); }
inline float v_relu(float x) { return v_max(0.0f, x); }
inline float v_leaky_relu(float x, float alpha) { return x < 0.0f ? x * alpha : x; }
inline float v_elu(float x, float alpha) { return x < 0.0f ? alpha * expm1(x) : x; }
inline float v_hard_sigmoid(float x, float alpha, float beta) { return v_max(0.0f, v_min(1.0f, x * alpha + beta)); }
inline float v_hard_swish(float x) { return x * v_hard_sigmoid(x, 1.0f / 6.0f, 0.5f); }
inline float v_softplus(float x) { return v_max(0.0f, x) + log1p(exp(-fabs(x))); }
inline float v_mish(float x) {
  const float u = exp(v_min(20.0f, x)), n = u * (u + 2.0f);
  return x > 20.0f ? x : x * (n / (n + 2.0f));
}
inline float v_gelu_erf(float x) { return x * 0.5f * erfc(x * -0.707106781186547524f); }
inline float v_gelu_tanh(float x) { return x * v_sigmoid(x * (x * x * (2.0f * 0.7978845608028654f * 0.044715f) + 2.0f * 0.7978845608028654f)); }
)CL";
  // Typed helpers per element type: min/max (as std::min/max: NaN-free operands), and for
  // integers Div (toward zero, x / 0 = 0), Mod (Python and C forms) and integer Pow.
  std::vector<DType> ints{DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32, DType::U64};
  std::vector<DType> all = ints;
  all.push_back(DType::F32);
  if (sp.fp64) all.push_back(DType::F64);
  for (DType t : all) {
    const std::string T = cltype(t, sp);
    s += "inline " + T + " min_" + T + "(" + T + " a, " + T + " b) { return b < a ? b : a; }\n";
    s += "inline " + T + " max_" + T + "(" + T + " a, " + T + " b) { return a < b ? b : a; }\n";
    s += "#define bit_cast_" + T + "(x) as_" + T + "(x)\n";  // BitCast
  }
  for (DType t : ints) {
    const std::string T = cltype(t, sp);
    s += "inline " + T + " idiv_" + T + "(" + T + " a, " + T + " b) { return b == 0 ? (" + T + ")0 : (" + T + ")(a / b); }\n";
    s += "inline " + T + " ifmod_" + T + "(" + T + " a, " + T + " b) { return b == 0 ? (" + T + ")0 : (" + T + ")(a % b); }\n";
    s += "inline " + T + " imod_" + T + "(" + T + " a, " + T + " b) { if (b == 0) return 0; " + T +
         " r = (" + T + ")(a % b); if (r != 0 && ((r < 0) != (b < 0))) r = (" + T + ")(r + b); return r; }\n";
    s += "inline " + T + " ipow_" + T + "(" + T + " a, " + T + " b) { " + T + " r = 1; for (; b > 0; --b) r = (" + T +
         ")(r * a); return r; }\n";
  }
  // QuantizeLinear / DequantizeLinear (cg_support.h's quantize / dequantize). With fp64 the
  // quotient is computed in double and rounded once to float: that is the correctly rounded
  // float quotient (53 >= 2 * 24 + 2), which OpenCL's float division need not be (2.5 ulp).
  const std::string quot = sp.fp64 ? "(float)((double)x / (double)s)" : "x / s";
  for (DType t : {DType::I8, DType::U8, DType::I16, DType::U16}) {
    const std::string T = cltype(t, sp);
    const bool sgn = t == DType::I8 || t == DType::I16;
    const int bits = t == DType::I8 || t == DType::U8 ? 8 : 16;
    const std::string lo = sgn ? std::to_string(-(1 << (bits - 1))) : "0";
    const std::string hi = std::to_string(sgn ? (1 << (bits - 1)) - 1 : (1 << bits) - 1);
    s += "inline " + T + " quantize_" + T + "(float x, float s, float zp) { float r = rint(" + quot + ") + zp; r = r > " +
         lo + ".0f ? r : " + lo + ".0f; r = r < " + hi + ".0f ? r : " + hi + ".0f; return (" + T + ")r; }\n";
  }
  s += "inline float dequantize_float(long x, float s, long zp) { return (float)(x - zp) * s; }\n";
  return s;
}

}  // namespace dnnf::cg::opencl
