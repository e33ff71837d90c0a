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

// ---- Blocks: buffers and stages ---------------------------------------------------------
// Where a value lives while a block runs.
struct Location {
  enum class Kind : uint8_t { GraphInput, GraphOutput, Arena, Constant, Scratch };
  Kind kind = Kind::Arena;
  int64_t at = 0;  // input/output/constant index, or byte offset (arena, block scratch)
  // Rows in a Concat's bytes (BufferSlot::row, stride): `row` bytes each, `stride` apart, the
  // first at `at`; 0, 0: contiguous. Only a channels-last convolution writes a value so (its
  // output pixels ConvShape::ldy apart), and only the Concat assembled over it reads it.
  int64_t row = 0, stride = 0;
};

// A tensor a block's code names: a block input (read), or a value the block materialises.
struct Buffer {
  ValueId value = kNoValue;
  DType dtype = DType::F32;
  bool written = false;  // materialised by this block (else only read)
  Location where;
};

// A pointwise loop nest computing one value over its whole index space. Flat form: rows of
// `row_len` consecutive elements; row form: one row per index of the dims before `last`
// (index variables i<k> = (o / div) % mod), the inner var along dim `last`.
struct LoopStage {
  ValueId value = kNoValue;
  int64_t total = 0, rows = 0, row_len = 0;
  bool flat = true;
  struct IndexVar {
    int k;            // the dim (name i<k>)
    int64_t div = 1, mod = 1;
    bool zero = false;  // a trailing dim of 1: always 0
  };
  std::vector<IndexVar> index_vars;
  Program body;  // ends with the store of `value`
};

// A materialised transpose of a value in memory that moves its innermost dim: a blocked
// 2-D copy rather than a gather per vector.
struct TransposeStage {
  ValueId in = kNoValue, out = kNoValue;
  DType dtype = DType::F32;
  std::vector<int64_t> dims, perm;
};

// The operators fused after an anchor, applied to each output vector while it is in a
// register; its program starts from the accumulator `v` over vars (row, j) of the anchor's
// [R, C] view of its output.
struct Epilogue {
  bool present = false;
  int64_t R = 0, C = 0;
  Program prog;
  int fused_ops = 0;
  bool stores = false;  // the program stores every output itself; the kernel's `y` is scratch
};

// One argument of an anchor kernel, in the kernel's parameter order (anchors.cc documents
// each kernel's list).
struct AnchorArg {
  enum class Kind : uint8_t {
    Int,     // i (`bare`: a plain int, else a long)
    Float,   // f (dtype: F32 or F64)
    Bool,    // i != 0
    Buffer,  // the buffer of `value` (an input, or an extra output such as MaxPool's Indices)
    Y,       // the buffer the kernel stores its result to (the stage's `y`)
    Null,    // an omitted optional buffer
    Ints,    // a static array of longs named `name` (`joined`: declared with the previous one)
    Floats,  // a static array of `dtype` named `name`
    Shape,   // a window geometry (`name`: "conv" or "pool"), its ints in the kernel's order
    Enum,    // a named constant of the kernel's interface (`name`, e.g. "ReduceKind::Sum")
    Packed,  // a weight packed once when the model is created (`i`: its slot)
    Ep,      // the epilogue
    Segments,  // an input read in place as channel segments: `values`, their channels in `ints`
  };
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  DType dtype = DType::F32;
  ValueId value = kNoValue;
  std::vector<ValueId> values;  // Segments
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string name;
  bool joined = false, bare = false;
};

// A GEMM call, C[M, N] = A[M, K] B[K, N] with element (i, k) of A at a[i*rs_a + k*cs_a]
// (likewise B) and C row-major with leading dimension N. MatMul runs it once per batch
// index b (`batched`), its operands offset by offset_a/offset_b over the var `b`.
struct GemmCall {
  int64_t M = 0, N = 0, K = 0;
  ValueId a = kNoValue, b = kNoValue;
  int packed_b = -1;  // a packed slot: B was packed when the model was created
  int64_t rs_a = 0, cs_a = 1, rs_b = 0, cs_b = 1;
  bool batched = false;
  // The element type: F32 runs the packed GEMM (gemm.h); F64 and the 32/64-bit integers
  // (MatMul only) run cg::matmul_any, a plain loop without packing, prologue or epilogue.
  DType dtype = DType::F32;
  // A computed while it is packed (a fused prologue; `a` is then kNoValue): the program sets
  // the accumulator `v` to A[row, k .. k + n) over vars (b, row, j), j along K the inner one, reading
  // A's producers through their composed index maps; A itself never reaches memory.
  bool a_computed = false;
  Program a_prog;
  int a_fused_ops = 0;  // operators evaluated in it
};

// Every anchor kernel; the anchor table (anchors.cc) has one row per kind.
enum class AnchorKind : uint8_t {
  MatMul, Gemm, Conv, ConvTranspose, NhwcConv, MaxPool, AvgPool, NhwcMaxPool, NhwcAvgPool,
  GlobalAvgPool, GlobalMaxPool, Softmax, LogSoftmax, LayerNorm, Reduce, InstanceNorm, CumSum,
  ArgReduce, TopK, RoiAlign, Resize, Scatter, GridSample,
};

struct AnchorStage {
  AnchorKind kind = AnchorKind::MatMul;
  const Node* node = nullptr;
  std::vector<AnchorArg> args;
  Epilogue ep;
  ValueId y = kNoValue;        // the buffer the kernel stores (kNoValue: scratch `y_scratch`)
  int64_t y_scratch = -1;
  GemmCall gemm;               // MatMul, Gemm
  // A batched GEMM (MatMul): the var `b` of `batch_vars` indexes A's and B's offsets;
  // the epilogue's rows start at b * M, the output at b * M * N.
  int64_t batch = 1;
  double flops_per_batch = 0;
  VarTable batch_vars;
  IExpr offset_a, offset_b;
  std::vector<AnchorArg> second;  // a second call on the same inputs (MaxPool's Indices)
  // A spatial mean (ReduceMean / ReduceSum over the pixels) of the stored output that the
  // depthwise NhwcConv kernel takes row by row as it stores them (conv_nhwc_mean_f32), its
  // pooled buffer and scale the last two args: the reduction's node runs no stage of its own.
  const Node* reduced_by = nullptr;
  // A depthwise NhwcConv that computes its own input from a pointwise NhwcConv (at most one
  // here: that convolution's stage, its `y` the depthwise one's x, never in memory), rows at a
  // time into a ring in cache (conv_nhwc_expand_f32, expand_rows.cc).
  std::vector<AnchorStage> expand;
};

// Whether a convolution's ConvShape ints (nd, N, C, M, group, ...) take the depthwise path
// (conv.h's is_depthwise), which writes its output dense only.
inline bool is_depthwise_shape(const std::vector<int64_t>& s) { return s.size() > 4 && s[4] == s[2] && s[3] == s[2]; }

// compile(..., dynamic=True)'s runtime sequence length (dnnfusion/seq_extents.py, seq_rows.cc):
// the stage's output is read only at its first P = min(max(L + offset, 0), size) positions
// along one dim, L the length input at run time, so the stage computes only those.
struct SeqRows {
  enum class How : uint8_t {
    None,
    Rows,    // a row-form loop whose outermost index var is the dim: per * P rows
    Guard,   // a row-form loop skips the rows whose index var `var` is >= P
    Flat,    // a flat loop over the first per * P elements (the dims before the dim are 1s)
    GemmM,   // a GEMM's M (per batch index) is P; with `n`, its N too (the last dim's P_N)
    Outer,   // a row kernel (Softmax, LayerNorm) over per * P rows: its first Int argument
    Heads,   // Softmax / LogSoftmax once per index of the dims before the sequence (`heads`,
             // `stride` elements apart), per * P rows each, its epilogue's rows continuing
  };
  How how = How::None;
  int64_t offset = 0, size = 0, per = 1;
  int var = -1;
  bool n = false;
  int64_t n_offset = 0, n_size = 0;
  int64_t heads = 1, stride = 0;
};

struct Stage {
  enum class Kind : uint8_t { Loop, Transpose, Anchor };
  Kind kind = Kind::Loop;
  LoopStage loop;
  TransposeStage transpose;
  AnchorStage anchor;
  SeqRows seq;
  std::string label;  // one line for KernelInfo::stages ("gemm [128x768x768] +epilogue(3 ops)")
};

struct BlockPlan {
  int block = -1;
  size_t operators = 0;
  int length_input = -1;  // the graph input holding L (int64 scalar) when a stage has SeqRows
  bool length_f32 = false;  // ... a float32 scalar
  std::vector<Buffer> buffers;  // in value-id order
  std::vector<Stage> stages;    // in execution order
  int64_t scratch_bytes = 0;
};

// A constant weight packed into the layout a kernel reads, once, when the model is created.
struct PackedConstant {
  // SegmentedNhwcConvWeights: NhwcConv weights for an input in channel segments.
  enum class Kind : uint8_t { GemmB, ConvWeights, NhwcConvWeights, SegmentedNhwcConvWeights };
  Kind kind = Kind::GemmB;
  ValueId value = kNoValue;
  int constant = -1;                  // index in the module's constants
  std::vector<int64_t> ints;          // GemmB: rs, cs, K, N; conv: the ConvShape's ints (+ segments)
};

// A whole model for one target: blocks in plan order and what they share.
struct ModulePlan {
  std::vector<ValueId> constants;      // the order the runtime hands them over
  std::vector<PackedConstant> packed;  // slot i = packed[i]
  std::vector<BlockPlan> blocks;
  int64_t scratch_bytes = 0;           // the largest block's scratch
  // Graph outputs no block writes (an input, a constant, a repeated output): copied last.
  struct Copy {
    int output = 0;
    int from_output = -1;  // an earlier output, or -1
    Location from;
    int64_t bytes = 0;
  };
  std::vector<Copy> copies;
};

}  // namespace dnnf::cg
