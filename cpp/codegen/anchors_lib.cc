// Anchors on the prelude's convolution, pooling, row and irregular kernels (paper §4.4):
// each call passes the block's fused epilogue (see BlockLowerer::epilogue).
#include "codegen/cpu/spell.h"
#include "codegen/lower.h"
#include "ir/errors.h"
#include "ir/shape_rules.h"

#include <algorithm>

namespace dnnf::cg {

namespace {

int64_t prod(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t k = from; k < to && k < d.size(); ++k) n *= d[k];
  return n;
}
using cpu::L;
using cpu::literal;

std::string ints3(const std::vector<int64_t>& v, int64_t fill) {
  std::string s = "{";
  for (size_t i = 0; i < 3; ++i) s += (i ? ", " : "") + std::to_string(i < v.size() ? v[i] : fill);
  return s + "}";
}

// The sliding-window geometry of Conv and the pools (ONNX auto_pad rules, as _ref_nn.Window).
struct Window {
  std::vector<int64_t> in, out, k, stride, dil, begin, end;
};
Window window_of(InferCtx& c, const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims,
                 std::vector<int64_t> kernel) {
  Window w;
  const size_t nd = in_dims.size() - 2;
  w.in.assign(in_dims.begin() + 2, in_dims.end());
  w.out.assign(out_dims.begin() + 2, out_dims.end());
  w.k = std::move(kernel);
  w.stride = c.attr_ints("strides", std::vector<int64_t>(nd, 1));
  w.dil = c.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  std::string ap = c.attr_string("auto_pad", "NOTSET");
  w.begin.assign(nd, 0);
  w.end.assign(nd, 0);
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    for (size_t i = 0; i < nd; ++i) {
      int64_t o = (w.in[i] + w.stride[i] - 1) / w.stride[i];
      int64_t total = std::max<int64_t>(0, (o - 1) * w.stride[i] + (w.k[i] - 1) * w.dil[i] + 1 - w.in[i]);
      int64_t small = total / 2, large = total - small;
      w.begin[i] = ap == "SAME_UPPER" ? small : large;
      w.end[i] = total - w.begin[i];
    }
  } else if (ap != "VALID") {
    std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
    for (size_t i = 0; i < nd; ++i) {
      w.begin[i] = pads[i];
      w.end[i] = pads[i + nd];
    }
  }
  if (nd > 3) throw UnsupportedOperatorError("windows over more than 3 spatial dims");
  return w;
}

// [N, spatial..., C] -> [N, C, spatial...]: the channels-last ops (NhwcConv, NhwcMaxPool,
// NhwcAveragePool) describe their windows as their channels-first twins do.
std::vector<int64_t> channels_first(std::vector<int64_t> d) {
  std::rotate(d.begin() + 1, d.end() - 1, d.end());
  return d;
}

// The PoolShape literal (pool.h) of a pool from `id` to `od` (dims channels first).
std::string pool_shape(InferCtx& c, const std::vector<int64_t>& id, const std::vector<int64_t>& od) {
  Window w = window_of(c, id, od, c.attr_ints("kernel_shape"));
  return "dnnf::pool::PoolShape{" + std::to_string(w.in.size()) + ", " + std::to_string(id[0]) + ", " +
         std::to_string(id[1]) + ", " + ints3(w.in, 1) + ", " + ints3(w.out, 1) + ", " + ints3(w.k, 1) + ", " +
         ints3(w.stride, 1) + ", " + ints3(w.dil, 1) + ", " + ints3(w.begin, 0) + ", " + ints3(w.end, 0) +
         ", " + (c.attr_int("count_include_pad", 0) ? "true" : "false") + "}";
}

}  // namespace

void BlockLowerer::emit_library(const Node& n) {
  if (n.op == OpKind::NonMaxSuppression)
    throw UnsupportedOperatorError("code generation does not support NonMaxSuppression yet: the length of its "
                                   "output depends on the data, and the memory plan needs static shapes (node '" +
                                   n.name + "')");
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ValueId v = n.inputs[i];
    if (n.op == OpKind::RoiAlign && i == 2) continue;  // batch_indices: i64, checked by the shape rule
    if (v != kNoValue && g_.value(v).type.dtype != DType::F32 &&
        !(g_.value(v).constant && is_integer(g_.value(v).type.dtype)))
      throw UnsupportedOperatorError(std::string("code generation supports ") + op_info(n.op).name +
                                     " on f32 only (node '" + n.name + "')");
  }
  InferCtx c(g_, n);
  const std::vector<int64_t> id = dims_of(g_, n.inputs[0]);
  const int64_t r = static_cast<int64_t>(id.size());
  auto axis = [&](int64_t dflt) {
    int64_t a = c.attr_int("axis", dflt);
    return a < 0 ? a + r : a;
  };
  std::string call;
  switch (n.op) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      int64_t a = axis(-1);
      code_.open("");
      EpCode ep = epilogue(n, "0L");
      code_.line(std::string("dnnf::rowops::") + (n.op == OpKind::Softmax ? "softmax_f32" : "log_softmax_f32") +
                 "(" + L(prod(id, 0, a)) + ", " + L(id[a]) + ", " + L(prod(id, a + 1, id.size())) + ", " +
                 ptr(n.inputs[0]) + ", " + ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string(op_info(n.op).name) + " rows" + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::LayerNormalization: {
      int64_t a = axis(-1);
      int64_t norm = prod(id, a, id.size());
      auto full = [&](size_t i) -> std::string {
        if (n.inputs.size() <= i || n.inputs[i] == kNoValue) return "nullptr";
        if (g_.value(n.inputs[i]).type.numel() != norm)
          throw UnsupportedOperatorError("LayerNormalization with a broadcast scale or bias (node '" + n.name + "')");
        return ptr(n.inputs[i]);
      };
      auto opt_out = [&](size_t i) -> std::string {
        if (n.outputs.size() <= i) return "nullptr";
        return ptr(n.outputs[i]);
      };
      code_.open("");
      std::string s = full(1), b = full(2), mo = opt_out(1), io = opt_out(2);
      EpCode ep = epilogue(n, "0L");
      code_.line("dnnf::rowops::layer_norm_f32(" + L(prod(id, 0, a)) + ", " + L(norm) + ", " +
                 ptr(n.inputs[0]) + ", " + s + ", " + b + ", " +
                 literal(c.attr_float("epsilon", 1e-5), DType::F32) + ", " + ep.y + ", " + mo + ", " +
                 io + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string("LayerNormalization rows") + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::ReduceMean:
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
    case OpKind::ReduceProd:
    case OpKind::ReduceL2: {
      std::vector<int64_t> axes;
      if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) axes = const_vector(c, 1, "axes");
      else axes = c.attr_ints("axes");
      unsigned mask = 0;
      if (axes.empty()) {
        if (c.attr_int("noop_with_empty_axes", 0)) mask = 0;
        else mask = (1u << r) - 1u;
      }
      for (int64_t x : axes) mask |= 1u << (x < 0 ? x + r : x);
      if (r > 8) throw UnsupportedOperatorError("reductions of rank > 8");
      const char* kind = n.op == OpKind::ReduceMean ? "Mean" : n.op == OpKind::ReduceSum ? "Sum"
                        : n.op == OpKind::ReduceMax ? "Max" : n.op == OpKind::ReduceMin ? "Min"
                        : n.op == OpKind::ReduceProd ? "Prod" : "L2";
      std::string shape;
      for (int64_t d : id) shape += (shape.empty() ? "" : ", ") + L(d);
      code_.open("");
      code_.line("static const long shape[] = {" + (shape.empty() ? std::string("1L") : shape) + "};");
      EpCode ep = epilogue(n, "0L");
      code_.line(std::string("dnnf::rowops::reduce_f32<dnnf::rowops::ReduceKind::") + kind + ">(" +
                 std::to_string(r) + ", shape, " + std::to_string(mask) + "u, " + ptr(n.inputs[0]) +
                 ", " + ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string(op_info(n.op).name) + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::Conv:
    case OpKind::ConvTranspose: {
      const bool tr = n.op == OpKind::ConvTranspose;
      const ValueId W = n.inputs[1], O = n.outputs[0];
      const ValueId B = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
      const std::vector<int64_t> wd = dims_of(g_, W), od = dims_of(g_, O);
      const int64_t group = c.attr_int("group", 1), M = od[1];
      Window w = window_of(c, id, od, std::vector<int64_t>(wd.begin() + 2, wd.end()));
      if (tr) {  // begin = the crop of the full result (the reference's rule)
        std::vector<int64_t> op = c.attr_ints("output_padding", std::vector<int64_t>(w.in.size(), 0));
        std::string ap = c.attr_string("auto_pad", "NOTSET");
        bool target = c.has_attr("output_shape") || ap == "SAME_UPPER" || ap == "SAME_LOWER";
        for (size_t i = 0; i < w.in.size(); ++i) {
          int64_t full = w.stride[i] * (w.in[i] - 1) + op[i] + (w.k[i] - 1) * w.dil[i] + 1;
          if (!target) {
            w.begin[i] = ap == "VALID" ? 0 : c.attr_ints("pads", std::vector<int64_t>(2 * w.in.size(), 0))[i];
            continue;
          }
          int64_t total = std::max<int64_t>(0, full - w.out[i]), small = total / 2;
          w.begin[i] = ap == "SAME_UPPER" ? small : total - small;
          if (w.begin[i] < 0 || full - total != w.out[i])
            throw UnsupportedOperatorError("ConvTranspose whose output_shape exceeds the full result (node '" + n.name + "')");
        }
      }
      const std::string shape = "dnnf::conv::ConvShape{" + std::to_string(w.in.size()) + ", " +
          std::to_string(id[0]) + ", " + std::to_string(id[1]) + ", " + std::to_string(M) + ", " +
          std::to_string(group) + ", " + ints3(w.in, 1) + ", " + ints3(w.out, 1) + ", " +
          ints3(w.k, 1) + ", " + ints3(w.stride, 1) + ", " + ints3(w.dil, 1) + ", " +
          ints3(w.begin, 0) + "}";
      std::string weights = ptr(W);
      if (!tr && g_.value(W).constant) {  // packed once in dnnf_create
        std::string m = "w" + std::to_string(ms_.counter++);
        ms_.members.push_back("std::unique_ptr<dnnf::conv::PackedConvWeights> " + m + ";");
        ms_.create.line("st->" + m + " = std::make_unique<dnnf::conv::PackedConvWeights>(" + shape +
                        ", static_cast<const float*>(st->c[" + std::to_string(ms_.constant(W)) + "]));");
        weights = "*x.st->" + m;
      }
      auto bias = [&](ExprBuilder& em) {
        std::vector<IExpr> ch{mod(IExpr::var(0), M, em.vars())};
        em.accumulate("add", em.eval(B, ch));
      };
      code_.open("");
      EpCode ep = B != kNoValue ? epilogue(n, "0L", bias) : epilogue(n, "0L");
      code_.line(std::string(tr ? "dnnf::conv::conv_transpose_f32(" : "dnnf::conv::conv_f32(") + shape +
                 ", " + ptr(n.inputs[0]) + ", " + weights + ", " + ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string(op_info(n.op).name) + " k" + std::to_string(w.k[0]) + " s" +
                        std::to_string(w.stride[0]) + " g" + std::to_string(group) +
                        (epilogues_.count(n.id) ? " +epilogue(" + std::to_string(epilogues_[n.id].nodes.size()) + " ops)" : ""));
      return;
    }
    case OpKind::NhwcConv: {  // channels last (conv_nhwc.h); the epilogue view is [pixels, M]
      const ValueId W = n.inputs[1], O = n.outputs[0];
      const ValueId B = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
      const std::vector<int64_t> wd = dims_of(g_, W), od = dims_of(g_, O);
      const int64_t group = c.attr_int("group", 1), M = od.back();
      const std::vector<int64_t> idf = channels_first(id);
      Window w = window_of(c, idf, channels_first(od), std::vector<int64_t>(wd.begin() + 2, wd.end()));
      const std::string shape = "dnnf::conv::ConvShape{" + std::to_string(w.in.size()) + ", " +
          std::to_string(idf[0]) + ", " + std::to_string(idf[1]) + ", " + std::to_string(M) + ", " +
          std::to_string(group) + ", " + ints3(w.in, 1) + ", " + ints3(w.out, 1) + ", " +
          ints3(w.k, 1) + ", " + ints3(w.stride, 1) + ", " + ints3(w.dil, 1) + ", " +
          ints3(w.begin, 0) + "}";
      ms_.headers.insert("conv_nhwc.h");
      std::string weights = ptr(W);
      if (g_.value(W).constant) {  // packed once in dnnf_create
        std::string m = "w" + std::to_string(ms_.counter++);
        ms_.members.push_back("std::unique_ptr<dnnf::conv::PackedNhwcWeights> " + m + ";");
        ms_.create.line("st->" + m + " = std::make_unique<dnnf::conv::PackedNhwcWeights>(" + shape +
                        ", static_cast<const float*>(st->c[" + std::to_string(ms_.constant(W)) + "]));");
        weights = "*x.st->" + m;
      }
      auto bias = [&](ExprBuilder& em) {  // per column: var 1 is the channel
        em.accumulate("add", em.eval(B, {IExpr::var(1)}));
      };
      code_.open("");
      EpCode ep = B != kNoValue ? epilogue(n, "0L", bias) : epilogue(n, "0L");
      code_.line("dnnf::conv::conv_nhwc_f32(" + shape + ", " + ptr(n.inputs[0]) + ", " + weights + ", " +
                 ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back("NhwcConv k" + std::to_string(w.k[0]) + " s" + std::to_string(w.stride[0]) + " g" +
                        std::to_string(group) +
                        (epilogues_.count(n.id) ? " +epilogue(" + std::to_string(epilogues_[n.id].nodes.size()) + " ops)" : ""));
      return;
    }
    case OpKind::NhwcMaxPool:
    case OpKind::NhwcAveragePool: {  // channels last (pool_nhwc.h); the epilogue view is [pixels, C]
      const std::string shape = pool_shape(c, channels_first(id), channels_first(dims_of(g_, n.outputs[0])));
      ms_.headers.insert("pool_nhwc.h");
      code_.open("");
      EpCode ep = epilogue(n, "0L");
      code_.line(std::string(n.op == OpKind::NhwcMaxPool ? "dnnf::pool::max_pool_nhwc_f32("
                                                         : "dnnf::pool::avg_pool_nhwc_f32(") +
                 shape + ", " + ptr(n.inputs[0]) + ", " + ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string(op_info(n.op).name) + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::MaxPool:
    case OpKind::AveragePool: {
      const bool indices = n.outputs.size() > 1 && n.outputs[1] != kNoValue &&
                           (!g_.consumers(n.outputs[1]).empty() || block_outputs_.count(n.outputs[1]));
      if (indices && !block_outputs_.count(n.outputs[1]))
        throw UnsupportedOperatorError("MaxPool's Indices used inside its own fused block is not generated "
                                       "(node '" + n.name + "')");
      const int64_t storage_order = c.attr_int("storage_order", 0);
      if (indices && storage_order != 0 && storage_order != 1)
        throw UnsupportedOperatorError("MaxPool storage_order " + std::to_string(storage_order) +
                                       " (node '" + n.name + "')");
      const std::string shape = pool_shape(c, id, dims_of(g_, n.outputs[0]));
      code_.open("");
      EpCode ep = epilogue(n, "0L");
      code_.line(std::string(n.op == OpKind::MaxPool ? "dnnf::pool::max_pool_f32(" : "dnnf::pool::avg_pool_f32(") +
                 shape + ", " + ptr(n.inputs[0]) + ", " + ep.y + ", " + ep.expr + ");");
      if (indices)
        code_.line("dnnf::pool::max_pool_indices(" + shape + ", " + ptr(n.inputs[0]) + ", " +
                   ptr(n.outputs[1]) + ", " + (storage_order ? "true" : "false") + ");");
      code_.close();
      stages_.push_back(std::string(op_info(n.op).name) + (indices ? " +indices" : "") +
                        (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::GlobalAveragePool:
    case OpKind::GlobalMaxPool: {
      code_.open("");
      EpCode ep = epilogue(n, "0L");
      code_.line(std::string(n.op == OpKind::GlobalAveragePool ? "dnnf::pool::global_avg_pool_f32("
                                                               : "dnnf::pool::global_max_pool_f32(") +
                 std::to_string(id[0]) + ", " + std::to_string(id[1]) + ", " + L(prod(id, 2, id.size())) +
                 ", " + ptr(n.inputs[0]) + ", " + ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string(op_info(n.op).name) + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::InstanceNormalization: {
      const int64_t C = id.size() > 1 ? id[1] : 1;
      for (size_t i = 1; i < 3; ++i)
        if (g_.value(n.inputs[i]).type.numel() != C)
          throw UnsupportedOperatorError("InstanceNormalization whose scale or bias is not [C] (node '" + n.name + "')");
      code_.open("");
      EpCode ep = epilogue(n, "0L");
      code_.line("dnnf::rowops::instance_norm_f32(" + L(id[0]) + ", " + L(C) + ", " + L(prod(id, 2, id.size())) +
                 ", " + ptr(n.inputs[0]) + ", " + ptr(n.inputs[1]) + ", " + ptr(n.inputs[2]) + ", " +
                 literal(c.attr_float("epsilon", 1e-5), DType::F32) + ", " + ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string("InstanceNormalization rows") + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::CumSum: {
      TensorPtr t = c.const_input(1);
      if (!t) throw UnsupportedOperatorError("CumSum with a computed axis (node '" + n.name + "')");
      int64_t a = t->to_ints().at(0);
      if (a < 0) a += r;
      code_.open("");
      EpCode ep = epilogue(n, "0L");
      code_.line("dnnf::rowops::cumsum_f32(" + L(prod(id, 0, a)) + ", " + L(id[a]) + ", " +
                 L(prod(id, a + 1, id.size())) + ", " + ptr(n.inputs[0]) + ", " + ep.y + ", " +
                 (c.attr_int("exclusive", 0) ? "true" : "false") + ", " +
                 (c.attr_int("reverse", 0) ? "true" : "false") + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string("CumSum") + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::ArgMax:
    case OpKind::ArgMin: {
      const int64_t a = axis(0);
      code_.line(std::string("dnnf::rowops::arg_reduce_i64(") + (n.op == OpKind::ArgMax ? "true" : "false") + ", " +
                 L(prod(id, 0, a)) + ", " + L(id[a]) + ", " + L(prod(id, a + 1, id.size())) + ", " +
                 ptr(n.inputs[0]) + ", " + ptr(n.outputs[0]) + ", " +
                 (c.attr_int("select_last_index", 0) ? "true" : "false") + ");");
      stages_.push_back(op_info(n.op).name);
      return;
    }
    case OpKind::TopK: {
      const int64_t a = axis(-1);
      TensorPtr kt = c.const_input(1);
      if (!kt) throw UnsupportedOperatorError("TopK with a computed K (node '" + n.name + "')");
      ms_.headers.insert("irregular.h");
      code_.line("dnnf::irr::topk_f32(" + L(prod(id, 0, a)) + ", " + L(id[a]) + ", " +
                 L(prod(id, a + 1, id.size())) + ", " + L(kt->to_ints().at(0)) + ", " +
                 (c.attr_int("largest", 1) ? "true" : "false") + ", " +
                 (c.attr_int("sorted", 1) ? "true" : "false") + ", " + ptr(n.inputs[0]) + ", " +
                 ptr(n.outputs[0]) + ", " + ptr(n.outputs[1]) + ");");
      stages_.push_back("TopK");
      return;
    }
    case OpKind::RoiAlign: {
      ms_.headers.insert("irregular.h");
      const std::vector<int64_t> od = dims_of(g_, n.outputs[0]);
      const std::string ctm = c.attr_string("coordinate_transformation_mode", "half_pixel");
      code_.open("");
      EpCode ep = epilogue(n, "0L");
      code_.line("dnnf::irr::roi_align_f32(" + L(id[0]) + ", " + L(id[1]) + ", " + L(id[2]) + ", " + L(id[3]) +
                 ", " + ptr(n.inputs[0]) + ", " + L(od[0]) + ", " + ptr(n.inputs[1]) + ", " + ptr(n.inputs[2]) +
                 ", " + L(od[2]) + ", " + L(od[3]) + ", " + L(c.attr_int("sampling_ratio", 0)) + ", " +
                 literal(c.attr_float("spatial_scale", 1.0), DType::F32) + ", " +
                 (ctm == "half_pixel" ? "true" : "false") + ", " +
                 (c.attr_string("mode", "avg") == "max" ? "true" : "false") + ", " + ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string("RoiAlign") + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::Resize: {
      ms_.headers.insert("resize.h");
      const std::vector<int64_t> od = dims_of(g_, n.outputs[0]);
      std::vector<int64_t> axes;
      for (int64_t a : c.has_attr("axes") ? c.attr_ints("axes") : std::vector<int64_t>{})
        axes.push_back(a < 0 ? a + r : a);
      if (!c.has_attr("axes"))
        for (int64_t a = 0; a < r; ++a) axes.push_back(a);
      // Per-axis scale, as the oracle's _resize_targets resolves scales / sizes.
      std::vector<double> scale(static_cast<size_t>(r), 1.0);
      TensorPtr st = n.inputs.size() > 2 && n.inputs[2] != kNoValue ? c.const_input(2) : nullptr;
      TensorPtr sz = n.inputs.size() > 3 && n.inputs[3] != kNoValue ? c.const_input(3) : nullptr;
      if (st && st->type.numel() > 0) {
        std::vector<double> s = st->to_doubles();
        for (size_t i = 0; i < axes.size() && i < s.size(); ++i) scale[axes[i]] = s[i];
      } else if (sz && sz->type.numel() > 0) {
        std::vector<int64_t> s = sz->to_ints();
        for (size_t i = 0; i < axes.size() && i < s.size(); ++i)
          scale[axes[i]] = static_cast<double>(s[i]) / static_cast<double>(id[axes[i]]);
        const std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
        if (policy != "stretch" && !axes.empty()) {
          double common = scale[axes[0]];
          for (int64_t a : axes) common = policy == "not_larger" ? std::min(common, scale[a]) : std::max(common, scale[a]);
          for (int64_t a : axes) scale[a] = common;
        }
      } else {
        throw UnsupportedOperatorError("Resize with computed scales or sizes (node '" + n.name + "')");
      }
      const std::string ctm = c.attr_string("coordinate_transformation_mode", "half_pixel");
      const std::string mode = c.attr_string("mode", "nearest");
      const std::string nm = c.attr_string("nearest_mode", "round_prefer_floor");
      auto pick = [&](const std::string& v, std::initializer_list<std::pair<const char*, const char*>> table) {
        for (auto& [k, e] : table) if (v == k) return std::string(e);
        throw UnsupportedOperatorError("Resize attribute value '" + v + "' (node '" + n.name + "')");
      };
      const std::string attrs =
          "dnnf::irr::ResizeAttrs{dnnf::irr::ResizeMode::" +
          pick(mode, {{"nearest", "Nearest"}, {"linear", "Linear"}, {"cubic", "Cubic"}}) +
          ", dnnf::irr::ResizeCoord::" +
          pick(ctm, {{"half_pixel", "HalfPixel"}, {"pytorch_half_pixel", "PytorchHalfPixel"},
                     {"half_pixel_symmetric", "HalfPixelSymmetric"}, {"align_corners", "AlignCorners"},
                     {"asymmetric", "Asymmetric"}, {"tf_crop_and_resize", "TfCropAndResize"}}) +
          ", dnnf::irr::NearestMode::" +
          pick(nm, {{"round_prefer_floor", "RoundPreferFloor"}, {"round_prefer_ceil", "RoundPreferCeil"},
                    {"floor", "Floor"}, {"ceil", "Ceil"}}) +
          ", " + literal(c.attr_float("cubic_coeff_a", -0.75), DType::F32) + ", " +
          (c.attr_int("exclude_outside", 0) ? "true" : "false") + ", " +
          (c.attr_int("antialias", 0) ? "true" : "false") + ", " +
          literal(c.attr_float("extrapolation_value", 0.0), DType::F32) + "}";
      // roi: [starts..., ends...] over all axes; only tf_crop_and_resize reads it.
      std::string roi = "nullptr";
      code_.open("");
      if (ctm == "tf_crop_and_resize" && n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
        TensorPtr rt = c.const_input(1);
        if (!rt) throw UnsupportedOperatorError("Resize with a computed roi (node '" + n.name + "')");
        std::vector<double> rv = rt->to_doubles();
        if (!rv.empty()) {
          if (rv.size() != 2 * axes.size())
            throw UnsupportedOperatorError("Resize roi of the wrong length (node '" + n.name + "')");
          std::vector<double> full(2 * static_cast<size_t>(r));
          for (int64_t a = 0; a < r; ++a) full[a] = 0.0, full[a + r] = 1.0;
          for (size_t i = 0; i < axes.size(); ++i) full[axes[i]] = rv[i], full[axes[i] + r] = rv[i + axes.size()];
          std::string list;
          for (double v : full) list += (list.empty() ? "" : ", ") + literal(v, DType::F32);
          code_.line("static const float roi[] = {" + list + "};");
          roi = "roi";
        }
      }
      std::string ins, outs, scs;
      for (int64_t a = 0; a < r; ++a) {
        ins += (a ? ", " : "") + L(id[a]);
        outs += (a ? ", " : "") + L(od[a]);
        scs += (a ? ", " : "") + literal(scale[a], DType::F64);
      }
      code_.line("static const long in_shape[] = {" + ins + "}, out_shape[] = {" + outs + "};");
      code_.line("static const double scales[] = {" + scs + "};");
      EpCode ep = epilogue(n, "0L");
      code_.line("dnnf::irr::resize_f32(" + std::to_string(r) + ", in_shape, out_shape, scales, " + roi + ", " +
                 attrs + ", " + ptr(n.inputs[0]) + ", " + ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back("Resize " + mode + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    default:
      break;
  }
  throw UnsupportedOperatorError(std::string("code generation does not support ") +
                                 op_info(n.op).name + " yet (node '" + n.name + "')");
}

}  // namespace dnnf::cg
