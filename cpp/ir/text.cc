// Printing and parsing the canonical text form of the ECG (see text.h for the grammar).
#include "ir/text.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ir/errors.h"

namespace dnnf {

namespace {

constexpr int64_t kInlineElements = 16;  // constants this small print as value lists

bool plain_ident(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.')) return false;
  return s != "_" && s != "const" && s != "return" && s != "graph";
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') { out += '\\'; out += static_cast<char>(ch); }
    else if (ch < 0x20 || ch >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else out += static_cast<char>(ch);
  }
  return out + "\"";
}

std::string ident(const std::string& s) { return plain_ident(s) ? s : quote(s); }

std::string fmt_float(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string type_text(const TensorType& t) {
  std::string s = std::string(dtype_name(t.dtype)) + "[";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) s += ",";
    s += t.shape[i].is_static() ? std::to_string(t.shape[i].value) : ident(t.shape[i].symbol);
  }
  return s + "]";
}

std::string hex_bytes(const void* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  s.reserve(2 + 2 * n);
  auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) { s += digits[b[i] >> 4]; s += digits[b[i] & 15]; }
  return s;
}

std::string data_text(const TensorData& t, bool elide) {
  int64_t n = t.type.numel();
  if (n > kInlineElements || is_half(t.type.dtype) || is_narrow(t.type.dtype) || is_small_float(t.type.dtype)) {
    if (elide && n > kInlineElements) return "<elided>";
    return hex_bytes(t.data, t.nbytes());
  }
  std::string s = "[";
  if (is_float(t.type.dtype)) {
    int digits = t.type.dtype == DType::F32 ? 9 : 17;
    auto v = t.to_doubles();
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + fmt_float(v[i], digits);
  } else if (t.type.dtype == DType::U64) {
    for (int64_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(t.as<uint64_t>()[i]);
  } else {
    auto v = t.to_ints();
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  }
  return s + "]";
}

std::string attr_text(const Attr& a) {
  auto list = [](const auto& xs, auto f, const char* empty) {
    if (xs.empty()) return std::string(empty);
    std::string s = "[";
    for (size_t i = 0; i < xs.size(); ++i) s += (i ? "," : "") + f(xs[i]);
    return s + "]";
  };
  switch (a.kind) {
    case Attr::Kind::Int: return std::to_string(a.i);
    case Attr::Kind::Float: return fmt_float(a.f, 17);
    case Attr::Kind::String: return quote(a.s);
    case Attr::Kind::Ints: return list(a.ints, [](int64_t v) { return std::to_string(v); }, "[]i");
    case Attr::Kind::Floats: return list(a.floats, [](double v) { return fmt_float(v, 17); }, "[]f");
    case Attr::Kind::Strings: return list(a.strings, quote, "[]s");
    case Attr::Kind::Tensor: return "tensor<" + type_text(a.t->type) + "> " + data_text(*a.t, false);
  }
  return "?";
}

}  // namespace

std::string print_graph(const Graph& g, bool elide_constants) {
  std::string s = "graph " + ident(g.name()) + "(";
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value& v = g.value(g.inputs()[i]);
    s += (i ? ", %" : "%") + ident(v.name) + ": " + type_text(v.type);
  }
  s += ") {\n";
  for (ValueId c : g.constants()) {
    const Value& v = g.value(c);
    s += "  %" + ident(v.name) + ": " + type_text(v.type) + " = const " +
         data_text(*v.constant, elide_constants) + "\n";
  }
  for (const Node& n : g.nodes()) {
    s += "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value& v = g.value(n.outputs[i]);
      s += (i ? ", %" : "%") + ident(v.name) + ": " + type_text(v.type);
    }
    s += std::string(" = ") + n.info().name + "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      s += i ? ", " : "";
      s += n.inputs[i] == kNoValue ? "_" : "%" + ident(g.value(n.inputs[i]).name);
    }
    s += ")";
    if (!n.attrs.empty()) {
      s += " {";
      bool first = true;
      for (const auto& [k, a] : n.attrs) {
        s += (first ? "" : ", ") + ident(k) + "=" + attr_text(a);
        first = false;
      }
      s += "}";
    }
    s += " @" + quote(n.name) + "\n";
  }
  s += "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i)
    s += (i ? ", %" : " %") + ident(g.value(g.outputs()[i]).name);
  return s + "\n}\n";
}

// ---------------------------------------------------------------------------- parsing

namespace {

class Parser {
 public:
  Parser(std::string_view text, const ElidedConstants* elided) : s_(text), elided_(elided) {}

  Graph parse() {
    expect_word("graph");
    Graph g(name());
    expect('(');
    if (!peek(')')) {
      do {
        std::string n = value_name();
        expect(':');
        g.add_input(n, type());
      } while (accept(','));
    }
    expect(')');
    expect('{');
    while (true) {
      skip_ws();
      if (word_ahead("return")) break;
      if (pos_ >= s_.size() || s_[pos_] == '}') fail("expected 'return' before the end of the graph");
      statement(g);
    }
    expect_word("return");
    std::vector<ValueId> outs;
    if (!peek('}')) {
      do outs.push_back(lookup(g, value_name()));
      while (accept(','));
    }
    g.set_outputs(outs);
    expect('}');
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the graph");
    return g;
  }

 private:
  void statement(Graph& g) {
    std::vector<std::string> names;
    std::vector<TensorType> types;
    do {
      names.push_back(value_name());
      expect(':');
      types.push_back(type());
    } while (accept(','));
    expect('=');
    skip_ws();
    if (word_ahead("const")) {
      expect_word("const");
      if (names.size() != 1) fail("a constant defines exactly one value");
      skip_ws();
      if (elided_ && s_.compare(pos_, 8, "<elided>") == 0) {
        auto it = elided_->find(names[0]);
        if (it == elided_->end() || !it->second)
          fail("elided constant '" + names[0] + "' was not given");
        if (!(it->second->type == types[0]))
          fail("elided constant '" + names[0] + "' is declared " + types[0].str() +
               " but was given as " + it->second->type.str());
        pos_ += 8;
        g.add_constant(names[0], it->second);
        return;
      }
      g.add_constant(names[0], data(types[0]));
      return;
    }
    std::string op = word();
    auto kind = op_from_name(op);
    if (!kind) fail("unknown operator '" + op + "'");
    expect('(');
    std::vector<ValueId> ins;
    if (!peek(')')) {
      do {
        skip_ws();
        if (accept('_')) ins.push_back(kNoValue);
        else ins.push_back(lookup(g, value_name()));
      } while (accept(','));
    }
    expect(')');
    Attrs attrs;
    if (accept('{')) {
      do {
        std::string k = name();
        expect('=');
        attrs[k] = attr();
      } while (accept(','));
      expect('}');
    }
    std::string node_name;
    if (accept('@')) node_name = quoted();
    g.add_node_typed(*kind, ins, std::move(attrs), types, node_name, names);
  }

  Attr attr() {
    skip_ws();
    if (peek('"')) return Attr::of_string(quoted());
    if (word_ahead("tensor")) {
      expect_word("tensor");
      expect('<');
      TensorType t = type();
      expect('>');
      return Attr::of_tensor(data(t));
    }
    if (accept('[')) {
      if (accept(']')) {
        char k = s_[pos_++];
        if (k == 'i') return Attr::of_ints({});
        if (k == 'f') return Attr::of_floats({});
        if (k == 's') return Attr::of_strings({});
        fail("an empty list is written []i, []f or []s");
      }
      skip_ws();
      if (peek('"')) {
        std::vector<std::string> v;
        do v.push_back(quoted()); while (accept(','));
        expect(']');
        return Attr::of_strings(v);
      }
      std::vector<std::string> toks;
      bool any_float = false;
      do {
        toks.push_back(number_token());
        any_float |= is_float_token(toks.back());
      } while (accept(','));
      expect(']');
      if (any_float) {
        std::vector<double> v;
        for (auto& t : toks) v.push_back(to_double(t));
        return Attr::of_floats(v);
      }
      std::vector<int64_t> v;
      for (auto& t : toks) v.push_back(to_int(t));
      return Attr::of_ints(v);
    }
    std::string t = number_token();
    return is_float_token(t) ? Attr::of_float(to_double(t)) : Attr::of_int(to_int(t));
  }

  TensorPtr data(const TensorType& t) {
    if (!t.is_static()) fail("a constant needs a static shape");
    skip_ws();
    if (s_.compare(pos_, 2, "0x") == 0) {
      pos_ += 2;
      size_t start = pos_;
      while (pos_ < s_.size() && std::isxdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      size_t n = (pos_ - start) / 2;
      if ((pos_ - start) % 2 || n != t.nbytes())
        fail("constant of type " + t.str() + " needs " + std::to_string(t.nbytes()) +
             " bytes of hex, got " + std::to_string(n));
      std::vector<uint8_t> bytes(n);
      for (size_t i = 0; i < n; ++i)
        bytes[i] = static_cast<uint8_t>(std::stoi(std::string(s_.substr(start + 2 * i, 2)), nullptr, 16));
      return TensorData::copy_of(t, bytes.data());
    }
    if (s_.compare(pos_, 8, "<elided>") == 0) fail("constants printed with elide_constants cannot be parsed");
    expect('[');
    std::vector<std::string> toks;
    if (!peek(']')) {
      do toks.push_back(number_token()); while (accept(','));
    }
    expect(']');
    if (static_cast<int64_t>(toks.size()) != t.numel())
      fail("constant of type " + t.str() + " needs " + std::to_string(t.numel()) +
           " values, got " + std::to_string(toks.size()));
    std::vector<uint8_t> bytes(t.nbytes());
    for (size_t i = 0; i < toks.size(); ++i) store(t.dtype, bytes.data(), i, toks[i]);
    return TensorData::copy_of(t, bytes.data());
  }

  void store(DType dt, uint8_t* base, size_t i, const std::string& tok) {
    auto put = [&](auto v) { std::memcpy(base + i * sizeof(v), &v, sizeof(v)); };
    if (is_half(dt) || is_narrow(dt) || is_small_float(dt))
      fail(std::string(dtype_name(dt)) + " constants are written in hex");
    switch (dt) {
      case DType::F32: put(static_cast<float>(to_double(tok))); break;
      case DType::F64: put(to_double(tok)); break;
      case DType::I8: put(static_cast<int8_t>(to_int(tok))); break;
      case DType::I16: put(static_cast<int16_t>(to_int(tok))); break;
      case DType::I32: put(static_cast<int32_t>(to_int(tok))); break;
      case DType::I64: put(to_int(tok)); break;
      case DType::U8: put(static_cast<uint8_t>(to_int(tok))); break;
      case DType::U16: put(static_cast<uint16_t>(to_int(tok))); break;
      case DType::U32: put(static_cast<uint32_t>(to_int(tok))); break;
      case DType::U64: put(static_cast<uint64_t>(std::stoull(tok))); break;
      case DType::Bool: put(static_cast<uint8_t>(to_int(tok) != 0)); break;
      default: fail(std::string("constants of type ") + dtype_name(dt) + " are written in hex");
    }
  }

  TensorType type() {
    std::string dt = word();
    auto d = parse_dtype(dt);
    if (!d) fail("unknown element type '" + dt + "'");
    TensorType t;
    t.dtype = *d;
    expect('[');
    if (!peek(']')) {
      do {
        skip_ws();
        if (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])))) t.shape.push_back(Dim(to_int(number_token())));
        else t.shape.push_back(Dim::sym(name()));
      } while (accept(','));
    }
    expect(']');
    return t;
  }

  ValueId lookup(const Graph& g, const std::string& n) {
    ValueId v = g.find_value(n);
    if (v == kNoValue) fail("value %" + n + " is used before it is defined");
    return v;
  }

  std::string value_name() {
    expect('%');
    return name();
  }
  std::string name() {
    skip_ws();
    if (peek('"')) return quoted();
    return word();
  }
  std::string word() {
    skip_ws();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '.')) ++pos_;
    if (start == pos_) fail("expected a name");
    return std::string(s_.substr(start, pos_ - start));
  }
  std::string quoted() {
    expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char ch = s_[pos_++];
      if (ch == '\\') {
        if (pos_ >= s_.size()) break;
        char e = s_[pos_++];
        if (e == 'x') {
          if (pos_ + 2 > s_.size()) fail("bad \\x escape");
          out += static_cast<char>(std::stoi(std::string(s_.substr(pos_, 2)), nullptr, 16));
          pos_ += 2;
        } else out += e;
      } else out += ch;
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }
  std::string number_token() {
    skip_ws();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || std::strchr("+-.", s_[pos_]))) ++pos_;
    if (start == pos_) fail("expected a number");
    return std::string(s_.substr(start, pos_ - start));
  }
  static bool is_float_token(const std::string& t) {
    return t.find_first_of(".eEn") != std::string::npos;  // '.', exponent, inf, nan
  }
  double to_double(const std::string& t) {
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size()) fail("bad number '" + t + "'");
    return v;
  }
  int64_t to_int(const std::string& t) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (end != t.c_str() + t.size() || errno) fail("bad integer '" + t + "'");
    return v;
  }

  void skip_ws() {
    while (pos_ < s_.size()) {
      if (std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      else if (s_[pos_] == '#') { while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_; }
      else break;
    }
  }
  bool peek(char c) { skip_ws(); return pos_ < s_.size() && s_[pos_] == c; }
  bool accept(char c) { if (peek(c)) { ++pos_; return true; } return false; }
  void expect(char c) { if (!accept(c)) fail(std::string("expected '") + c + "'"); }
  bool word_ahead(const char* w) {
    size_t n = std::strlen(w);
    return s_.compare(pos_, n, w) == 0 &&
           (pos_ + n >= s_.size() || !(std::isalnum(static_cast<unsigned char>(s_[pos_ + n])) || s_[pos_ + n] == '_'));
  }
  void expect_word(const char* w) {
    skip_ws();
    if (!word_ahead(w)) fail(std::string("expected '") + w + "'");
    pos_ += std::strlen(w);
  }

  [[noreturn]] void fail(const std::string& msg) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') { ++line; col = 1; } else ++col;
    }
    throw ModelFormatError("ECG text, line " + std::to_string(line) + ", column " +
                           std::to_string(col) + ": " + msg);
  }

  std::string_view s_;
  size_t pos_ = 0;
  const ElidedConstants* elided_ = nullptr;
};

}  // namespace

Graph parse_graph(std::string_view text, const ElidedConstants* elided) {
  try {
    return Parser(text, elided).parse();
  } catch (const ModelFormatError&) {
    throw;
  } catch (const Error& e) {
    throw ModelFormatError(std::string("ECG text: ") + e.what());
  }
}

}  // namespace dnnf
