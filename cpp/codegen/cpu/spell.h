// The CPU renderer's spellings (paper §4.4 code generation for CPUs): C++ types and literals,
// index expressions, elementwise trees and programs over the SIMD vocabulary of the prelude
// (`V::` = dnnf::simd in the module's dialect, `S::` its scalar twin, `cg::` the support
// library of cg_support.h).
#pragma once
#include <string>
#include <vector>

#include "codegen/code.h"
#include "codegen/kernel.h"

namespace dnnf::cg::cpu {

const char* ctype(DType t);              // "float", "int64_t", "bool", ...
std::string literal(double v, DType t);  // a typed C++ literal ("0.5f", "INFINITY", ...)
std::string L(int64_t v);                // "12L"
// An index expression as a `long` C++ expression.
std::string index(const IExpr& e, const VarTable& vt);
// The C++ type of a value of `t` in `m`.
std::string vtype(DType t, Mode m);

// A program's statements, appended to `out` at its indentation; buffers of values in memory
// are named p<value id>.
void render_program(const Program& p, Code& out);
// The C++ expression of instruction `r` of `p`: its name, or its text where it is spelled in
// place.
std::string expr_of(const Program& p, Ref r);
// The C++ expression of Compute instruction `i` of `p`.
std::string compute_text(const Program& p, const Instr& i);
// The name of the buffer of value `v` inside a kernel.
std::string ptr(ValueId v);

}  // namespace dnnf::cg::cpu
