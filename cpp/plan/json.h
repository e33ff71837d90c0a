// JSON output shared by the plan printer (plan.cc) and the profiling database
// (profile_db.cc).
#pragma once
#include <string>

namespace dnnf {

// `s` as a JSON string literal, quotes included: '"', '\\' and control characters escaped
// (\n, \r, \t by name, the rest as \u00XX); other bytes, UTF-8 included, pass through.
std::string json_quote(const std::string& s);

}  // namespace dnnf
