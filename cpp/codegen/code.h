// A line-oriented text buffer with indentation, used by the renderers (paper §4.4 code
// generation) to write generated source.
#pragma once
#include <string>

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

}  // namespace dnnf::cg
