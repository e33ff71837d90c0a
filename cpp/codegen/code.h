// A line-oriented text buffer with indentation, used by the renderers (paper §4.4 code
// generation) to write generated source.
#pragma once
#include <cctype>
#include <string>
#include <vector>

namespace dnnf::cg {

struct Code {
  std::string text;
  int indent = 1;
  void line(const std::string& s) {
    text.append(static_cast<size_t>(indent) * 2, ' ');
    text += s;
    text += '\n';
  }
  void open(const std::string& s) {
    line(s + " {");
    ++indent;
  }
  void close(const std::string& s = "}") {
    --indent;
    line(s);
  }
};

// An Ew::Kind::Text template with $0, $1, ... replaced by `args` (every renderer's spelling).
inline std::string fill_text(const std::string& tmpl, const std::vector<std::string>& args) {
  std::string s;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '$' && i + 1 < tmpl.size() && std::isdigit(static_cast<unsigned char>(tmpl[i + 1]))) {
      s += args.at(static_cast<size_t>(tmpl[i + 1] - '0'));
      ++i;
    } else {
      s += tmpl[i];
    }
  }
  return s;
}

}  // namespace dnnf::cg
