// Prelude units: the anchor kernels' template instances (GEMM, convolution, pooling, row
// kernels, each with one kind of epilogue) that every generated module would otherwise
// instantiate and optimise again: most of a module's compile time. A unit is a group of entry
// points below and an epilogue type: 0 EpNone, 1 EpDyn<false> (applied to values), 2
// EpDyn<true> (stores itself).
//
// A module names its units on its second line (`// dnnf-prelude-units: nhwc.1 reduce.0`,
// cpu/render_module.cc) and declares them after its includes with DNNF_UNIT_EXTERN inside
// `#ifdef DNNF_LINK_UNITS`. The runtime (runtime/compiler.h, compile_shared) compiles each
// named unit once per compiler and flags into the kernel cache, from its common header, this
// header's prelude_unit_sources.h and DNNF_UNIT_DEFINE(group, epilogue), and links the objects
// into the module, compiled with -DDNNF_LINK_UNITS; without them (a unit that does not build)
// the module compiles as a whole, as before. Each module still is one shared object with
// hidden symbols: unit objects are linked into it, not shared between modules, so the
// prelude's function-local statics (thread pool, blocking, scratch) stay private to it.
//
// Units are self-contained, but for one: a unit instantiates whatever its entry points call
// (two units may both hold a GEMM driver; the linker keeps one), except nhwcexp, which calls
// the gemm unit's driver (see there).
#pragma once

#define DNNF_UNIT_EP_0 dnnf::gemm::EpNone
#define DNNF_UNIT_EP_1 dnnf::gemm::EpDyn<false>
#define DNNF_UNIT_EP_2 dnnf::gemm::EpDyn<true>

#define DNNF_UNIT_GEMM_RUN_(EP, D, A, B)                                                         \
  D(void dnnf::gemm::detail::gemm_run<EP, A, B>(int, int, int, const A&, const B&, float*, long, \
                                                  const EP&, const dnnf::gemm::Options&))

// MatMul, Gemm (and the NHWC pointwise Conv): the GEMM driver, a unit per kind of operands a
// call names, so that a module compiles only the kinds it calls: A strided and B packed
// beforehand (weights), both strided (activations, e.g. attention's), A computed by a fused
// prologue (B either). All four in one unit took 4.8 s (Xeon, AVX-512).
#define DNNF_UNIT_gemm(EP, D) \
  DNNF_UNIT_GEMM_RUN_(EP, D, dnnf::gemm::AView<dnnf::gemm::ProNone>, dnnf::gemm::PackedBView)
#define DNNF_UNIT_gemmb(EP, D) DNNF_UNIT_GEMM_RUN_(EP, D, dnnf::gemm::AView<dnnf::gemm::ProNone>, dnnf::gemm::BView)
#define DNNF_UNIT_gemmpro(EP, D)                                             \
  DNNF_UNIT_GEMM_RUN_(EP, D, dnnf::gemm::ARows, dnnf::gemm::PackedBView) \
  DNNF_UNIT_GEMM_RUN_(EP, D, dnnf::gemm::ARows, dnnf::gemm::BView)
// All four, for a module naming two or more of the above with one epilogue (render_module.cc):
// their micro-kernels (templates of the epilogue alone, most of each unit's compile) once.
#define DNNF_UNIT_gemmall(EP, D) DNNF_UNIT_gemm(EP, D) DNNF_UNIT_gemmb(EP, D) DNNF_UNIT_gemmpro(EP, D)

// Conv and ConvTranspose in NCHW (conv.h).
#define DNNF_UNIT_conv(EP, D)                                                                          \
  D(void dnnf::conv::conv_f32<EP>(const dnnf::conv::ConvShape&, const float*, const float*, float*,    \
                                  const EP&))                                                          \
  D(void dnnf::conv::conv_f32<EP>(const dnnf::conv::ConvShape&, const float*,                          \
                                  const dnnf::conv::PackedConvWeights&, float*, const EP&))            \
  D(void dnnf::conv::conv_transpose_f32<EP>(const dnnf::conv::ConvShape&, const float*, const float*, \
                                            float*, const EP&))

// Conv in NHWC (conv_nhwc.h), a unit per path, so that a module compiles only the paths its
// convolutions take (conv_nhwc_paths_f32; the pointwise GEMM is the gemm unit's): the direct
// kernel (also channel segments, channels-first inputs), Winograd, depthwise (also with the
// spatial mean it reduces). MobileNetV2's module, which takes no Winograd, built all paths in
// one 10.8 s unit (Xeon, AVX-512), its longest compile.
#define DNNF_UNIT_nhwcdirect(EP, D)                                                                     \
  D(void dnnf::conv::conv_direct_f32<EP>(const dnnf::conv::ConvShape&, const float*,                    \
                                         const dnnf::conv::DirectWeights&, float*, const EP&))          \
  D(void dnnf::conv::conv_direct_f32<EP>(const dnnf::conv::ConvShape&, const dnnf::conv::InputSegments&, \
                                         const dnnf::conv::DirectWeights&, float*, const EP&))
#define DNNF_UNIT_nhwcwino(EP, D)                                                                     \
  D(void dnnf::conv::nhwc_winograd_f32<EP>(const dnnf::conv::ConvShape&, const dnnf::conv::InputSegments&, \
                                           const dnnf::conv::wino::Weights&, float*, const EP&))
#define DNNF_UNIT_nhwcdw(EP, D)                                                                          \
  D(void dnnf::conv::nhwc_depthwise_f32<EP>(const dnnf::conv::ConvShape&, const float*, const float*, float*, \
                                            const EP&))                                                  \
  D(void dnnf::conv::conv_nhwc_mean_f32<EP>(const dnnf::conv::ConvShape&, const float*,                  \
                                            const dnnf::conv::PackedNhwcWeights&, float*, const EP&,     \
                                            float*, float))
// The expansions run each row block's 1x1 convolution through the gemm unit's driver: the
// only unit that takes another's (a module naming nhwcexp names gemm or gemmall too,
// render_module.cc),
// because the driver was most of its compile (4.6 s with it).
#define DNNF_UNIT_nhwcexp(EP, D) DNNF_UNIT_gemm(EP, DNNF_UNIT_EXTERN_) DNNF_UNIT_NHWC_EXPAND(EP, D)

// The expansion kernels (conv_nhwc_expand.h) are the nhwcexp unit, but only a module that
// includes their header may declare them: that header defines DNNF_UNIT_NHWC_EXPAND, here it
// is empty. (Declared unconditionally, they made every module naming an nhwc unit fail to
// compile with the units and compile whole instead, at twice the time, without a word: a
// test in test_prelude_units.py now links an NHWC module's units.)
#ifndef DNNF_UNIT_NHWC_EXPAND
#define DNNF_UNIT_NHWC_EXPAND(EP, D)
#endif

// The weights a module packs once at setup (render_module.cc names it where it has packed
// constants): PackedB's packing (gemm.h pack_b_into), PackedConvWeights made and deleted
// (conv.h), and PackedNhwcWeights packed, made and deleted (conv_nhwc.h, which defines
// DNNF_UNIT_PACK_NHWC as conv_nhwc_expand.h does DNNF_UNIT_NHWC_EXPAND). It takes no
// epilogue: only pack.0 exists (a group whose definition names no EP has no other kinds).
// Compiled into each module, they were 2.2 s of ResNet-50's 5.2 s module compile and most of
// a small channels-last module's (Zen 3, AVX2, -O3).
#ifndef DNNF_UNIT_PACK_NHWC
#define DNNF_UNIT_PACK_NHWC(D)
#endif
#define DNNF_UNIT_pack(EP, D)                                                                         \
  D(dnnf::gemm::PackedBView dnnf::gemm::pack_b_into<0>(float*, const float*, long, long, int, int, int, \
                                                       bool))                                           \
  D(dnnf::conv::PackedConvWeights* dnnf::conv::detail::new_packed_conv<0>(const dnnf::conv::ConvShape&,   \
                                                                         const float*))                 \
  D(void dnnf::conv::detail::delete_packed_conv<0>(dnnf::conv::PackedConvWeights*))                     \
  DNNF_UNIT_PACK_NHWC(D)

// Pooling in NCHW (pool.h).
#define DNNF_UNIT_pool(EP, D)                                                                          \
  D(void dnnf::pool::max_pool_f32<EP>(const dnnf::pool::PoolShape&, const float*, float*, const EP&)) \
  D(void dnnf::pool::avg_pool_f32<EP>(const dnnf::pool::PoolShape&, const float*, float*, const EP&)) \
  D(void dnnf::pool::global_avg_pool_f32<EP>(int, int, long, const float*, float*, const EP&))        \
  D(void dnnf::pool::global_max_pool_f32<EP>(int, int, long, const float*, float*, const EP&))

// Pooling in NHWC (pool_nhwc.h).
#define DNNF_UNIT_poolnhwc(EP, D)                                                                           \
  D(void dnnf::pool::max_pool_nhwc_f32<EP>(const dnnf::pool::PoolShape&, const float*, float*, const EP&)) \
  D(void dnnf::pool::avg_pool_nhwc_f32<EP>(const dnnf::pool::PoolShape&, const float*, float*, const EP&))

// Row kernels (rowops.h).
#define DNNF_UNIT_rows(EP, D)                                                                              \
  D(void dnnf::rowops::softmax_f32<EP>(long, long, long, const float*, float*, const EP&))                 \
  D(void dnnf::rowops::log_softmax_f32<EP>(long, long, long, const float*, float*, const EP&))             \
  D(void dnnf::rowops::layer_norm_f32<EP>(long, long, const float*, const float*, const float*, float,     \
                                          float*, float*, float*, const EP&))                              \
  D(void dnnf::rowops::instance_norm_f32<EP>(long, long, long, const float*, const float*, const float*, \
                                             float, float*, const EP&))                                    \
  D(void dnnf::rowops::cumsum_f32<EP>(long, long, long, const float*, float*, bool, bool, const EP&))

#define DNNF_UNIT_REDUCE_(EP, D, K)                                                                    \
  D(void dnnf::rowops::reduce_f32<dnnf::rowops::ReduceKind::K, EP>(int, const long*, unsigned, const float*, \
                                                                  float*, const EP&))
// Float reductions (reduce.h), a unit per kind (the kind a module's reduction takes is known
// when it is generated; all six in one unit took 3.8 s where MobileNetV2 needs its Mean).
#define DNNF_UNIT_reducesum(EP, D) DNNF_UNIT_REDUCE_(EP, D, Sum)
#define DNNF_UNIT_reducemean(EP, D) DNNF_UNIT_REDUCE_(EP, D, Mean)
#define DNNF_UNIT_reducemax(EP, D) DNNF_UNIT_REDUCE_(EP, D, Max)
#define DNNF_UNIT_reducemin(EP, D) DNNF_UNIT_REDUCE_(EP, D, Min)
#define DNNF_UNIT_reduceprod(EP, D) DNNF_UNIT_REDUCE_(EP, D, Prod)
#define DNNF_UNIT_reducenorm(EP, D) DNNF_UNIT_REDUCE_(EP, D, L2)

// Resize (resize.h) and RoiAlign (irregular.h).
#define DNNF_UNIT_resize(EP, D)                                                                   \
  D(void dnnf::irr::resize_f32<EP>(int, const long*, const long*, const double*, const float*, \
                                   const dnnf::irr::ResizeAttrs&, const float*, float*, const EP&))
#define DNNF_UNIT_roi(EP, D)                                                                               \
  D(void dnnf::irr::roi_align_f32<EP>(long, long, long, long, const float*, long, const float*,           \
                                      const int64_t*, long, long, long, float, bool, bool, long, long, long, \
                                      long, float*, const EP&))

#define DNNF_UNIT_EXTERN_(...) extern template __VA_ARGS__;
#define DNNF_UNIT_DEFINE_(...) template __VA_ARGS__;
// The declarations a module makes for a unit it links, and the definitions a unit object makes.
#define DNNF_UNIT_EXTERN(group, ep) DNNF_UNIT_##group(DNNF_UNIT_EP_##ep, DNNF_UNIT_EXTERN_)
// A unit object also exports dnnf_unit_<group>_<ep>, so a module's dynamic symbols say which
// units it links (tests; `nm -D`).
#define DNNF_UNIT_DEFINE(group, ep)                                     \
  DNNF_UNIT_##group(DNNF_UNIT_EP_##ep, DNNF_UNIT_DEFINE_)               \
  extern "C" __attribute__((visibility("default"))) int dnnf_unit_##group##_##ep(void) { return 1; }
