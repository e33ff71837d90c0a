// A ConvTranspose whose windows do not overlap (U-Net's 2x2 stride-2 up-convolutions) as a 1x1
// convolution to s * s * M channels and a DepthToSpace: what select_layout (layout.cc) puts in
// a channels-last region in its place.
#include <cstring>
#include <vector>

#include "rewrite/passes.h"

namespace dnnf {

namespace {

bool all_equal(const Node& n, const char* k, int64_t v) {
  if (!n.has_attr(k)) return true;
  for (int64_t x : n.attrs.at(k).ints)
    if (x != v) return false;
  return true;
}

}  // namespace

int64_t pointwise_up_conv_block(const Graph& g, const Node& n) {
  if (n.op != OpKind::ConvTranspose || n.inputs.size() < 2 || n.outputs.size() != 1) return 0;
  const ValueId x = n.inputs[0], w = n.inputs[1], b = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
  const TensorType &xt = g.value(x).type, &wt = g.value(w).type, &yt = g.value(n.outputs[0]).type;
  if (xt.dtype != DType::F32 || wt.dtype != DType::F32 || !xt.is_static() || !wt.is_static() || !yt.is_static() ||
      xt.shape.size() != 4 || wt.shape.size() != 4 || !g.value(w).constant)
    return 0;
  if (b != kNoValue && (!g.value(b).constant || g.value(b).type.dtype != DType::F32)) return 0;
  if (n.has_attr("group") && n.attrs.at("group").i != 1) return 0;
  const std::vector<int64_t> xd = xt.dims(), wd = wt.dims(), yd = yt.dims();
  const int64_t C = wd[0], M = wd[1], s = wd[2];
  if (s < 2 || wd[3] != s || C != xd[1] || yd[1] != M) return 0;
  if (!n.has_attr("strides") || n.attrs.at("strides").ints != std::vector<int64_t>{s, s}) return 0;
  if (!all_equal(n, "dilations", 1) || !all_equal(n, "pads", 0) || !all_equal(n, "output_padding", 0)) return 0;
  if (yd[0] != xd[0] || yd[2] != xd[2] * s || yd[3] != xd[3] * s) return 0;
  return s;
}

PointwiseUpConv pointwise_up_conv(const Graph& g, const Node& n) {
  PointwiseUpConv out;
  out.s = pointwise_up_conv_block(g, n);
  if (!out.s) return out;
  // ConvTranspose: y[n, m, h*s + a, w*s + b] = sum_c x[n, c, h, w] W[c, m, a, b] + B[m].
  // DepthToSpace DCR: y[n, m, h*s + a, w*s + b] = t[n, (a*s + b)*M + m, h, w]. So t is the 1x1
  // Conv with W'[(a*s + b)*M + m, c] = W[c, m, a, b] and B'[(a*s + b)*M + m] = B[m]; DCR, not
  // CRD, since channels last each output pixel's M values are then one run of t's pixel.
  const std::vector<int64_t> wd = g.value(n.inputs[1]).type.dims();
  const int64_t C = wd[0], M = wd[1], s = out.s;
  const float* wv = g.value(n.inputs[1]).constant->as<float>();
  std::vector<float> w1(static_cast<size_t>(s * s * M * C));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t ab = 0; ab < s * s; ++ab)
        w1[static_cast<size_t>((ab * M + m) * C + c)] = wv[(c * M + m) * s * s + ab];
  out.weight = TensorData::copy_of(TensorType{DType::F32, {s * s * M, C, 1, 1}}, w1.data());
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const float* bv = g.value(n.inputs[2]).constant->as<float>();
    std::vector<float> b1(static_cast<size_t>(s * s * M));
    for (int64_t ab = 0; ab < s * s; ++ab) std::memcpy(b1.data() + ab * M, bv, static_cast<size_t>(M) * 4);
    out.bias = TensorData::copy_of(TensorType{DType::F32, {s * s * M}}, b1.data());
  }
  return out;
}

}  // namespace dnnf
