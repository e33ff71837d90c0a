// Constant folding and BatchNormalization folding (paper §4.2 "other optimizations"):
// computing at compile time what does not depend on the inputs.
#include <algorithm>
#include <cmath>
#include <optional>

#include "ir/errors.h"
#include "rewrite/passes.h"
#include "rewrite/pattern.h"
#include "rewrite/rebuild.h"

namespace dnnf {

namespace {

TensorPtr i64_tensor(const Shape& shape, const std::vector<int64_t>& xs) {
  return TensorData::copy_of(TensorType{DType::I64, shape}, xs.data());
}

// Shape/Size need only the input's type, which is known even when its data is not.
TensorPtr fold_shape_of(const Graph& g, const Node& n) {
  const TensorType& t = g.value(n.inputs[0]).type;
  if (!t.is_static()) return nullptr;
  auto dims = t.dims();
  if (n.op == OpKind::Size) return i64_tensor({}, {t.numel()});
  auto r = static_cast<int64_t>(dims.size());
  auto clamp = [r](int64_t a) { return std::clamp(a < 0 ? a + r : a, int64_t{0}, r); };
  int64_t b = clamp(n.has_attr("start") ? n.attrs.at("start").i : 0);
  int64_t e = clamp(n.has_attr("end") ? n.attrs.at("end").i : r);
  std::vector<int64_t> out(dims.begin() + b, dims.begin() + std::max(b, e));
  return i64_tensor({Dim(static_cast<int64_t>(out.size()))}, out);
}

// The constants node `n` computes, or nothing when it does not fold.
std::vector<TensorPtr> evaluate(Rebuilder& rb, const Node& n, const Evaluator& eval) {
  const Graph& g = rb.src();
  const Graph& d = rb.dst();
  size_t out_bytes = 0;
  for (ValueId o : n.outputs) {
    if (!g.value(o).type.is_static()) return {};
    out_bytes += g.value(o).type.nbytes();
  }
  if (n.op == OpKind::Constant && n.has_attr("value") && n.attrs.at("value").kind == Attr::Kind::Tensor)
    return {n.attrs.at("value").t};
  if ((n.op == OpKind::Shape || n.op == OpKind::Size) && n.inputs[0] != kNoValue)
    if (TensorPtr t = fold_shape_of(g, n)) return {t};
  std::vector<TensorPtr> ins;
  size_t in_bytes = 0;
  int64_t in_elems = 0;
  for (ValueId v : n.inputs) {
    if (v == kNoValue) { ins.push_back(nullptr); continue; }
    const Value& img = d.value(rb.map(v));
    if (!img.constant) return {};
    ins.push_back(img.constant);
    in_bytes += img.constant->nbytes();
    in_elems = std::max(in_elems, img.constant->type.numel());
  }
  // An elementwise op that makes no element, only wider ones (DequantizeLinear or Cast of an
  // int8 weight to float32: what a Conv or Gemm reads), folds whatever its size.
  bool widens_only = n.info().mapping == MappingType::OneToOne;
  for (ValueId o : n.outputs) widens_only = widens_only && g.value(o).type.numel() <= in_elems;
  if (out_bytes > in_bytes + kFoldSlackBytes && !widens_only) return {};
  return eval(n, ins);
}

}  // namespace

Graph fold_constants(const Graph& g, const Evaluator& eval) {
  Rebuilder rb(g);
  for (const Node& n : g.nodes()) {
    std::vector<TensorPtr> ts = evaluate(rb, n, eval);
    if (ts.empty()) {
      rb.copy(n);
      continue;
    }
    if (ts.size() < n.outputs.size())
      throw InternalError("fold_constants: node '" + n.name + "' (" + n.info().name + ") evaluated to " +
                          std::to_string(ts.size()) + " outputs, expected " + std::to_string(n.outputs.size()));
    std::vector<ValueId> outs;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value& o = g.value(n.outputs[i]);
      if (!ts[i] || ts[i]->type != o.type)
        throw InternalError("fold_constants: node '" + n.name + "' (" + n.info().name + ") evaluated '" + o.name +
                            "' to " + (ts[i] ? ts[i]->type.str() : std::string("nothing")) + ", its type is " +
                            o.type.str());
      outs.push_back(rb.dst().add_constant(o.name, ts[i]));
    }
    rb.replace(n, outs);
  }
  return eliminate_dead_code(rb.finish());
}

// ---- BatchNormalization folding ------------------------------------------------------

namespace {

// y -> y * scale[o] + shift[o] along the output channels o of a Conv or Gemm.
struct ChannelAffine {
  std::vector<double> scale, shift;
};

std::optional<std::vector<double>> doubles(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).constant || !is_float(g.value(v).type.dtype) ||
      is_half(g.value(v).type.dtype))
    return std::nullopt;
  return g.value(v).constant->to_doubles();
}

// A constant that broadcasts against y = [N, C, ...] along axis 1 only, as C values.
std::optional<std::vector<double>> per_channel(const Graph& g, ValueId c, const Shape& y, int64_t channels) {
  auto xs = doubles(g, c);
  if (!xs) return std::nullopt;
  const Shape& s = g.value(c).type.shape;
  if (s.size() > y.size()) return std::nullopt;
  size_t lead = y.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t dim = s[i].value;
    if (lead + i == 1 ? (dim != 1 && dim != channels) : dim != 1) return std::nullopt;
  }
  if (xs->size() == 1) xs->assign(static_cast<size_t>(channels), (*xs)[0]);
  return xs;
}

// The per-channel map node `n` applies to its input `data`, or nullopt if it is not one.
std::optional<ChannelAffine> channel_affine(const Graph& g, const Node& n, size_t& data, int64_t channels) {
  const Shape& y_shape = g.value(n.outputs[0]).type.shape;
  auto m = static_cast<size_t>(channels);
  if (n.op == OpKind::BatchNormalization) {
    if (n.outputs.size() != 1 || (n.has_attr("training_mode") && n.attrs.at("training_mode").i != 0))
      return std::nullopt;
    auto scale = doubles(g, n.inputs[1]), bias = doubles(g, n.inputs[2]);
    auto mean = doubles(g, n.inputs[3]), var = doubles(g, n.inputs[4]);
    if (!scale || !bias || !mean || !var || scale->size() != m) return std::nullopt;
    double eps = n.has_attr("epsilon") ? n.attrs.at("epsilon").f : 1e-5;
    ChannelAffine a{std::vector<double>(m), std::vector<double>(m)};
    for (size_t o = 0; o < m; ++o) {
      a.scale[o] = (*scale)[o] / std::sqrt((*var)[o] + eps);
      a.shift[o] = (*bias)[o] - (*mean)[o] * a.scale[o];
    }
    data = 0;
    return a;
  }
  if (n.op != OpKind::Mul && n.op != OpKind::Add && n.op != OpKind::Sub && n.op != OpKind::Div) return std::nullopt;
  bool commutes = n.info().commutative();
  for (size_t i : {size_t{0}, size_t{1}}) {
    if (i == 1 && !commutes) break;
    auto c = per_channel(g, n.inputs[1 - i], y_shape, channels);
    if (!c || g.value(n.inputs[i]).type != g.value(n.outputs[0]).type) continue;
    ChannelAffine a{std::vector<double>(m, 1.0), std::vector<double>(m, 0.0)};
    for (size_t o = 0; o < m; ++o) {
      double x = (*c)[o];
      switch (n.op) {
        case OpKind::Mul: a.scale[o] = x; break;
        case OpKind::Div: a.scale[o] = 1.0 / x; break;
        case OpKind::Add: a.shift[o] = x; break;
        default: a.shift[o] = -x; break;  // Sub
      }
    }
    data = i;
    return a;
  }
  return std::nullopt;
}

std::string fresh(Rebuilder& rb, const std::string& base) {
  std::string nm = base;
  for (int i = 2; rb.src().find_value(nm) != kNoValue || rb.dst().find_value(nm) != kNoValue; ++i)
    nm = base + "." + std::to_string(i);
  return nm;
}

// Emits `p` (a Conv or Gemm of the new graph) with the map `a` folded into its weights;
// kNoValue when its weights are not foldable constants.
ValueId fold_into(Rebuilder& rb, const Node& p, const ChannelAffine& a, const std::string& out_name) {
  Graph& d = rb.dst();
  size_t m = a.scale.size();
  auto w = doubles(d, p.inputs[1]);
  if (!w) return kNoValue;
  const TensorType& wt = d.value(p.inputs[1]).type;
  bool has_bias = p.inputs.size() > 2 && p.inputs[2] != kNoValue;
  std::optional<std::vector<double>> b = has_bias ? doubles(d, p.inputs[2]) : std::vector<double>{};
  if (!b) return kNoValue;
  Attrs attrs = p.attrs;
  TensorType bias_type{wt.dtype, {Dim(static_cast<int64_t>(m))}};
  std::vector<double> nb(m);
  if (p.op == OpKind::Conv) {  // W: [M, C/group, k...]
    size_t per = w->size() / m;
    for (size_t o = 0; o < m; ++o) {
      for (size_t j = 0; j < per; ++j) (*w)[o * per + j] *= a.scale[o];
      nb[o] = (has_bias ? (*b)[o] : 0.0) * a.scale[o] + a.shift[o];
    }
  } else {  // Gemm: B is [K, N] (or [N, K] with transB); C broadcasts to [M, N]
    bool tb = p.has_attr("transB") && p.attrs.at("transB").i != 0;
    size_t k = w->size() / m;
    for (size_t i = 0; i < w->size(); ++i) (*w)[i] *= a.scale[tb ? i / k : i % m];
    double beta = p.has_attr("beta") ? p.attrs.at("beta").f : 1.0;
    attrs.erase("beta");
    if (has_bias && beta == 0.0) has_bias = false;
    const Shape& cs = has_bias ? d.value(p.inputs[2]).type.shape : Shape{};
    size_t rows = cs.size() == 2 ? static_cast<size_t>(cs[0].value) : 1;
    size_t cols = !cs.empty() && cs.back().value == static_cast<int64_t>(m) ? m : 1;
    if (rows > 1) bias_type.shape = {Dim(static_cast<int64_t>(rows)), Dim(static_cast<int64_t>(m))};
    nb.assign(rows * m, 0.0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t o = 0; o < m; ++o) {
        double c = has_bias ? beta * (*b)[r * cols + (cols == 1 ? 0 : o)] : 0.0;
        nb[r * m + o] = c * a.scale[o] + a.shift[o];
      }
  }
  TensorPtr wn = tensor_of_doubles(wt, *w), bn = tensor_of_doubles(bias_type, nb);
  if (!wn || !bn) return kNoValue;
  ValueId wv = d.add_constant(fresh(rb, out_name + ".weight"), wn);
  ValueId bv = d.add_constant(fresh(rb, out_name + ".bias"), bn);
  return d.add_node(p.op, {p.inputs[0], wv, bv}, attrs, 1, p.name, {out_name})[0];
}

}  // namespace

Graph fold_batch_norm(const Graph& g) {
  const std::vector<int> readers = reader_counts(g);
  Rebuilder rb(g);
  for (const Node& n : g.nodes()) {
    ValueId out = kNoValue;
    for (size_t i = 0; i < n.inputs.size() && i < 2 && out == kNoValue; ++i) {
      // The node's data input must be computed by a Conv/Gemm (in the new graph) that
      // nothing else reads.
      ValueId v = n.inputs[i];
      if (v == kNoValue || g.value(v).producer < 0 || g.is_graph_output(v) || readers[v] != 1) continue;
      const Value& img = rb.dst().value(rb.map(v));
      if (img.producer < 0) continue;
      const Node& p = rb.dst().node(img.producer);
      if (p.op != OpKind::Conv && p.op != OpKind::Gemm) continue;
      const Dim& ch = p.op == OpKind::Conv ? rb.dst().value(p.inputs[1]).type.shape[0] : img.type.shape[1];
      if (!ch.is_static() || ch.value < 1) continue;
      int64_t channels = ch.value;
      size_t data = 0;
      auto a = channel_affine(g, n, data, channels);
      if (!a || data != i) continue;
      out = fold_into(rb, p, *a, g.value(n.outputs[0]).name);
    }
    if (out == kNoValue) rb.copy(n);
    else rb.replace(n, {out});
  }
  return eliminate_dead_code(rb.finish());
}

// ---- Input-channel scales folded into Conv weights -------------------------------------

namespace {

int64_t static_numel(const TensorType& t) { return t.is_static() ? t.numel() : -1; }

// Whether s (computed, f32) broadcasts against y = [N, C, spatial...] along axis 1 only and
// not along the batch (the same scale for every image), so that it broadcasts the same way
// against Conv weights [M, C, k...].
bool channel_scale(const Graph& g, ValueId s, const TensorType& y) {
  const TensorType& t = g.value(s).type;
  if (g.value(s).constant || t.dtype != DType::F32 || !t.is_static() || t.shape.size() > y.shape.size())
    return false;
  const size_t lead = y.shape.size() - t.shape.size();
  for (size_t i = 0; i < t.shape.size(); ++i) {
    const int64_t d = t.shape[i].value;
    if (d != 1 && !(lead + i == 1 && y.shape[1].is_static() && d == y.shape[1].value)) return false;
  }
  return true;
}

}  // namespace

Graph fold_input_scale(const Graph& g) {
  const std::vector<int> readers = reader_counts(g);
  Rebuilder rb(g);
  for (const Node& n : g.nodes()) {
    ValueId out = kNoValue;
    const ValueId v = n.op == OpKind::Conv && !n.inputs.empty() ? n.inputs[0] : kNoValue;
    const bool group1 = !n.has_attr("group") || n.attrs.at("group").i == 1;
    if (v != kNoValue && group1 && n.inputs.size() > 1 && g.value(v).producer >= 0 && readers[v] == 1 &&
        !g.is_graph_output(v)) {
      const Node& m = g.node(g.value(v).producer);
      const TensorType& vt = g.value(v).type;
      const ValueId w = n.inputs[1];
      const int64_t wn = static_numel(g.value(w).type), xn = static_numel(vt);
      if (m.op == OpKind::Mul && m.inputs.size() == 2 && vt.dtype == DType::F32 && wn > 0 && xn > 0 &&
          2 * wn < xn && g.value(w).type.shape.size() == vt.shape.size()) {
        for (size_t i : {size_t{0}, size_t{1}}) {
          const ValueId x = m.inputs[i], s = m.inputs[1 - i];
          if (!(g.value(x).type == vt) || !channel_scale(g, s, vt)) continue;
          const ValueId ws = rb.emit(OpKind::Mul, {rb.map(w), rb.map(s)}, {}, n.name + ".scaled_weight");
          std::vector<ValueId> ins = {rb.map(x), ws};
          if (n.inputs.size() > 2) ins.push_back(n.inputs[2] == kNoValue ? kNoValue : rb.map(n.inputs[2]));
          out = rb.dst().add_node(OpKind::Conv, ins, n.attrs, 1, n.name, {g.value(n.outputs[0]).name})[0];
          break;
        }
      }
    }
    if (out == kNoValue) rb.copy(n);
    else rb.replace(n, {out});
  }
  return eliminate_dead_code(rb.finish());
}

}  // namespace dnnf
