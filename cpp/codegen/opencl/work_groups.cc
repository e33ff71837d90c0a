// The OpenCL renderer's work-group kernels: the local-memory GEMM tile (GEMMs, and
// convolutions as implicit GEMMs) and the work-group-per-row reduction of the row kernels.
#include <algorithm>
#include <cstring>
#include <functional>

#include "codegen/opencl/renderer.h"
#include "ir/errors.h"

namespace dnnf::cg::opencl {

// A GEMM tile through local memory, for GEMMs and convolutions (as implicit GEMMs) big
// enough to fill it: C[b](M x N) = A[b](M x K) B[b](K x N). A work-group of kTileSide x
// kTileSide work-items computes a t x t tile of C, each work-item an R x R block of it in
// registers (R = t / kTileSide); K advances kTileK at a time through two local tiles that the
// group loads together, each element once (A's prologue, where there is one, is evaluated
// there, so once per t columns instead of once per column).
// The features (OpenclCodegenOptions::tile_features: all on a GPU, all but the prefetch on
// other devices, unless DNNF_OPENCL_TILE_FEATURES says otherwise) are what a GPU's SGEMM needs
// beyond that:
// - vec: an item's rows and columns are runs of V = min(4, R) adjacent ones (rows
//   g * 16 V + ty V + v), so each k step reads its A and B values from local memory as
//   floatV vectors (R / V vector loads each instead of R scalar ones: the inner loop is FMAs);
//   off, rows ty + 16 i, scalar loads;
// - prefetch: the next K step's elements are loaded from global memory into registers while
//   the group computes on the local tiles of this one (their latency hidden behind the FMAs);
// - kfast_b (the caller's b_kfast and a_mfast): a B whose k is contiguous in memory (a Linear
//   layer's weights [N, K]) is loaded with k fastest across the items, an A whose m is (a
//   ConvTranspose's weights [C, M taps]) with m fastest, so that a group's loads are
//   consecutive addresses;
// - tap_major (conv): see Renderer::conv.
// `setup_b` runs once before the K loop with dn_nb, the item's column of B, in scope (only
// when !b_kfast: each item then loads the same column at every step), `step_b` once per K
// step before the step's elements with dn_kb, the step's first k, in scope. Every output accumulates
// fma(A[m, k], B[k, n]) over k in order from 0, as the one-item-per-element kernel does, so
// both give the same bits. `load_a` spells v = A(b, dn_m, dn_k), `load_b` v = B(b, dn_k,
// dn_n) (both only called in range; out of range the tile holds 0), `out` the flat output
// index of (b, dn_m, dn_n).
void Renderer::tiled_gemm(K& k, const AnchorStage& a, TileChoice choice, int64_t M, int64_t N, int64_t Kd, int64_t batch,
                          const std::function<void()>& load_a, const std::function<void()>& setup_b,
                          const std::function<void()>& step_b, const std::function<void()>& load_b, bool b_kfast,
                          bool a_mfast, const std::string& out, int64_t global[3]) {
  const bool vec = opt.tile_features & kTileVec, prefetch = opt.tile_features & kTilePrefetch;
  b_kfast = b_kfast && (opt.tile_features & kTileKFastB);
  a_mfast = a_mfast && (opt.tile_features & kTileKFastB);
  const int64_t t = choice.side, T = t, S = kTileSide, R = t / kTileSide, P = tile_row(opt, t);  // tile, items per side, per item, row
  const int64_t V = vec ? std::min<int64_t>(4, R) : 1, GS = S * V;  // vector width, stride of an item's runs
  const int64_t items = S * S, E = kTileK * T / items;  // elements of each tile an item loads per step
  if (T % S != 0 || items % T != 0 || items % kTileK != 0 || R % V != 0)
    throw InternalError("tiled_gemm: tile " + std::to_string(T) + " does not suit work-groups of " + std::to_string(items));
  const std::string Ts = std::to_string(T), Ps = std::to_string(P), KT = std::to_string(kTileK);
  // Split K: group z of `splits` runs K steps [z Kc, (z + 1) Kc) and stores its partial tile to
  // scratch after the block's own; a second kernel sums the partials in z order and finishes.
  int64_t splits = choice.splits;
  const int64_t Kc = std::max(kTileK, ((Kd + splits - 1) / splits + kTileK - 1) / kTileK * kTileK);
  splits = std::max<int64_t>(1, (Kd + Kc - 1) / Kc);  // K = 0 (an empty inner axis): one group, zeros
  const K base = k;  // the declarations, for the summing kernel
  const int64_t part_at = (cur_scratch + 255) / 256 * 256, total = batch * M * N;
  const std::string part = "((__global float*)(dnnf_scratch + " + std::to_string(part_at) + "))";
  shape.dims = 3;
  shape.local[0] = S;
  shape.local[1] = S;
  shape.local[2] = 1;
  global[0] = (N + T - 1) / T * S;
  global[1] = (M + T - 1) / T * S;
  global[2] = batch * splits;
  shape.local_bytes = 2 * kTileK * P * 4;
  const std::string al = vec ? " __attribute__((aligned(16)))" : "";
  k.body.line("__local float dn_As[" + std::to_string(kTileK * P) + "]" + al + ", dn_Bs[" + std::to_string(kTileK * P) + "]" +
              al + ";");
  k.body.line("const int dn_tx = (int)get_local_id(0), dn_ty = (int)get_local_id(1), dn_t = dn_ty * " + std::to_string(S) +
              " + dn_tx;");
  k.body.line("const long b = get_global_id(2) / " + L(splits) + ", dn_m0 = (long)get_group_id(1) * " + L(T) +
              ", dn_n0 = (long)get_group_id(0) * " + L(T) + ";");
  k.body.line("(void)b;");
  // Each item's place in the tiles it loads: A with k fastest (dn_ak fixed, rows dn_t / kTileK +
  // (items / kTileK) l); B with n fastest (dn_bn fixed, k rows dn_t / t + (items / t) l) or,
  // b_kfast, k fastest like A.
  k.body.line("const int dn_ak = dn_t % " + KT + ", dn_bn = dn_t % " + Ts + ";");
  k.body.line("(void)dn_bn;");
  // A's place when a_mfast: row dn_bn of the tile, k rows dn_t / t + (items / t) l (as B's).
  const auto a_at = [&](int64_t l) -> std::pair<std::string, std::string> {
    if (a_mfast) return {"dn_m0 + dn_bn", "dn_kb + dn_t / " + Ts + " + " + L(l * (items / T))};
    return {"dn_m0 + dn_t / " + KT + " + " + L(l * (items / kTileK)), "dn_kb + dn_ak"};
  };
  k.body.line("const long dn_nb = dn_n0 + dn_bn;");
  if (!b_kfast) setup_b();
  if (splits > 1) {
    k.body.line("const long dn_z = get_global_id(2) % " + L(splits) + ";");
    k.body.line("const long dn_kbeg = dn_z * " + L(Kc) + ", dn_kend = min(dn_kbeg + " + L(Kc) + ", " + L(Kd) + ");");
  } else {
    k.body.line("const long dn_kbeg = 0, dn_kend = " + L(Kd) + ";");
  }
  std::string regs;
  for (int64_t i = 0; i < R * R; ++i) regs += (i ? ", c" : "c") + std::to_string(i) + " = 0.0f";
  k.body.line("float " + regs + ";");
  std::string held;
  for (int64_t l = 0; l < E; ++l) held += (l ? ", dn_ra" : "dn_ra") + std::to_string(l) + ", dn_rb" + std::to_string(l);
  k.body.line("float " + held + ";");
  // One element of a tile into register `reg`: its coordinates (`where`), the bounds, the load.
  auto element = [&](const std::string& where, const std::string& inside, const std::function<void()>& load,
                     const std::string& reg) {
    k.body.open("");
    k.body.line(where);
    k.body.line("float v = 0.0f;");
    k.body.open("if (" + inside + ")");
    load();
    k.body.close();
    k.body.line(reg + " = v;");
    k.body.close();
  };
  // The step at dn_kb (the expression `first`) into the registers.
  auto fetch = [&](const std::string& first) {
    k.body.open("");
    k.body.line("const long dn_kb = " + first + ";");
    if (!b_kfast) step_b();
    for (int64_t l = 0; l < E; ++l)
      element("const long dn_m = " + a_at(l).first + ", dn_k = " + a_at(l).second + ";",
              "dn_m < " + L(M) + " && dn_k < dn_kend", load_a, "dn_ra" + std::to_string(l));
    for (int64_t l = 0; l < E; ++l) {
      const std::string where =
          b_kfast ? "const long dn_n = dn_n0 + dn_t / " + KT + " + " + L(l * (items / kTileK)) + ", dn_k = dn_kb + dn_ak;"
                  : "const long dn_n = dn_nb, dn_k = dn_kb + dn_t / " + Ts + " + " + L(l * (items / T)) + ";";
      element(where, "dn_n < " + L(N) + " && dn_k < dn_kend", load_b, "dn_rb" + std::to_string(l));
    }
    k.body.close();
  };
  // The registers into the local tiles: A[k][m] and B[k][n], rows of P floats.
  auto store = [&] {
    for (int64_t l = 0; l < E; ++l) {
      const std::string L_ = std::to_string(l);
      k.body.line(a_mfast ? "dn_As[(dn_t / " + Ts + " + " + std::to_string(l * (items / T)) + ") * " + Ps + " + dn_bn] = dn_ra" + L_ + ";"
                          : "dn_As[dn_ak * " + Ps + " + dn_t / " + KT + " + " + std::to_string(l * (items / kTileK)) + "] = dn_ra" + L_ + ";");
      k.body.line(b_kfast ? "dn_Bs[dn_ak * " + Ps + " + dn_t / " + KT + " + " + std::to_string(l * (items / kTileK)) + "] = dn_rb" + L_ + ";"
                          : "dn_Bs[(dn_t / " + Ts + " + " + std::to_string(l * (items / T)) + ") * " + Ps + " + dn_bn] = dn_rb" + L_ + ";");
    }
  };
  if (prefetch) {
    // One step ahead: the loop starts a step early, when it only fetches (one copy of the
    // fetch in the source: compiling it twice made PoCL's builds of 128-wide tiles slow). The
    // step's branches are the same for every item of the group, so the barriers in them are
    // met by all.
    k.body.open("for (long dn_k0 = dn_kbeg - " + L(kTileK) + "; dn_k0 < dn_kend; dn_k0 += " + L(kTileK) + ")");
    k.body.line("const bool dn_now = dn_k0 >= dn_kbeg;  // a step to compute (else only the first fetch)");
    k.body.open("if (dn_now)");
    store();
    k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
    k.body.close();
    k.body.open("if (dn_k0 + " + L(kTileK) + " < dn_kend)");  // the next step's loads in flight during this one's FMAs
    fetch("dn_k0 + " + L(kTileK));
    k.body.close();
    k.body.open("if (dn_now)");
  } else {
    k.body.open("for (long dn_k0 = dn_kbeg; dn_k0 < dn_kend; dn_k0 += " + L(kTileK) + ")");
    fetch("dn_k0");
    store();
    k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
  }
  k.body.open("for (int dn_kk = 0; dn_kk < " + KT + "; ++dn_kk)");
  // Row i of the item's block is row (i / V) GS + ty V + i % V of the tile (columns alike).
  const std::string vt = V == 1 ? "float" : "float" + std::to_string(V);
  std::string ld;
  for (int64_t g = 0; g < R / V; ++g) {
    const std::string G = std::to_string(g), off = std::to_string(g * GS);
    if (V == 1) {
      ld += "const float a" + G + " = dn_As[dn_kk * " + Ps + " + dn_ty + " + off + "], b" + G + " = dn_Bs[dn_kk * " + Ps +
            " + dn_tx + " + off + "]; ";
    } else {
      ld += "const " + vt + " a" + G + " = *(__local const " + vt + "*)(dn_As + dn_kk * " + Ps + " + dn_ty * " +
            std::to_string(V) + " + " + off + "), b" + G + " = *(__local const " + vt + "*)(dn_Bs + dn_kk * " + Ps +
            " + dn_tx * " + std::to_string(V) + " + " + off + "); ";
    }
  }
  k.body.line(ld);
  auto part_of = [&](const char* name, int64_t i) {
    return std::string(name) + std::to_string(i / V) + (V == 1 ? "" : ".s" + std::to_string(i % V));
  };
  for (int64_t i = 0; i < R; ++i) {
    std::string f;
    for (int64_t j = 0; j < R; ++j) {
      const std::string c = "c" + std::to_string(i * R + j);
      f += c + " = fma(" + part_of("a", i) + ", " + part_of("b", j) + ", " + c + "); ";
    }
    k.body.line(f);
  }
  k.body.close();
  k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
  if (prefetch) k.body.close();  // if (dn_now)
  k.body.close();
  auto local_of = [&](int64_t i) { return L(i / V * GS + i % V); };
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < R; ++j) {
      k.body.open("");
      k.body.line("const long dn_m = dn_m0 + dn_ty * " + L(V) + " + " + local_of(i) + ", dn_n = dn_n0 + dn_tx * " + L(V) +
                  " + " + local_of(j) + ";");
      k.body.open("if (dn_m < " + L(M) + " && dn_n < " + L(N) + ")");
      if (splits > 1) {
        k.body.line(part + "[((dn_z * " + L(batch) + " + b) * " + L(M) + " + dn_m) * " + L(N) + " + dn_n] = c" +
                    std::to_string(i * R + j) + ";");
      } else {
        k.body.line("const float acc = c" + std::to_string(i * R + j) + ";");
        finish_element(k, a, out);
      }
      k.body.close();
      k.body.close();
    }
  if (splits == 1) return;
  k.name += "_part";
  const int64_t g3[3] = {global[0], global[1], global[2]};
  finish(k, g3);
  this->out.launches.back().block = cur_block;
  scratch_end = std::max(scratch_end, part_at + splits * total * 4);
  split_bytes[cur_block] += splits * total * 4;
  k = base;
  shape = Shape{};
  global[0] = total;
  global[1] = global[2] = 1;
  k.body.line("const long e = get_global_id(0);");
  k.body.line("if (e >= " + L(total) + ") return;");
  k.body.line("const long dn_n = e % " + L(N) + ", dn_m = e / " + L(N) + " % " + L(M) + ", b = e / " + L(M * N) + ";");
  k.body.line("(void)b;");
  k.body.line("float acc = " + part + "[e];");
  k.body.line("for (long dn_z = 1; dn_z < " + L(splits) + "; ++dn_z) acc += " + part + "[dn_z * " + L(total) + " + e];");
  finish_element(k, a, out);
}

int64_t tile_row(const OpenclCodegenOptions& o, int64_t t) {
  // + 1 spreads the transposing stores over the banks; with vector reads, + 4 keeps every row
  // 16-byte aligned.
  return t + ((o.tile_features & kTileVec) ? 4 : 1);
}

TileChoice choose_tile(const OpenclCodegenOptions& o, int64_t M, int64_t N, int64_t K, int64_t batch, bool conv) {
  if (!o.tiled_gemm || M < kTileMin || N < kTileMin) return {};
  auto fits = [&](int64_t t) {
    return kTileSide * kTileSide <= o.max_work_group && 2 * kTileK * tile_row(o, t) * 4 <= o.local_mem_bytes;
  };
  const int64_t steps = (K + kTileK - 1) / kTileK, cu = std::max<int64_t>(1, o.compute_units);
  auto groups = [&](int64_t t) { return (M + t - 1) / t * ((N + t - 1) / t) * batch; };
  // Splits of K that bring the groups up to `aim` where they are fewer than `below`, each split
  // keeping `min_steps` steps.
  auto split_to = [&](int64_t t, int64_t aim, int64_t below, int64_t min_steps) {
    const int64_t g = groups(t);
    return g >= below ? 1 : std::max<int64_t>(1, std::min((aim + g - 1) / g, steps / min_steps));
  };
  // A 128-wide tile's group holds 64 accumulators per item: one group per compute unit, so the
  // groups run in waves of `cu` and a last, partial wave idles the rest (H200, run 9: 50 groups
  // on 132 units ran at 50/132 of the speed of 128 groups). The fewest splits whose waves are
  // 85% full, each split keeping kHugeSplitSteps steps (run 9: ResNet-50's 128-channel layers
  // split into 4-step pieces ran slower than 32-wide tiles); 0 where none is.
  auto wave_splits = [&](bool any) -> int64_t {
    int64_t best = 1;
    double best_fill = 0;
    for (int64_t s = 1; s <= std::max<int64_t>(1, steps / kHugeSplitSteps); ++s) {
      const int64_t g = groups(kTileHuge) * s;
      const double fill = static_cast<double>(g) / static_cast<double>((g + cu - 1) / cu * cu);
      if (fill >= 0.85) return s;
      if (fill > best_fill + 1e-9) best = s, best_fill = fill;
    }
    return any ? best : 0;
  };
  auto splits = [&](int64_t t) -> int64_t {
    if (o.split_k) return std::max<int64_t>(1, std::min(o.split_k, steps));
    if (!o.gpu) return split_to(t, 2 * cu, cu, kSplitMinSteps);  // below one per unit, aiming at two
    if (t == kTileHuge) return wave_splits(true);
    // Smaller tiles: several resident groups per unit hide each other's loads. GEMMs split
    // until three per unit in pieces of kGemmSplitSteps (run 8: BERT's FFN 13.7 -> 18.7
    // TFLOP/s at four, 12 steps each), convolutions as before run 8 (below two per unit,
    // aiming at four), under which ResNet-50 ran fastest (run 7).
    return conv ? split_to(t, 4 * cu, 2 * cu, kSplitMinSteps) : split_to(t, 3 * cu, 3 * cu, kGemmSplitSteps);
  };
  int64_t t = 0;
  if (o.tile) {
    t = fits(o.tile) ? o.tile : 0;
  } else if (o.gpu && conv && M >= kTileHuge && N >= kTileHuge && fits(kTileHuge) && wave_splits(false)) {
    t = kTileHuge;  // a convolution whose 128-wide tiles (split) fill the compute units' waves
  } else if (!o.gpu || conv) {  // a CPU device, and other convolutions as before run 8: 64
    // where that gives a group per compute unit, else 32
    t = fits(kTileBig) && groups(kTileBig) >= cu ? kTileBig : fits(kTileSmall) ? kTileSmall : 0;
  } else {  // GEMMs: the widest tile they fill, up to 64 (run 8: 128 lost on every GEMM)
    t = M >= kTileBig && N >= kTileBig && fits(kTileBig) ? kTileBig : fits(kTileSmall) ? kTileSmall : 0;
  }
  return t ? TileChoice{t, splits(t)} : TileChoice{};
}

int64_t gemm_tile_side(const OpenclCodegenOptions& o, int64_t M, int64_t N, int64_t batch) {
  return choose_tile(o, M, N, kTileK, batch, false).side;
}

// A work-group per row (row kernels whose rows are long enough): the group's items each take
// every kRowGroup-th element of the row, and a tree in local memory combines their partial
// results (`op` of two floats); every item gets the total in `name`. The group never returns
// early, so every item meets every barrier.
bool Renderer::row_groups(int64_t len) const {
  return opt.tiled_gemm && len >= kRowGroupMin && kRowGroup <= opt.max_work_group && kRowGroup * 4 <= opt.local_mem_bytes;
}

void Renderer::group_head(K& k, int64_t rows, int64_t global[3]) {
  global[0] = rows * kRowGroup;
  shape.local[0] = kRowGroup;
  shape.local_bytes = kRowGroup * 4;
  k.body.line("__local float dn_red[" + std::to_string(kRowGroup) + "];");
  k.body.line("const long dn_r = get_group_id(0); const int dn_lid = (int)get_local_id(0);");
}

void Renderer::group_reduce(K& k, const std::string& part, const std::string& name, const std::string& op) {
  k.body.line("dn_red[dn_lid] = " + part + ";");
  k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
  k.body.open("for (int dn_s = " + std::to_string(kRowGroup / 2) + "; dn_s > 0; dn_s >>= 1)");
  k.body.line("if (dn_lid < dn_s) { const float x = dn_red[dn_lid], y = dn_red[dn_lid + dn_s]; dn_red[dn_lid] = " + op + "; }");
  k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
  k.body.close();
  k.body.line("const float " + name + " = dn_red[0];");
  k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
}

}  // namespace dnnf::cg::opencl
