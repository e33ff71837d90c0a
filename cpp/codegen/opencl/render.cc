// The OpenCL renderer (paper §4.4 code generation for the mobile GPU): spells the kernel plan
// of every block as OpenCL C NDRange kernels, one per stage (a pointwise loop nest, a
// transpose, an anchor with its epilogue), launched in order on an in-order queue, which is
// the barrier between a block's stages. One work-item computes one output element (or one
// row of a row kernel); the fused epilogue runs on it before the store, as in the CPU target.
// Buffers are the CPU target's: graph inputs, outputs and constants, and the arena and block
// scratch, which kernels offset themselves (the OPENCL-ABI note of opencl_module.h).
#include <algorithm>
#include <map>

#include "codegen/counts.h"
#include "codegen/module.h"
#include "codegen/opencl/renderer.h"
#include "ir/errors.h"

namespace dnnf {

namespace cg::opencl {

ValueId Renderer::located_value(const Location& l) const {
  switch (l.kind) {
    case Location::Kind::GraphInput: return g.inputs().at(static_cast<size_t>(l.at));
    case Location::Kind::GraphOutput: return g.outputs().at(static_cast<size_t>(l.at));
    case Location::Kind::Constant: return mp.constants.at(static_cast<size_t>(l.at));
    default: return kNoValue;
  }
}

// Declares p<v> for every buffer of the block, as the CPU renderer does.
void Renderer::declare(K& k, const BlockPlan& b) {
  k.body.indent = 1;
  for (const Buffer& buf : b.buffers) {
    const std::string t = cltype(buf.dtype, sp);
    std::string at;
    switch (buf.where.kind) {
      case Location::Kind::Arena: at = "dnnf_arena + " + std::to_string(buf.where.at); break;
      case Location::Kind::Scratch: at = "dnnf_scratch + " + std::to_string(buf.where.at); break;
      default: {
        const ValueId v = located_value(buf.where);
        auto it = std::find(k.values.begin(), k.values.end(), v);
        size_t i = static_cast<size_t>(it - k.values.begin());
        if (it == k.values.end()) k.values.push_back(v);
        at = "dnnf_v" + std::to_string(i);
      }
    }
    k.body.line("__global " + t + "* p" + std::to_string(buf.value) + " = (__global " + t + "*)(" + at + ");");
  }
}

void Renderer::finish(K& k, const int64_t (&global)[3]) {
  if (static_cast<int64_t>(k.values.size()) > opt.max_kernel_args)
    throw CompileError("kernel " + k.name + " takes " + std::to_string(k.values.size()) +
                       " tensors, more than the device's kernel-argument limit of " + std::to_string(opt.max_kernel_args) +
                       "; plan with that limit (compile(target='opencl') does; plan(..., max_kernel_args=" +
                       std::to_string(opt.max_kernel_args) + "))");
  std::string params = "__global int* dnnf_err, __global uchar* dnnf_arena, __global uchar* dnnf_scratch";
  for (size_t i = 0; i < k.values.size(); ++i) params += ", __global uchar* dnnf_v" + std::to_string(i);
  kernels += k.globals + "__kernel void " + k.name + "(" + params + ") {\n" + k.body.text + "}\n\n";
  OpenclLaunch l;
  l.kernel = k.name;
  l.dims = shape.dims;
  l.local_bytes = shape.local_bytes;
  for (int d = 0; d < shape.dims; ++d) {
    l.global[d] = std::max<int64_t>(1, global[d]);
    l.local[d] = shape.local[d];
  }
  if (shape.dims == 1) l.global[0] = (l.global[0] + kGroup - 1) / kGroup * kGroup;
  OpenclArg a;
  for (OpenclArg::Kind kind : {OpenclArg::Kind::ErrorFlag, OpenclArg::Kind::Arena, OpenclArg::Kind::Scratch}) {
    a.kind = kind;
    l.args.push_back(a);
  }
  for (ValueId v : k.values) {
    a.kind = OpenclArg::Kind::Value;
    a.value = v;
    l.args.push_back(a);
  }
  out.launches.push_back(std::move(l));
}

void Renderer::loop(K& k, const LoopStage& l) {
  k.body.line("const long gid = get_global_id(0);");
  k.body.line("if (gid >= " + std::to_string(l.total) + "L) return;");
  if (l.flat) {
    k.body.line("const long j = gid;");
  } else {
    k.body.line("const long o = gid / " + std::to_string(l.row_len) + "L, j = gid % " + std::to_string(l.row_len) + "L;");
    k.body.line("(void)o;");
    for (const LoopStage::IndexVar& v : l.index_vars)
      k.body.line("const long i" + std::to_string(v.k) + " = " +
                  (v.zero ? std::string("0") : "(o / " + std::to_string(v.div) + "L) % " + std::to_string(v.mod) + "L") + ";");
  }
  render_program(l.body, sp, k.body);
}

void Renderer::transpose(K& k, const TransposeStage& t) {
  const size_t r = t.dims.size();
  std::vector<int64_t> in_stride(r, 1), od(r);
  for (size_t d = r - 1; d > 0; --d) in_stride[d - 1] = in_stride[d] * t.dims[d];
  int64_t total = 1;
  for (size_t d = 0; d < r; ++d) {
    od[d] = t.dims[static_cast<size_t>(t.perm[d])];
    total *= od[d];
  }
  k.body.line("const long gid = get_global_id(0);");
  k.body.line("if (gid >= " + std::to_string(total) + "L) return;");
  k.body.line("long rest = gid, src = 0;");
  for (size_t d = r; d-- > 0;) {
    k.body.line("src += (rest % " + std::to_string(od[d]) + "L) * " +
                std::to_string(in_stride[static_cast<size_t>(t.perm[d])]) + "L; rest /= " + std::to_string(od[d]) + "L;");
  }
  k.body.line("p" + std::to_string(t.out) + "[gid] = p" + std::to_string(t.in) + "[src];");
}

// The anchor's result for element `e` is in `acc`: the epilogue (over the [R, C] view:
// row = e / C, j = e % C) and the store.
void Renderer::finish_element(K& k, const AnchorStage& a, const std::string& e) {
  const std::string y = a.y != kNoValue ? "p" + std::to_string(a.y)
                                        : "((__global float*)(dnnf_scratch + " + std::to_string(a.y_scratch) + "))";
  if (!a.ep.present) {
    k.body.line(y + "[" + e + "] = acc;");
    return;
  }
  k.body.open("");
  k.body.line("const long row = (" + e + ") / " + std::to_string(a.ep.C) + "L, j = (" + e + ") % " +
              std::to_string(a.ep.C) + "L;");
  k.body.line("(void)row; (void)j;");
  k.body.line("float v = acc;");
  render_program(a.ep.prog, sp, k.body);
  if (!a.ep.stores) k.body.line(y + "[" + e + "] = v;");
  k.body.close();
}

bool Renderer::anchor(K& k, const AnchorStage& a, int64_t global[3]) {
  using A = AnchorKind;
  switch (a.kind) {
    case A::MatMul:
    case A::Gemm: gemm(k, a, global); return true;
    case A::Conv: conv(k, a, global); return true;
    case A::ConvTranspose: conv_transpose(k, a, global); return true;
    case A::Resize: resize(k, a, global); return true;
    case A::MaxPool: pool(k, a, global, true); return true;
    case A::CumSum: cumsum(k, a, global); return true;
    case A::ArgReduce: arg_reduce(k, a, global); return true;
    case A::TopK: topk(k, a, global); return true;
    case A::Scatter: scatter(k, a, global); return true;
    case A::InstanceNorm: instance_norm(k, a, global); return true;
    case A::RoiAlign: roi_align(k, a, global); return true;
    case A::GridSample: grid_sample(k, a, global); return true;
    case A::AvgPool: pool(k, a, global, false); return true;
    case A::GlobalAvgPool: global_pool(k, a, global, false); return true;
    case A::GlobalMaxPool: global_pool(k, a, global, true); return true;
    case A::Softmax: softmax(k, a, global, false); return true;
    case A::LogSoftmax: softmax(k, a, global, true); return true;
    case A::LayerNorm: layer_norm(k, a, global); return true;
    case A::Reduce: reduce(k, a, global); return true;
    default: break;
  }
  throw UnsupportedOperatorError(std::string(op_info(a.node->op).name) +
                                 " is not supported by the OpenCL target yet (node '" + a.node->name + "')");
}

void Renderer::block(const BlockPlan& b) {
  KernelInfo info;
  cur_block = b.block;
  cur_scratch = b.scratch_bytes;
  info.block = b.block;
  info.function = "k" + std::to_string(b.block);
  info.scratch_bytes = b.scratch_bytes;
  for (size_t s = 0; s < b.stages.size(); ++s) {
    const Stage& st = b.stages[s];
    info.stages.push_back(st.label);
    K k;
    k.name = info.function + "_" + std::to_string(s);
    declare(k, b);
    int64_t global[3] = {1, 1, 1};
    shape = Shape{};
    switch (st.kind) {
      case Stage::Kind::Loop:
        loop(k, st.loop);
        global[0] = st.loop.total;
        break;
      case Stage::Kind::Transpose: {
        transpose(k, st.transpose);
        global[0] = prod(st.transpose.dims, 0, st.transpose.dims.size());
        break;
      }
      case Stage::Kind::Anchor:
        // (LowerOptions::conv_means is the CPU's: no OpenCL kernel reduces as it stores)
        if (st.anchor.reduced_by) throw InternalError("codegen: an OpenCL anchor asked to reduce its output");
        if (!st.anchor.expand.empty())
          throw InternalError("codegen: an OpenCL anchor asked to compute its input from a convolution");
        anchor(k, st.anchor, global);
        break;
    }
    finish(k, global);
    out.launches.back().block = b.block;
  }
  out.kernels.push_back(std::move(info));
}

}  // namespace cg::opencl

OpenclModule generate_opencl(const Graph& g, const FusionPlan& p, const OpenclCodegenOptions& opt) {
  for (ValueId v : g.inputs())
    if (!g.value(v).type.is_static())
      throw ShapeError("the OpenCL target needs static shapes: input '" + g.value(v).name + "' is " +
                       g.value(v).type.str());
  OpenclModule m;
  // (no buffers for Concats consumed in their block: Renderer::conv reads their inputs in place)
  m.memory = plan_memory(g, p, std::max<int64_t>(64, opt.base_align_bytes), false);
  cg::LowerOptions lo;
  lo.gemm_a_evaluations = [&opt](int64_t M, int64_t N, int64_t batch) {  // once per tile column, or per column
    const int64_t t = cg::opencl::gemm_tile_side(opt, M, N, batch);
    return t ? (N + t - 1) / t : N;
  };
  lo.nchw_conv_segments = true;  // Renderer::conv reads a channel Concat's inputs in place
  lo.scatters_in_place = true;   // Renderer::scatter then launches no copy
  const cg::ModulePlan mp = cg::plan_module(g, p, m.memory, lo);
  cg::opencl::Spelling sp;
  sp.fp64 = opt.fp64;
  for (ValueId v = 0; v < static_cast<ValueId>(g.values().size()); ++v)
    if (g.value(v).type.dtype == DType::F64 && !opt.fp64 && (g.value(v).producer >= 0 || g.value(v).constant))
      throw UnsupportedOperatorError("the model computes in float64, which this OpenCL device does not support "
                                     "(no cl_khr_fp64): value '" + g.value(v).name + "'");
  cg::opencl::Renderer r{g, mp, sp, m, {}, opt, {}};
  for (const cg::BlockPlan& b : mp.blocks) r.block(b);
  m.inputs = g.inputs();
  m.outputs = g.outputs();
  m.constants = mp.constants;
  m.scratch_bytes = std::max(mp.scratch_bytes, r.scratch_end);
  m.output_sources.assign(m.outputs.size(), kNoValue);
  for (const cg::ModulePlan::Copy& c : mp.copies)
    m.output_sources[static_cast<size_t>(c.output)] =
        c.from_output >= 0 ? m.outputs[static_cast<size_t>(c.from_output)] : r.located_value(c.from);
  m.source = "// Generated by dnnfusion: the OpenCL target (one kernel per stage of each fused block).\n" +
             cg::opencl::support_library(sp) + "\n" + r.kernels;
  m.build_options = "-cl-std=CL1.2";
  // Counts: bytes from the kernel plan (the same stores as the CPU target); passes are this
  // target's launches (MaxPool's indices come from the max's own kernel) plus output copies.
  const cg::Counts c = cg::count_module(g, mp);
  // Split-K GEMMs add a launch and their partial sums' bytes to their block.
  m.kernels_run = c.kernels;
  m.intermediate_bytes_written = c.intermediate_bytes_written;
  m.passes = static_cast<int64_t>(m.launches.size() + mp.copies.size());
  for (size_t i = 0; i < mp.blocks.size(); ++i) {
    const int blk = mp.blocks[i].block;
    m.kernels[i].passes = std::count_if(m.launches.begin(), m.launches.end(),
                                        [&](const OpenclLaunch& l) { return l.block == blk; });
    const auto extra = r.split_bytes.find(blk);
    const int64_t more = extra == r.split_bytes.end() ? 0 : extra->second;
    m.kernels[i].intermediate_bytes_written = cg::count_block(g, mp.blocks[i]).intermediate_bytes_written + more;
    m.intermediate_bytes_written += more;
  }
  return m;
}

}  // namespace dnnf
