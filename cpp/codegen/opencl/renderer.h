// The OpenCL renderer's state and kernels (see render.cc for what it does): one kernel
// per stage; the stage kernels are in render.cc, the anchors' in gemm_kernels.cc (GEMMs, convolutions)
// and anchor_kernels.cc (the rest).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "codegen/code.h"
#include "codegen/kernel.h"
#include "codegen/opencl/spell.h"
#include "codegen/opencl_module.h"
#include "ir/graph.h"

namespace dnnf::irr {
struct ResizeAttrs;  // codegen/prelude/resize_taps.h
}

namespace dnnf::cg::opencl {

constexpr int64_t kGroup = 64;  // work-items per group of 1-D launches (rounded-up global size)
// The local-memory GEMM tile (tiled_gemm): T x T outputs per work-group of kTileSide x
// kTileSide work-items, each (T / kTileSide)^2 of them, K in steps of kTileK, of side kTileHuge,
// kTileBig or kTileSmall as choose_tile decides. GEMMs and convolutions with fewer than
// kTileMin rows or columns keep one work-item per output element.
constexpr int64_t kTileHuge = 128, kTileBig = 64, kTileSmall = 32, kTileSide = 16, kTileK = 16, kTileMin = 32;
// The fewest K steps a split of K keeps: 128-wide tiles, GEMMs' smaller tiles, the rest.
constexpr int64_t kHugeSplitSteps = 12, kGemmSplitSteps = 8, kSplitMinSteps = 4;
// Row kernels (Softmax, LayerNorm) with rows of kRowGroupMin elements or more run a
// work-group of kRowGroup items per row (group_reduce).
constexpr int64_t kRowGroup = 128, kRowGroupMin = 64;
// TopK over float rows of kTopKSelectMin elements or more selects its threshold first
// (Renderer::topk_select), instead of comparing every element with its whole row.
constexpr int64_t kTopKSelectMin = 1024;
// group_reduce's max and min that keep a NaN of either side (the CPU kernels' semantics).
inline constexpr const char* kNanMax = "isnan(x) ? x : (isnan(y) || y > x) ? y : x";
inline constexpr const char* kNanMin = "isnan(x) ? x : (isnan(y) || y < x) ? y : x";

// The GEMM tile for C[batch](M x N) over K on the device `o` describes (`conv`: an implicit-GEMM
// convolution): its side (0: not tiled) and how many work-groups share each tile's K (1: none;
// their partial tiles are summed by a second kernel). On a CPU device (a 128-wide tile's 64
// accumulators per item would spill from its vectorised work-groups), 64 where that gives a
// group per compute unit, else 32, K split below one group per unit, aiming at two. On a GPU
// (measured on an H200, runs 7 to 9 of benchmarks/README.md): 128 for convolutions whose tiles,
// split, fill the compute units' waves; 64 for GEMMs of at least 64 rows and columns, split
// until three groups per unit; other convolutions as on a CPU device, split below two groups
// per unit, aiming at four. DNNF_OPENCL_TILING and DNNF_OPENCL_SPLIT_K force either.
struct TileChoice {
  int64_t side = 0, splits = 0;
};
TileChoice choose_tile(const OpenclCodegenOptions& o, int64_t M, int64_t N, int64_t K, int64_t batch, bool conv);
// The side choose_tile gives a GEMM (what a prologue's evaluation count depends on).
int64_t gemm_tile_side(const OpenclCodegenOptions& o, int64_t M, int64_t N, int64_t batch);
// The floats of one row of a local tile of side t (t plus padding).
int64_t tile_row(const OpenclCodegenOptions& o, int64_t t);

struct Renderer {
  const Graph& g;
  const ModulePlan& mp;
  Spelling sp;
  OpenclModule& out;
  std::string kernels;
  // The device's limits, whether GEMMs may be tiled at all, and the tile's side if forced.
  OpenclCodegenOptions opt;
  // The launch shape of the stage being rendered, beyond its global size: set by the kernels
  // that need a 3-D launch or a fixed work-group (0: the default 1-D, runtime-chosen group).
  struct Shape {
    int dims = 1;
    int64_t local[3] = {0, 0, 0};
    int64_t local_bytes = 0;  // its __local arrays
  } shape;
  // The block being rendered: its index and scratch (split-K partials go after it), the
  // module's scratch end and the bytes split-K partials add per block (counted as written).
  int cur_block = -1;
  int64_t cur_scratch = 0, scratch_end = 0;
  std::map<int, int64_t> split_bytes;

  // A kernel under construction: its value arguments (graph inputs, outputs, constants)
  // and its body.
  struct K {
    std::string name;
    std::vector<ValueId> values;
    Code body;
    std::string globals;  // program-scope __constant tables the kernel reads
  };

  ValueId located_value(const Location& l) const;

  // Declares p<v> for every buffer of the block, as the CPU renderer does.
  void declare(K& k, const BlockPlan& b);

  // Appends the kernel to the program and its launch (global size, `shape`) to the module.
  void finish(K& k, const int64_t (&global)[3]);

  void loop(K& k, const LoopStage& l);

  void transpose(K& k, const TransposeStage& t);

  // The anchor's result for element `e` is in `acc`: the epilogue (over the [R, C] view:
  // row = e / C, j = e % C) and the store.
  void finish_element(K& k, const AnchorStage& a, const std::string& e);

  static int64_t prod(const std::vector<int64_t>& v, size_t from, size_t to) {
    int64_t n = 1;
    for (size_t i = from; i < to; ++i) n *= v[i];
    return n;
  }

  std::string p(ValueId v) const { return "p" + std::to_string(v); }
  std::string L(int64_t v) const { return std::to_string(v) + "L"; }

  // One element per work-item over `total`: `e` is the element.
  void elementwise_head(K& k, int64_t total) {
    k.body.line("const long e = get_global_id(0);");
    k.body.line("if (e >= " + L(total) + ") return;");
  }

  int64_t out_numel(const AnchorStage& a) const { return g.value(a.node->outputs[0]).type.numel(); }

  void gemm(K& k, const AnchorStage& a, int64_t global[3]);

  TileChoice tile_for(int64_t M, int64_t N, int64_t K, int64_t batch, bool conv = false) const {
    return choose_tile(opt, M, N, K, batch, conv);
  }

  // GEMM C[b] = A[b] B[b] through local-memory tiles of side `t` (see work_groups.cc).
  void tiled_gemm(K& k, const AnchorStage& a, TileChoice t, int64_t M, int64_t N, int64_t Kd, int64_t batch,
                  const std::function<void()>& load_a, const std::function<void()>& setup_b,
                  const std::function<void()>& step_b, const std::function<void()>& load_b, bool b_kfast,
                  bool a_mfast, const std::string& out, int64_t global[3]);

  void conv(K& k, const AnchorStage& a, int64_t global[3]);

  void pool(K& k, const AnchorStage& a, int64_t global[3], bool is_max);

  void global_pool(K& k, const AnchorStage& a, int64_t global[3], bool is_max);

  // A work-group per row: whether rows of `len` get one, the kernel's head (dn_r: the row,
  // dn_lid: the item), and a reduction of each item's `part` over the group into `name`.
  bool row_groups(int64_t len) const;
  // Whether `outputs` items, one per output element, are too few to keep the device busy
  // (OpenclCodegenOptions::busy_items): untiled GEMMs and convolutions with a K of kRowGroup or
  // more then take a work-group per output element.
  bool few_outputs(int64_t outputs) const { return outputs < std::max<int64_t>(1, opt.compute_units) * opt.busy_items; }
  void group_head(K& k, int64_t rows, int64_t global[3]);
  void group_reduce(K& k, const std::string& part, const std::string& name, const std::string& op);

  // Softmax / LogSoftmax: one work-item per (outer, inner) row of `len` elements.
  void softmax(K& k, const AnchorStage& a, int64_t global[3], bool log);

  // LayerNormalization: one work-item per row of `norm` elements.
  void layer_norm(K& k, const AnchorStage& a, int64_t global[3]);

  // Reduce*: one work-item per output element, looping over the reduced index space (a
  // work-group per element for long float reductions).
  void reduce(K& k, const AnchorStage& a, int64_t global[3]);

  // ConvTranspose: y[n, m, o] = sum over the group's c and taps t with o = i * stride +
  // t * dilation - begin of x[n, c, i] * w[c, m % (M / G), t].
  void conv_transpose(K& k, const AnchorStage& a, int64_t global[3]);

  // Resize: the CPU kernel's per-axis tap tables (resize_taps.h), baked into the program;
  // each output element sums the products of its axes' taps.
  void resize(K& k, const AnchorStage& a, int64_t global[3]);
  // (a roi computed at run time: axis d's taps computed by the kernel)
  void resize_taps_at_run_time(K& k, const AnchorStage& a, const irr::ResizeAttrs& at, int d);

  // Per-row kernels of irregular anchors: one work-item per (outer, inner) row of `len`.
  void row_head(K& k, int64_t outer, int64_t len, int64_t inner, int64_t global[3]);

  void cumsum(K& k, const AnchorStage& a, int64_t global[3]);  // [outer, len, inner, x, y, exclusive, reverse, ep]

  void arg_reduce(K& k, const AnchorStage& a, int64_t global[3]);  // [is_max, outer, len, inner, x, y, last]

  void topk(K& k, const AnchorStage& a, int64_t global[3]);  // [outer, len, inner, k, largest, sorted, x, v, i]
  void topk_select(K& k, const AnchorStage& a, int64_t global[3]);  // long float rows: see row_kernels.cc

  void instance_norm(K& k, const AnchorStage& a, int64_t global[3]);  // [N, C, S, x, scale, bias, eps, y, ep]

  // RoiAlign (the CPU kernel's arithmetic, per output element): [N, C, H, W, x, R, rois,
  // batch indices, out h, out w, sampling ratio, spatial scale, half pixel, max mode, y, ep].
  void roi_align(K& k, const AnchorStage& a, int64_t global[3]);

  // GridSample (lower_grid_sample's args): an item per output element, its taps computed as
  // grid_sample.h's grid_sample_f32 computes them.
  void grid_sample(K& k, const AnchorStage& a, int64_t global[3]);

  // ScatterND / ScatterElements (lower_scatter's args): a copy of data, then a kernel whose
  // items own disjoint outputs and apply their updates in the CPU kernel's order.
  void scatter(K& k, const AnchorStage& a, int64_t global[3]);

  bool anchor(K& k, const AnchorStage& a, int64_t global[3]);

  void block(const BlockPlan& b);
};

}  // namespace dnnf::cg::opencl
