// The anchor table (paper §4.4): one row per Many-to-Many operator that code generation runs
// on a kernel (the CPU prelude's, or the OpenCL renderer's): the [R, C] view of its output
// that its epilogue sees, whether it takes one, and the lowering of its call into arguments
// (kernel.h AnchorArg, in the kernel's parameter order). GEMM, convolutions and pools here;
// row, reduction and irregular kernels in anchors_lib.cc.
#include "codegen/anchors.h"

#include <algorithm>
#include <tuple>

#include "ir/errors.h"
#include "ir/shape_rules.h"
#include "ir/window.h"

namespace dnnf::cg {

int64_t prod(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t k = from; k < to && k < d.size(); ++k) n *= d[k];
  return n;
}

AnchorArg int_arg(int64_t v, bool bare) {
  AnchorArg a;
  a.kind = AnchorArg::Kind::Int;
  a.i = v;
  a.bare = bare;
  return a;
}
AnchorArg float_arg(double v, DType t) {
  AnchorArg a;
  a.kind = AnchorArg::Kind::Float;
  a.f = v;
  a.dtype = t;
  return a;
}
AnchorArg bool_arg(bool v) {
  AnchorArg a;
  a.kind = AnchorArg::Kind::Bool;
  a.i = v;
  return a;
}
AnchorArg buffer_arg(ValueId v) {
  AnchorArg a;
  a.kind = v == kNoValue ? AnchorArg::Kind::Null : AnchorArg::Kind::Buffer;
  a.value = v;
  return a;
}
AnchorArg kind_arg(AnchorArg::Kind k) {
  AnchorArg a;
  a.kind = k;
  return a;
}

void need_f32(const Graph& g, const Node& n) {
  for (ValueId v : n.inputs)
    if (v != kNoValue && g.value(v).type.dtype != DType::F32)
      throw UnsupportedOperatorError(std::string("code generation supports ") + op_info(n.op).name +
                                     " on f32 only; node '" + n.name + "' reads " +
                                     dtype_name(g.value(v).type.dtype) +
                                     ": a Cast of its inputs to float32 in the model lets it compile");
}

void need_f32_library(const Graph& g, const Node& n) {
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ValueId v = n.inputs[i];
    // batch_indices: i64, checked by the shape rule
    if ((n.op == OpKind::RoiAlign || n.op == OpKind::NhwcRoiAlign) && i == 2) continue;
    // Resize's roi: f32 or f64, the kernel takes it as f32 (lower_resize)
    if (n.op == OpKind::Resize && i == 1 && v != kNoValue && g.value(v).type.dtype == DType::F64) continue;
    if (v != kNoValue && g.value(v).type.dtype != DType::F32 &&
        !(g.value(v).constant && is_integer(g.value(v).type.dtype)))
      throw UnsupportedOperatorError(std::string("code generation supports ") + op_info(n.op).name +
                                     " on f32 only; node '" + n.name + "' reads " +
                                     dtype_name(g.value(v).type.dtype) +
                                     ": a Cast of its inputs to float32 in the model lets it compile");
  }
}

std::string epilogue_label(const BlockLowerer& bl, const Node& n, bool count) {
  if (!bl.has_epilogue_plan(n)) return "";
  return count ? " +epilogue(" + std::to_string(bl.fused_ops(n)) + " ops)" : " +epilogue";
}

namespace {

std::string prologue_label(const GemmCall& gc) {
  return gc.a_computed ? " +prologue(" + std::to_string(gc.a_fused_ops) + " ops)" : "";
}

// ---- views ------------------------------------------------------------------------------
std::pair<int64_t, int64_t> view_channels_first(const Graph& g, const Node& n) {  // [N * C, spatial]
  const std::vector<int64_t> od = dims_of(g, n.outputs.at(0));
  return {od.size() >= 2 ? od[0] * od[1] : 1, prod(od, 2, od.size())};
}
std::pair<int64_t, int64_t> view_last_dim(const Graph& g, const Node& n) {  // [rest, last dim]
  const std::vector<int64_t> od = dims_of(g, n.outputs.at(0));
  int64_t C = od.empty() ? 1 : std::max<int64_t>(od.back(), 1);
  return {numel(od) / C, C};
}
std::pair<int64_t, int64_t> view_global_pool(const Graph& g, const Node& n) {  // [N, C]
  const std::vector<int64_t> od = dims_of(g, n.outputs.at(0));
  return {od[0], od.size() > 1 ? od[1] : 1};
}

bool always(const Node&) { return true; }

// ---- GEMM -------------------------------------------------------------------------------
// MatMul's element types besides f32, as ONNX Runtime's CPU kernel has them (f16 models are
// computed in f32 at import): summed in the type itself, integers wrapping around.
bool matmul_any_type(DType t) {
  return t == DType::F64 || t == DType::I32 || t == DType::I64 || t == DType::U32 || t == DType::U64;
}

void lower_matmul(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  const DType dt = g.value(n.inputs[0]).type.dtype;
  if (dt == DType::F32) {
    need_f32(g, n);
  } else if (!matmul_any_type(dt) || g.value(n.inputs[1]).type.dtype != dt) {
    throw UnsupportedOperatorError("code generation computes MatMul on float32, float64, int32, int64, uint32 and "
                                   "uint64, both inputs of one type; node '" + n.name + "' reads " +
                                   dtype_name(dt) + " and " + dtype_name(g.value(n.inputs[1]).type.dtype) +
                                   ": a Cast of its inputs to float32 in the model lets it compile");
  }
  AnchorStage& a = st.anchor;
  GemmCall& gc = a.gemm;
  gc.dtype = dt;
  const ValueId A = n.inputs[0], B = n.inputs[1], O = n.outputs[0];
  const std::vector<int64_t> ad = dims_of(g, A), bd = dims_of(g, B), od = dims_of(g, O);
  const bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  gc.M = a1 ? 1 : ad[ad.size() - 2];
  gc.K = ad.back();
  gc.N = b1 ? 1 : bd.back();
  gc.a = A;
  gc.b = B;
  gc.rs_a = gc.K;
  gc.rs_b = gc.N;
  gc.batched = true;
  // An operand made by Transpose/Reshape of a value in memory is read there, through strides
  // (attention's K^T: the packing of B reads K's rows).
  const StridedView* va = bl.strided(A);
  const StridedView* vb = bl.strided(B);
  if (va) std::tie(gc.a, gc.rs_a, gc.cs_a) = std::make_tuple(va->root, va->strides[ad.size() - 2], va->strides.back());
  if (vb) std::tie(gc.b, gc.rs_b, gc.cs_b) = std::make_tuple(vb->root, vb->strides[bd.size() - 2], vb->strides.back());
  std::vector<int64_t> batch_dims(od.begin(), od.end() - (a1 ? 0 : 1) - (b1 ? 0 : 1));
  a.batch = numel(batch_dims);
  VarTable& vt = a.batch_vars;
  int bv = vt.add("b", a.batch);
  std::vector<IExpr> bidx = delinearize(IExpr::var(bv), batch_dims, vt);
  auto batch_offset = [&](const std::vector<int64_t>& d, bool vec, int64_t mat, const StridedView* v) {
    std::vector<int64_t> bd2(d.begin(), d.end() - (vec ? 1 : 2));
    std::vector<IExpr> i(bd2.size());
    size_t lead = batch_dims.size() - bd2.size();
    for (size_t k = 0; k < bd2.size(); ++k) i[k] = bd2[k] == 1 ? IExpr::constant(0) : bidx[lead + k];
    if (!v) return std::make_pair(scale(linearize(i, bd2, vt), mat, vt), numel(bd2));
    IExpr off = IExpr::constant(v->offset);  // a Split/Slice part starts inside its root
    for (size_t k = 0; k < bd2.size(); ++k) off = add(off, scale(i[k], v->strides[k], vt), vt);
    return std::make_pair(off, numel(bd2));
  };
  int64_t nb;
  std::tie(a.offset_a, std::ignore) = batch_offset(ad, a1, gc.M * gc.K, va);
  std::tie(a.offset_b, nb) = batch_offset(bd, b1, gc.K * gc.N, vb);
  a.flops_per_batch = 2.0 * gc.M * gc.N * gc.K;
  if (dt != DType::F32) {  // no packing, prologue or epilogue: they compute in f32
    bl.epilogue(n, a);
    st.label = "matmul " + std::string(dtype_name(dt)) + " " + std::to_string(a.batch) + "x[" +
               std::to_string(gc.M) + "x" + std::to_string(gc.N) + "x" + std::to_string(gc.K) + "]";
    return;
  }
  if (g.value(B).constant && nb == 1 && !vb) {
    PackedConstant p;
    p.kind = PackedConstant::Kind::GemmB;
    p.value = B;
    p.ints = {gc.N, 1, gc.K, gc.N};
    gc.packed_b = bl.module().pack(p);
  }
  bl.gemm_prologue(n, gc);
  bl.epilogue(n, a);
  st.label = "gemm " + std::to_string(a.batch) + "x[" + std::to_string(gc.M) + "x" + std::to_string(gc.N) + "x" +
             std::to_string(gc.K) + "]" + (gc.packed_b < 0 ? "" : " packed-B") + prologue_label(gc) +
             epilogue_label(bl, n, true);
}

void lower_gemm(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  need_f32(g, n);
  InferCtx c(g, n);
  AnchorStage& a = st.anchor;
  GemmCall& gc = a.gemm;
  const ValueId A = n.inputs[0], B = n.inputs[1], O = n.outputs[0];
  const ValueId Cv = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
  const std::vector<int64_t> ad = dims_of(g, A), od = dims_of(g, O);
  const bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  gc.M = od[0];
  gc.N = od[1];
  gc.K = ta ? ad[0] : ad[1];
  gc.a = A;
  gc.b = B;
  gc.rs_a = ta ? 1 : gc.K;
  gc.cs_a = ta ? gc.M : 1;
  gc.rs_b = tb ? 1 : gc.N;
  gc.cs_b = tb ? gc.K : 1;
  // Operands made by Transpose/Reshape of a value in memory are read there, through strides.
  if (const StridedView* v = bl.strided(A))
    std::tie(gc.a, gc.rs_a, gc.cs_a) = std::make_tuple(v->root, v->strides[ta ? 1 : 0], v->strides[ta ? 0 : 1]);
  const StridedView* vb = bl.strided(B);
  if (vb) std::tie(gc.b, gc.rs_b, gc.cs_b) = std::make_tuple(vb->root, vb->strides[tb ? 1 : 0], vb->strides[tb ? 0 : 1]);
  if (g.value(B).constant && !vb) {
    PackedConstant p;
    p.kind = PackedConstant::Kind::GemmB;
    p.value = B;
    p.ints = {gc.rs_b, gc.cs_b, gc.K, gc.N};
    gc.packed_b = bl.module().pack(p);
  }
  auto pre = [&](ExprBuilder& em) {
    if (alpha != 1.0) em.accumulate("mul", em.literal(alpha));
    if (Cv == kNoValue || beta == 0.0) return;
    std::vector<int64_t> cd = dims_of(g, Cv);
    std::vector<IExpr> ci;  // C broadcast to [M, N]: vars 0 and 1 are the epilogue's row and col
    std::vector<IExpr> oi{IExpr::var(0), IExpr::var(1)};
    for (size_t k = 0; k < cd.size(); ++k) ci.push_back(cd[k] == 1 ? IExpr::constant(0) : oi[2 - cd.size() + k]);
    Ref cv = em.eval(Cv, ci);
    if (beta != 1.0) {
      Ew mul;
      mul.kind = Ew::Kind::Call;
      mul.name = "v_mul";
      mul.kids.resize(2);
      mul.kids[1].kind = Ew::Kind::Const;
      mul.kids[1].value = beta;
      cv = em.compute_inline(mul, {cv});
    }
    em.accumulate("add", cv);
  };
  bl.gemm_prologue(n, gc);
  const bool needs_pre = alpha != 1.0 || (Cv != kNoValue && beta != 0.0);
  if (needs_pre) {
    bl.epilogue(n, a, pre);
  } else {
    bl.epilogue(n, a);
  }
  st.label = "gemm [" + std::to_string(gc.M) + "x" + std::to_string(gc.N) + "x" + std::to_string(gc.K) + "]" +
             (gc.packed_b < 0 ? "" : " packed-B") + prologue_label(gc) + epilogue_label(bl, n, true);
}

// ---- windows ----------------------------------------------------------------------------
// [N, spatial..., C] -> [N, C, spatial...]: the channels-last ops (NhwcConv, NhwcMaxPool,
// NhwcAveragePool) describe their windows as their channels-first twins do.
std::vector<int64_t> channels_first(std::vector<int64_t> d) {
  std::rotate(d.begin() + 1, d.end() - 1, d.end());
  return d;
}

void push3(std::vector<int64_t>& out, const std::vector<int64_t>& v, int64_t fill) {
  for (size_t i = 0; i < 3; ++i) out.push_back(i < v.size() ? v[i] : fill);
}

// The ConvShape of conv.h: nd, N, C, M, group, in, out, kernel, stride, dilation, begin, ldy
// (0 here: set where the output lies in rows), planar_x (0: set where x is read channels first).
AnchorArg conv_shape(size_t nd, int64_t N, int64_t C, int64_t M, int64_t group, const std::vector<int64_t>& in,
                     const std::vector<int64_t>& out, const Window& w, const std::vector<int64_t>& begin) {
  AnchorArg a;
  a.kind = AnchorArg::Kind::Shape;
  a.name = "conv";
  a.ints = {static_cast<int64_t>(nd), N, C, M, group};
  push3(a.ints, in, 1);
  push3(a.ints, out, 1);
  push3(a.ints, w.kernel, 1);
  push3(a.ints, w.strides, 1);
  push3(a.ints, w.dilations, 1);
  push3(a.ints, begin, 0);
  a.ints.push_back(0);  // ldy
  a.ints.push_back(0);  // planar_x
  return a;
}

// The PoolShape of pool.h: nd, N, C, in, out, kernel, stride, dilation, begin, end,
// count_include_pad (dims channels first).
AnchorArg pool_shape(const InferCtx& c, const std::vector<int64_t>& id, const std::vector<int64_t>& od) {
  const size_t nd = id.size() - 2;
  Window w = read_window(c, nd, -1);
  std::vector<int64_t> in(id.begin() + 2, id.end()), out(od.begin() + 2, od.end());
  WindowPlacement p = place_window(w, in);
  if (nd > 3) throw UnsupportedOperatorError("windows over more than 3 spatial dims");
  AnchorArg a;
  a.kind = AnchorArg::Kind::Shape;
  a.name = "pool";
  a.ints = {static_cast<int64_t>(nd), id[0], id[1]};
  push3(a.ints, in, 1);
  push3(a.ints, out, 1);
  push3(a.ints, w.kernel, 1);
  push3(a.ints, w.strides, 1);
  push3(a.ints, w.dilations, 1);
  push3(a.ints, p.begin, 0);
  push3(a.ints, p.end, 0);
  a.ints.push_back(c.attr_int("count_include_pad", 0) ? 1 : 0);
  return a;
}

// Conv, ConvTranspose (channels first) and NhwcConv (channels last; its epilogue view is
// [pixels, M]): [shape, x, weights (packed or a buffer), y, ep].
void lower_conv(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  need_f32_library(g, n);
  InferCtx c(g, n);
  AnchorStage& a = st.anchor;
  const bool tr = n.op == OpKind::ConvTranspose, last = n.op == OpKind::NhwcConv;
  const ValueId W = n.inputs[1], O = n.outputs[0];
  const ValueId B = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
  const std::vector<int64_t> id0 = dims_of(g, n.inputs[0]), od0 = dims_of(g, O);
  const std::vector<int64_t> id = last ? channels_first(id0) : id0, od = last ? channels_first(od0) : od0;
  const int64_t group = c.attr_int("group", 1), M = od[1];
  const size_t nd = id.size() - 2;
  Window w = read_window(c, nd, 1);
  std::vector<int64_t> in(id.begin() + 2, id.end()), out(od.begin() + 2, od.end());
  std::vector<int64_t> begin = place_window(w, in).begin;
  if (nd > 3) throw UnsupportedOperatorError("windows over more than 3 spatial dims");
  if (tr) {  // begin = the crop of the full result (the reference's rule)
    std::vector<int64_t> op = c.attr_ints("output_padding", std::vector<int64_t>(nd, 0));
    std::string ap = c.attr_string("auto_pad", "NOTSET");
    bool target = c.has_attr("output_shape") || ap == "SAME_UPPER" || ap == "SAME_LOWER";
    for (size_t i = 0; i < nd; ++i) {
      int64_t full = w.strides[i] * (in[i] - 1) + op[i] + (w.kernel[i] - 1) * w.dilations[i] + 1;
      if (!target) {
        begin[i] = ap == "VALID" ? 0 : c.attr_ints("pads", std::vector<int64_t>(2 * nd, 0))[i];
        continue;
      }
      int64_t total = std::max<int64_t>(0, full - out[i]), small = total / 2;
      begin[i] = ap == "SAME_UPPER" ? small : total - small;
      if (begin[i] < 0 || full - total != out[i])
        throw UnsupportedOperatorError("ConvTranspose whose output_shape exceeds the full result (node '" + n.name +
                                       "'): give the extra rows and columns as output_padding instead");
    }
  }
  AnchorArg shape = conv_shape(nd, id[0], id[1], M, group, in, out, w, begin);
  // The model's channels-first input read where it lies, not through a transposed copy.
  const ValueId planar = last ? bl.planar(n.inputs[0]) : kNoValue;
  if (planar != kNoValue) shape.ints[24] = 1;
  a.args.push_back(shape);
  // A Concat along the channels, read in place: a pointer per input (LowerOptions says where).
  const std::vector<ValueId>* segs = bl.segments(n.inputs[0]);
  AnchorArg x = segs ? kind_arg(AnchorArg::Kind::Segments) : buffer_arg(planar != kNoValue ? planar : n.inputs[0]);
  if (segs) {
    x.values = *segs;
    for (ValueId u : *segs) x.ints.push_back(last ? dims_of(g, u).back() : dims_of(g, u).at(1));
  }
  a.args.push_back(x);
  if (segs && last) {  // the channels-last convolution's weights packed per segment
    PackedConstant p;
    p.kind = PackedConstant::Kind::SegmentedNhwcConvWeights;
    p.value = W;
    p.ints = shape.ints;
    p.ints.insert(p.ints.end(), x.ints.begin(), x.ints.end());
    AnchorArg packed = kind_arg(AnchorArg::Kind::Packed);
    packed.i = bl.module().pack(p);
    a.args.push_back(packed);
  } else if (!tr && g.value(W).constant) {  // packed once when the model is created
    PackedConstant p;
    p.kind = last ? PackedConstant::Kind::NhwcConvWeights : PackedConstant::Kind::ConvWeights;
    p.value = W;
    p.ints = shape.ints;
    AnchorArg packed = kind_arg(AnchorArg::Kind::Packed);
    packed.i = bl.module().pack(p);
    a.args.push_back(packed);
  } else {
    a.args.push_back(buffer_arg(W));
  }
  a.args.push_back(kind_arg(AnchorArg::Kind::Y));
  a.args.push_back(kind_arg(AnchorArg::Kind::Ep));
  if (B != kNoValue) {
    bl.epilogue(n, a, [&](ExprBuilder& em) {
      // The channel: row % M of the [N * M, pixels] view, or column (var 1) channels last.
      std::vector<IExpr> ch{last ? IExpr::var(1) : mod(IExpr::var(0), M, em.vars())};
      em.accumulate("add", em.eval(B, ch));
    });
  } else {
    bl.epilogue(n, a);
  }
  if (last) {  // ConvShape::ldy: the output's pixels as rows of a Concat's bytes (0: dense)
    const Location* l = a.y != kNoValue && !bl.streamed(a.y) ? &bl.location(a.y) : nullptr;
    a.args[0].ints[23] = l && l->row != 0 ? l->stride / 4 : 0;
  }
  st.label = std::string(last ? "NhwcConv" : op_info(n.op).name) + " k" + std::to_string(w.kernel[0]) + " s" +
             std::to_string(w.strides[0]) + " g" + std::to_string(group) +
             (segs ? " concat(" + std::to_string(segs->size()) + ")" : "") + (planar != kNoValue ? " x channels first" : "") +
             epilogue_label(bl, n, true) +
             (last && a.args[0].ints[23] != 0 ? " into rows of " + std::to_string(a.args[0].ints[23]) : "");
}

// MaxPool, AveragePool: [shape, x, y, ep], and MaxPool's Indices as a second call
// [shape, x, indices, storage_order].
void lower_pool(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  // MaxPool's other element types as ONNX has them (and ONNX Runtime computes): a window at a
  // time in the type (pool::max_pool_scalar), without an epilogue (epilogues compute in f32).
  const DType dt = g.value(n.inputs[0]).type.dtype;
  const bool scalar = n.op == OpKind::MaxPool && (dt == DType::F64 || dt == DType::I8 || dt == DType::U8);
  if (!scalar) need_f32_library(g, n);
  InferCtx c(g, n);
  AnchorStage& a = st.anchor;
  const bool indices = n.outputs.size() > 1 && n.outputs[1] != kNoValue &&
                       (!g.consumers(n.outputs[1]).empty() || bl.block_output(n.outputs[1]));
  if (indices && !bl.block_output(n.outputs[1]))
    throw UnsupportedOperatorError("MaxPool's Indices used inside its own fused block is not generated "
                                   "(node '" + n.name + "')");
  const int64_t storage_order = c.attr_int("storage_order", 0);
  if (indices && storage_order != 0 && storage_order != 1)
    throw UnsupportedOperatorError("MaxPool storage_order " + std::to_string(storage_order) + " (node '" + n.name + "')");
  AnchorArg shape = pool_shape(c, dims_of(g, n.inputs[0]), dims_of(g, n.outputs[0]));
  a.args = {shape, buffer_arg(n.inputs[0]), kind_arg(AnchorArg::Kind::Y), kind_arg(AnchorArg::Kind::Ep)};
  a.args[1].dtype = dt;  // the renderer's choice of kernel
  bl.epilogue(n, a);
  if (indices) a.second = {shape, buffer_arg(n.inputs[0]), buffer_arg(n.outputs[1]), bool_arg(storage_order != 0)};
  st.label = std::string(op_info(n.op).name) + (scalar ? std::string(" ") + dtype_name(dt) : std::string()) +
             (indices ? " +indices" : "") + epilogue_label(bl, n, false);
}

void lower_nhwc_pool(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  need_f32_library(g, n);
  InferCtx c(g, n);
  AnchorStage& a = st.anchor;
  a.args = {pool_shape(c, channels_first(dims_of(g, n.inputs[0])), channels_first(dims_of(g, n.outputs[0]))),
            buffer_arg(n.inputs[0]), kind_arg(AnchorArg::Kind::Y), kind_arg(AnchorArg::Kind::Ep)};
  bl.epilogue(n, a);
  st.label = std::string(op_info(n.op).name) + epilogue_label(bl, n, false);
}

// GlobalAveragePool, GlobalMaxPool: [N (int), C (int), spatial, x, y, ep].
void lower_global_pool(BlockLowerer& bl, const Node& n, Stage& st) {
  const Graph& g = bl.graph();
  need_f32_library(g, n);
  const std::vector<int64_t> id = dims_of(g, n.inputs[0]);
  AnchorStage& a = st.anchor;
  a.args = {int_arg(id[0], true), int_arg(id[1], true), int_arg(prod(id, 2, id.size()), false),
            buffer_arg(n.inputs[0]), kind_arg(AnchorArg::Kind::Y), kind_arg(AnchorArg::Kind::Ep)};
  bl.epilogue(n, a);
  st.label = std::string(op_info(n.op).name) + epilogue_label(bl, n, false);
}

}  // namespace

// The rows of anchors_lib.cc.
void lower_softmax(BlockLowerer& bl, const Node& n, Stage& st);
void lower_layer_norm(BlockLowerer& bl, const Node& n, Stage& st);
void lower_reduce(BlockLowerer& bl, const Node& n, Stage& st);
void lower_instance_norm(BlockLowerer& bl, const Node& n, Stage& st);
void lower_cumsum(BlockLowerer& bl, const Node& n, Stage& st);
void lower_arg_reduce(BlockLowerer& bl, const Node& n, Stage& st);
void lower_topk(BlockLowerer& bl, const Node& n, Stage& st);
void lower_roi_align(BlockLowerer& bl, const Node& n, Stage& st);
void lower_grid_sample(BlockLowerer& bl, const Node& n, Stage& st);
void lower_resize(BlockLowerer& bl, const Node& n, Stage& st);
void lower_scatter(BlockLowerer& bl, const Node& n, Stage& st);
std::pair<int64_t, int64_t> view_axis(const Graph& g, const Node& n);
std::pair<int64_t, int64_t> view_reduce(const Graph& g, const Node& n);
std::pair<int64_t, int64_t> view_layer_norm(const Graph& g, const Node& n);
bool layer_norm_epilogue(const Node& n);

const AnchorRow* anchor_row(OpKind op) {
  using K = AnchorKind;
  static const AnchorRow rows[] = {
      {OpKind::MatMul, K::MatMul, always, view_last_dim, lower_matmul},
      {OpKind::Gemm, K::Gemm, always, view_last_dim, lower_gemm},
      {OpKind::Conv, K::Conv, always, view_channels_first, lower_conv},
      {OpKind::ConvTranspose, K::ConvTranspose, always, view_channels_first, lower_conv},
      {OpKind::NhwcConv, K::NhwcConv, always, view_last_dim, lower_conv},
      {OpKind::MaxPool, K::MaxPool, always, view_channels_first, lower_pool},
      {OpKind::AveragePool, K::AvgPool, always, view_channels_first, lower_pool},
      {OpKind::NhwcMaxPool, K::NhwcMaxPool, always, view_last_dim, lower_nhwc_pool},
      {OpKind::NhwcAveragePool, K::NhwcAvgPool, always, view_last_dim, lower_nhwc_pool},
      {OpKind::GlobalAveragePool, K::GlobalAvgPool, always, view_global_pool, lower_global_pool},
      {OpKind::GlobalMaxPool, K::GlobalMaxPool, always, view_global_pool, lower_global_pool},
      {OpKind::Softmax, K::Softmax, always, view_axis, lower_softmax},
      {OpKind::LogSoftmax, K::LogSoftmax, always, view_axis, lower_softmax},
      {OpKind::LayerNormalization, K::LayerNorm, layer_norm_epilogue, view_layer_norm, lower_layer_norm},
      {OpKind::ReduceMean, K::Reduce, always, view_reduce, lower_reduce},
      {OpKind::ReduceSum, K::Reduce, always, view_reduce, lower_reduce},
      {OpKind::ReduceMax, K::Reduce, always, view_reduce, lower_reduce},
      {OpKind::ReduceMin, K::Reduce, always, view_reduce, lower_reduce},
      {OpKind::ReduceProd, K::Reduce, always, view_reduce, lower_reduce},
      {OpKind::ReduceL2, K::Reduce, always, view_reduce, lower_reduce},
      {OpKind::InstanceNormalization, K::InstanceNorm, always, view_channels_first, lower_instance_norm},
      {OpKind::CumSum, K::CumSum, always, view_axis, lower_cumsum},
      {OpKind::CumProd, K::CumSum, nullptr, view_axis, lower_cumsum},
      {OpKind::ArgMax, K::ArgReduce, nullptr, view_last_dim, lower_arg_reduce},
      {OpKind::ArgMin, K::ArgReduce, nullptr, view_last_dim, lower_arg_reduce},
      {OpKind::TopK, K::TopK, nullptr, view_last_dim, lower_topk},
      {OpKind::RoiAlign, K::RoiAlign, always, view_last_dim, lower_roi_align},
      {OpKind::NhwcRoiAlign, K::RoiAlign, always, view_last_dim, lower_roi_align},
      {OpKind::GridSample, K::GridSample, always, view_last_dim, lower_grid_sample},
      {OpKind::Resize, K::Resize, always, view_last_dim, lower_resize},
      {OpKind::ScatterElements, K::Scatter, nullptr, view_last_dim, lower_scatter},
      {OpKind::ScatterND, K::Scatter, nullptr, view_last_dim, lower_scatter},
  };
  for (const AnchorRow& r : rows)
    if (r.op == op) return &r;
  return nullptr;
}

}  // namespace dnnf::cg
