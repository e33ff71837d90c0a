// A generated CPU module compiled as several translation units in parallel and linked
// (codegen.h kPartsGuard): a module's compile was one compiler process, 6-9 s of a cold
// compile on a 2-CPU machine while the other CPU idled.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace dnnf {

// How many parts to compile `source` in: 1 (whole) unless it has the parts guard; else the
// CPUs this process may use, at most 8 and at most one per 48 kernels. DNNF_COMPILE_PARTS=N
// sets it (1: whole).
int compile_parts_for(const std::string& source);

// Compiles src as `parts` objects at once (`cc` + "-c -fPIC", `defines` (the precompiled
// header's -I, -D...), -DDNNF_PARTS/-DDNNF_PART when parts > 1, `flags`), then links them with
// the objects `link()` gives (prelude units; called once the parts are compiled, whether or
// not they compiled, so that it may wait for units built meanwhile; `need_link`: an empty
// answer fails) into `so` with `flags`. False if any step fails; the caller then compiles
// whole, so that an error is reported as the source's own. The objects are removed either way.
bool compile_in_parts(const std::vector<std::string>& cc, const std::string& src, const std::string& so,
                      const std::vector<std::string>& defines,
                      const std::function<std::vector<std::string>()>& link, bool need_link,
                      const std::vector<std::string>& flags, int parts, double timeout_s);

}  // namespace dnnf
