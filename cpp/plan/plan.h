// Fusion plans (paper §4.3): a partition of the ECG's nodes into blocks, each compiled to
// one kernel, with the reason behind every decision. All planners (DNNFusion's and the
// baselines) produce this one structure, so their layer counts compare like with like.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dnnf {

// ---- The mapping-type table (fusion_table.cc) ---------------------------------------
enum class Decision : uint8_t { Fuse, Reject, Profile };  // green, red, yellow
const char* decision_name(Decision d);                     // "fuse", "reject", "profile"
const char* decision_color(Decision d);                    // "green", "red", "yellow"

struct FusionRule {
  MappingType fused;  // the mapping type of the fused pair
  Decision decision;
  const char* why;    // one line: the paper's rule behind the cell
};
// The cell for `first` (producer) followed by `second` (consumer).
const FusionRule& fusion_rule(MappingType first, MappingType second);

// ---- Plans ---------------------------------------------------------------------------
struct Block {
  int id = -1;
  std::vector<NodeId> nodes;     // topological order
  NodeId seed = -1;              // the node the block grew from (-1: none, e.g. "none" planner)
  MappingType fused_type = MappingType::OneToOne;
  std::vector<ValueId> inputs;   // values read from outside the block (incl. constants)
  std::vector<ValueId> outputs;  // values read after the block or graph outputs
};

// Why a producer/consumer pair ended up fused or not. Every edge between two nodes the
// planner looked at gets one; `explain()` prints them.
struct Reason {
  NodeId producer = -1, consumer = -1;
  bool fused = false;
  std::string why;  // e.g. "table: Many-to-Many + One-to-One -> fuse (green)"
  // A yellow pair settled by the profiling database or its estimate: the key it looked up
  // (what `dnnfusion profile` measures). The ops are the producer's and consumer's.
  bool yellow = false;
  MappingType yellow_producer_type = MappingType::OneToOne, yellow_consumer_type = MappingType::OneToOne;
  std::string yellow_bucket;
};

struct PlanStats {
  int64_t operators_before = 0;
  int64_t kernels_after = 0;
  int64_t intermediate_bytes_removed = 0;  // bytes of tensors that no longer reach memory
  int64_t intermediates_removed = 0;
};

struct FusionPlan {
  std::string planner;
  std::vector<Block> blocks;   // topological order of blocks
  std::vector<int> block_of;   // per node id: its block id
  std::vector<Reason> reasons;
  PlanStats stats;
};

struct PlanOptions {
  std::string planner = "dnnfusion";  // dnnfusion | none | patterns | tvm | dp
  std::string target = "cpu";         // cpu | opencl
  int max_kernel_args = 0;            // 0: no limit (cpu); OpenCL: 128
  bool horizontal = false;            // fuse siblings reading one input (e.g. Q/K/V)
  // The threads the code will run on: part of every profiling-database key (a measurement at
  // another thread count settles nothing). 0: not given (the OpenCL target; old callers).
  int threads = 0;
  // Profiling databases (profile_db.h), read in order: an entry in a later file replaces one
  // with the same key in an earlier file (the shipped database, then this machine's cache of
  // compile-time measurements). Empty: none; yellow cells are settled by the estimate.
  std::vector<std::string> profile_dbs;
};

// Runs the chosen planner. Unknown planner or target names raise Error; target "opencl"
// with max_kernel_args 0 gets the OpenCL limit of 128.
FusionPlan plan_fusion(const Graph& g, const PlanOptions& opt);
// The DNNFusion planner (dnnfusion_planner.cc); the baselines are in baselines.h.
FusionPlan plan_dnnfusion(const Graph& g, const PlanOptions& opt);

// Shared by all planners (plan.cc): turns a node->group assignment into blocks ordered
// topologically, fills inputs/outputs/fused types/stats, and checks the plan (every node in
// one block, blocks convex so the block graph is acyclic). Throws InternalError if not.
FusionPlan finalize_plan(const Graph& g, std::string planner, const std::vector<int>& group_of,
                         const std::vector<NodeId>& seeds, std::vector<Reason> reasons);
// Whether v is an output its producer's kernel computes in a call of its own and only writes
// to memory, so a reader of v never shares the producer's block: MaxPool's Indices (the
// second call of code generation's lower_pool). Every planner keeps such edges between blocks.
bool written_apart(const Graph& g, ValueId v);
// Whether merging the groups `a` and `b` would create a cycle between blocks.
bool would_create_cycle(const Graph& g, const std::vector<int>& group_of, int a, int b);
// Whether n is a ReduceMean or ReduceSum over exactly axes 1..r-2 of an f32 value of static rank
// 3 to 5: the pixels of a channels-last image (reduced_by_anchor.cc).
bool reduces_pixels(const Graph& g, const Node& n);
// The anchor of a block (`in_block`) whose kernel on `target` computes reduction `red` of its
// output as it stores it (reduced_by_anchor.cc: on the CPU, a mean or sum over the pixels of a
// depthwise NhwcConv's output, through its epilogue); -1 if none.
NodeId anchor_reducing_as_it_stores(const Graph& g, const std::string& target, NodeId red,
                                    const std::function<bool(NodeId)>& in_block);
// Whether n is a channels-last 1x1 convolution, stride 1, no padding, one group, constant f32
// weights, 2-D (expanded_by_anchor.cc).
bool expands_pointwise(const Graph& g, const Node& n);
// Planes narrower than this are not expanded by their depthwise convolution (see
// pointwise_expanded_by).
inline constexpr int64_t kExpandMinWidth = 8;
// The planner's estimate for an expansion no measurement settles (expansion_estimate): fuse
// when the expanded tensor is larger than this many bytes, twice this machine's L2 (per
// core), or $DNNF_EXPAND_MIN_BYTES (which then decides every expansion, measured or not).
// Measured (AVX2 Zen 3, 512 KiB L2, MobileNetV2, 1 thread, each depthwise kernel with its
// expansion against the two apart): 112x112x96 (4.8 MB) 0.66x the time, 56x56x144 (1.8 MB)
// 0.95x, but 28x28x192 (0.6 MB) 1.07x and 14x14x576 (0.45 MB) 1.15x, where the whole tensor
// stays in cache and one GEMM over all its pixels beats one per row. On a Xeon with 2 MiB of
// L2 and 260 MiB of L3 the same rule lost 4-7% on MobileNetV1-SSD at batch 8 and won 6% on
// MobileNetV2, so where it matters the profiling database decides (a yellow key per shape).
int64_t expand_min_bytes();
// The pointwise NhwcConv whose output depthwise NhwcConv `dw` can compute rows at a time from
// its input on `target` (expanded_by_anchor.cc: the CPU's conv_nhwc_expand_f32), reached from
// dw's input through One-to-One ops that nothing else reads (its epilogue, returned in `chain`
// in node order); -1 if none. Structural only: whether it pays is the planner's decision, and
// code generation expands every such pair a plan puts in one block.
NodeId pointwise_expanded_by(const Graph& g, const std::string& target, NodeId dw, std::vector<NodeId>* chain);
// The profiling key's bucket for the expansion of `dw` from `pw`: the expanded tensor's size
// bucket and its shape ("2^20 w112 k32 c96 s1": row width, the 1x1's input and output
// channels, the depthwise stride), what decides whether computing it a row at a time pays.
std::string expansion_bucket(const Graph& g, NodeId dw, NodeId pw);
// The estimate: fuse iff the expanded tensor has more than expand_min_bytes(); `why` says so.
bool expansion_estimate(const Graph& g, NodeId dw, std::string* why);
std::string plan_to_json(const Graph& g, const FusionPlan& p);
std::string plan_to_dot(const Graph& g, const FusionPlan& p);

}  // namespace dnnf
