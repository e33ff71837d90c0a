// Prelude units inside the runtime (compile_shared, runtime/compiler.h; the units themselves:
// codegen/prelude/prelude_units.h).
#pragma once
#include <string>
#include <vector>

#include "runtime/compiler.h"

namespace dnnf {

// The units a module source names on its second line ("gemm.1 reduce.0"); none where the
// line is absent or malformed (then the module compiles whole, as any other source).
std::vector<std::string> prelude_units_named(const std::string& source);

// The object files of `units` for this compiler and these flags, built where missing into
// units-<key>/ in the cache `dir` (with the hinted ones, hint_prelude_units; a GEMM unit of
// one kind served by gemmall of its epilogue where that one is named, hinted or built); empty when any
// cannot be built or units do not apply, and then the module compiles whole.
// `build` false: only when all are built already (nothing is built, no failure remembered).
std::vector<std::string> prelude_unit_objects(const Compiler& cc, const std::vector<std::string>& flags,
                                              const std::vector<std::string>& units, const std::string& header,
                                              const std::string& pch_dir, const std::string& dir, double timeout_s,
                                              bool build = true);

// Whether a module compiled with `flags` and including `header` first can link units at all
// (DNNF_PRELUDE_UNITS=0 and sources without the prelude hash cannot).
bool prelude_units_apply(const std::vector<std::string>& flags, const std::string& header);

// Adds a line to prelude_unit_problems() (runtime/compiler.h).
void note_prelude_unit_problem(const std::string& what);

// The first line of compiler output that reports an error (else its first line that says
// something: the linker's complaints carry no "error"), at most 300
// characters: what prelude_unit_problems() quotes.
std::string first_compiler_complaint(const std::string& output);

// A random 16-hex-digit tag for temporary file names in the cache (compiler.cc).
std::string random_tag();

}  // namespace dnnf
