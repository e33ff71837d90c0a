// The pattern language of the algebraic rules (paper §4.2): parsing, matching with
// backtracking over commutative operand orders, and building replacements on the side.
#include "rewrite/pattern.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>

#include "ir/errors.h"
#include "ir/shape_rules.h"
#include "rewrite/passes.h"
#include "rewrite/cost.h"

namespace dnnf {

// ---- Parsing -------------------------------------------------------------------------

namespace {

class PatternParser {
 public:
  explicit PatternParser(const std::string& s) : s_(s) {}

  Pattern parse() {
    Pattern p = expr();
    skip();
    if (pos_ != s_.size()) fail("unexpected text");
    return p;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InternalError("rule pattern '" + s_ + "': " + why + " at column " + std::to_string(pos_));
  }
  void skip() { while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_; }
  bool accept(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) { ++pos_; return true; }
    return false;
  }
  std::string ident() {
    skip();
    size_t b = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    if (b == pos_) fail("expected a name");
    return s_.substr(b, pos_ - b);
  }

  Pattern expr() {
    skip();
    if (pos_ >= s_.size()) fail("unexpected end");
    char c = s_[pos_];
    Pattern p;
    if (c == '-' || c == '.' || std::isdigit(static_cast<unsigned char>(c))) {
      const char* start = s_.c_str() + pos_;
      char* end = nullptr;
      p.kind = Pattern::Kind::Number;
      p.number = std::strtod(start, &end);
      if (end == start) fail("expected a number");
      pos_ += static_cast<size_t>(end - start);
      return p;
    }
    if (c == '#' || c == '$' || c == '+') {
      ++pos_;
      p.sigil = c == '#' ? Pattern::Sigil::Const : c == '$' ? Pattern::Sigil::Scalar : Pattern::Sigil::NonNeg;
    }
    std::string name = ident();
    if (std::islower(static_cast<unsigned char>(name[0]))) {
      p.kind = Pattern::Kind::Var;
      p.name = name;
      return p;
    }
    if (p.sigil != Pattern::Sigil::Any) fail("a sigil on an operator");
    auto op = op_from_name(name);
    if (!op) fail("unknown operator '" + name + "'");
    p.kind = Pattern::Kind::Op;
    p.op = *op;
    if (accept('@')) p.label = ident();
    if (!accept('(')) fail("expected '('");
    do p.args.push_back(expr()); while (accept(','));
    if (!accept(')')) fail("expected ')'");
    return p;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

Pattern parse_pattern(const std::string& text) { return PatternParser(text).parse(); }

// ---- Constants -----------------------------------------------------------------------

TensorPtr tensor_of_doubles(const TensorType& type, const std::vector<double>& xs) {
  if (static_cast<int64_t>(xs.size()) != type.numel()) throw InternalError("tensor_of_doubles: size mismatch");
  if (type.dtype == DType::F64) return TensorData::copy_of(type, xs.data());
  if (type.dtype != DType::F32) return nullptr;
  std::vector<float> f(xs.begin(), xs.end());
  return TensorData::copy_of(type, f.data());
}

namespace {

constexpr int64_t kMaxInspected = 1 << 16;  // larger constants are never read element-wise

bool readable(const TensorPtr& t) {
  return t && !is_half(t->type.dtype) && t->type.numel() <= kMaxInspected;
}

bool all_equal(const TensorPtr& t, double x) {
  if (!readable(t)) return false;
  for (double v : t->to_doubles())
    if (v != x) return false;
  return true;
}

}  // namespace

TensorPtr fold_arithmetic(OpKind op, const std::vector<TensorPtr>& ins) {
  static const std::set<OpKind> unary = {OpKind::Neg, OpKind::Reciprocal, OpKind::Sqrt,
                                         OpKind::Abs, OpKind::Exp, OpKind::Log};
  static const std::set<OpKind> binary = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div};
  size_t arity = unary.count(op) ? 1 : binary.count(op) ? 2 : 0;
  if (arity == 0 || ins.size() != arity) return nullptr;
  size_t in_bytes = 0;
  for (const auto& t : ins) {
    if (!readable(t) || !is_float(t->type.dtype) || t->type.dtype != ins[0]->type.dtype) return nullptr;
    in_bytes += t->nbytes();
  }
  Shape shape = ins[0]->type.shape;
  if (arity == 2) {
    auto b = broadcast_shapes(shape, ins[1]->type.shape);
    if (!b) return nullptr;
    shape = *b;
  }
  TensorType out{ins[0]->type.dtype, shape};
  if (out.nbytes() > in_bytes + kFoldSlackBytes) return nullptr;
  std::vector<int64_t> dims = out.dims();
  size_t r = dims.size();
  // Strides of each input in output coordinates (0 along broadcast axes).
  std::vector<std::vector<int64_t>> strides;
  std::vector<std::vector<double>> vals;
  for (const auto& t : ins) {
    auto d = t->type.dims();
    std::vector<int64_t> st(r, 0);
    int64_t s = 1;
    for (size_t j = 0; j < d.size(); ++j) {
      size_t k = d.size() - 1 - j;
      st[r - 1 - j] = d[k] == 1 ? 0 : s;
      s *= d[k];
    }
    strides.push_back(std::move(st));
    vals.push_back(t->to_doubles());
  }
  std::vector<double> res(static_cast<size_t>(out.numel()));
  std::vector<int64_t> idx(r, 0);
  for (size_t i = 0; i < res.size(); ++i) {
    double x[2] = {0, 0};
    for (size_t k = 0; k < arity; ++k) {
      int64_t off = 0;
      for (size_t a = 0; a < r; ++a) off += idx[a] * strides[k][a];
      x[k] = vals[k][static_cast<size_t>(off)];
    }
    switch (op) {
      case OpKind::Add: res[i] = x[0] + x[1]; break;
      case OpKind::Sub: res[i] = x[0] - x[1]; break;
      case OpKind::Mul: res[i] = x[0] * x[1]; break;
      case OpKind::Div: res[i] = x[0] / x[1]; break;
      case OpKind::Neg: res[i] = -x[0]; break;
      case OpKind::Reciprocal: res[i] = 1.0 / x[0]; break;
      case OpKind::Sqrt: res[i] = std::sqrt(x[0]); break;
      case OpKind::Abs: res[i] = std::fabs(x[0]); break;
      case OpKind::Exp: res[i] = std::exp(x[0]); break;
      case OpKind::Log: res[i] = std::log(x[0]); break;
      default: return nullptr;
    }
    for (size_t a = r; a-- > 0;) {
      if (++idx[a] < dims[a]) break;
      idx[a] = 0;
    }
  }
  return tensor_of_doubles(out, res);
}

bool known_non_negative(const Graph& g, ValueId v, int depth) {
  if (v == kNoValue || depth < 0) return false;
  const Value& val = g.value(v);
  if (val.constant) {
    if (!readable(val.constant)) return false;
    for (double x : val.constant->to_doubles())
      if (x < 0) return false;
    return true;
  }
  if (val.producer < 0) return false;
  const Node& n = g.node(val.producer);
  auto arg = [&](size_t i) { return i < n.inputs.size() && known_non_negative(g, n.inputs[i], depth - 1); };
  switch (n.op) {
    case OpKind::Relu: case OpKind::Abs: case OpKind::Exp: case OpKind::Sqrt: case OpKind::Sigmoid:
    case OpKind::Softmax: case OpKind::Softplus: case OpKind::HardSigmoid: case OpKind::ReduceL2:
      return true;
    case OpKind::Mul:
      return (n.inputs[0] == n.inputs[1]) || (arg(0) && arg(1));
    case OpKind::Add: case OpKind::Div: case OpKind::Max: case OpKind::Min: case OpKind::Sum:
    case OpKind::Mean: {
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (!arg(i)) return false;
      return true;
    }
    case OpKind::Clip:  // clip(x, lo, hi) >= lo; and >= 0 when x >= 0 unless hi < 0
      return arg(1) || (arg(0) && (n.inputs.size() < 3 || n.inputs[2] == kNoValue || arg(2)));
    default:
      break;
  }
  // Reductions, pools and data movement keep the sign of their data input.
  MappingType m = n.info().mapping;
  bool keeps_sign = m == MappingType::Reorganize || m == MappingType::Shuffle ||
                    n.op == OpKind::ReduceSum || n.op == OpKind::ReduceMean || n.op == OpKind::ReduceMax ||
                    n.op == OpKind::ReduceMin || n.op == OpKind::MaxPool || n.op == OpKind::AveragePool ||
                    n.op == OpKind::GlobalAveragePool || n.op == OpKind::GlobalMaxPool ||
                    n.op == OpKind::Expand || n.op == OpKind::Tile;
  return keeps_sign && n.op != OpKind::Shape && n.op != OpKind::Size && n.op != OpKind::Pad &&
         n.op != OpKind::Concat && arg(0);
}

// ---- Matching ------------------------------------------------------------------------

namespace {

using Cont = std::function<bool(Match&)>;

bool same_input_types(const Graph& g, const Node& a, const Node& b) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    bool pa = a.inputs[i] != kNoValue, pb = b.inputs[i] != kNoValue;
    if (pa != pb || (pa && g.value(a.inputs[i]).type != g.value(b.inputs[i]).type)) return false;
  }
  return true;
}

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g) {}

  bool value(const Pattern& p, ValueId v, Match m, const Cont& k) const {
    switch (p.kind) {
      case Pattern::Kind::Number:
        return v != kNoValue && all_equal(g_.value(v).constant, p.number) && k(m);
      case Pattern::Kind::Var: {
        if (v == kNoValue ? p.sigil != Pattern::Sigil::Any : !sigil_ok(p.sigil, v)) return false;
        auto it = m.vars.find(p.name);
        if (it != m.vars.end()) return same_value(it->second, v) && k(m);
        m.vars[p.name] = v;
        return k(m);
      }
      case Pattern::Kind::Op:
        return op(p, v, std::move(m), k);
    }
    return false;
  }

 private:
  // One value, or two small constants with equal types and bytes (exports repeat them).
  bool same_value(ValueId a, ValueId b) const {
    if (a == b) return true;
    if (a == kNoValue || b == kNoValue) return false;
    const Value& x = g_.value(a);
    const Value& y = g_.value(b);
    return x.constant && y.constant && x.type.numel() <= kMaxInspected && x.constant->same_as(*y.constant);
  }

  bool sigil_ok(Pattern::Sigil s, ValueId v) const {
    const Value& val = g_.value(v);
    switch (s) {
      case Pattern::Sigil::Any: return true;
      case Pattern::Sigil::Const: return bool(val.constant);
      case Pattern::Sigil::Scalar: return val.constant && val.type.numel() == 1;
      case Pattern::Sigil::NonNeg: return known_non_negative(g_, v);
    }
    return false;
  }

  bool op(const Pattern& p, ValueId v, Match m, const Cont& k) const {
    if (v == kNoValue || g_.value(v).producer < 0) return false;
    const Node& n = g_.node(g_.value(v).producer);
    if (n.op != p.op || n.outputs.size() != 1) return false;
    for (size_t i = p.args.size(); i < n.inputs.size(); ++i)
      if (n.inputs[i] != kNoValue) return false;
    if (p.label.empty()) {
      if (!n.attrs.empty()) return false;
    } else {
      auto it = m.labels.find(p.label);
      if (it == m.labels.end()) {
        m.labels[p.label] = n.id;
      } else if (it->second != n.id) {
        const Node& other = g_.node(it->second);
        if (other.attrs != n.attrs || !same_input_types(g_, other, n)) return false;
      }
    }
    if (std::find(m.nodes.begin(), m.nodes.end(), n.id) == m.nodes.end()) m.nodes.push_back(n.id);
    // A $-scalar operand must leave the output the shape of the other operand.
    for (bool swap : {false, true}) {
      if (swap && !(n.info().commutative() && p.args.size() == 2)) break;
      Cont checked = [&, swap](Match& mm) {
        for (size_t i = 0; i < p.args.size(); ++i) {
          if (p.args[i].kind != Pattern::Kind::Var || p.args[i].sigil != Pattern::Sigil::Scalar) continue;
          if (n.inputs.size() != 2) return false;
          size_t other = swap ? i : 1 - i;
          if (g_.value(n.inputs[other]).type.shape != g_.value(n.outputs[0]).type.shape) return false;
        }
        return k(mm);
      };
      if (args(p, n, swap, 0, m, checked)) return true;
    }
    return false;
  }

  bool args(const Pattern& p, const Node& n, bool swap, size_t i, Match m, const Cont& k) const {
    if (i == p.args.size()) return k(m);
    size_t src = swap ? 1 - i : i;
    ValueId v = src < n.inputs.size() ? n.inputs[src] : kNoValue;
    return value(p.args[i], v, std::move(m), [&](Match& mm) { return args(p, n, swap, i + 1, mm, k); });
  }

  const Graph& g_;
};

}  // namespace

std::optional<Match> match_pattern(const Graph& g, const Pattern& p, const Node& root) {
  if (p.kind != Pattern::Kind::Op || root.outputs.size() != 1) return std::nullopt;
  std::optional<Match> found;
  Cont accept = [&](Match& m) {
    std::set<NodeId> inside(m.nodes.begin(), m.nodes.end());
    std::set<ValueId> interior;
    for (NodeId id : m.nodes) {
      const Node& n = g.node(id);
      if (!is_float(g.value(n.outputs[0]).type.dtype)) return false;
      if (id == root.id) continue;
      ValueId out = n.outputs[0];
      if (g.is_graph_output(out)) return false;
      for (NodeId c : g.consumers(out))
        if (!inside.count(c)) return false;
      interior.insert(out);
    }
    for (const auto& [name, v] : m.vars)
      if (interior.count(v)) return false;
    found = m;
    return true;
  };
  Matcher(g).value(p, root.outputs[0], Match{}, accept);
  return found;
}

// ---- Replacements --------------------------------------------------------------------

std::optional<Instance> instantiate(const Pattern& r, const Match& m, const Graph& g, DType literal_dtype) {
  Instance inst;
  Graph& s = inst.scratch;
  std::map<std::string, ValueId> var;
  for (const auto& [name, v] : m.vars) {
    if (v == kNoValue) { var[name] = kNoValue; continue; }
    const Value& val = g.value(v);
    ValueId sv = val.constant ? s.add_constant(name, val.constant) : s.add_input(name, val.type);
    inst.leaves[sv] = v;
    var[name] = sv;
  }
  int fresh = 0;
  bool ok = true;
  std::function<ValueId(const Pattern&)> build = [&](const Pattern& p) -> ValueId {
    if (!ok) return kNoValue;
    switch (p.kind) {
      case Pattern::Kind::Var: {
        auto it = var.find(p.name);
        if (it == var.end()) throw InternalError("replacement uses the unbound variable '" + p.name + "'");
        return it->second;
      }
      case Pattern::Kind::Number: {
        TensorPtr t = tensor_of_doubles(TensorType{literal_dtype, {}}, {p.number});
        if (!t) { ok = false; return kNoValue; }
        return s.add_constant("lit." + std::to_string(fresh++), t);
      }
      case Pattern::Kind::Op: break;
    }
    std::vector<ValueId> ins;
    for (const Pattern& a : p.args) ins.push_back(build(a));
    if (!ok) return kNoValue;
    while (!ins.empty() && ins.back() == kNoValue) ins.pop_back();
    Attrs attrs;
    if (!p.label.empty()) {
      auto it = m.labels.find(p.label);
      if (it == m.labels.end()) throw InternalError("replacement uses the unbound label '" + p.label + "'");
      attrs = g.node(it->second).attrs;
    }
    std::vector<TensorPtr> consts;
    for (ValueId in : ins)
      if (in != kNoValue && s.value(in).constant) consts.push_back(s.value(in).constant);
    if (consts.size() == ins.size() && attrs.empty())
      if (TensorPtr t = fold_arithmetic(p.op, consts)) return s.add_constant("fold." + std::to_string(fresh++), t);
    std::string name = "n." + std::to_string(fresh++);
    try {
      return s.add_node(p.op, ins, std::move(attrs), 1, name, {name})[0];
    } catch (const Error&) {  // the shape rule rejects it: the rewrite does not apply here
      ok = false;
      return kNoValue;
    }
  };
  inst.result = build(r);
  if (!ok || inst.result == kNoValue) return std::nullopt;
  for (const Node& n : s.nodes()) {
    inst.flops += node_flops(s, n);
    ++inst.ops;
  }
  return inst;
}

}  // namespace dnnf
