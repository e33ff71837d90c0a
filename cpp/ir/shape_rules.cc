// The shape-rule table and the context rules read from.
#include "ir/shape_rules.h"

#include "ir/errors.h"

namespace dnnf {

InferCtx::InferCtx(const Graph& g, const Node& n) : g_(g), node_(n) {
  out.resize(n.outputs.size());
}

bool InferCtx::has_input(size_t i) const {
  return i < node_.inputs.size() && node_.inputs[i] != kNoValue;
}

const TensorType& InferCtx::in(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required");
  return g_.value(node_.inputs[i]).type;
}

TensorPtr InferCtx::const_input(size_t i) const {
  if (!has_input(i)) return nullptr;
  return g_.value(node_.inputs[i]).constant;
}

std::optional<std::vector<int64_t>> InferCtx::const_ints(size_t i, const char* what) const {
  if (!has_input(i)) return std::nullopt;
  TensorPtr t = const_input(i);
  if (!t)
    fail(std::string(what) + " (input " + std::to_string(i) +
         ") must be a constant to infer static shapes; dnnfusion folds shape arithmetic at "
         "import, so this value depends on data");
  if (!is_integer(t->type.dtype)) fail(std::string(what) + " must be an integer tensor");
  return t->to_ints();
}

int64_t InferCtx::attr_int(const std::string& k, int64_t dflt) const {
  auto it = node_.attrs.find(k);
  if (it == node_.attrs.end()) return dflt;
  if (it->second.kind != Attr::Kind::Int) fail("attribute '" + k + "' must be an int");
  return it->second.i;
}

double InferCtx::attr_float(const std::string& k, double dflt) const {
  auto it = node_.attrs.find(k);
  if (it == node_.attrs.end()) return dflt;
  if (it->second.kind == Attr::Kind::Int) return static_cast<double>(it->second.i);
  if (it->second.kind != Attr::Kind::Float) fail("attribute '" + k + "' must be a float");
  return it->second.f;
}

std::string InferCtx::attr_string(const std::string& k, const std::string& dflt) const {
  auto it = node_.attrs.find(k);
  if (it == node_.attrs.end()) return dflt;
  if (it->second.kind != Attr::Kind::String) fail("attribute '" + k + "' must be a string");
  return it->second.s;
}

std::vector<int64_t> InferCtx::attr_ints(const std::string& k, std::vector<int64_t> dflt) const {
  auto it = node_.attrs.find(k);
  if (it == node_.attrs.end()) return dflt;
  if (it->second.kind != Attr::Kind::Ints) fail("attribute '" + k + "' must be a list of ints");
  return it->second.ints;
}

TensorPtr InferCtx::attr_tensor(const std::string& k) const {
  auto it = node_.attrs.find(k);
  if (it == node_.attrs.end()) return nullptr;
  if (it->second.kind != Attr::Kind::Tensor) fail("attribute '" + k + "' must be a tensor");
  return it->second.t;
}

int64_t InferCtx::axis(int64_t a, int64_t r, const char* what) const {
  // Rank 0 admits no axis: callers check the rank before indexing the shape.
  if (a < -r || a >= r || r == 0)
    fail(std::string(what) + " " + std::to_string(a) + " is out of range for rank " +
         std::to_string(r));
  return a < 0 ? a + r : a;
}

std::vector<int64_t> InferCtx::static_dims(size_t i) const {
  const TensorType& t = in(i);
  if (!t.is_static())
    fail("needs a static shape for input " + std::to_string(i) + ", got " + t.str() +
         "; specialize symbolic dimensions with input_shapes=");
  return t.dims();
}

void InferCtx::fail(const std::string& msg) const {
  throw ShapeError("node '" + node_.name + "' (" + node_.info().name + "): " + msg);
}

namespace {
const ShapeRuleTable& table() {
  static const ShapeRuleTable t = [] {
    ShapeRuleTable r;
    add_elementwise_shape_rules(r);
    add_nn_shape_rules(r);
    add_tensor_shape_rules(r);
    add_index_shape_rules(r);
    return r;
  }();
  return t;
}
}  // namespace

bool has_shape_rule(OpKind k) { return table().rules[static_cast<size_t>(k)] != nullptr; }

std::vector<TensorType> infer_output_types(const Graph& g, const Node& n) {
  ShapeRule rule = table().rules[static_cast<size_t>(n.op)];
  if (!rule)
    throw UnsupportedOperatorError("node '" + n.name + "' (" + n.info().name +
                                   "): no shape rule for this operator yet");
  InferCtx c(g, n);
  rule(c);
  for (size_t i = 0; i < c.out.size(); ++i)
    for (const Dim& d : c.out[i].shape)
      if (d.is_static() && d.value < 0)
        c.fail("inferred a negative dimension for output " + std::to_string(i) + ": " +
               c.out[i].str());
  return c.out;
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim* da = i < r - a.size() ? nullptr : &a[i - (r - a.size())];
    const Dim* db = i < r - b.size() ? nullptr : &b[i - (r - b.size())];
    if (!da) { out[i] = *db; continue; }
    if (!db) { out[i] = *da; continue; }
    if (*da == *db) out[i] = *da;
    else if (da->is_static() && da->value == 1) out[i] = *db;
    else if (db->is_static() && db->value == 1) out[i] = *da;
    else return std::nullopt;
  }
  return out;
}

Shape broadcast_all(const InferCtx& c, const std::vector<size_t>& inputs) {
  Shape s;
  bool first = true;
  for (size_t i : inputs) {
    if (!c.has_input(i)) continue;
    if (first) { s = c.shape(i); first = false; continue; }
    auto b = broadcast_shapes(s, c.shape(i));
    if (!b) c.fail("shapes " + shape_str(s) + " and " + shape_str(c.shape(i)) + " do not broadcast");
    s = *b;
  }
  return s;
}

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

bool conflict(const Dim& a, const Dim& b) { return a.is_static() && b.is_static() && a != b; }

int64_t checked_add(const InferCtx& c, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) c.fail("a dimension overflows int64");
  return r;
}

int64_t checked_mul(const InferCtx& c, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) c.fail("a dimension overflows int64");
  return r;
}

int64_t flag(const InferCtx& c, const char* name, int64_t dflt) {
  int64_t v = c.attr_int(name, dflt);
  if (v != 0 && v != 1)
    c.fail(std::string("attribute '") + name + "' must be 0 or 1, got " + std::to_string(v));
  return v;
}

void need_float(const InferCtx& c, size_t i, const char* what) {
  if (!is_float(c.dtype(i)))
    c.fail(std::string(what) + " must be a float tensor, got " + c.in(i).str());
}

void same_dtype(const InferCtx& c, size_t a, size_t b, const char* what) {
  if (c.has_input(b) && c.dtype(a) != c.dtype(b))
    c.fail(std::string(what) + " must have the element type of input " + std::to_string(a) +
           " (" + dtype_name(c.dtype(a)) + "), got " + c.in(b).str());
}

std::vector<int64_t> const_vector(const InferCtx& c, size_t i, const char* what) {
  if (!c.has_input(i)) c.fail(std::string(what) + " (input " + std::to_string(i) + ") is required");
  std::vector<int64_t> v = *c.const_ints(i, what);
  if (c.rank(i) != 1) c.fail(std::string(what) + " must be a 1-D tensor, got " + c.in(i).str());
  return v;
}

Shape const_shape(const InferCtx& c, size_t i, const char* what) {
  std::vector<int64_t> v = const_vector(c, i, what);
  Shape s;
  for (int64_t x : v) {
    if (x < 0) c.fail(std::string(what) + " " + ints_str(v) + " has a negative entry");
    s.push_back(x);
  }
  return s;
}

bool is_scalar_like(const InferCtx& c, size_t i) {
  return c.rank(i) == 0 || (c.rank(i) == 1 && c.shape(i)[0] == Dim(1));
}

std::vector<bool> axis_set(const InferCtx& c, const std::vector<int64_t>& axes, int64_t r,
                           bool allow_repeats) {
  std::vector<bool> set(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    if (r == 0) c.fail("axes " + ints_str(axes) + " given for a scalar input");
    int64_t k = c.axis(a, r, "axes value");
    if (set[k] && !allow_repeats)
      c.fail("axes " + ints_str(axes) + " name axis " + std::to_string(k) + " twice");
    set[k] = true;
  }
  return set;
}

}  // namespace dnnf
