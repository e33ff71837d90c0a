// Memory plan of a fused model: every intermediate tensor that survives fusion (a block
// output that is not a graph output) gets an offset in one arena, reusing memory between
// tensors whose lifetimes do not overlap. Part of planning, below code generation (every
// target's module carries one); the paper counts the bytes that fusion removes (§5), this
// places the ones it keeps.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "plan/plan.h"

namespace dnnf {

// One intermediate tensor in the arena. Times are positions in plan.blocks (execution
// order): a tensor is live from the block that writes it to the last block that reads it,
// both included, so a block's inputs never share memory with its outputs.
struct BufferSlot {
  ValueId value = kNoValue;
  int64_t offset = 0;  // bytes from the arena start, a multiple of the alignment
  int64_t size = 0;    // the tensor's bytes
  int first = 0;       // producing block
  int last = 0;        // last consuming block (== first if no later block reads it)
  // A Concat's input placed in the Concat's own bytes (its run of them: the Concat has only
  // ones before its axis), so that its producer writes it there and the Concat copies nothing;
  // kNoValue for a buffer of its own. The Concat's buffer is then live from the first such
  // input's block (and a Concat its own block consumes has one too).
  ValueId within = kNoValue;
  // Rows in a Concat's bytes (a Concat along the channels of a channels-last tensor, or with
  // more than ones before its axis): the tensor is size / row runs of `row` bytes, `stride`
  // bytes apart, the first at `offset`; 0, 0: contiguous. Only for tensors the code generator
  // says it writes so (plan_memory's `row_writers`) and only the Concat reads.
  int64_t row = 0, stride = 0;
  // A result computed in place of an input (an anchor's residual, read and written at the
  // same index): this tensor takes over the bytes of `shares`, whose last reader is the block
  // that writes this one; kNoValue otherwise. A chain of them is placed as one buffer.
  ValueId shares = kNoValue;
};

struct MemoryPlan {
  int64_t alignment = 64;
  // Where a Concat's input may start in the Concat's bytes (BufferSlot::within): the arena's
  // alignment for a target whose buffers must all be aligned (OpenCL's sub-buffer offsets), 1
  // (element alignment) on the CPU, whose kernels load and store unaligned.
  int64_t run_alignment = 64;
  int64_t arena_bytes = 0;         // the arena to allocate (a multiple of alignment)
  int64_t intermediate_bytes = 0;  // sum of sizes: the memory without reuse or padding
  int64_t naive_bytes = 0;         // sum of sizes rounded up to the alignment: one buffer each
  int64_t peak_bytes = 0;          // most bytes live at one time: no plan can do better
  std::vector<BufferSlot> buffers;  // in value-id order
};

// Reshape, Flatten, Squeeze, Unsqueeze, Identity: n's output is its data input's bytes in
// their order, whatever the shapes (a Concat input made so from an arena tensor is placed by
// placing that tensor).
bool flat_view(const Node& n);

// Where input u of Concat x lies in x's bytes: one run at byte `at` (row == 0; x has only
// ones before its axis), or rows of `row` bytes, `stride` apart, the first at `at`; at == -1
// if x is not a Concat with u as one input. u may also be what an input is a flat view of,
// where the parts are runs (SSD's heads: Concat(Reshape(conv), ...)): the same bytes.
struct ConcatPart {
  int64_t at = -1, row = 0, stride = 0;
};
ConcatPart part_in_concat(const Graph& g, ValueId x, ValueId u);

// Greedy by size, best fit (see memory_plan.cc), after placing batch-1 Concats' inputs that
// other blocks make in the Concat's bytes (BufferSlot::within). `concats_in_block`: a Concat
// its own block consumes gets such a buffer too (off for a target whose convolutions read a
// channel Concat's inputs where they lie, as OpenCL's do: the buffer would only hold the
// later inputs' bytes from the first one's block on). Needs static shapes: ShapeError names a
// symbolic tensor. `alignment` must be a power of two; `run_alignment` (MemoryPlan::run_alignment;
// 0: `alignment`) too.
// `in_place`: (y, r) pairs a code generator may write in place (see BufferSlot::shares); a
// pair is kept only where both are arena tensors of one size outside any Concat's bytes, r's
// last reader is y's block, and neither is in another pair in the same role.
// `row_writers`: values whose producing kernels can write them with their last dim's rows apart
// (BufferSlot::row, stride): a Concat along the last axis whose inputs are not single runs of
// its bytes (channels last) is assembled in place only when each input is one of them, read by
// that Concat alone.
MemoryPlan plan_memory(const Graph& g, const FusionPlan& p, int64_t alignment = 64, bool concats_in_block = true,
                       const std::vector<std::pair<ValueId, ValueId>>& in_place = {}, int64_t run_alignment = 0,
                       const std::vector<ValueId>& row_writers = {});

// Verifies a memory plan against the graph and plan, deriving lifetimes independently of
// plan_memory (from the blocks' input/output lists): every intermediate has exactly one
// aligned buffer of at least its size inside the arena, its recorded live range covers the
// true one, and no two tensors live at the same time share a byte, but a Concat's input at its
// run of the Concat's bytes (checked against the Concat, whose range covers the input's), and
// a tensor that shares another's bytes (at its offset, of its size, written in the block that
// last reads the other).
// InternalError if not.
// plan_memory runs it itself in debug builds.
void check_memory_plan(const Graph& g, const FusionPlan& p, const MemoryPlan& m);

}  // namespace dnnf
