// What every generated CPU module includes, first (cpu/render_module.cc writes the #include).
// The runtime precompiles this header once per compiler and flags (runtime/compiler.h,
// compile_shared's pch_header), so a module's compile skips parsing it.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>

#include "cg_support.h"
#include "gemm.h"
#include "conv.h"
#include "pool.h"
#include "rowops.h"
#include "reduce.h"
#include "prelude_units.h"
