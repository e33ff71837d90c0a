// The CPU renderer of a whole model (paper §4.4 code generation; the ABI is the GENERATED-ABI
// note in codegen.h): one function per block in plan order, the State holding the constants
// and the weights packed once in dnnf_create, and dnnf_run calling the blocks.
#include <set>

#include "codegen/cpu/render.h"
#include "codegen/seq_rows.h"

#include <cstdlib>
#include "codegen/counts.h"
#include "codegen/module.h"
#include "codegen/prelude/conv_shape.h"
#include "ir/errors.h"

namespace dnnf::cg::cpu {

namespace {

// The prelude headers a module needs beyond the always-included ones.
std::set<std::string> headers(const ModulePlan& mp) {
  std::set<std::string> out;
  for (const BlockPlan& b : mp.blocks)
    for (const Stage& s : b.stages) {
      if (s.kind != Stage::Kind::Anchor) continue;
      switch (s.anchor.kind) {
        case AnchorKind::NhwcConv:
          out.insert(s.anchor.expand.empty() ? "conv_nhwc.h" : "conv_nhwc_expand.h");
          break;
        case AnchorKind::NhwcMaxPool:
        case AnchorKind::NhwcAvgPool: out.insert("pool_nhwc.h"); break;
        case AnchorKind::TopK:
        case AnchorKind::Scatter:
        case AnchorKind::RoiAlign: out.insert("irregular.h"); break;
        case AnchorKind::GridSample: out.insert("grid_sample.h"); break;
        case AnchorKind::Resize: out.insert("resize.h"); break;
        default: break;
      }
    }
  return out;
}

// The prelude units (prelude/prelude_units.h) holding the anchor kernels this module calls,
// as "group.epilogue" (0 none, 1 applied, 2 storing): the runtime links them in prebuilt.
// Kernels templated on anything else (integer reductions, TopK, ArgMax) stay in the module.
std::set<std::string> units(const ModulePlan& mp) {
  std::set<std::string> out;
  for (const BlockPlan& b : mp.blocks)
    for (const Stage& s : b.stages) {
      if (s.kind != Stage::Kind::Anchor) continue;
      const AnchorStage& a = s.anchor;
      const char* ep = !a.ep.present ? ".0" : a.ep.stores ? ".2" : ".1";
      if (a.kind == AnchorKind::NhwcConv) {  // a unit per path it may take (conv_nhwc_paths_f32)
        if (!a.expand.empty()) {  // the expansion's 1x1 convolution runs the gemm unit's driver
          out.insert(std::string("nhwcexp") + ep);
          out.insert(std::string("gemm") + ep);
          continue;
        }
        const int p = nhwc_paths(a);
        const std::pair<conv::NhwcPath, const char*> path_units[] = {{conv::NhwcPath::Direct, "nhwcdirect"},
                                                                     {conv::NhwcPath::Winograd, "nhwcwino"},
                                                                     {conv::NhwcPath::Depthwise, "nhwcdw"},
                                                                     {conv::NhwcPath::Pointwise, "gemm"}};
        for (const auto& [bit, unit] : path_units)
          if (p & static_cast<int>(bit)) out.insert(unit + std::string(ep));
        continue;
      }
      const char* group = nullptr;
      switch (a.kind) {
        case AnchorKind::MatMul:
        case AnchorKind::Gemm:  // the kinds of operands its call names (BlockRenderer::gemm_call)
          if (a.gemm.dtype == DType::F32) group = a.gemm.a_computed ? "gemmpro" : a.gemm.packed_b >= 0 ? "gemm" : "gemmb";
          break;
        case AnchorKind::Conv:
        case AnchorKind::ConvTranspose: group = "conv"; break;
        case AnchorKind::MaxPool:
        case AnchorKind::AvgPool:
        case AnchorKind::GlobalAvgPool:
        case AnchorKind::GlobalMaxPool: group = "pool"; break;
        case AnchorKind::NhwcMaxPool:
        case AnchorKind::NhwcAvgPool: group = "poolnhwc"; break;
        case AnchorKind::Softmax:
        case AnchorKind::LogSoftmax:
        case AnchorKind::LayerNorm:
        case AnchorKind::InstanceNorm: group = "rows"; break;
        case AnchorKind::CumSum:
          if (a.args.at(3).dtype == DType::F32 && a.node->op == OpKind::CumSum) group = "rows";
          break;
        case AnchorKind::Reduce:  // a unit per kind: args[0] is the enum "ReduceKind::Sum", ...
          if (a.args.at(0).dtype == DType::F32) {
            static const std::pair<const char*, const char*> kinds[] = {
                {"ReduceKind::Sum", "reducesum"}, {"ReduceKind::Mean", "reducemean"}, {"ReduceKind::Max", "reducemax"},
                {"ReduceKind::Min", "reducemin"}, {"ReduceKind::Prod", "reduceprod"}, {"ReduceKind::L2", "reducenorm"}};
            for (const auto& [kind, unit] : kinds)
              if (a.args[0].name == kind) group = unit;
          }
          break;
        case AnchorKind::Resize: group = "resize"; break;
        case AnchorKind::RoiAlign: group = "roi"; break;
        default: break;
      }
      if (group) out.insert(group + std::string(ep));
    }
  // The weight packing (PackedB, PackedConvWeights, PackedNhwcWeights): for the weights packed
  // at setup, and for a channels-last convolution's weights computed in the run, which the
  // module packs per call (conv_nhwc_f32).
  bool packs = !mp.packed.empty();
  for (const std::string& u : out) packs = packs || u.rfind("nhwc", 0) == 0;
  if (packs) out.insert("pack.0");
  // Two or more GEMM units of one epilogue: the one unit holding all their instances instead.
  // Their micro-kernels, most of each one's compile (2.1 of 2.75 s, Xeon, AVX-512), are
  // templates of the epilogue alone, compiled once there and once per unit apart (BERT named
  // three: 9.2 s of compiles for 4.8 s in one).
  for (const char* ep : {".0", ".1", ".2"}) {
    std::vector<std::string> gemms;
    for (const char* g : {"gemm", "gemmb", "gemmpro"})
      if (out.count(g + std::string(ep))) gemms.push_back(g + std::string(ep));
    if (gemms.size() < 2) continue;
    for (const std::string& u : gemms) out.erase(u);
    out.insert("gemmall" + std::string(ep));
  }
  return out;
}

std::string packed_member(const PackedConstant& p, const std::string& name) {
  switch (p.kind) {
    case PackedConstant::Kind::GemmB: return "dnnf::gemm::PackedB " + name + ";";
    case PackedConstant::Kind::ConvWeights: return "dnnf::conv::PackedConvPtr " + name + ";";
    case PackedConstant::Kind::NhwcConvWeights:
    case PackedConstant::Kind::SegmentedNhwcConvWeights:
      return "dnnf::conv::PackedNhwcPtr " + name + ";";
  }
  throw InternalError("codegen: a packed constant of unknown kind");
}

std::string packed_create(const PackedConstant& p, const std::string& name) {
  const std::string src = "static_cast<const float*>(st->c[" + std::to_string(p.constant) + "])";
  if (p.kind == PackedConstant::Kind::GemmB)  // rs, cs, K, N
    return "st->" + name + " = dnnf::gemm::PackedB(" + src + ", " + L(p.ints[0]) + ", " + L(p.ints[1]) + ", " +
           std::to_string(p.ints[2]) + ", " + std::to_string(p.ints[3]) + ");";
  AnchorArg shape;
  shape.kind = AnchorArg::Kind::Shape;
  shape.name = "conv";
  shape.ints.assign(p.ints.begin(), p.ints.begin() + 25);
  // Made and deleted by the pack unit (conv.h new_packed_conv and PackedConvPtr, conv_nhwc.h
  // new_packed and PackedNhwcPtr).
  if (p.kind == PackedConstant::Kind::ConvWeights)
    return "st->" + name + ".reset(dnnf::conv::detail::new_packed_conv<0>(" + shape_literal(shape) + ", " + src +
           "));";
  const std::string made = "st->" + name + ".reset(dnnf::conv::nhwc_detail::new_packed<0>(" + shape_literal(shape) +
                           ", " + src + ", ";
  if (p.kind != PackedConstant::Kind::SegmentedNhwcConvWeights) return made + "nullptr));";
  std::string segments;  // the channels of each input segment, after the shape's 25 ints
  for (size_t k = 25; k < p.ints.size(); ++k) segments += (k > 25 ? ", " : "") + std::to_string(p.ints[k]);
  return "{\n          const std::vector<int> seg{" + segments + "};\n          " + made + "&seg));\n        }";
}

std::string location(const Location& l) {
  switch (l.kind) {
    case Location::Kind::GraphInput: return "x.in[" + std::to_string(l.at) + "]";
    case Location::Kind::Constant: return "x.st->c[" + std::to_string(l.at) + "]";
    default: break;
  }
  throw InternalError("codegen: a graph output copied from neither an input nor a constant");
}

// The kernels as one source that compiles whole or as DNNF_PARTS translation units in
// parallel (runtime/compiler.cc, a module's compile on a 2-CPU machine took 6-9 s in one
// compiler process): every kernel is declared, and defined in the part whose share of the
// estimated compile work its start falls in; contiguous runs, so that kernels of one stage of
// a network, which share epilogue and template instantiations, stay together. The work of a
// kernel: its text, and more for each call into a prelude template (an instantiation).
std::string split_kernels(const std::vector<std::string>& bodies, const std::vector<KernelInfo>& infos) {
  std::vector<long> weight;
  long total = 0;
  for (const std::string& b : bodies) {
    long w = static_cast<long>(b.size());
    for (size_t at = b.find("dnnf::"); at != std::string::npos; at = b.find("dnnf::", at + 6)) w += 2000;
    weight.push_back(w);
    total += w;
  }
  std::string s;
  for (const KernelInfo& k : infos) s += "void " + k.function + "(const Ctx& x);\n";
  s += "\n";
  long start = 0;
  for (size_t i = 0; i < bodies.size(); ++i) {
    s += "#if DNNF_PART == " + std::to_string(start) + " * DNNF_PARTS / " + std::to_string(std::max(1L, total)) + "\n";
    s += bodies[i] + "#endif\n\n";
    start += weight[i];
  }
  return s;
}

}  // namespace

GeneratedModule render_module(const Graph& g, const ModulePlan& mp, const MemoryPlan& memory, const std::string& isa) {
  GeneratedModule gm;
  gm.inputs = g.inputs();
  gm.outputs = g.outputs();
  gm.memory = memory;
  gm.constants = mp.constants;
  gm.arena_bytes = memory.arena_bytes + mp.scratch_bytes;
  const Counts counts = count_module(g, mp);
  gm.kernels_run = counts.kernels;
  gm.passes = counts.passes;
  gm.intermediate_bytes_written = counts.intermediate_bytes_written;
  gm.output_bytes_written = counts.output_bytes_written;
  std::vector<std::string> bodies;
  EpilogueTypes epilogue_types;
  for (const BlockPlan& b : mp.blocks) {
    KernelInfo info;
    info.block = b.block;
    info.function = "k" + std::to_string(b.block);
    for (const Stage& s : b.stages) {
      info.stages.push_back(s.label + (s.seq.how != SeqRows::How::None ? " (rows: runtime length)" : ""));
      info.seq_rows_stages += s.seq.how != SeqRows::How::None;
    }
    info.scratch_bytes = b.scratch_bytes;
    const Counts bc = count_block(g, b);
    info.passes = bc.passes;
    info.intermediate_bytes_written = bc.intermediate_bytes_written;
    bodies.push_back(render_block(b, info.function, epilogue_types));
    gm.kernels.push_back(std::move(info));
  }
  std::string kernels = split_kernels(bodies, gm.kernels);
  std::string copies;
  for (const ModulePlan::Copy& c : mp.copies) {
    const std::string src = c.from_output >= 0 ? "out[" + std::to_string(c.from_output) + "]" : location(c.from);
    copies += "    std::memcpy(out[" + std::to_string(c.output) + "], " + src + ", " + std::to_string(c.bytes) + ");\n";
  }
  // The packed weights are independent of each other: each a task on the module's pool (YOLOv4's
  // 110 took 0.7 s of its warm compile on one thread), the first failure rethrown after.
  std::string create, members;
  for (size_t i = 0; i < mp.packed.size(); ++i) {
    const std::string name = "w" + std::to_string(i);
    members += "  " + packed_member(mp.packed[i], name) + "\n";
    create += "          case " + std::to_string(i) + ": " + packed_create(mp.packed[i], name) + " break;\n";
  }
  if (!create.empty())
    create = "    if (num_threads > 0 && num_threads != dnnf::get_num_threads()) dnnf::set_num_threads(num_threads);\n"
             "    std::exception_ptr failed;\n    std::mutex failed_mu;\n"
             "    dnnf::parallel_for(" + std::to_string(mp.packed.size()) + ", [&](int k) {\n      try {\n"
             "        switch (k) {\n" + create + "        }\n      } catch (...) {\n"
             "        std::lock_guard<std::mutex> lock(failed_mu);\n        if (!failed) failed = std::current_exception();\n"
             "      }\n    });\n    if (failed) std::rethrow_exception(failed);\n";

  std::string s;
  s += "// Generated by dnnfusion (dialect " + isa + "): " + std::to_string(mp.blocks.size()) + " kernels for " +
       std::to_string(g.nodes().size()) + " operators.\n";
  const std::set<std::string> linked = units(mp);
  if (!linked.empty()) {  // the line compile_shared reads (runtime/compiler.h)
    s += kPreludeUnitsLine;
    for (const std::string& u : linked) s += " " + u;
    s += "\n";
  }
  s += "#include \"" + std::string(kModuleCommonHeader) + "\"\n";  // first: the runtime precompiles it
  for (const std::string& h : headers(mp)) s += "#include \"" + h + "\"\n";
  if (!linked.empty()) {
    s += "#ifdef DNNF_LINK_UNITS\n";
    for (const std::string& u : linked) {
      const size_t dot = u.find('.');
      s += "DNNF_UNIT_EXTERN(" + u.substr(0, dot) + ", " + u.substr(dot + 1) + ")\n";
    }
    s += "#endif\n";
  }
  s += "\n";
  s += kPartsGuard;
  s += "#define DNNF_EXPORT __attribute__((visibility(\"default\")))\n\n";
  s += "namespace __attribute__((visibility(\"hidden\"))) dnnf_module {\n";
  s += "namespace V = dnnf::simd;\nnamespace S = dnnf::simd_scalar;\nnamespace cg = dnnf::cg;\n\n";
  s += "struct State {\n  const void* c[" + std::to_string(std::max<size_t>(1, mp.constants.size())) + "] = {};\n";
  s += members;
  s += "};\n\n";
  s += "struct Ctx {\n  const void* const* in;\n  void* const* out;\n  char* arena;\n  char* scratch;\n  State* st;\n};\n\n";
  s += epilogue_types.text;
  s += kernels;
  s += "}  // namespace dnnf_module\n\n";
  s += "#if DNNF_PART == 0\nusing namespace dnnf_module;\n\n";
  s += "extern \"C\" DNNF_EXPORT int dnnf_abi_version(void) { return " + std::to_string(kGeneratedAbiVersion) + "; }\n\n";
  s += "extern \"C\" DNNF_EXPORT void* dnnf_create(const void* const* constants, int num_threads, char* err,\n"
       "                                          int errlen) {\n";
  s += "  State* st = nullptr;\n  try {\n    st = new State();\n";
  s += "    for (int k = 0; k < " + std::to_string(mp.constants.size()) + "; ++k) st->c[k] = constants[k];\n";
  s += create;
  s += "    return st;\n  } catch (const std::exception& e) {\n    delete st;\n";
  s += "    std::snprintf(err, static_cast<size_t>(errlen), \"%s\", e.what());\n    return nullptr;\n  }\n}\n\n";
  s += "extern \"C\" DNNF_EXPORT void dnnf_destroy(void* st) { delete static_cast<State*>(st); }\n\n";
  // One body for dnnf_run and dnnf_run_timed: with `seconds`, the wall time of kernel i goes
  // to seconds[i] and that of the output copies to seconds[kernels]; without, one untaken
  // branch per kernel.
  s += "static int run_all(void* state, const void* const* in, void* const* out, void* arena, int num_threads,\n";
  s += "                   double* seconds, char* err, int errlen) {\n";
  s += "  using clock = std::chrono::steady_clock;\n";
  s += "  try {\n";
  s += "    if (num_threads > 0 && num_threads != dnnf::get_num_threads()) dnnf::set_num_threads(num_threads);\n";
  s += "    char* a = static_cast<char*>(arena);\n";
  s += "    const Ctx x{in, out, a, a + " + std::to_string(memory.arena_bytes) + ", static_cast<State*>(state)};\n";
  s += "    auto t = clock::now();\n";
  s += "    auto lap = [&](int i) {\n";
  s += "      if (!seconds) return;\n";
  s += "      auto now = clock::now();\n";
  s += "      seconds[i] = std::chrono::duration<double>(now - t).count();\n";
  s += "      t = now;\n    };\n";
  for (size_t i = 0; i < gm.kernels.size(); ++i)
    s += "    " + gm.kernels[i].function + "(x); lap(" + std::to_string(i) + ");\n";
  s += copies;
  s += "    lap(" + std::to_string(gm.kernels.size()) + ");\n";
  s += "    return 0;\n  } catch (const std::exception& e) {\n";
  s += "    std::snprintf(err, static_cast<size_t>(errlen), \"%s\", e.what());\n    return 1;\n  }\n}\n\n";
  s += "extern \"C\" DNNF_EXPORT int dnnf_run(void* state, const void* const* in, void* const* out, void* arena,\n";
  s += "                        int num_threads, char* err, int errlen) {\n";
  s += "  return run_all(state, in, out, arena, num_threads, nullptr, err, errlen);\n}\n\n";
  s += "extern \"C\" DNNF_EXPORT int dnnf_run_timed(void* state, const void* const* in, void* const* out,\n";
  s += "                        void* arena, int num_threads, double* seconds, char* err, int errlen) {\n";
  s += "  return run_all(state, in, out, arena, num_threads, seconds, err, errlen);\n}\n";
  s += "#endif  // DNNF_PART == 0\n";
  gm.source = std::move(s);
  return gm;
}

}  // namespace dnnf::cg::cpu

namespace dnnf {

GeneratedModule generate_cpu(const Graph& g, const FusionPlan& p, const CodegenOptions& opt) {
  // Concat runs at any element: the CPU's kernels load and store unaligned (SSD's six heads
  // write into their Concat at runs of 2166 x 21 floats and so on).
  MemoryPlan memory = plan_memory(g, p, 64, true, {}, 1);
  cg::LowerOptions lo;
  lo.gemm_prologues = opt.prologues;
  // A depthwise convolution takes the spatial mean of its output in its block as it stores
  // its rows (squeeze-and-excitation pools, conv_mean.cc). DNNF_CONV_MEANS=0 keeps the mean a
  // stage of its own in the same kernel (for comparisons).
  const char* means_env = std::getenv("DNNF_CONV_MEANS");
  lo.conv_means = !(means_env && means_env[0] == '0');
  // A pointwise convolution feeding a depthwise one in its block is computed by it, rows at a
  // time (expand_rows.cc). DNNF_EXPAND_ROWS=0 keeps it a stage of its own (for comparisons).
  const char* expand_env = std::getenv("DNNF_EXPAND_ROWS");
  lo.expand_rows = !(expand_env && expand_env[0] == '0');
  // Scatters whose data dies at them update it in place instead of copying it first (an
  // index_put into a buffer: a KV cache's one new row copied the whole cache): data made in
  // the block shares its scratch (lowering), data from another block its arena bytes (the
  // memory plan's pairs below). DNNF_SCATTER_IN_PLACE=0 turns both off (for comparisons).
  const char* scatter_env = std::getenv("DNNF_SCATTER_IN_PLACE");
  lo.scatters_in_place = !(scatter_env && scatter_env[0] == '0');
  lo.concat_run_alignment = memory.run_alignment;
  cg::ModulePlan mp = cg::plan_module(g, p, memory, lo);
  // Residuals added in place (an anchor's output in the bytes of the residual its epilogue
  // adds, which dies there): the output is then written over lines the epilogue has just read
  // instead of lines fetched for writing. ResNet-50's 1x1 convolutions with their shortcut
  // (Xeon, 1 thread, caches flushed): 64->256 on 56x56 0.81 -> 0.63 ms, 128->512 on 28x28
  // 0.73 -> 0.62. The kernels plan again over the new offsets. DNNF_RESIDUAL_IN_PLACE=0 turns
  // it off (for comparisons).
  const char* env = std::getenv("DNNF_RESIDUAL_IN_PLACE");
  std::vector<std::pair<ValueId, ValueId>> in_place =
      env && env[0] == '0' ? std::vector<std::pair<ValueId, ValueId>>{} : cg::cpu::residuals_in_place(g, mp, memory);
  if (lo.scatters_in_place)
    for (const auto& pr : cg::cpu::scatters_in_place(g, mp, memory)) in_place.push_back(pr);
  // Channels-last Concats assembled in place: the convolutions that store an input of one
  // with their own store (ConvShape::ldy) write it as rows of the Concat's bytes, so that an
  // Inception module's or a CSP stage's Concat copies nothing (S3D, YOLOv4).
  // DNNF_CONCAT_ROWS=0 turns it off (for comparisons).
  std::vector<ValueId> row_writers;
  const char* rows_env = std::getenv("DNNF_CONCAT_ROWS");
  if (!(rows_env && rows_env[0] == '0'))
    for (const cg::BlockPlan& b : mp.blocks)
      for (const cg::Stage& st : b.stages)
        if (st.kind == cg::Stage::Kind::Anchor && st.anchor.kind == cg::AnchorKind::NhwcConv && !st.anchor.ep.stores &&
            st.anchor.y != kNoValue && !cg::is_depthwise_shape(st.anchor.args.at(0).ints))
          row_writers.push_back(st.anchor.y);
  if (!in_place.empty() || !row_writers.empty()) {
    memory = plan_memory(g, p, memory.alignment, true, in_place, memory.run_alignment, row_writers);
    mp = cg::plan_module(g, p, memory, lo);
  }
  cg::limit_sequence_rows(g, mp, opt.seq_rows, opt.length_input, opt.length_f32);
  return cg::cpu::render_module(g, mp, memory, opt.isa);
}

}  // namespace dnnf
