// Inter-block layout selection (paper §4.4): regions of convolutions and the elementwise
// operators between them run channels last (NhwcConv), with a Transpose only where a region
// meets the rest of the graph, and only where the estimated gain exceeds the transposes' cost.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "ir/errors.h"
#include "ir/shape_rules.h"
#include "rewrite/passes.h"
#include "rewrite/rebuild.h"
#include "target/isa.h"

namespace dnnf {

namespace {

bool static_rank(const Graph& g, ValueId v, size_t lo, size_t hi) {
  const TensorType& t = g.value(v).type;
  return t.is_static() && t.shape.size() >= lo && t.shape.size() <= hi;
}

int64_t attr_or(const Node& n, const char* k, int64_t d) { return n.has_attr(k) ? n.attrs.at(k).i : d; }

// The convolutions the NHWC kernels take: 1 to 3 spatial dims, f32, static shapes, and
// group 1 or depthwise (other grouped convs run, but slowly, so only kNhwc takes them).
bool conv_candidate(const Graph& g, const Node& n, bool any_group) {
  if (n.op != OpKind::Conv || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  const ValueId x = n.inputs[0], w = n.inputs[1];
  if (!static_rank(g, x, 3, 5) || !static_rank(g, w, 3, 5) || !static_rank(g, n.outputs[0], 3, 5)) return false;
  if (g.value(x).type.dtype != DType::F32) return false;
  const int64_t group = attr_or(n, "group", 1);
  const std::vector<int64_t> xd = g.value(x).type.dims(), od = g.value(n.outputs[0]).type.dims();
  const bool depthwise = group == xd[1] && group == od[1];
  return group == 1 || depthwise || any_group;
}

// One-to-One operators whose result does not depend on where an element sits (not
// BatchNormalization, which names axis 1, nor Trilu), with at least one input of the
// output's shape: the data path the layout follows. Broadcast operands are transposed too.
bool elementwise_candidate(const Graph& g, const Node& n) {
  if (n.info().mapping != MappingType::OneToOne || n.outputs.size() != 1 || n.inputs.empty()) return false;
  if (n.op == OpKind::BatchNormalization || n.op == OpKind::Trilu || n.op == OpKind::Constant) return false;
  const ValueId o = n.outputs[0];
  if (!static_rank(g, o, 3, 5)) return false;
  const size_t r = g.value(o).type.shape.size();
  bool full = false;
  for (ValueId v : n.inputs) {
    if (v == kNoValue) continue;
    if (!g.value(v).type.is_static() || g.value(v).type.shape.size() > r) return false;
    full |= g.value(v).type.shape == g.value(o).type.shape;
  }
  return full;
}

// Global pools of a channels-last value reduce its spatial axes (ReduceMean/ReduceMax with
// keepdims): [N, 1.., C] is the channels-last image of their [N, C, 1..] result, so a
// squeeze-and-excitation gate computed from a region stays in it.
bool global_pool_candidate(const Graph& g, const Node& n) {
  if ((n.op != OpKind::GlobalAveragePool && n.op != OpKind::GlobalMaxPool) || n.outputs.size() != 1) return false;
  return static_rank(g, n.inputs[0], 3, 5) && g.value(n.inputs[0]).type.dtype == DType::F32;
}

// ReduceMean/Max/Min/Sum over exactly the spatial axes of a channels-last value (a classifier's
// mean over time and space, S3D's): channels last it reduces axes 1..r-2. With keepdims its
// [N, 1.., C] is the channels-last image of the [N, C, 1..] result (as a global pool's); without,
// its [N, C] is the result itself, which leaves the region with no transpose. 1: keepdims,
// 2: not, 0: not such a reduction.
int spatial_reduce_candidate(const Graph& g, const Node& n) {
  if (n.op != OpKind::ReduceMean && n.op != OpKind::ReduceMax && n.op != OpKind::ReduceMin &&
      n.op != OpKind::ReduceSum)
    return 0;
  if (n.outputs.size() != 1 || n.inputs.empty() || !static_rank(g, n.inputs[0], 3, 5) ||
      g.value(n.inputs[0]).type.dtype != DType::F32)
    return 0;
  const int64_t r = static_cast<int64_t>(g.value(n.inputs[0]).type.shape.size());
  std::optional<std::vector<int64_t>> axes;
  try {
    axes = InferCtx(g, n).const_ints(1, "axes");
  } catch (const Error&) {
    return 0;
  }
  if (!axes) return 0;
  std::vector<int64_t> a = *axes;
  for (int64_t& x : a) x = x < 0 ? x + r : x;
  std::sort(a.begin(), a.end());
  std::vector<int64_t> spatial(static_cast<size_t>(r - 2));
  std::iota(spatial.begin(), spatial.end(), 2);
  if (a != spatial) return 0;
  return attr_or(n, "keepdims", 1) ? 1 : 2;
}

// MaxPool (its Indices unused) and AveragePool run channels last as NhwcMaxPool /
// NhwcAveragePool (pool_nhwc.h), so a pool between two convolutions does not split a region.
bool window_pool_candidate(const Graph& g, const Node& n) {
  if (n.op != OpKind::MaxPool && n.op != OpKind::AveragePool) return false;
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i] != kNoValue && (!g.consumers(n.outputs[i]).empty() || g.is_graph_output(n.outputs[i])))
      return false;
  return static_rank(g, n.inputs[0], 3, 5) && g.value(n.inputs[0]).type.dtype == DType::F32;
}

// Concat of same-rank values (any axis): channels last it concatenates along the axis's
// new position. Auto takes it only where code generation keeps it on vectors: along the
// channels (then the innermost axis) every input but the last must be a whole number of
// vectors wide (codegen/pointwise.cc; else a scalar loop: YOLOv4's CSP concats of 32 + 32
// channels on AVX-512 ran +20%).
bool concat_candidate(const Graph& g, const Node& n, bool forced) {
  if (n.op != OpKind::Concat || n.outputs.size() != 1 || !static_rank(g, n.outputs[0], 3, 5)) return false;
  const size_t r = g.value(n.outputs[0]).type.shape.size();
  for (ValueId v : n.inputs)
    if (v == kNoValue || !static_rank(g, v, r, r)) return false;
  int64_t axis = n.has_attr("axis") ? n.attrs.at("axis").i : 0;
  if (axis < 0) axis += static_cast<int64_t>(r);
  if (forced || axis != 1) return true;
  for (size_t i = 0; i + 1 < n.inputs.size(); ++i)
    if (g.value(n.inputs[i]).type.dims()[1] % kMaxVecWidth != 0) return false;
  return true;
}

// DepthToSpace (either mode) of a static 4-D value: channels last it is a Reshape, Transpose
// and Reshape of the channels-last image, which the kernels reading it compose into their
// loads (a sub-pixel convolution's pixel shuffle stays in its convolutions' region).
bool depth_to_space_candidate(const Graph& g, const Node& n) {
  return n.op == OpKind::DepthToSpace && n.outputs.size() == 1 && static_rank(g, n.inputs[0], 4, 4) &&
         static_rank(g, n.outputs[0], 4, 4);
}

// The permutations between channels first [N, C, s...] and channels last [N, s..., C].
std::vector<int64_t> to_last(size_t r) {
  std::vector<int64_t> p{0};
  for (size_t i = 2; i < r; ++i) p.push_back(static_cast<int64_t>(i));
  p.push_back(1);
  return p;
}
std::vector<int64_t> to_first(size_t r) {
  std::vector<int64_t> p{0, static_cast<int64_t>(r) - 1};
  for (size_t i = 1; i + 1 < r; ++i) p.push_back(static_cast<int64_t>(i));
  return p;
}

// A constant of rank <= r broadcast to rank r (leading 1s) and permuted by `perm` (any dtype).
TensorPtr permuted_constant(const TensorData& t, size_t r, const std::vector<int64_t>& perm) {
  std::vector<int64_t> d = t.type.dims();
  d.insert(d.begin(), r - d.size(), 1);
  std::vector<int64_t> nd(r), stride(r, 1);
  for (size_t i = r; i-- > 1;) stride[i - 1] = stride[i] * d[i];
  for (size_t i = 0; i < r; ++i) nd[i] = d[static_cast<size_t>(perm[i])];
  const size_t es = dtype_size(t.type.dtype);
  const int64_t total = t.type.numel();
  std::vector<unsigned char> out(static_cast<size_t>(total) * es);
  const unsigned char* src = static_cast<const unsigned char*>(t.data);
  std::vector<int64_t> idx(r, 0);
  for (int64_t k = 0; k < total; ++k) {  // k walks the output; idx is its multi-index
    int64_t off = 0;
    for (size_t i = 0; i < r; ++i) off += idx[i] * stride[static_cast<size_t>(perm[i])];
    std::memcpy(out.data() + k * es, src + off * es, es);
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < nd[i]) break;
      idx[i] = 0;
    }
  }
  TensorType tt{t.type.dtype, {}};
  for (int64_t x : nd) tt.shape.push_back(x);
  return TensorData::copy_of(tt, out.data());
}

// How much more a border transpose costs when it lands in node n's kernel: Reorganize,
// Shuffle and One-to-Many kernels (Slice, Split, Concat, Resize...) then gather scalars.
double gather_factor(const Node& n) {
  const MappingType t = n.info().mapping;
  return t == MappingType::Reorganize || t == MappingType::Shuffle || t == MappingType::OneToMany ? 20.0 : 1.0;
}

struct UnionFind {
  std::vector<int> p;
  explicit UnionFind(size_t n) : p(n) { std::iota(p.begin(), p.end(), 0); }
  int find(int x) { return p[x] == x ? x : p[x] = find(p[x]); }
  void join(int a, int b) { p[find(a)] = find(b); }
};

// A ConvTranspose pointwise_up_conv takes, as the 1x1 convolution it becomes channels last.
ConvGeometry up_conv_geometry(const Graph& g, const Node& n) {
  const std::vector<int64_t> xd = g.value(n.inputs[0]).type.dims(), od = g.value(n.outputs[0]).type.dims();
  ConvGeometry c;
  c.C = xd[1];
  c.M = od[1] * (od[2] / xd[2]) * (od[3] / xd[3]);
  c.batch = xd[0];
  c.in_pixels = c.out_pixels = xd[0] * xd[2] * xd[3];
  return c;
}

ConvGeometry geometry_of(const Graph& g, const Node& n) {
  if (n.op == OpKind::ConvTranspose) return up_conv_geometry(g, n);
  const std::vector<int64_t> xd = g.value(n.inputs[0]).type.dims(), od = g.value(n.outputs[0]).type.dims();
  const std::vector<int64_t> wd = g.value(n.inputs[1]).type.dims();
  ConvGeometry c;
  c.C = xd[1];
  c.M = od[1];
  c.group = attr_or(n, "group", 1);
  c.batch = xd[0];
  c.in_pixels = xd[0];
  c.out_pixels = od[0];
  for (size_t i = 2; i < xd.size(); ++i) c.in_pixels *= xd[i];
  for (size_t i = 2; i < od.size(); ++i) c.out_pixels *= od[i];
  for (size_t i = 2; i < wd.size(); ++i) c.taps *= wd[i];
  if (n.has_attr("strides"))
    for (int64_t s : n.attrs.at("strides").ints) c.stride = std::max(c.stride, s);
  // Winograd (conv_winograd.h) needs a 3x3 plane (the last two dims) with stride and
  // dilation 1 there; a 3-D kernel's depth may be anything.
  const size_t nd = wd.size() - 2;
  auto plane_is_1 = [&](const char* name) {
    if (!n.has_attr(name)) return true;
    const auto& v = n.attrs.at(name).ints;
    for (size_t i = v.size() >= 2 ? v.size() - 2 : 0; i < v.size(); ++i)
      if (v[i] != 1) return false;
    return true;
  };
  c.winograd = (nd == 2 || nd == 3) && wd[nd] == 3 && wd[nd + 1] == 3 && plane_is_1("strides") &&
               plane_is_1("dilations") && c.group == 1;
  return c;
}

}  // namespace

// ---- The cost model -------------------------------------------------------------------
// Estimated microseconds of one convolution in each layout. Channels first: the FLOPs at
// 380 GFLOP/s plus the bytes at 30 GB/s (20, or 12 strided, for depthwise, which is memory
// bound). Channels last: the same with the compute part divided by a speed ratio measured
// on kernels (conv_nhwc.h's direct kernel and pointwise GEMM against conv.h's im2col GEMM,
// Zen 5, 2 threads; benchmarks/layout_bench.py for whole models):
//   depthwise 3x3 stride 2            1.6  (no deinterleave)       stride 1: 1.0
//   dense 3x3 on planes of 56x56+     1.2-1.9 (64 channels at 224x224 1.9, 256 at 56x56 1.2)
//             on 28x28 .. 32x32       1.4; 14x14 and 7x7 2.2; stride 2 2.0
//   1x1 stride 2                      1.4  (a strided gather of pixels, not of rows)
//   1x1 stride 1                      1.1 on planes of 56x56+, 1.3-1.4 below
//   a stem on 3 image channels        0.9  (7x7 stride 2 at parity, 3x3 stride 1 0.75)
// and where channels last runs a 3x3 stride-1 convolution through Winograd F(2x2, 3x3)
// (conv_winograd.h: at least 32 channels each side and 8x8 outputs), its compute part is a
// further 1.6x faster than the direct kernel (measured 1.5-2.1x with AVX-512 and 1.3-1.8x
// with AVX2 on 14x14 to 112x112 planes of 64-512 channels, Zen 4, 2 threads; 1.4-1.9x for
// 3-D kernels with a 3x3 plane). Channels first has no Winograd path.
double layout_conv_us(const ConvGeometry& c, bool nhwc) {
  const double out_px = static_cast<double>(c.out_pixels), in_px = static_cast<double>(c.in_pixels);
  const double flops = 2.0 * out_px * c.M * (static_cast<double>(c.C) / c.group) * c.taps;
  const double bytes = 4.0 * (in_px * c.C + out_px * c.M);
  const bool depthwise = c.group == c.C && c.group == c.M && c.group > 1;
  if (depthwise) {
    const double gbs = nhwc ? 20.0 : (c.stride > 1 ? 12.0 : 20.0);
    return flops / 380e3 + bytes / (gbs * 1e3);
  }
  double ratio = 1.0;
  const double plane = out_px / std::max<int64_t>(c.batch, 1);
  if (c.C < 8) {
    ratio = 0.9;
  } else if (c.taps == 1) {
    ratio = c.stride > 1 ? 1.4 : plane >= 3136 ? 1.1 : 1.3;
  } else {
    ratio = c.stride > 1 ? 2.0 : plane >= 3136 ? 1.2 : plane >= 784 ? 1.4 : 2.0;
    if (c.winograd && c.C >= 32 && c.M >= 32 && plane >= 64) ratio *= 1.6;
  }
  return flops / 380e3 / (nhwc ? ratio : 1.0) + bytes / 30e3;
}

// A transpose at a region's border is folded into a neighbouring kernel's loads or stores.
// Into a vectorized epilogue it costs about 0.4 ns per element (the MobileNetV2 stem's
// output, 401k elements: +0.16 ms); into a Slice or Split of the channels it turns the
// kernel into a scalar gather, about 9 ns per element (YOLOv4's CSP splits: 5.5M elements,
// 10 -> 53 ms). select_layout charges 20x where the kernel across the border is a
// Reorganize, Shuffle or One-to-Many one.
double layout_transpose_us(int64_t numel) { return 2.0 + 0.4e-3 * static_cast<double>(numel); }

// Whether n is a RoiAlign sampling the 4-D value v (as X only): once v is a region's output,
// n becomes an NhwcRoiAlign reading v's channels-last image in place, so v needs no
// channels-first copy for it.
static bool roi_align_of(const Graph& g, const Node& n, ValueId v) {
  return n.op == OpKind::RoiAlign && n.inputs.size() == 3 && n.inputs[0] == v && n.inputs[1] != v &&
         n.inputs[2] != v && g.value(v).type.shape.size() == 4;
}

Graph select_layout(const Graph& g, LayoutMode mode, LayoutReport* report) {
  if (report) *report = LayoutReport{};
  if (mode == LayoutMode::Nchw) return eliminate_dead_code(g);
  const bool forced = mode == LayoutMode::Nhwc;
  const size_t nn = g.nodes().size();
  std::vector<char> cand(nn, 0), is_conv(nn, 0), is_pool(nn, 0), is_wpool(nn, 0), is_concat(nn, 0);
  std::vector<char> is_reduce(nn, 0);  // spatial_reduce_candidate: 1 keepdims, 2 not (its result leaves as it is)
  std::vector<char> is_d2s(nn, 0), is_up(nn, 0);  // DepthToSpace; a ConvTranspose that pointwise_up_conv takes
  for (const Node& n : g.nodes()) {
    // Auto leaves out convolutions the model expects to be much slower channels last (a stem
    // on the image's 3 channels): their region then starts after them. Milder losses stay in
    // (leaving would split the region, at the price of two transposes).
    if (conv_candidate(g, n, forced) &&
        (forced || layout_conv_us(geometry_of(g, n), true) <= 1.5 * layout_conv_us(geometry_of(g, n), false)))
      cand[n.id] = is_conv[n.id] = 1;
    else if (global_pool_candidate(g, n)) cand[n.id] = is_pool[n.id] = 1;
    else if (const int k = spatial_reduce_candidate(g, n)) cand[n.id] = 1, is_reduce[n.id] = static_cast<char>(k);
    else if (window_pool_candidate(g, n)) cand[n.id] = is_wpool[n.id] = 1;
    else if (concat_candidate(g, n, forced)) cand[n.id] = is_concat[n.id] = 1;
    else if (depth_to_space_candidate(g, n)) cand[n.id] = is_d2s[n.id] = 1;
    // An up-convolution whose windows do not overlap: channels last a 1x1 convolution (a GEMM,
    // with no transposes around it) and a DepthToSpace; channels first it stays the
    // ConvTranspose kernel (a DepthToSpace there gathers). U-Net's four, Xeon, 2 threads:
    // 7.5-11.7 ms channels first, 4.3-5.2 ms channels last, and each one's neighbours lose a
    // transposed store.
    else if (pointwise_up_conv_block(g, n)) cand[n.id] = is_conv[n.id] = is_up[n.id] = 1;
    else if (elementwise_candidate(g, n)) cand[n.id] = 1;
  }
  auto data_input = [&](const Node& n, size_t i) {  // along which the layout propagates
    if (is_conv[n.id] || is_pool[n.id] || is_wpool[n.id] || is_reduce[n.id] || is_d2s[n.id]) return i == 0;
    if (is_concat[n.id]) return true;
    return n.inputs[i] != kNoValue && g.value(n.inputs[i]).type.shape == g.value(n.outputs[0]).type.shape;
  };
  // Regions: candidates joined along the data path (a conv's X, an elementwise input of the
  // output's shape) to candidate producers.
  UnionFind uf(nn);
  for (const Node& n : g.nodes()) {
    if (!cand[n.id]) continue;
    const TensorType& ot = g.value(n.outputs[0]).type;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId v = n.inputs[i];
      if (!data_input(n, i)) continue;
      const NodeId p = g.value(v).producer;
      if (p >= 0 && cand[p] && is_reduce[p] != 2 &&
          g.value(v).type.shape.size() == (is_reduce[n.id] ? g.value(n.inputs[0]).type.shape.size() : ot.shape.size()))
        uf.join(n.id, p);
    }
  }
  // Per region: the gain of its convolutions and the cost of the transposes at its border.
  struct Region {
    double gain = 0, cost = 0;
    int convs = 0, leaving = 0;
    std::vector<ValueId> entering;
  };
  std::map<int, Region> regions;
  for (const Node& n : g.nodes()) {
    if (!cand[n.id]) continue;
    const int id = uf.find(n.id);
    Region& r = regions[id];
    if (is_conv[n.id]) {
      const ConvGeometry c = geometry_of(g, n);
      r.gain += layout_conv_us(c, false) - layout_conv_us(c, true);
      ++r.convs;
    }
    const bool one_input = is_conv[n.id] || is_pool[n.id] || is_wpool[n.id] || is_reduce[n.id] || is_d2s[n.id];
    const std::vector<ValueId> ins = one_input ? std::vector<ValueId>{n.inputs[0]} : n.inputs;
    for (ValueId v : ins) {  // values from outside the region (constants are permuted here)
      if (v == kNoValue || g.value(v).constant) continue;
      const NodeId p = g.value(v).producer;
      if ((p >= 0 && cand[p] && uf.find(p) == id) ||
          std::find(r.entering.begin(), r.entering.end(), v) != r.entering.end())
        continue;
      r.entering.push_back(v);
      r.cost += layout_transpose_us(g.value(v).type.numel()) * (p >= 0 ? gather_factor(g.node(p)) : 1.0);
    }
    const ValueId o = n.outputs[0];  // read outside the region, or as a conv's weights
    bool leaves = g.is_graph_output(o);
    double factor = 1.0;
    for (NodeId c : g.consumers(o)) {
      if (roi_align_of(g, g.node(c), o)) continue;
      const bool out = !cand[c] || uf.find(c) != id || (is_conv[c] && g.node(c).inputs[0] != o);
      leaves |= out;
      if (out) factor = std::max(factor, gather_factor(g.node(c)));
    }
    if (leaves && is_reduce[n.id] != 2) {  // a reduction without keepdims leaves as it is
      r.cost += layout_transpose_us(g.value(o).type.numel()) * factor;
      ++r.leaving;
    }
  }
  std::vector<char> nhwc(nn, 0);
  for (auto& [id, r] : regions) {
    if (r.convs == 0) continue;
    const bool take = forced || r.gain > r.cost;
    if (report) {
      report->regions.push_back(LayoutRegion{r.convs, r.gain, r.cost, take});
      if (take) report->transposes_out += r.leaving;
    }
    if (!take) r.convs = 0;
  }
  for (const Node& n : g.nodes()) nhwc[n.id] = cand[n.id] && regions[uf.find(n.id)].convs > 0;

  // The rewrite: a region node reads its inputs channels last (transposing what comes from
  // outside once per value) and leaves a channels-first copy behind for the rest of the
  // graph; copies nothing reads are removed by dead-code elimination.
  Rebuilder rb(g);
  std::map<ValueId, ValueId> last;  // source value -> its channels-last image in the new graph
  auto fresh_name = [&](const std::string& base) {
    std::string nm = base;
    while (rb.dst().find_value(nm) != kNoValue || g.find_value(nm) != kNoValue) nm += "_";
    return nm;
  };
  auto channels_last = [&](ValueId v, size_t r) -> ValueId {
    auto it = last.find(v);
    if (it != last.end()) return it->second;
    const Value& val = g.value(v);
    ValueId img;
    if (val.constant) {
      img = rb.constant(permuted_constant(*val.constant, r, to_last(r)), val.name + ".nhwc");
    } else {
      ValueId src = rb.map(v);
      const size_t q = val.type.shape.size();
      if (q < r) {  // broadcast to rank r first: leading 1s
        std::vector<int64_t> shape(r - q, 1);
        for (int64_t d : val.type.dims()) shape.push_back(d);
        TensorType st{DType::I64, {static_cast<int64_t>(r)}};
        ValueId sc = rb.constant(TensorData::copy_of(st, shape.data()), val.name + ".shape");
        src = rb.emit(OpKind::Reshape, {src, sc});
      }
      Attrs a;
      a["perm"] = Attr::of_ints(to_last(r));
      img = rb.emit(OpKind::Transpose, {src}, a);
      if (report) ++report->transposes_in;
    }
    last[v] = img;
    return img;
  };
  for (const Node& n : g.nodes()) {
    if (!n.inputs.empty() && last.count(n.inputs[0]) && roi_align_of(g, n, n.inputs[0])) {
      rb.replace(n, {rb.emit(OpKind::NhwcRoiAlign, {last.at(n.inputs[0]), rb.map(n.inputs[1]), rb.map(n.inputs[2])},
                             n.attrs, n.name)});
      if (report) ++report->roi_aligns_nhwc;
      continue;
    }
    if (!nhwc[n.id]) {
      rb.copy(n);
      continue;
    }
    const ValueId o = n.outputs[0];
    const size_t r = g.value(o).type.shape.size();
    if (is_reduce[n.id]) {  // the spatial axes channels last; without keepdims the result itself
      const size_t ri = g.value(n.inputs[0]).type.shape.size();
      std::vector<int64_t> axes;
      for (size_t i = 1; i + 1 < ri; ++i) axes.push_back(static_cast<int64_t>(i));
      Attrs attrs;
      for (const auto& [k, v] : n.attrs)
        if (k != "axes") attrs[k] = v;
      TensorType at{DType::I64, {static_cast<int64_t>(axes.size())}};
      const ValueId y = rb.dst().add_node(
          n.op, {channels_last(n.inputs[0], ri), rb.constant(TensorData::copy_of(at, axes.data()), n.name + ".axes")},
          attrs, 1, n.name, {fresh_name(g.value(o).name + (is_reduce[n.id] == 1 ? ".nhwc" : ""))})[0];
      if (is_reduce[n.id] == 2) {
        rb.replace(n, {y});
        continue;
      }
      last[o] = y;
      Attrs a;
      a["perm"] = Attr::of_ints(to_first(r));
      rb.replace(n, {rb.emit(OpKind::Transpose, {y}, a)});
      continue;
    }
    if (is_d2s[n.id] || is_up[n.id]) {  // [N, H, W, s*s*M] -> [N, H, s, W, s, M] -> [N, H*s, W*s, M]
      const std::vector<int64_t> xd = g.value(n.inputs[0]).type.dims(), od = g.value(o).type.dims();
      const int64_t bs = od[2] / xd[2], M = od[1];
      // DCR: channel (a*s + b)*M + m of the input; CRD: m*s*s + a*s + b
      const bool dcr = is_up[n.id] || !n.has_attr("mode") || n.attrs.at("mode").s == "DCR";
      auto shape_of = [&](const std::vector<int64_t>& d, const char* hint) {
        return rb.constant(TensorData::copy_of(TensorType{DType::I64, {static_cast<int64_t>(d.size())}}, d.data()),
                           n.name + hint);
      };
      ValueId t = channels_last(n.inputs[0], r);
      if (is_up[n.id]) {  // t = the 1x1 convolution channels last
        const PointwiseUpConv up = pointwise_up_conv(g, n);
        std::vector<ValueId> ins = {t, rb.constant(up.weight, n.name + ".pointwise_weight")};
        if (up.bias) ins.push_back(rb.constant(up.bias, n.name + ".pointwise_bias"));
        Attrs ca;
        ca["kernel_shape"] = Attr::of_ints({1, 1});
        t = rb.emit(OpKind::NhwcConv, ins, ca, n.name + ".pointwise");
        if (report) ++report->convs_nhwc;
      }
      const ValueId split = rb.emit(
          OpKind::Reshape,
          {t, shape_of(dcr ? std::vector<int64_t>{xd[0], xd[2], xd[3], bs, bs, M}
                           : std::vector<int64_t>{xd[0], xd[2], xd[3], M, bs, bs},
                       ".blocks")});
      Attrs pa;
      pa["perm"] = Attr::of_ints(dcr ? std::vector<int64_t>{0, 1, 3, 2, 4, 5} : std::vector<int64_t>{0, 1, 4, 2, 5, 3});
      const ValueId moved = rb.emit(OpKind::Transpose, {split}, pa);
      const ValueId y = rb.dst().add_node(OpKind::Reshape, {moved, shape_of({od[0], od[2], od[3], M}, ".shape")}, {}, 1,
                                          n.name, {fresh_name(g.value(o).name + ".nhwc")})[0];
      last[o] = y;
      Attrs a;
      a["perm"] = Attr::of_ints(to_first(r));
      rb.replace(n, {rb.emit(OpKind::Transpose, {y}, a)});
      continue;
    }
    std::vector<ValueId> ins;
    OpKind op = n.op;
    if (is_conv[n.id]) {
      op = OpKind::NhwcConv;
      ins = {channels_last(n.inputs[0], r), rb.map(n.inputs[1])};
      if (n.inputs.size() > 2) ins.push_back(rb.map(n.inputs[2]));
      if (report) ++report->convs_nhwc;
    } else {
      for (ValueId v : n.inputs) {
        const bool scalar = v != kNoValue && g.value(v).type.numel() == 1 && g.value(v).type.shape.size() < r;
        ins.push_back(v == kNoValue ? kNoValue : scalar ? rb.map(v) : channels_last(v, r));
      }
    }
    Attrs attrs = n.attrs;
    if (is_concat[n.id]) {  // NCHW axis a sits at position 0, r - 1 or a - 1 channels last
      int64_t a = n.has_attr("axis") ? n.attrs.at("axis").i : 0;
      if (a < 0) a += static_cast<int64_t>(r);
      attrs["axis"] = Attr::of_int(a == 0 ? 0 : a == 1 ? static_cast<int64_t>(r) - 1 : a - 1);
    }
    if (is_wpool[n.id]) {
      op = n.op == OpKind::MaxPool ? OpKind::NhwcMaxPool : OpKind::NhwcAveragePool;
      ins = {channels_last(n.inputs[0], r)};
    }
    if (is_pool[n.id]) {
      op = n.op == OpKind::GlobalAveragePool ? OpKind::ReduceMean : OpKind::ReduceMax;
      std::vector<int64_t> axes;
      for (size_t i = 1; i + 1 < r; ++i) axes.push_back(static_cast<int64_t>(i));
      attrs = {{"keepdims", Attr::of_int(1)}};
      TensorType at{DType::I64, {static_cast<int64_t>(axes.size())}};
      ins = {channels_last(n.inputs[0], r), rb.constant(TensorData::copy_of(at, axes.data()), n.name + ".axes")};
    }
    const ValueId y = rb.dst().add_node(op, ins, attrs, 1, n.name, {fresh_name(g.value(o).name + ".nhwc")})[0];
    last[o] = y;
    Attrs a;
    a["perm"] = Attr::of_ints(to_first(r));
    std::vector<ValueId> outs(n.outputs.size(), kNoValue);  // a MaxPool's unused Indices: none
    outs[0] = rb.emit(OpKind::Transpose, {y}, a);
    rb.replace(n, outs);
  }
  return eliminate_dead_code(rb.finish());
}

}  // namespace dnnf
