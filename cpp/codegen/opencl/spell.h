// The OpenCL renderer's spellings (paper §4.4, the mobile-GPU target): OpenCL C types,
// literals, index expressions, elementwise trees and programs, one element per work-item.
// A program planned on vectors is spelled per element: a lane is the work-item whose inner
// variable is that lane's index, so every load and store is one element at its index.
#pragma once
#include <string>

#include "codegen/code.h"
#include "codegen/kernel.h"

namespace dnnf::cg::opencl {

struct Spelling {
  bool fp64 = false;  // the device has cl_khr_fp64 (else double arithmetic runs in float)
};

const char* cltype(DType t, const Spelling& sp);  // "float", "long", "uchar" (bool), ...
std::string literal(double v, DType t, const Spelling& sp);
std::string index(const IExpr& e, const VarTable& vt);
// A program's statements; buffers are named p<value id>; `v` is an epilogue's accumulator.
void render_program(const Program& p, const Spelling& sp, Code& out);
// The support functions every program may call (the SIMD vocabulary's scalar twins, integer
// helpers, wrap_index), as OpenCL C.
std::string support_library(const Spelling& sp);

}  // namespace dnnf::cg::opencl
