// Shape rules of the indexing and selecting operators: Slice, Pad, Expand, Tile, Resize, Gather,
// GatherElements (Reorganize, One-to-Many) and TopK, NonMaxSuppression, RoiAlign, GridSample.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/shape_rules.h"

namespace dnnf {
namespace {

// Normalizes `axes` (each in [-r, r), no repeats) among r axes.
std::vector<int64_t> norm_axes(const InferCtx& c, const std::vector<int64_t>& axes, int64_t r) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    if (r == 0) c.fail("axes " + ints_str(axes) + " given for a scalar input");
    int64_t k = c.axis(a, r, "axes value");
    if (std::find(out.begin(), out.end(), k) != out.end())
      c.fail("axes " + ints_str(axes) + " name axis " + std::to_string(k) + " twice");
    out.push_back(k);
  }
  return out;
}

std::vector<int64_t> all_axes(int64_t r) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < r; ++i) v.push_back(i);
  return v;
}

// Slice of one axis of static size d, ONNX clamping rules.
int64_t slice_count(int64_t d, int64_t start, int64_t end, int64_t step) {
  if (d == 0) return 0;
  if (start < 0) start += d;
  if (end < 0) end += d;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
    return end > start ? (end - start - 1) / step + 1 : 0;
  }
  start = std::clamp<int64_t>(start, 0, d - 1);
  end = std::clamp<int64_t>(end, -1, d - 1);
  int64_t mag = step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max()
                                                            : -step;
  return start > end ? (start - end - 1) / mag + 1 : 0;
}

void slice_rule(InferCtx& c) {
  std::vector<int64_t> starts = const_vector(c, 1, "starts"), ends = const_vector(c, 2, "ends");
  int64_t r = c.rank(0);
  std::vector<int64_t> axes = c.has_input(3) ? const_vector(c, 3, "axes") : all_axes(starts.size());
  std::vector<int64_t> steps =
      c.has_input(4) ? const_vector(c, 4, "steps") : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts " + ints_str(starts) + ", ends " + ints_str(ends) + ", axes " + ints_str(axes) +
           " and steps " + ints_str(steps) + " must have one length");
  axes = norm_axes(c, axes, r);
  Shape out = c.shape(0);
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();  // "to the end" in exports
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t s = starts[i], e = ends[i], st = steps[i];
    if (st == 0) c.fail("steps " + ints_str(steps) + " contain a 0");
    Dim& d = out[axes[i]];
    if (d.is_static()) { d = slice_count(d.value, s, e, st); continue; }
    bool whole = (st == 1 && (s == 0 || s <= -kBig) && e >= kBig) ||
                 (st == -1 && (s == -1 || s >= kBig) && e <= -kBig);
    if (!whole)
      c.fail("axis " + std::to_string(axes[i]) + " has the symbolic size '" + d.symbol +
             "' and the slice [" + std::to_string(s) + ":" + std::to_string(e) + ":" +
             std::to_string(st) + "] needs its value; specialize with input_shapes=");
  }
  c.out[0] = {c.dtype(0), out};
}

void pad_rule(InferCtx& c) {
  std::vector<int64_t> pads = const_vector(c, 1, "pads");
  int64_t r = c.rank(0);
  std::string mode = c.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    c.fail("attribute mode must be constant, reflect, edge or wrap, got '" + mode + "'");
  if (c.has_input(2)) {
    if (!is_scalar_like(c, 2)) c.fail("constant_value must be a scalar, got " + c.in(2).str());
    if (c.dtype(2) != c.dtype(0))
      c.fail("constant_value " + c.in(2).str() + " must have the element type of " + c.in(0).str());
  }
  std::vector<int64_t> axes =
      c.has_input(3) ? norm_axes(c, const_vector(c, 3, "axes"), r) : all_axes(r);
  size_t n = axes.size();
  if (pads.size() != 2 * n)
    c.fail("pads " + ints_str(pads) + " must have 2 x " + std::to_string(n) +
           " values (begins, then ends) for " + c.in(0).str());
  const Shape& in = c.shape(0);
  Shape out = in;
  for (size_t i = 0; i < n; ++i) {
    int64_t pb = pads[i], pe = pads[i + n];
    Dim& d = out[axes[i]];
    if (!d.is_static()) {
      if (checked_add(c, pb, pe) == 0) continue;
      c.fail("axis " + std::to_string(axes[i]) + " has the symbolic size '" + d.symbol +
             "' and pads change it; specialize with input_shapes=");
    }
    int64_t o = checked_add(c, checked_add(c, d.value, pb), pe);
    if (o < 0)
      c.fail("pads " + ints_str(pads) + " remove more than the size " + d.str() + " of axis " +
             std::to_string(axes[i]));
    d = o;
  }
  for (size_t i = 0; i < n && mode != "constant"; ++i) {  // what is copied must exist
    int64_t pb = pads[i], pe = pads[i + n];
    const Dim& d = in[axes[i]];
    if (!d.is_static() || (pb <= 0 && pe <= 0) || out[axes[i]] == Dim(0)) continue;
    int64_t kept = d.value + std::min<int64_t>(pb, 0) + std::min<int64_t>(pe, 0);
    if (kept <= 0 || (mode == "reflect" && std::max(pb, pe) > kept - 1))
      c.fail("mode " + mode + " cannot pad axis " + std::to_string(axes[i]) + " of size " +
             std::to_string(kept) + " (after cropping) by " + std::to_string(std::max(pb, pe)) +
             (mode == "reflect" ? "; reflect pads must be smaller than the size" : ""));
  }
  c.out[0] = {c.dtype(0), out};
}

void expand_rule(InferCtx& c) {
  Shape target = const_shape(c, 1, "shape");
  auto b = broadcast_shapes(c.shape(0), target);
  if (!b) c.fail("input " + c.in(0).str() + " does not broadcast with shape " + shape_str(target));
  c.out[0] = {c.dtype(0), *b};
}

void tile_rule(InferCtx& c) {
  std::vector<int64_t> reps = const_vector(c, 1, "repeats");
  if (static_cast<int64_t>(reps.size()) != c.rank(0))
    c.fail("repeats " + ints_str(reps) + " must have one entry per axis of " + c.in(0).str());
  Shape out = c.shape(0);
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) c.fail("repeats " + ints_str(reps) + " has a negative entry");
    if (out[i].is_static()) out[i] = checked_mul(c, out[i].value, reps[i]);
    else if (reps[i] == 0) out[i] = 0;
    else if (reps[i] != 1)
      c.fail("axis " + std::to_string(i) + " has the symbolic size '" + out[i].symbol +
             "' and is repeated " + std::to_string(reps[i]) +
             " times; specialize with input_shapes=");
  }
  c.out[0] = {c.dtype(0), out};
}

void resize_rule(InferCtx& c) {
  int64_t r = c.rank(0);
  if (r < 1) c.fail("X must have rank >= 1, got " + c.in(0).str());
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (c.has_input(2)) {
    TensorPtr t = c.const_input(2);
    if (!t) c.fail("scales (input 2) must be a constant to infer static shapes");
    if (t->type.dtype != DType::F32 && t->type.dtype != DType::F64)
      c.fail("scales must be a float tensor, got " + c.in(2).str());
    scales = t->to_doubles();
  }
  if (c.has_input(3)) sizes = *c.const_ints(3, "sizes");
  // Old exports pass an empty tensor for the unused one of the two.
  if (scales.empty() == sizes.empty())
    c.fail(std::string("give exactly one of scales (input 2) and sizes (input 3), got ") +
           (scales.empty() ? "neither" : "both"));
  std::string mode = c.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    c.fail("attribute mode must be nearest, linear or cubic, got '" + mode + "'");
  std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    c.fail("attribute keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got '" +
           policy + "'");
  if (!scales.empty() && policy != "stretch")
    c.fail("scales cannot be combined with keep_aspect_ratio_policy=" + policy + " (give sizes)");
  std::vector<int64_t> axes =
      c.has_attr("axes") ? norm_axes(c, c.attr_ints("axes"), r) : all_axes(r);
  size_t n = scales.empty() ? sizes.size() : scales.size();
  if (n != axes.size())
    c.fail(std::string(scales.empty() ? "sizes" : "scales") + " has " + std::to_string(n) +
           " values but " + std::to_string(axes.size()) + " axes are resized");
  Shape out = c.shape(0);
  auto need_static = [&](int64_t ax) {
    if (!out[ax].is_static())
      c.fail("axis " + std::to_string(ax) + " has the symbolic size '" + out[ax].symbol +
             "' and is resized; specialize with input_shapes=");
    return out[ax].value;
  };
  if (!scales.empty()) {
    for (size_t i = 0; i < n; ++i) {
      double s = scales[i];
      if (!(s > 0) || !std::isfinite(s))
        c.fail("scales must be positive and finite, got " + std::to_string(s));
      if (s == 1.0) continue;
      // float arithmetic, as ONNX shape inference and onnxruntime compute it
      float o = std::floor(static_cast<float>(need_static(axes[i])) * static_cast<float>(s));
      if (!(o < 9.2e18f)) c.fail("resized size overflows int64");
      out[axes[i]] = static_cast<int64_t>(o);
    }
  } else {
    for (int64_t v : sizes)
      if (v < 0) c.fail("sizes " + ints_str(sizes) + " has a negative entry");
    if (policy == "stretch") {
      for (size_t i = 0; i < n; ++i) out[axes[i]] = sizes[i];
    } else {
      bool larger = policy == "not_larger";
      float scale = larger ? std::numeric_limits<float>::max() : 0.0f;
      for (size_t i = 0; i < n; ++i) {
        int64_t d = need_static(axes[i]);
        if (d == 0)
          c.fail("cannot keep the aspect ratio of the empty axis " + std::to_string(axes[i]));
        float s = static_cast<float>(sizes[i]) / static_cast<float>(d);
        scale = larger ? std::min(scale, s) : std::max(scale, s);
      }
      for (size_t i = 0; i < n; ++i) {
        float o = std::roundf(scale * static_cast<float>(out[axes[i]].value));
        if (!(o < 9.2e18f)) c.fail("resized size overflows int64");
        out[axes[i]] = static_cast<int64_t>(o);
      }
    }
  }
  c.out[0] = {c.dtype(0), out};
}

void need_index_dtype(const InferCtx& c, size_t i) {
  if (c.dtype(i) != DType::I32 && c.dtype(i) != DType::I64)
    c.fail("indices must be i32 or i64, got " + c.in(i).str());
}

// Constant indices must lie in [-d, d) for an axis of static size d.
void check_index_range(const InferCtx& c, const Dim& d, int64_t axis) {
  TensorPtr t = c.const_input(1);
  if (!t || !d.is_static()) return;
  for (int64_t v : t->to_ints())
    if (v < -d.value || v >= d.value)
      c.fail("index " + std::to_string(v) + " is out of range for axis " + std::to_string(axis) +
             " of size " + d.str() + " of " + c.in(0).str());
}

void gather_rule(InferCtx& c) {
  int64_t r = c.rank(0);
  if (r < 1) c.fail("data must have rank >= 1, got " + c.in(0).str());
  need_index_dtype(c, 1);
  int64_t axis = c.axis(c.attr_int("axis", 0), r);
  const Shape& d = c.shape(0);
  Shape out(d.begin(), d.begin() + axis);
  for (const Dim& x : c.shape(1)) out.push_back(x);
  out.insert(out.end(), d.begin() + axis + 1, d.end());
  check_index_range(c, d[axis], axis);
  c.out[0] = {c.dtype(0), out};
}

void gather_elements_rule(InferCtx& c) {
  int64_t r = c.rank(0);
  if (r < 1) c.fail("data must have rank >= 1, got " + c.in(0).str());
  need_index_dtype(c, 1);
  if (c.rank(1) != r)
    c.fail("indices must have the rank of data " + c.in(0).str() + ", got " + c.in(1).str());
  int64_t axis = c.axis(c.attr_int("axis", 0), r);
  for (int64_t i = 0; i < r; ++i) {
    const Dim &a = c.shape(0)[i], &b = c.shape(1)[i];
    if (i != axis && a.is_static() && b.is_static() && b.value > a.value)
      c.fail("indices " + c.in(1).str() + " are larger than data " + c.in(0).str() + " on axis " +
             std::to_string(i));
  }
  check_index_range(c, c.shape(0)[axis], axis);
  c.out[0] = {c.dtype(0), c.shape(1)};
}

// GatherND(data [r], indices [q], batch_dims b): the last axis of indices (k) addresses data's
// axes b .. b+k; out = indices.shape[:-1] + data.shape[b+k:].
void gather_nd_rule(InferCtx& c) {
  const int64_t r = c.rank(0), q = c.rank(1);
  if (r < 1) c.fail("data must have rank >= 1, got " + c.in(0).str());
  if (q < 1) c.fail("indices must have rank >= 1, got " + c.in(1).str());
  if (c.dtype(1) != DType::I64) c.fail("indices must be i64, got " + c.in(1).str());
  const int64_t b = c.attr_int("batch_dims", 0);
  if (b < 0 || b >= std::min(q, r))
    c.fail("batch_dims must be in [0, " + std::to_string(std::min(q, r)) + ") for data " + c.in(0).str() +
           " and indices " + c.in(1).str() + ", got " + std::to_string(b));
  const Dim& kd = c.shape(1)[q - 1];
  if (!kd.is_static()) c.fail("the last axis of indices must have a static size, got " + c.in(1).str());
  const int64_t k = kd.value;
  if (k < 1 || k > r - b)
    c.fail("the last axis of indices (" + std::to_string(k) + ") must be in [1, " + std::to_string(r - b) +
           "] for data " + c.in(0).str() + " and batch_dims " + std::to_string(b));
  const Shape &d = c.shape(0), &id = c.shape(1);
  for (int64_t i = 0; i < b; ++i)
    if (conflict(d[i], id[i]))
      c.fail("data " + c.in(0).str() + " and indices " + c.in(1).str() + " disagree on batch axis " +
             std::to_string(i));
  if (TensorPtr t = c.const_input(1)) {  // constant indices: each within its axis, as Gather's
    const std::vector<int64_t> v = t->to_ints();
    for (size_t i = 0; i < v.size(); ++i) {
      const Dim& ax = d[b + static_cast<int64_t>(i % k)];
      if (ax.is_static() && (v[i] < -ax.value || v[i] >= ax.value))
        c.fail("index " + std::to_string(v[i]) + " is out of range for axis " + std::to_string(b + i % k) +
               " of size " + ax.str() + " of " + c.in(0).str());
    }
  }
  Shape out(id.begin(), id.end() - 1);
  out.insert(out.end(), d.begin() + b + k, d.end());
  c.out[0] = {c.dtype(0), out};
}

// Two shapes of one rank that disagree on a static dimension.
bool conflict_any(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return true;
  for (size_t i = 0; i < a.size(); ++i)
    if (conflict(a[i], b[i])) return true;
  return false;
}

// ScatterElements / ScatterND: reduction none (13), add and mul (16), max and min (18).
void scatter_reduction(InferCtx& c) {
  const std::string red = c.attr_string("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    c.fail("reduction must be none, add, mul, max or min");
  if (red != "none" && c.dtype(0) == DType::Bool) c.fail("reduction " + red + " of a bool tensor");
  if (c.dtype(2) != c.dtype(0))
    c.fail("updates " + c.in(2).str() + " must have the element type of data " + c.in(0).str());
}

// ScatterElements(data [r], indices [r], updates = indices' shape, axis): out = data's.
void scatter_elements_rule(InferCtx& c) {
  const int64_t r = c.rank(0);
  if (r < 1) c.fail("data must have rank >= 1, got " + c.in(0).str());
  need_index_dtype(c, 1);
  scatter_reduction(c);
  if (c.rank(1) != r) c.fail("indices must have the rank of data " + c.in(0).str() + ", got " + c.in(1).str());
  const int64_t axis = c.axis(c.attr_int("axis", 0), r);
  for (int64_t i = 0; i < r; ++i) {
    const Dim &a = c.shape(0)[i], &b = c.shape(1)[i];
    if (i != axis && a.is_static() && b.is_static() && b.value > a.value)
      c.fail("indices " + c.in(1).str() + " are larger than data " + c.in(0).str() + " on axis " +
             std::to_string(i));
  }
  if (c.rank(2) != r || conflict_any(c.shape(1), c.shape(2)))
    c.fail("updates " + c.in(2).str() + " must have the shape of indices " + c.in(1).str());
  check_index_range(c, c.shape(0)[axis], axis);
  c.out[0] = c.in(0);
}

// ScatterND(data [r], indices [q] (last axis k), updates = indices.shape[:-1] + data.shape[k:]).
void scatter_nd_rule(InferCtx& c) {
  const int64_t r = c.rank(0), q = c.rank(1);
  if (r < 1) c.fail("data must have rank >= 1, got " + c.in(0).str());
  if (q < 1) c.fail("indices must have rank >= 1, got " + c.in(1).str());
  if (c.dtype(1) != DType::I64) c.fail("indices must be i64, got " + c.in(1).str());
  scatter_reduction(c);
  const Dim& kd = c.shape(1)[q - 1];
  if (!kd.is_static() || kd.value < 1 || kd.value > r)
    c.fail("the last axis of indices must have a static size in [1, " + std::to_string(r) + "], got " +
           c.in(1).str());
  const int64_t k = kd.value;
  Shape want(c.shape(1).begin(), c.shape(1).end() - 1);
  want.insert(want.end(), c.shape(0).begin() + k, c.shape(0).end());
  if (static_cast<int64_t>(want.size()) != c.rank(2) || conflict_any(want, c.shape(2)))
    c.fail("updates " + c.in(2).str() + " must have shape indices.shape[:-1] + data.shape[" + std::to_string(k) +
           ":] for data " + c.in(0).str() + " and indices " + c.in(1).str());
  if (TensorPtr t = c.const_input(1)) {
    const std::vector<int64_t> v = t->to_ints();
    for (size_t i = 0; i < v.size(); ++i) {
      const Dim& ax = c.shape(0)[static_cast<int64_t>(i % k)];
      if (ax.is_static() && (v[i] < -ax.value || v[i] >= ax.value))
        c.fail("index " + std::to_string(v[i]) + " is out of range for axis " + std::to_string(i % k) +
               " of size " + ax.str() + " of " + c.in(0).str());
    }
  }
  c.out[0] = c.in(0);
}

void nonzero_rule(InferCtx& c) {
  const int64_t r = c.rank(0);
  if (r < 1) c.fail("X must have rank >= 1, got " + c.in(0).str());
  c.out[0] = {DType::I64, {Dim(r), Dim::sym("nonzero_count")}};
}

// Unique: Y holds U distinct values of the flattened X (no axis) or U slices of X along
// `axis`; indices and counts are [U], inverse_indices one entry per element (or slice).
// U is decided by the data: a symbol.
void unique_rule(InferCtx& c) {
  flag(c, "sorted", 1);
  const Dim u = Dim::sym("unique_count");
  Shape y = {u};
  Dim per = Dim(1);
  if (c.has_attr("axis")) {
    const int64_t r = c.rank(0);
    if (r < 1) c.fail("X must have rank >= 1 with an axis, got " + c.in(0).str());
    const int64_t axis = c.axis(c.attr_int("axis", 0), r);
    y = c.shape(0);
    y[axis] = u;
    per = c.shape(0)[axis];
  } else {
    int64_t n = 1;
    for (const Dim& d : c.shape(0)) {
      if (!d.is_static()) {
        per = Dim::sym("unique_inputs");
        n = -1;
        break;
      }
      n = checked_mul(c, n, d.value);
    }
    if (n >= 0) per = Dim(n);
  }
  c.out[0] = {c.dtype(0), y};
  if (c.num_outputs() > 1) c.out[1] = {DType::I64, {u}};
  if (c.num_outputs() > 2) c.out[2] = {DType::I64, {per}};
  if (c.num_outputs() > 3) c.out[3] = {DType::I64, {u}};
}

void topk_rule(InferCtx& c) {
  int64_t r = c.rank(0);
  if (r < 1) c.fail("X must have rank >= 1, got " + c.in(0).str());
  if (c.dtype(0) == DType::Bool) c.fail("TopK of a bool tensor");
  int64_t axis = c.axis(c.attr_int("axis", -1), r);
  std::vector<int64_t> kv = c.const_ints(1, "K").value_or(std::vector<int64_t>{});
  if (!c.has_input(1) || kv.size() != 1 || c.rank(1) > 1)
    c.fail("K must be a constant holding a single value, got " +
           (c.has_input(1) ? c.in(1).str() : "none"));
  int64_t k = kv[0];
  if (k < 0) c.fail("K must be >= 0, got " + std::to_string(k));
  const Dim& d = c.shape(0)[axis];
  if (d.is_static() && k > d.value)
    c.fail("K = " + std::to_string(k) + " exceeds the size " + d.str() + " of axis " +
           std::to_string(axis) + " of " + c.in(0).str());
  flag(c, "largest", 1);
  flag(c, "sorted", 1);
  Shape out = c.shape(0);
  out[axis] = k;
  c.out[0] = {c.dtype(0), out};
  c.out[1] = {DType::I64, out};
}

void nms_rule(InferCtx& c) {
  const Shape& boxes = c.shape(0);
  const Shape& scores = c.shape(1);
  if (boxes.size() != 3 || conflict(boxes[2], Dim(4)))
    c.fail("boxes must have shape [num_batches, spatial_dimension, 4], got " + c.in(0).str());
  if (scores.size() != 3)
    c.fail("scores must have shape [num_batches, num_classes, spatial_dimension], got " +
           c.in(1).str());
  if (conflict(boxes[0], scores[0]) || conflict(boxes[1], scores[2]))
    c.fail("boxes " + c.in(0).str() + " and scores " + c.in(1).str() +
           " disagree on num_batches or spatial_dimension");
  need_float(c, 0, "boxes");
  same_dtype(c, 0, 1, "scores");
  const char* names[] = {"", "", "max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (size_t i = 2; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    if (!is_scalar_like(c, i))
      c.fail(std::string(names[i]) + " must be a scalar, got " + c.in(i).str());
    if (i == 2 ? c.dtype(i) != DType::I64 : c.dtype(i) != DType::F32)
      c.fail(std::string(names[i]) + " must be " + (i == 2 ? "i64" : "f32") + ", got " +
             c.in(i).str());
  }
  flag(c, "center_point_box", 0);
  TensorPtr mx = c.const_input(2);
  bool none = !c.has_input(2) || (mx && mx->to_ints()[0] <= 0);
  c.out[0] = {DType::I64, {none ? Dim(0) : Dim::sym("nms_selected"), 3}};
}

void roi_align_rule(InferCtx& c) {
  const bool last = c.node().op == OpKind::NhwcRoiAlign;  // X [N, H, W, C]
  if (c.rank(0) != 4) c.fail(std::string("X must have shape ") + (last ? "[N, H, W, C]" : "[N, C, H, W]") + ", got " + c.in(0).str());
  need_float(c, 0, "X");
  same_dtype(c, 0, 1, "rois");
  const Shape& rois = c.shape(1);
  if (rois.size() != 2 || conflict(rois[1], Dim(4)))
    c.fail("rois must have shape [num_rois, 4], got " + c.in(1).str());
  if (c.rank(2) != 1 || conflict(c.shape(2)[0], rois[0]))
    c.fail("batch_indices must have shape [" + rois[0].str() + "], got " + c.in(2).str());
  if (c.dtype(2) != DType::I64) c.fail("batch_indices must be i64, got " + c.in(2).str());
  int64_t oh = c.attr_int("output_height", 1), ow = c.attr_int("output_width", 1);
  if (oh < 1 || ow < 1)
    c.fail("output_height/output_width must be >= 1, got " + std::to_string(oh) + "/" +
           std::to_string(ow));
  if (c.attr_int("sampling_ratio", 0) < 0) c.fail("attribute sampling_ratio must be >= 0");
  std::string mode = c.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max")
    c.fail("attribute mode must be avg or max, got '" + mode + "'");
  std::string ctm = c.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    c.fail("attribute coordinate_transformation_mode must be half_pixel or output_half_pixel, "
           "got '" + ctm + "'");
  c.out[0] = {c.dtype(0), {rois[0], c.shape(0)[last ? 3 : 1], oh, ow}};
}

// GridSample: X [N, C, *in] (1 to 3 spatial axes) sampled at grid [N, *out, nd], the points
// normalized to [-1, 1] with the innermost spatial axis first: Y [N, C, *out].
void grid_sample_rule(InferCtx& c) {
  const size_t r = c.rank(0);
  if (r < 3 || r > 5) c.fail("X must have shape [N, C, D1, ...] with 1 to 3 spatial axes, got " + c.in(0).str());
  need_float(c, 0, "X");
  need_float(c, 1, "grid");
  const Shape& x = c.shape(0);
  const Shape& grid = c.shape(1);
  if (grid.size() != r || conflict(grid[0], x[0]) || conflict(grid[r - 1], Dim(static_cast<int64_t>(r - 2))))
    c.fail("grid must have shape [" + x[0].str() + ", " + std::string(r == 3 ? "W_out" : r == 4 ? "H_out, W_out" : "D_out, H_out, W_out") +
           ", " + std::to_string(r - 2) + "] for X " + c.in(0).str() + ", got " + c.in(1).str());
  const std::string mode = c.attr_string("mode", "linear");
  if (mode != "linear" && mode != "nearest" && mode != "cubic" && mode != "bilinear" && mode != "bicubic")
    c.fail("attribute mode must be linear, nearest or cubic (bilinear, bicubic before opset 20), got '" + mode + "'");
  const std::string pad = c.attr_string("padding_mode", "zeros");
  if (pad != "zeros" && pad != "border" && pad != "reflection")
    c.fail("attribute padding_mode must be zeros, border or reflection, got '" + pad + "'");
  const int64_t ac = c.attr_int("align_corners", 0);
  if (ac != 0 && ac != 1) c.fail("attribute align_corners must be 0 or 1, got " + std::to_string(ac));
  Shape out = {x[0], x[1]};
  for (size_t i = 1; i + 1 < r; ++i) out.push_back(grid[i]);
  c.out[0] = {c.dtype(0), out};
}
}  // namespace

void add_index_shape_rules(ShapeRuleTable& t) {
  t.set(OpKind::Slice, slice_rule);
  t.set(OpKind::Pad, pad_rule);
  t.set(OpKind::Expand, expand_rule);
  t.set(OpKind::Tile, tile_rule);
  t.set(OpKind::Resize, resize_rule);
  t.set(OpKind::Gather, gather_rule);
  t.set(OpKind::GatherElements, gather_elements_rule);
  t.set(OpKind::GatherND, gather_nd_rule);
  t.set(OpKind::NonZero, nonzero_rule);
  t.set(OpKind::Unique, unique_rule);
  t.set(OpKind::ScatterElements, scatter_elements_rule);
  t.set(OpKind::ScatterND, scatter_nd_rule);
  t.set(OpKind::TopK, topk_rule);
  t.set(OpKind::NonMaxSuppression, nms_rule);
  t.set(OpKind::RoiAlign, roi_align_rule);
  t.set(OpKind::NhwcRoiAlign, roi_align_rule);
  t.set(OpKind::GridSample, grid_sample_rule);
}

}  // namespace dnnf
