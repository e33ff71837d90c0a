// Shape rules of the Many-to-Many (nn) operators: convolutions, Gemm/MatMul,
// normalizations, pooling, reductions, ArgMax/ArgMin, CumSum, Softmax.
#include <algorithm>
#include <string>
#include <vector>

#include "ir/shape_rules.h"
#include "ir/window.h"

namespace dnnf {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a > 0 ? (a - 1) / b + 1 : -((-a) / b); }

void need_rank_at_least(const InferCtx& c, size_t i, int64_t r, const char* layout) {
  if (c.rank(i) < r)
    c.fail("input " + std::to_string(i) + " must have rank >= " + std::to_string(r) + " " +
           layout + ", got " + c.in(i).str());
}

// ---- sliding windows: Conv, ConvTranspose, MaxPool, AveragePool ----

std::string axis_name(size_t i) { return "spatial axis " + std::to_string(i); }

[[noreturn]] void symbolic_window(const InferCtx& c, size_t i, const Dim& in) {
  c.fail(axis_name(i) + " has the symbolic size '" + in.symbol +
         "' and this window changes it; specialize it with input_shapes=");
}

// Output size of a forward window (Conv and pools) along spatial axis i.
Dim window_out(const InferCtx& c, const Dim& in, size_t i, const Window& w, size_t n,
               bool ceil_mode) {
  int64_t k = w.kernel[i], s = w.strides[i], d = w.dilations[i];
  int64_t ek = (k - 1) * d + 1;
  bool valid = w.auto_pad == "VALID";
  int64_t pb = valid ? 0 : w.pads[i], pe = valid ? 0 : w.pads[i + n];
  if (!in.is_static()) {  // only size-preserving windows keep a symbolic size
    if (s == 1 && (w.same() || pb + pe == ek - 1)) return in;
    symbolic_window(c, i, in);
  }
  if (w.same()) return ceil_div(in.value, s);
  int64_t padded = checked_add(c, checked_add(c, in.value, pb), pe);
  if (padded < ek)
    c.fail("the kernel extent " + std::to_string(ek) + " (kernel " + std::to_string(k) +
           ", dilation " + std::to_string(d) + ") is larger than the padded input " +
           std::to_string(padded) + " (size " + std::to_string(in.value) + " + pads " +
           std::to_string(pb) + "+" + std::to_string(pe) + ") on " + axis_name(i));
  int64_t out = (ceil_mode ? ceil_div(padded - ek, s) : (padded - ek) / s) + 1;
  // ceil_mode: a window that would start in the end padding is dropped.
  if (ceil_mode && checked_mul(c, out - 1, s) >= in.value + pb) --out;
  return out;
}

// Checks shared by Conv and ConvTranspose; returns the group count.
int64_t conv_common(const InferCtx& c, const char* weight_layout) {
  need_rank_at_least(c, 0, 3, "(N, C, spatial...)");
  need_float(c, 0, "X");
  same_dtype(c, 0, 1, "W");
  same_dtype(c, 0, 2, "B");
  if (c.rank(1) != c.rank(0))
    c.fail("weight must have the input's rank " + std::to_string(c.rank(0)) + " " +
           weight_layout + ", got " + c.in(1).str());
  int64_t group = c.attr_int("group", 1);
  if (group < 1) c.fail("attribute group must be >= 1, got " + std::to_string(group));
  return group;
}

void check_bias(const InferCtx& c, const Dim& m) {
  if (c.has_input(2) && (c.rank(2) != 1 || conflict(c.shape(2)[0], m)))
    c.fail("bias must have shape [" + m.str() + "], got " + c.in(2).str());
}

void conv_rule(InferCtx& c) {
  int64_t group = conv_common(c, "(M, C/group, kernel...)");
  const Shape& x = c.shape(0);
  const Shape& w = c.shape(1);
  size_t n = x.size() - 2;
  if (w[0].is_static() && w[0].value % group != 0)
    c.fail("weight output channels " + w[0].str() + " are not divisible by group " +
           std::to_string(group));
  if (x[1].is_static() && w[1].is_static() && x[1].value != checked_mul(c, w[1].value, group))
    c.fail("input channels " + x[1].str() + " must equal weight dim 1 (" + w[1].str() +
           ") x group (" + std::to_string(group) + "); input " + c.in(0).str() + ", weight " +
           c.in(1).str());
  check_bias(c, w[0]);
  Window win = read_window(c, n, 1);
  Shape out = {x[0], w[0]};
  for (size_t i = 0; i < n; ++i) out.push_back(window_out(c, x[2 + i], i, win, n, false));
  c.out[0] = {c.dtype(0), out};
}

// NhwcConv: Conv with the channels last, X [N, spatial..., C] -> Y [N, spatial..., M].
void nhwc_conv_rule(InferCtx& c) {
  int64_t group = conv_common(c, "(M, C/group, kernel...)");
  const Shape& x = c.shape(0);
  const Shape& w = c.shape(1);
  size_t n = x.size() - 2;
  if (w[0].is_static() && w[0].value % group != 0)
    c.fail("weight output channels " + w[0].str() + " are not divisible by group " +
           std::to_string(group));
  if (x.back().is_static() && w[1].is_static() && x.back().value != checked_mul(c, w[1].value, group))
    c.fail("input channels (last dim) " + x.back().str() + " must equal weight dim 1 (" + w[1].str() +
           ") x group (" + std::to_string(group) + "); input " + c.in(0).str() + ", weight " +
           c.in(1).str());
  check_bias(c, w[0]);
  Window win = read_window(c, n, 1);
  Shape out = {x[0]};
  for (size_t i = 0; i < n; ++i) out.push_back(window_out(c, x[1 + i], i, win, n, false));
  out.push_back(w[0]);
  c.out[0] = {c.dtype(0), out};
}

void conv_transpose_rule(InferCtx& c) {
  int64_t group = conv_common(c, "(C, M/group, kernel...)");
  const Shape& x = c.shape(0);
  const Shape& w = c.shape(1);
  size_t n = x.size() - 2;
  if (conflict(x[1], w[0]))
    c.fail("input channels " + x[1].str() + " must equal weight dim 0, got input " +
           c.in(0).str() + ", weight " + c.in(1).str());
  if (x[1].is_static() && x[1].value % group != 0)
    c.fail("input channels " + x[1].str() + " are not divisible by group " + std::to_string(group));
  Dim m = w[1];
  if (m.is_static()) m = checked_mul(c, w[1].value, group);
  else if (group != 1) c.fail("weight dim 1 is symbolic; output channels need a static size");
  check_bias(c, m);
  Window win = read_window(c, n, 1);
  std::vector<int64_t> opad = sized_ints(c, "output_padding", n, 0, 0);
  for (size_t i = 0; i < n; ++i)
    if (opad[i] >= std::max(win.strides[i], win.dilations[i]))
      c.fail("output_padding " + ints_str(opad) +
             " must be smaller than the stride or the dilation on " + axis_name(i));
  Shape out = {x[0], m};
  if (c.has_attr("output_shape")) {
    std::vector<int64_t> os = c.attr_ints("output_shape");
    if (os.size() != n)
      c.fail("attribute output_shape must have " + std::to_string(n) + " values, got " +
             ints_str(os));
    for (size_t i = 0; i < n; ++i) {
      int64_t ek = (win.kernel[i] - 1) * win.dilations[i] + 1;
      int64_t most = x[2 + i].is_static()  // like output_padding, up to stride - 1 more
          ? checked_add(c, checked_mul(c, win.strides[i], x[2 + i].value), opad[i] + ek - 1)
          : os[i];
      if (os[i] < 1 || os[i] > most)
        c.fail("output_shape " + ints_str(os) + " is not reachable on " + axis_name(i) +
               ": the transposed output is at most " + std::to_string(most));
      out.push_back(os[i]);
    }
    c.out[0] = {c.dtype(0), out};
    return;
  }
  bool valid = win.auto_pad == "VALID";
  for (size_t i = 0; i < n; ++i) {
    int64_t s = win.strides[i], ek = (win.kernel[i] - 1) * win.dilations[i] + 1;
    int64_t pads = valid ? 0 : win.pads[i] + win.pads[i + n];
    const Dim& in = x[2 + i];
    if (!in.is_static()) {
      if (s == 1 && (win.same() || opad[i] + ek - pads == 1)) { out.push_back(in); continue; }
      symbolic_window(c, i, in);
    }
    // SAME pads up to in * stride; like onnxruntime and ONNX shape inference, a negative
    // total padding is clamped to 0.
    int64_t full = checked_add(c, checked_mul(c, s, in.value - 1), opad[i] + ek);
    int64_t o = win.same() ? std::min(full, checked_mul(c, in.value, s)) : full - pads;
    if (o <= 0)
      c.fail("pads " + ints_str(win.pads) + " exceed the transposed output on " + axis_name(i) +
             " (size " + std::to_string(o + pads) + " before padding)");
    out.push_back(o);
  }
  c.out[0] = {c.dtype(0), out};
}

void gemm_rule(InferCtx& c) {
  if (c.rank(0) != 2 || c.rank(1) != 2)
    c.fail("A and B must be matrices, got " + c.in(0).str() + " and " + c.in(1).str());
  same_dtype(c, 0, 1, "B");
  same_dtype(c, 0, 2, "C");
  if (c.dtype(0) == DType::Bool) c.fail("Gemm of bool tensors");
  bool ta = flag(c, "transA", 0), tb = flag(c, "transB", 0);
  const Shape& a = c.shape(0);
  const Shape& b = c.shape(1);
  Dim m = a[ta ? 1 : 0], ka = a[ta ? 0 : 1], kb = b[tb ? 1 : 0], n = b[tb ? 0 : 1];
  if (conflict(ka, kb))
    c.fail("inner dimensions differ: A" + std::string(ta ? "^T" : "") + " is [" + m.str() + "," +
           ka.str() + "], B" + (tb ? "^T" : "") + " is [" + kb.str() + "," + n.str() + "]");
  Shape out = {m, n};
  if (c.has_input(2)) {
    const Shape& cs = c.shape(2);
    bool ok = cs.size() <= 2;
    for (size_t i = 0; ok && i < cs.size(); ++i) {
      const Dim& t = out[2 - cs.size() + i];
      ok = !(cs[i].is_static() && cs[i].value != 1 && conflict(cs[i], t));
    }
    if (!ok) c.fail("C " + c.in(2).str() + " does not broadcast to [M,N] = " + shape_str(out));
  }
  c.out[0] = {c.dtype(0), out};
}

void matmul_rule(InferCtx& c) {
  if (c.rank(0) < 1 || c.rank(1) < 1)
    c.fail("operands must have rank >= 1, got " + c.in(0).str() + " and " + c.in(1).str());
  same_dtype(c, 0, 1, "B");
  if (c.dtype(0) == DType::Bool) c.fail("MatMul of bool tensors");
  Shape a = c.shape(0), b = c.shape(1);
  bool vec_a = a.size() == 1, vec_b = b.size() == 1;
  if (vec_a) a.insert(a.begin(), Dim(1));
  if (vec_b) b.push_back(Dim(1));
  if (conflict(a.back(), b[b.size() - 2]))
    c.fail("inner dimensions differ: " + c.in(0).str() + " @ " + c.in(1).str());
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  auto batch = broadcast_shapes(ba, bb);
  if (!batch)
    c.fail("batch dimensions " + shape_str(ba) + " and " + shape_str(bb) + " do not broadcast (" +
           c.in(0).str() + " @ " + c.in(1).str() + ")");
  Shape out = *batch;
  if (!vec_a) out.push_back(a[a.size() - 2]);
  if (!vec_b) out.push_back(b.back());
  c.out[0] = {c.dtype(0), out};
}

void instance_norm_rule(InferCtx& c) {
  need_rank_at_least(c, 0, 3, "(N, C, spatial...)");
  need_float(c, 0, "input");
  const Dim& ch = c.shape(0)[1];
  for (size_t i = 1; i < 3; ++i) {
    same_dtype(c, 0, i, i == 1 ? "scale" : "B");
    if (c.rank(i) != 1 || conflict(c.shape(i)[0], ch))
      c.fail(std::string(i == 1 ? "scale" : "B") + " must have shape [" + ch.str() + "], got " +
             c.in(i).str());
  }
  c.out[0] = c.in(0);
}

void layer_norm_rule(InferCtx& c) {
  if (!c.has_input(1)) c.fail("Scale (input 1) is required");
  need_float(c, 0, "X");
  int64_t r = c.rank(0);
  if (r < 1) c.fail("X must have rank >= 1, got " + c.in(0).str());
  int64_t axis = c.axis(c.attr_int("axis", -1), r);
  const Shape& x = c.shape(0);
  Shape norm(x.begin() + axis, x.end());
  for (size_t i = 1; i < 3; ++i) {
    if (!c.has_input(i)) continue;
    same_dtype(c, 0, i, i == 1 ? "Scale" : "B");
    auto b = broadcast_shapes(norm, c.shape(i));
    if (!b || *b != norm)
      c.fail(std::string(i == 1 ? "Scale " : "B ") + c.in(i).str() +
             " must broadcast to the normalized shape " + shape_str(norm));
  }
  auto stash = dtype_from_onnx(static_cast<int>(c.attr_int("stash_type", 1)));
  if (!stash || !is_float(*stash))
    c.fail("attribute stash_type must name a float type, got " +
           std::to_string(c.attr_int("stash_type", 1)));
  Shape stat = x;
  for (int64_t i = axis; i < r; ++i) stat[i] = 1;
  c.out[0] = c.in(0);
  for (size_t i = 1; i < c.out.size(); ++i) c.out[i] = {*stash, stat};
}

// MaxPool / AveragePool, and their channels-last twins (X [N, spatial..., C]).
void pool_rule(InferCtx& c) {
  const bool last = c.node().op == OpKind::NhwcMaxPool || c.node().op == OpKind::NhwcAveragePool;
  need_rank_at_least(c, 0, 3, last ? "(N, spatial..., C)" : "(N, C, spatial...)");
  bool is_max = c.node().op == OpKind::MaxPool || c.node().op == OpKind::NhwcMaxPool;
  DType t = c.dtype(0);
  if (!is_float(t) && !(is_max && (t == DType::I8 || t == DType::U8)))
    c.fail("X must be a float tensor" + std::string(is_max ? " (or i8/u8)" : "") + ", got " +
           c.in(0).str());
  const Shape& x = c.shape(0);
  size_t n = x.size() - 2;
  const size_t sp0 = last ? 1 : 2;  // the first spatial dim
  Window win = read_window(c, n, -1);
  for (size_t i = 0; i < 2 * n; ++i)
    if (win.pads[i] >= win.kernel[i % n])
      c.fail("pads " + ints_str(win.pads) + " must be smaller than kernel_shape " +
             ints_str(win.kernel));
  bool ceil_mode = flag(c, "ceil_mode", 0);
  if (is_max) flag(c, "storage_order", 0);
  else flag(c, "count_include_pad", 0);
  Shape out = {x[0]};
  if (!last) out.push_back(x[1]);
  for (size_t i = 0; i < n; ++i) out.push_back(window_out(c, x[sp0 + i], i, win, n, ceil_mode));
  if (last) out.push_back(x.back());
  c.out[0] = {t, out};
  if (c.out.size() > 1) c.out[1] = {DType::I64, out};
}

void global_pool_rule(InferCtx& c) {
  need_rank_at_least(c, 0, 3, "(N, C, spatial...)");
  need_float(c, 0, "X");
  Shape out = c.shape(0);
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  c.out[0] = {c.dtype(0), out};
}

// ---- reductions ----

Shape reduced(const Shape& in, const std::vector<bool>& set, bool keep) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!set[i]) out.push_back(in[i]);
    else if (keep) out.push_back(1);
  }
  return out;
}

void reduce_rule(InferCtx& c) {
  OpKind op = c.node().op;
  if (c.dtype(0) == DType::Bool && op != OpKind::ReduceMax && op != OpKind::ReduceMin)
    c.fail("cannot reduce a bool tensor with this operator");
  std::vector<int64_t> axes = c.const_ints(1, "axes").value_or(std::vector<int64_t>{});
  if (c.has_input(1) && c.rank(1) != 1) c.fail("axes must be a 1-D tensor, got " + c.in(1).str());
  bool keep = flag(c, "keepdims", 1);
  if (axes.empty() && flag(c, "noop_with_empty_axes", 0)) {
    c.out[0] = c.in(0);
    return;
  }
  int64_t r = c.rank(0);
  // A repeated axis is allowed, as in ONNX.
  std::vector<bool> set = axes.empty() ? std::vector<bool>(r, true) : axis_set(c, axes, r, true);
  c.out[0] = {c.dtype(0), reduced(c.shape(0), set, keep)};
}

void arg_rule(InferCtx& c) {
  int64_t r = c.rank(0);
  if (r < 1) c.fail("input must have rank >= 1, got " + c.in(0).str());
  if (c.dtype(0) == DType::Bool) c.fail("cannot take the arg max/min of a bool tensor");
  int64_t axis = c.axis(c.attr_int("axis", 0), r);
  bool keep = flag(c, "keepdims", 1);
  flag(c, "select_last_index", 0);
  std::vector<bool> set(static_cast<size_t>(r), false);
  set[axis] = true;
  c.out[0] = {DType::I64, reduced(c.shape(0), set, keep)};
}

void cumsum_rule(InferCtx& c) {
  if (c.dtype(0) == DType::Bool) c.fail("a cumulative sum or product of a bool tensor");
  if (c.dtype(1) != DType::I32 && c.dtype(1) != DType::I64)
    c.fail("axis must be an i32 or i64 tensor, got " + c.in(1).str());
  if (c.rank(1) > 1 || (c.rank(1) == 1 && c.shape(1)[0] != Dim(1)))
    c.fail("axis must be a scalar, got " + c.in(1).str());
  if (c.rank(0) < 1) c.fail("input must have rank >= 1, got " + c.in(0).str());
  if (TensorPtr a = c.const_input(1)) c.axis(a->to_ints()[0], c.rank(0));
  flag(c, "exclusive", 0);
  flag(c, "reverse", 0);
  c.out[0] = c.in(0);
}

void softmax_rule(InferCtx& c) {
  need_float(c, 0, "input");
  if (c.rank(0) < 1) c.fail("input must have rank >= 1, got " + c.in(0).str());
  c.axis(c.attr_int("axis", -1), c.rank(0));
  c.out[0] = c.in(0);
}

}  // namespace

void add_nn_shape_rules(ShapeRuleTable& t) {
  t.set(OpKind::Conv, conv_rule);
  t.set(OpKind::NhwcConv, nhwc_conv_rule);
  t.set(OpKind::ConvTranspose, conv_transpose_rule);
  t.set(OpKind::Gemm, gemm_rule);
  t.set(OpKind::MatMul, matmul_rule);
  t.set(OpKind::InstanceNormalization, instance_norm_rule);
  t.set(OpKind::LayerNormalization, layer_norm_rule);
  t.set(OpKind::MaxPool, pool_rule);
  t.set(OpKind::AveragePool, pool_rule);
  t.set(OpKind::NhwcMaxPool, pool_rule);
  t.set(OpKind::NhwcAveragePool, pool_rule);
  t.set(OpKind::GlobalAveragePool, global_pool_rule);
  t.set(OpKind::GlobalMaxPool, global_pool_rule);
  for (OpKind k : {OpKind::ReduceMean, OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMin,
                   OpKind::ReduceProd, OpKind::ReduceL2})
    t.set(k, reduce_rule);
  t.set(OpKind::ArgMax, arg_rule);
  t.set(OpKind::ArgMin, arg_rule);
  t.set(OpKind::CumSum, cumsum_rule);
  t.set(OpKind::CumProd, cumsum_rule);
  t.set(OpKind::Softmax, softmax_rule);
  t.set(OpKind::LogSoftmax, softmax_rule);
}

}  // namespace dnnf
