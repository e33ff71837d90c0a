// Everything a prelude unit (prelude_units.h) instantiates from: the runtime compiles a unit
// as `#include "module_common.h"`, this header, then DNNF_UNIT_DEFINE(group, epilogue).
#pragma once
#include "module_common.h"
#include "conv_nhwc.h"
#include "conv_nhwc_expand.h"
#include "irregular.h"
#include "pool_nhwc.h"
#include "resize.h"
#include "prelude_units.h"
