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
// Units are self-contained: a unit instantiates whatever its entry points call (two units may
// both hold a GEMM driver; the linker keeps one), so no unit depends on another.
#pragma once

#define DNNF_UNIT_EP_0 dnnf::gemm::EpNone
#define DNNF_UNIT_EP_1 dnnf::gemm::EpDyn<false>
#define DNNF_UNIT_EP_2 dnnf::gemm::EpDyn<true>

#define DNNF_UNIT_GEMM_RUN_(EP, D, A, B)                                                         \
  D(void dnnf::gemm::detail::gemm_run<EP, A, B>(int, int, int, const A&, const B&, float*, long, \
                                                  const EP&, const dnnf::gemm::Options&))

// MatMul, Gemm: the GEMM driver for strided, packed and computed (prologue) operands.
#define DNNF_UNIT_gemm(EP, D)                                                                  \
  DNNF_UNIT_GEMM_RUN_(EP, D, dnnf::gemm::AView<dnnf::gemm::ProNone>, dnnf::gemm::PackedBView) \
  DNNF_UNIT_GEMM_RUN_(EP, D, dnnf::gemm::AView<dnnf::gemm::ProNone>, dnnf::gemm::BView)       \
  DNNF_UNIT_GEMM_RUN_(EP, D, dnnf::gemm::ARows, dnnf::gemm::PackedBView)                      \
  DNNF_UNIT_GEMM_RUN_(EP, D, dnnf::gemm::ARows, dnnf::gemm::BView)

// Conv and ConvTranspose in NCHW (conv.h).
#define DNNF_UNIT_conv(EP, D)                                                                          \
  D(void dnnf::conv::conv_f32<EP>(const dnnf::conv::ConvShape&, const float*, const float*, float*,    \
                                  const EP&))                                                          \
  D(void dnnf::conv::conv_f32<EP>(const dnnf::conv::ConvShape&, const float*,                          \
                                  const dnnf::conv::PackedConvWeights&, float*, const EP&))            \
  D(void dnnf::conv::conv_transpose_f32<EP>(const dnnf::conv::ConvShape&, const float*, const float*, \
                                            float*, const EP&))

// Conv in NHWC (conv_nhwc.h): GEMM, direct and Winograd paths, depthwise.
#define DNNF_UNIT_nhwc(EP, D)                                                                           \
  D(void dnnf::conv::conv_nhwc_f32<EP>(const dnnf::conv::ConvShape&, const float*,                      \
                                       const dnnf::conv::PackedNhwcWeights&, float*, const EP&))        \
  D(void dnnf::conv::conv_nhwc_f32<EP>(const dnnf::conv::ConvShape&, const dnnf::conv::InputSegments&, \
                                       const dnnf::conv::PackedNhwcWeights&, float*, const EP&))        \
  D(void dnnf::conv::conv_nhwc_f32<EP>(const dnnf::conv::ConvShape&, const float*, const float*, float*, \
                                       const EP&))                                                      \
  D(void dnnf::conv::conv_nhwc_mean_f32<EP>(const dnnf::conv::ConvShape&, const float*,                 \
                                            const dnnf::conv::PackedNhwcWeights&, float*, const EP&,    \
                                            float*, float))    \
  DNNF_UNIT_NHWC_EXPAND(EP, D)

// The expansion kernels (conv_nhwc_expand.h) are in the nhwc unit too, but only a module that
// includes their header may declare them: that header defines DNNF_UNIT_NHWC_EXPAND, here it
// is empty. (Declared unconditionally, they made every module naming an nhwc unit fail to
// compile with the units and compile whole instead, at twice the time, without a word: a
// test in test_prelude_units.py now links an NHWC module's units.)
#ifndef DNNF_UNIT_NHWC_EXPAND
#define DNNF_UNIT_NHWC_EXPAND(EP, D)
#endif

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
// Float reductions (reduce.h), every kind.
#define DNNF_UNIT_reduce(EP, D)                                                          \
  DNNF_UNIT_REDUCE_(EP, D, Sum) DNNF_UNIT_REDUCE_(EP, D, Mean) DNNF_UNIT_REDUCE_(EP, D, Max) \
  DNNF_UNIT_REDUCE_(EP, D, Min) DNNF_UNIT_REDUCE_(EP, D, Prod) DNNF_UNIT_REDUCE_(EP, D, L2)

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
