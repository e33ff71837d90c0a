// The kernel plan (paper §4.4): what lowering decides for a fused block, as data that a
// renderer per target spells (kernels_cpu.cc: C++ over the SIMD vocabulary; kernels_opencl.cc:
// OpenCL C). Lowering chooses what is materialised, the stages, the composed index maps and
// the fused expressions; a renderer only spells them. Nothing here is text of a target
// language: identifiers (t3, g4, a0, p12) are made by the generator, never from model strings.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/index.h"
#include "ir/graph.h"

namespace dnnf::cg {

// How a program computes: whole vectors along its inner loop variable (the target's vector
// width, `n` live lanes), or one element at a time.
enum class Mode : uint8_t { Vector, Scalar };

// ---- Elementwise expressions -------------------------------------------------------------
// The arithmetic of one One-to-One operator over its operands (elementwise.cc builds them
// from one table; every renderer spells the same trees).
struct Ew {
  enum class Kind : uint8_t {
    Arg,     // operand `arg`
    Call,    // `name(kids...)`: a function of the SIMD vocabulary (v_relu, v_add, ...), typed
             // f32 (a vector in vector mode, a float in scalar mode)
    Param,   // `value` as an f32 scalar literal (an attribute passed to a vocabulary function)
    Const,   // `value` as an f32 constant in the program's mode (a broadcast vector)
    Lanes,   // the f32 libm function `name` (sin, cos, fmod, fmod_py) lane by lane
    Cast,    // kids[0] converted to `type`
    Text,    // C arithmetic on scalars: `name` with $0, $1, ... for kids (valid C and OpenCL C)
    Typed,   // `name<type>(kids...)`: an integer helper of the support library (idiv, imod,
             // ifmod, ipow) or min/max over `type`
    Libm,    // `name(kids[0])` of <cmath> over f64 (sqrt, exp, ...)
  };
  Kind kind = Kind::Arg;
  std::string name;
  double value = 0;
  DType type = DType::F32;
  int arg = 0;
  std::vector<Ew> kids;
};

// ---- Programs: expressions as instructions in evaluation order -----------------------------
using Ref = int;  // an instruction of the same program
inline constexpr Ref kNoRef = -1;

// (a) op rhs, or (a) - (b) op rhs: a condition on indices (Concat, Pad, Trilu).
struct IndexCmp {
  IExpr a, b;
  bool diff = false;  // compare a - b
  std::string op;     // "<", ">=", "<="
  int64_t rhs = 0;
};

struct Instr {
  enum class Kind : uint8_t {
    Load,       // the value `value` in memory at `index` (a leaf of the block)
    Literal,    // `number` of `dtype`
    Compute,    // `ew` over `args` (an elementwise operator; `node` is the one it computes)
    Range,      // range_start + index * range_delta, of `dtype`
    WrapIndex,  // an index (`name`) from the integer args[0]: wrapped into [0, extent) or an
                // error naming `what`
    IfBegin,    // declares `name` of `dtype` and opens `if (conds...)`
    Else,
    IfEnd,
    Assign,     // `target` (an IfBegin's name) = args[0]
    Store,      // memory of `value` at `index` = args[0]
    Acc,        // the accumulator of an epilogue (`v`) = v `acc_op` args[0] ("mul", "add"), or
                // = args[0] when acc_op is empty
    Define,     // `name` = the accumulator (the anchor's result before its epilogue)
  };
  Kind kind = Kind::Load;
  Mode mode = Mode::Scalar;
  DType dtype = DType::F32;
  bool inline_ = false;        // spelled where it is used, not bound to `name`
  std::string name;            // the bound name ("t3", "g4", "a0")
  ValueId value = kNoValue;    // Load, Store
  IExpr index;                 // Load, Store (flat), Range
  Stride stride = Stride::Contiguous;  // Load, Store in vector mode
  double number = 0;           // Literal
  double range_start = 0, range_delta = 0;
  bool range_float = false;
  std::vector<Ref> args;
  std::vector<DType> arg_types;
  Ew ew;                       // Compute
  const Node* node = nullptr;  // Compute, WrapIndex: the operator
  int64_t extent = 0;          // WrapIndex
  std::string what;            // WrapIndex: the operator name for the error ("Gather")
  std::vector<IndexCmp> conds; // IfBegin: all must hold
  std::string target;          // Assign
  std::string acc_op;          // Acc
};

// One program: straight-line code over loop variables `vars`, the inner one stepped by whole
// vectors in vector mode.
struct Program {
  Mode mode = Mode::Scalar;
  VarTable vars;
  int inner = -1;
  std::vector<Instr> code;
};

}  // namespace dnnf::cg
