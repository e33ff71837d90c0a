// The ECG verifier: checks the invariants every pass must keep (MLIR-style verification
// between passes). Throws ModelFormatError listing every problem found.
#pragma once
#include "ir/graph.h"

namespace dnnf {

void verify(const Graph& g);

}  // namespace dnnf
