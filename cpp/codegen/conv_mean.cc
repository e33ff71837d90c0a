// A spatial mean taken by the depthwise convolution whose output it reduces (issue 13, paper
// §4.3 beyond its table: a Many-to-Many reduction after a Many-to-Many anchor): the squeeze-
// and-excitation gate's global pool of EfficientNet and MobileNetV3. The depthwise kernel stores
// its output one row of pixels at a time; it adds each row's channels up right after storing
// it, while the row is in cache, so the pool is no pass over the output of its own. Part of
// BlockLowerer (lower.h): lower() asks before it emits the reduction's stage.
#include <algorithm>

#include "codegen/anchors.h"
#include "codegen/lower.h"
#include "ir/shape_rules.h"
#include "plan/plan.h"

namespace dnnf::cg {

// The reduction's scale when n is a ReduceMean (1 / pixels) or ReduceSum (1) over the pixels
// of an f32 channels-last value (reduces_pixels); 0 otherwise.
static double spatial_mean_scale(const Graph& g, const Node& n) {
  if (!reduces_pixels(g, n)) return 0;
  const std::vector<int64_t> d = dims_of(g, n.inputs[0]);
  int64_t pixels = 1;
  for (size_t i = 1; i + 1 < d.size(); ++i) pixels *= d[i];
  if (pixels <= 0) return 0;
  return n.op == OpKind::ReduceMean ? 1.0 / static_cast<double>(pixels) : 1.0;
}

// Reduction n runs inside the call of an earlier depthwise NhwcConv stage of this block that
// stores n's input itself (its own store, dense, after its epilogue), when n has no epilogue
// of its own and its result is materialised. Returns whether it does (then n has no stage).
bool BlockLowerer::mean_by_conv(const Node& n) {
  if (!opt_.conv_means || epilogues_.count(n.id) || !materialised_.count(n.outputs[0])) return false;
  const double scale = spatial_mean_scale(g_, n);
  if (scale == 0) return false;
  for (Stage& st : plan_.stages) {
    AnchorStage& a = st.anchor;
    if (st.kind != Stage::Kind::Anchor || a.kind != AnchorKind::NhwcConv || a.y != n.inputs[0] || a.ep.stores ||
        a.reduced_by)
      continue;
    const std::vector<int64_t>& shape = a.args.at(0).ints;
    // Depthwise, the output dense (ldy 0) and x where it lies channels last (not planar, not
    // channel segments), its weights packed once: the kernel conv_nhwc_mean_f32 takes.
    if (!is_depthwise_shape(shape) || shape.size() != 25 || shape[23] != 0 || shape[24] != 0 ||
        a.args.at(1).kind != AnchorArg::Kind::Buffer || a.args.at(2).kind != AnchorArg::Kind::Packed)
      return false;
    a.args.push_back(buffer_arg(n.outputs[0]));
    a.args.push_back(float_arg(scale));
    a.reduced_by = &n;
    st.label += std::string(" +") + (n.op == OpKind::ReduceMean ? "mean" : "sum") + " of its pixels";
    return true;
  }
  return false;
}

}  // namespace dnnf::cg
