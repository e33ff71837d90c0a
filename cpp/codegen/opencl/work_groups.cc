// The OpenCL renderer's work-group kernels: the local-memory GEMM tile (GEMMs, and
// convolutions as implicit GEMMs) and the work-group-per-row reduction of the row kernels.
#include <algorithm>
#include <cstring>
#include <functional>

#include "codegen/opencl/renderer.h"
#include "ir/errors.h"

namespace dnnf::cg::opencl {

// A GEMM tile through local memory, for GEMMs and convolutions (as implicit GEMMs) big
// enough to fill it: C[b](M x N) = A[b](M x K) B[b](K x N). A work-group of 16 x 16
// work-items computes a 64 x 64 tile of C, each work-item a 4 x 4 block of it in registers
// (rows ty + 16 i, columns tx + 16 j); K advances 16 at a time through two local tiles that
// the group loads together, each element once (A's prologue, where there is one, is evaluated
// there, so once per 64 columns instead of once per column). Every output still accumulates
// fma(A[m, k], B[k, n]) over k in order from 0, as the one-item-per-element kernel does, so
// both give the same bits. `load_a` spells v = A(b, dn_m, dn_k), `load_b` v = B(b, dn_k, dn_n)
// (both only called in range; out of range the tile holds 0), `out` the flat output index of
// (b, dn_m, dn_n).
void Renderer::tiled_gemm(K& k, const AnchorStage& a, int64_t M, int64_t N, int64_t Kd, int64_t batch,
                          const std::function<void()>& load_a, const std::function<void()>& load_b,
                          const std::string& out, int64_t global[3]) {
  constexpr int64_t T = kTile, S = kTile / kTileItems, P = kTile + 1;  // tile, items per side, padded row
  shape.dims = 3;
  shape.local[0] = S;
  shape.local[1] = S;
  shape.local[2] = 1;
  global[0] = (N + T - 1) / T * S;
  global[1] = (M + T - 1) / T * S;
  global[2] = batch;
  k.body.line("__local float dn_As[" + std::to_string(kTileK * P) + "], dn_Bs[" + std::to_string(kTileK * P) + "];");
  k.body.line("const int dn_tx = (int)get_local_id(0), dn_ty = (int)get_local_id(1), dn_t = dn_ty * " + std::to_string(S) +
              " + dn_tx;");
  k.body.line("const long b = get_global_id(2), dn_m0 = (long)get_group_id(1) * " + L(T) + ", dn_n0 = (long)get_group_id(0) * " +
              L(T) + ";");
  k.body.line("(void)b;");
  std::string regs;
  for (int i = 0; i < kTileItems * kTileItems; ++i) regs += (i ? ", c" : "c") + std::to_string(i) + " = 0.0f";
  k.body.line("float " + regs + ";");
  k.body.open("for (long dn_k0 = 0; dn_k0 < " + L(Kd) + "; dn_k0 += " + L(kTileK) + ")");
  const int64_t per_item = kTileK * T / (S * S);
  k.body.open("for (int dn_l = 0; dn_l < " + std::to_string(per_item) + "; ++dn_l)");
  k.body.line("const int dn_x = dn_t + " + std::to_string(S * S) + " * dn_l;");
  // One element of a tile: `f`/`s` its fast and slow coordinates in the tile (the fast one
  // along consecutive items), `where` the global coordinates they give, `inside` the bounds.
  auto element = [&](const char* tile, const std::string& f, int64_t fast, const std::string& s, const std::string& where,
                     const std::string& inside, const std::function<void()>& load, const std::string& at) {
    k.body.open("");
    k.body.line("const int " + f + " = dn_x % " + std::to_string(fast) + ", " + s + " = dn_x / " + std::to_string(fast) + ";");
    k.body.line(where);
    k.body.line("float v = 0.0f;");
    k.body.open("if (" + inside + ")");
    load();
    k.body.close();
    k.body.line(std::string(tile) + "[" + at + "] = v;");
    k.body.close();
  };
  element("dn_As", "dn_ak", kTileK, "dn_am", "const long dn_m = dn_m0 + dn_am, dn_k = dn_k0 + dn_ak;",
          "dn_m < " + L(M) + " && dn_k < " + L(Kd), load_a, "dn_ak * " + std::to_string(P) + " + dn_am");
  element("dn_Bs", "dn_bn", T, "dn_bk", "const long dn_n = dn_n0 + dn_bn, dn_k = dn_k0 + dn_bk;",
          "dn_n < " + L(N) + " && dn_k < " + L(Kd), load_b, "dn_bk * " + std::to_string(P) + " + dn_bn");
  k.body.close();
  k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
  k.body.open("for (int dn_kk = 0; dn_kk < " + std::to_string(kTileK) + "; ++dn_kk)");
  k.body.line("__local const float* dn_ar = dn_As + dn_kk * " + std::to_string(P) + " + dn_ty;");
  k.body.line("__local const float* dn_br = dn_Bs + dn_kk * " + std::to_string(P) + " + dn_tx;");
  std::string ld;
  for (int i = 0; i < kTileItems; ++i)
    ld += (i ? ", a" : "const float a") + std::to_string(i) + " = dn_ar[" + std::to_string(i * S) + "]";
  for (int j = 0; j < kTileItems; ++j) ld += ", b" + std::to_string(j) + " = dn_br[" + std::to_string(j * S) + "]";
  k.body.line(ld + ";");
  for (int i = 0; i < kTileItems; ++i) {
    std::string f;
    for (int j = 0; j < kTileItems; ++j) {
      const std::string c = "c" + std::to_string(i * kTileItems + j);
      f += c + " = fma(a" + std::to_string(i) + ", b" + std::to_string(j) + ", " + c + "); ";
    }
    k.body.line(f);
  }
  k.body.close();
  k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
  k.body.close();
  for (int i = 0; i < kTileItems; ++i)
    for (int j = 0; j < kTileItems; ++j) {
      k.body.open("");
      k.body.line("const long dn_m = dn_m0 + dn_ty + " + L(i * S) + ", dn_n = dn_n0 + dn_tx + " + L(j * S) + ";");
      k.body.open("if (dn_m < " + L(M) + " && dn_n < " + L(N) + ")");
      k.body.line("const float acc = c" + std::to_string(i * kTileItems + j) + ";");
      finish_element(k, a, out);
      k.body.close();
      k.body.close();
    }
}

bool Renderer::tiles_fit() const {
  const int64_t side = kTile / kTileItems;
  return tiling && side * side <= max_work_group && 2 * kTileK * (kTile + 1) * 4 <= local_mem_bytes;
}

// A work-group per row (row kernels whose rows are long enough): the group's items each take
// every kRowGroup-th element of the row, and a tree in local memory combines their partial
// results (`op` of two floats); every item gets the total in `name`. The group never returns
// early, so every item meets every barrier.
bool Renderer::row_groups(int64_t len) const {
  return tiling && len >= kRowGroupMin && kRowGroup <= max_work_group && kRowGroup * 4 <= local_mem_bytes;
}

void Renderer::group_head(K& k, int64_t rows, int64_t global[3]) {
  global[0] = rows * kRowGroup;
  shape.local[0] = kRowGroup;
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
