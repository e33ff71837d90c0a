// The CPU renderer's spellings of types, literals, indices, elementwise trees and programs;
// see spell.h.
#include "codegen/cpu/spell.h"

#include <cmath>
#include <cstdio>

#include "codegen/refuse.h"
#include "ir/errors.h"

namespace dnnf::cg::cpu {

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
  refuse_dtype("code generation", t);
}

std::string literal(double v, DType t) {
  if (t == DType::Bool) return v != 0 ? "true" : "false";
  if (is_float(t)) {
    if (std::isnan(v))  // with its sign (a float8 e4m3fn overflow is -NaN below the range)
      return std::signbit(v) ? (t == DType::F32 ? "(-NAN)" : "(-double(NAN))") : (t == DType::F32 ? "NAN" : "double(NAN)");
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

std::string L(int64_t v) { return std::to_string(v) + "L"; }

std::string index(const IExpr& e, const VarTable& vt) {
  return spell_index(render(e, vt), "std::min<long>", "std::max<long>");
}

std::string vtype(DType t, Mode m) { return m == Mode::Vector ? "V::vf" : ctype(t); }

std::string ptr(ValueId v) { return "p" + std::to_string(v); }

namespace {

std::string join(const std::vector<std::string>& a) {
  std::string s;
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
  return s;
}

std::string spell(const Ew& e, const std::vector<std::string>& args, Mode m) {
  std::vector<std::string> k;
  for (const Ew& c : e.kids) k.push_back(spell(c, args, m));
  const bool vec = m == Mode::Vector;
  switch (e.kind) {
    case Ew::Kind::Arg: return args.at(static_cast<size_t>(e.arg));
    case Ew::Kind::Call: return (vec ? "V::" : "S::") + e.name + "(" + join(k) + ")";
    case Ew::Kind::Param: return literal(e.value, DType::F32);
    case Ew::Kind::Const: return vec ? "V::v_set1(" + literal(e.value, DType::F32) + ")" : literal(e.value, DType::F32);
    case Ew::Kind::Lanes: {
      const std::string fn = e.name == "fmod_py" ? "cg::fmod_py" : "std::" + e.name;
      if (!vec) return fn + "(" + join(k) + ")";
      if (k.size() == 1) return "cg::map1(" + k[0] + ", [](float x) { return " + fn + "(x); })";
      return "cg::map2(" + k[0] + ", " + k[1] + ", [](float x, float y) { return " + fn + "(x, y); })";
    }
    case Ew::Kind::Cast: return "static_cast<" + std::string(ctype(e.type)) + ">(" + k[0] + ")";
    case Ew::Kind::Text: return fill_text(e.name, k);
    case Ew::Kind::Typed: {
      const std::string ns = e.name == "max" || e.name == "min" ? "std::" : "cg::";
      return ns + e.name + "<" + ctype(e.type) + ">(" + join(k) + ")";
    }
    case Ew::Kind::Libm: return "std::" + e.name + "(" + join(k) + ")";
  }
  throw InternalError("codegen: an elementwise tree of unknown kind");
}

std::string load_text(const Instr& i, const VarTable& vt) {
  const std::string off = index(i.index, vt), p = ptr(i.value);
  if (i.mode == Mode::Scalar) return p + "[" + off + "]";
  switch (i.stride) {
    case Stride::Contiguous: return "cg::ld(" + p + " + (" + off + "), n)";
    case Stride::Broadcast: return "V::v_set1(" + p + "[" + off + "])";
    case Stride::Gather: break;
  }
  return "cg::gather(j, n, [&](long j) { return " + p + "[" + off + "]; })";
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

}  // namespace

std::string compute_text(const Program& p, const Instr& i) {
  std::vector<std::string> args;
  for (Ref a : i.args) args.push_back(expr_of(p, a));
  return spell(i.ew, args, i.mode);
}

std::string expr_of(const Program& p, Ref r) {
  if (r == kNoRef) return "";
  const Instr& i = p.code.at(static_cast<size_t>(r));
  if (!i.inline_) return i.name;
  switch (i.kind) {
    case Instr::Kind::Literal: {
      if (i.mode == Mode::Vector) return i.what == "zero" ? "V::v_zero()" : "V::v_set1(" + literal(i.number, i.dtype) + ")";
      return literal(i.number, i.dtype);
    }
    case Instr::Kind::Compute:
      return compute_text(p, i);
    case Instr::Kind::Range: {
      const std::string t = ctype(i.dtype), x = index(i.index, p.vars);
      if (i.range_float)
        return "static_cast<" + t + ">(" + literal(i.range_start, DType::F64) + " + static_cast<double>(" + x +
               ") * " + literal(i.range_delta, DType::F64) + ")";
      return "static_cast<" + t + ">(" + std::to_string(static_cast<int64_t>(i.range_start)) + "LL + (" + x +
             ") * " + std::to_string(static_cast<int64_t>(i.range_delta)) + "LL)";
    }
    default:
      break;
  }
  throw InternalError("codegen: an instruction spelled in place that has no expression");
}

namespace {

// One instruction of `p` (most are one line; IfBegin, Else and IfEnd open and close blocks).
void render_instr(const Program& p, const Instr& i, Code& out) {
  switch (i.kind) {
    case Instr::Kind::Load:
      out.line("const " + vtype(i.dtype, i.mode) + " " + i.name + " = " + load_text(i, p.vars) + ";");
      break;
    case Instr::Kind::Compute:
      if (i.inline_) break;
      out.line("const " + vtype(i.dtype, i.mode) + " " + i.name + " = " + compute_text(p, i) + ";");
      break;
    case Instr::Kind::Literal:
    case Instr::Kind::Range:
      break;
    case Instr::Kind::WrapIndex:
      out.line("const long " + i.name + " = cg::wrap_index(static_cast<long>(" + expr_of(p, i.args[0]) + "), " +
               L(i.extent) + ", \"" + i.what + "\");");
      break;
    case Instr::Kind::IfBegin:
      out.line(vtype(i.dtype, i.mode) + " " + i.name + ";");
      out.open("if (" + conds_text(i.conds, p.vars) + ")");
      break;
    case Instr::Kind::Assign:
      out.line(i.target + " = " + expr_of(p, i.args[0]) + ";");
      break;
    case Instr::Kind::Else:
      out.close("} else {");
      ++out.indent;
      break;
    case Instr::Kind::IfEnd:
      out.close();
      break;
    case Instr::Kind::Store: {
      const std::string off = index(i.index, p.vars), v = expr_of(p, i.args[0]), q = ptr(i.value);
      if (i.mode == Mode::Scalar) {
        out.line(q + "[" + off + "] = " + v + ";");
      } else if (i.stride == Stride::Contiguous) {
        out.line("cg::st(" + q + " + (" + off + "), " + v + ", n);");
      } else {
        out.line("cg::scatter(j, n, " + v + ", [&](long j, float e) { " + q + "[" + off + "] = e; });");
      }
      break;
    }
    case Instr::Kind::Acc:
      if (i.acc_op.empty()) {
        out.line("v = " + expr_of(p, i.args[0]) + ";");
      } else {
        out.line("v = V::v_" + i.acc_op + "(v, " + expr_of(p, i.args[0]) + ");");
      }
      break;
    case Instr::Kind::Define:
      out.line("const V::vf " + i.name + " = v;");
      break;
  }
}

// Whether an elementwise tree calls a function that costs tens of cycles a vector (a
// polynomial or a division), or runs libm lane by lane.
bool heavy(const Ew& e) {
  static const char* const kHeavy[] = {"v_exp", "v_log", "v_tanh",  "v_sigmoid",  "v_erf",      "v_pow",        "v_div",
                                       "v_rcp", "v_sqrt", "v_elu", "v_softplus", "v_mish", "v_gelu_erf", "v_gelu_tanh"};
  if (e.kind == Ew::Kind::Lanes || e.kind == Ew::Kind::Libm) return true;
  if (e.kind == Ew::Kind::Call)
    for (const char* h : kHeavy)
      if (e.name == h) return true;
  for (const Ew& k : e.kids)
    if (heavy(k)) return true;
  return false;
}

// An index that names the inner var only through the term algebra (an opaque part spells
// the var's name into its own text, which renaming the var cannot reach).
bool renamable(const IExpr& e, int inner) {
  if (e.affine()) return true;
  for (int v : e.opaque_vars)
    if (v == inner) return false;
  return true;
}

}  // namespace

void render_program(const Program& p, Code& out) {
  for (const Instr& i : p.code) render_instr(p, i, out);
}

int heavy_calls(const Program& p) {
  int n = 0;
  for (const Instr& i : p.code)
    if (i.kind == Instr::Kind::Compute && heavy(i.ew)) ++n;
  return n;
}

bool interleavable(const Program& p) {
  if (p.mode != Mode::Vector || p.inner < 0) return false;
  for (const Instr& i : p.code) {
    switch (i.kind) {
      case Instr::Kind::Load:
        if (i.stride == Stride::Gather || !renamable(i.index, p.inner)) return false;
        break;
      case Instr::Kind::Store:
        if (i.stride != Stride::Contiguous || !renamable(i.index, p.inner)) return false;
        break;
      case Instr::Kind::Range:
        if (!renamable(i.index, p.inner)) return false;
        break;
      case Instr::Kind::Compute:
      case Instr::Kind::Literal:
        break;
      default:
        return false;  // conditions, wrapped indices, accumulators: not straight-line values
    }
  }
  return true;
}

void render_interleaved(const Program& p, int copies, Code& out) {
  if (!interleavable(p)) throw InternalError("codegen: interleaving a program that is not straight-line");
  // Copy u: every bound name gets the suffix _u and the inner var j reads (j + u * cg::W).
  std::vector<Program> cs(static_cast<size_t>(copies), p);
  for (int u = 1; u < copies; ++u) {
    Program& c = cs[static_cast<size_t>(u)];
    VarTable vt;
    for (int k = 0; k < p.vars.size(); ++k)
      vt.add(k == p.inner ? "(" + p.vars[k].name + " + " + std::to_string(u) + " * cg::W)" : p.vars[k].name,
             p.vars[k].range);
    c.vars = vt;
    for (Instr& i : c.code)
      if (!i.name.empty()) i.name += "_" + std::to_string(u);
  }
  for (size_t k = 0; k < p.code.size(); ++k)
    for (const Program& c : cs) render_instr(c, c.code[k], out);
}

}  // namespace dnnf::cg::cpu
