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
// Whether `p` is straight-line vector code over its inner var (contiguous or broadcast loads
// and contiguous stores at affine indices, computes, literals, ranges), so that several
// vectors' copies of it can be interleaved instruction by instruction.
bool interleavable(const Program& p);
// `copies` copies of interleavable `p` for the vectors at j, j + W, ..., instruction by
// instruction: the copies' chains of dependent calls are then in flight together.
void render_interleaved(const Program& p, int copies, Code& out);
// The Compute instructions of `p` that call a costly function (exp, tanh, erf, a division...).
int heavy_calls(const Program& p);
// The C++ expression of instruction `r` of `p`: its name, or its text where it is spelled in
// place.
std::string expr_of(const Program& p, Ref r);
// The C++ expression of Compute instruction `i` of `p`.
std::string compute_text(const Program& p, const Instr& i);
// The name of the buffer of value `v` inside a kernel.
std::string ptr(ValueId v);

}  // namespace dnnf::cg::cpu
