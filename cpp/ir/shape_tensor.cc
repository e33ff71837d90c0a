// Shape rules of the layout operators: Reshape, Flatten, Squeeze, Unsqueeze, Concat, Split,
// Shape, Size, Transpose, DepthToSpace, SpaceToDepth; and the generators ConstantOfShape, Range.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "ir/shape_rules.h"

namespace dnnf {
namespace {

// A static dim times k; a symbolic dim survives only k == 1.
Dim mul_dim(const InferCtx& c, const Dim& d, int64_t k, const char* what) {
  if (d.is_static()) return checked_mul(c, d.value, k);
  if (k == 1) return d;
  c.fail(std::string(what) + " is the symbolic size '" + d.symbol +
         "' and would be multiplied by " + std::to_string(k) +
         "; specialize it with input_shapes=");
}

// The product of dims [b, e) of s: static, one symbol alone, or a failure.
Dim dims_product(const InferCtx& c, const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  std::vector<std::string> syms;
  for (size_t i = b; i < e; ++i) {
    if (s[i].is_static()) p = checked_mul(c, p, s[i].value);
    else syms.push_back(s[i].symbol);
  }
  if (syms.empty() || p == 0) return p;
  if (syms.size() == 1 && p == 1) return Dim::sym(syms[0]);
  Shape part(s.begin() + b, s.begin() + e);
  c.fail("merging dims " + shape_str(part) + " needs a static size; specialize with input_shapes=");
}

void reshape_rule(InferCtx& c) {
  std::vector<int64_t> spec = const_vector(c, 1, "shape");
  int64_t allowzero = flag(c, "allowzero", 0);
  const Shape& in = c.shape(0);
  std::multiset<std::string> syms;  // input symbols not copied to the output
  int64_t in_static = 1, out_static = 1;
  for (const Dim& d : in) {
    if (d.is_static()) in_static = checked_mul(c, in_static, d.value);
    else syms.insert(d.symbol);
  }
  Shape out;
  int infer = -1;
  bool has_zero = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t v = spec[i];
    if (v < -1) c.fail("shape " + ints_str(spec) + " has the invalid entry " + std::to_string(v));
    if (v == -1) {
      if (infer >= 0) c.fail("shape " + ints_str(spec) + " has more than one -1");
      infer = static_cast<int>(i);
      out.push_back(Dim(1));
    } else if (v == 0 && !allowzero) {
      if (i >= in.size())
        c.fail("shape " + ints_str(spec) + " copies input dim " + std::to_string(i) +
               " (a 0) but the input " + c.in(0).str() + " has rank " + std::to_string(in.size()));
      out.push_back(in[i]);
      if (in[i].is_static()) out_static = checked_mul(c, out_static, in[i].value);
      else syms.erase(syms.find(in[i].symbol));
    } else {
      has_zero |= v == 0;
      out.push_back(v);
      out_static = checked_mul(c, out_static, v);
    }
  }
  if (allowzero && has_zero && infer >= 0)
    c.fail("shape " + ints_str(spec) + " has both 0 and -1, which allowzero=1 forbids");
  std::string what = "cannot reshape " + c.in(0).str() + " to " + ints_str(spec);
  if (infer >= 0) {
    if (out_static == 0) c.fail(what + ": the -1 is ambiguous when the other dims multiply to 0");
    if (syms.empty()) {
      if (in_static % out_static != 0)
        c.fail(what + ": " + std::to_string(in_static) + " elements do not divide into " +
               std::to_string(out_static));
      out[infer] = in_static / out_static;
    } else if (syms.size() == 1 && in_static == out_static) {
      out[infer] = Dim::sym(*syms.begin());
    } else {
      c.fail(what + ": the -1 would be a product involving symbolic dims; specialize with "
                    "input_shapes= or copy symbolic dims with 0");
    }
  } else if (!syms.empty()) {
    c.fail(what + ": the symbolic dims are not carried over (use 0 or -1 for them)");
  } else if (in_static != out_static) {
    c.fail(what + ": " + std::to_string(in_static) + " elements vs " + std::to_string(out_static));
  }
  c.out[0] = {c.dtype(0), out};
}

void flatten_rule(InferCtx& c) {
  int64_t r = c.rank(0), a = c.attr_int("axis", 1);
  if (a < -r || a > r)
    c.fail("axis " + std::to_string(a) + " is out of range [" + std::to_string(-r) + ", " +
           std::to_string(r) + "] for " + c.in(0).str());
  size_t axis = static_cast<size_t>(a < 0 ? a + r : a);
  const Shape& s = c.shape(0);
  c.out[0] = {c.dtype(0), {dims_product(c, s, 0, axis), dims_product(c, s, axis, s.size())}};
}

void squeeze_rule(InferCtx& c) {
  std::vector<int64_t> axes;
  if (c.has_input(1)) axes = const_vector(c, 1, "axes");
  const Shape& in = c.shape(0);
  int64_t r = c.rank(0);
  Shape out;
  if (!axes.empty()) {
    std::vector<bool> set = axis_set(c, axes, r, true);  // repeats: onnxruntime allows them
    for (int64_t i = 0; i < r; ++i) {
      if (!set[i]) { out.push_back(in[i]); continue; }
      if (in[i].is_static() && in[i].value != 1)
        c.fail("cannot squeeze axis " + std::to_string(i) + " of " + c.in(0).str() +
               ": its size is not 1");
    }
  } else {
    for (const Dim& d : in) {
      if (!d.is_static())
        c.fail("Squeeze without axes cannot tell whether the symbolic dim '" + d.symbol +
               "' of " + c.in(0).str() + " is 1; give axes");
      if (d.value != 1) out.push_back(d);
    }
  }
  c.out[0] = {c.dtype(0), out};
}

void unsqueeze_rule(InferCtx& c) {
  std::vector<int64_t> axes = const_vector(c, 1, "axes");
  const Shape& in = c.shape(0);
  int64_t r = c.rank(0) + static_cast<int64_t>(axes.size());
  std::vector<bool> set = axis_set(c, axes, r, false);
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(set[i] ? Dim(1) : in[next++]);
  c.out[0] = {c.dtype(0), out};
}

void concat_rule(InferCtx& c) {
  if (!c.has_attr("axis")) c.fail("attribute 'axis' is required");
  int64_t r = c.rank(0);
  if (r == 0) c.fail("cannot concatenate scalars");
  int64_t axis = c.axis(c.attr_int("axis", 0), r);
  Shape out = c.shape(0);
  int64_t sum = 0;
  std::vector<std::string> syms;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const Shape& s = c.shape(i);
    if (c.dtype(i) != c.dtype(0))
      c.fail("inputs must have one element type, got " + c.in(0).str() + " and " + c.in(i).str());
    if (c.rank(i) != r)
      c.fail("inputs must have one rank, got " + c.in(0).str() + " and " + c.in(i).str());
    for (int64_t d = 0; d < r; ++d) {
      if (d == axis) continue;
      if (conflict(out[d], s[d]))
        c.fail("input " + std::to_string(i) + " " + c.in(i).str() + " differs from " +
               c.in(0).str() + " on axis " + std::to_string(d) + " (only axis " +
               std::to_string(axis) + " may differ)");
      if (!out[d].is_static()) out[d] = s[d];
    }
    if (s[axis].is_static()) sum = checked_add(c, sum, s[axis].value);
    else syms.push_back(s[axis].symbol);
  }
  if (syms.empty()) out[axis] = sum;
  else if (syms.size() == 1 && sum == 0) out[axis] = Dim::sym(syms[0]);
  else c.fail("the concatenated axis " + std::to_string(axis) +
              " would be a sum involving symbolic dims; specialize with input_shapes=");
  c.out[0] = {c.dtype(0), out};
}

void split_rule(InferCtx& c) {
  int64_t r = c.rank(0);
  if (r < 1) c.fail("cannot split a scalar");
  int64_t axis = c.axis(c.attr_int("axis", 0), r);
  int64_t n = static_cast<int64_t>(c.num_outputs());
  std::vector<int64_t> split;
  if (c.has_input(1)) split = const_vector(c, 1, "split");
  if (c.has_attr("num_outputs")) {
    if (!split.empty()) c.fail("give either the split input or attribute num_outputs, not both");
    int64_t k = c.attr_int("num_outputs", 0);
    if (k != n)
      c.fail("attribute num_outputs is " + std::to_string(k) + " but the node has " +
             std::to_string(n) + " outputs");
  }
  const Dim& d = c.shape(0)[axis];
  std::vector<Dim> sizes;
  if (!split.empty()) {
    if (static_cast<int64_t>(split.size()) != n)
      c.fail("split " + ints_str(split) + " has " + std::to_string(split.size()) +
             " entries but the node has " + std::to_string(n) + " outputs");
    int64_t total = 0;
    for (int64_t v : split) {
      if (v < 0) c.fail("split " + ints_str(split) + " has a negative size");
      total = checked_add(c, total, v);
      sizes.push_back(v);
    }
    if (d.is_static() && total != d.value)
      c.fail("split " + ints_str(split) + " sums to " + std::to_string(total) + " but axis " +
             std::to_string(axis) + " of " + c.in(0).str() + " has size " + d.str());
  } else if (!d.is_static()) {
    if (n != 1)
      c.fail("cannot split the symbolic axis '" + d.symbol + "' into " + std::to_string(n) +
             " parts; give split sizes or specialize with input_shapes=");
    sizes.push_back(d);
  } else if (c.has_attr("num_outputs")) {  // ONNX 18: chunks of ceil(size / n), the last smaller
    int64_t chunk = d.value > 0 ? (d.value - 1) / n + 1 : 0, last = d.value - chunk * (n - 1);
    if (last < 0)
      c.fail("axis " + std::to_string(axis) + " of size " + d.str() + " cannot be split into " +
             std::to_string(n) + " chunks of " + std::to_string(chunk) +
             " (the last would be negative)");
    sizes.assign(static_cast<size_t>(n), Dim(chunk));
    sizes.back() = last;
  } else {  // no split sizes: equal parts, one per output
    if (d.value % n != 0)
      c.fail("axis " + std::to_string(axis) + " of size " + d.str() +
             " is not evenly splittable into " + std::to_string(n) +
             " outputs; give split sizes or num_outputs");
    sizes.assign(static_cast<size_t>(n), Dim(d.value / n));
  }
  for (int64_t i = 0; i < n; ++i) {
    c.out[i] = c.in(0);
    c.out[i].shape[axis] = sizes[i];
  }
}

void shape_rule(InferCtx& c) {
  int64_t r = c.rank(0);
  auto clampi = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  int64_t s = clampi(c.attr_int("start", 0)), e = clampi(c.attr_int("end", r));
  c.out[0] = {DType::I64, {std::max<int64_t>(e - s, 0)}};
}

void size_rule(InferCtx& c) {
  c.in(0);
  c.out[0] = {DType::I64, {}};
}

void transpose_rule(InferCtx& c) {
  int64_t r = c.rank(0);
  std::vector<int64_t> perm(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) perm[i] = r - 1 - i;
  perm = c.attr_ints("perm", perm);
  bool ok = static_cast<int64_t>(perm.size()) == r;
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < r && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok)
    c.fail("perm " + ints_str(perm) + " is not a permutation of 0.." + std::to_string(r - 1) +
           " for " + c.in(0).str());
  Shape out;
  for (int64_t p : perm) out.push_back(c.shape(0)[p]);
  c.out[0] = {c.dtype(0), out};
}

int64_t blocksize(const InferCtx& c) {
  if (c.rank(0) != 4) c.fail("input must have shape [N, C, H, W], got " + c.in(0).str());
  if (!c.has_attr("blocksize")) c.fail("attribute 'blocksize' is required");
  int64_t b = c.attr_int("blocksize", 1);
  if (b < 1) c.fail("attribute blocksize must be >= 1, got " + std::to_string(b));
  return b;
}

void depth_to_space_rule(InferCtx& c) {
  int64_t b = blocksize(c);
  std::string mode = c.attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    c.fail("attribute mode must be DCR or CRD, got '" + mode + "'");
  const Shape& s = c.shape(0);
  Dim ch = s[1];
  if (b != 1) {
    if (!ch.is_static())
      c.fail("channels are the symbolic size '" + ch.symbol +
             "'; they must be static to divide by blocksize^2");
    int64_t bb = checked_mul(c, b, b);
    if (ch.value % bb != 0)
      c.fail("channels " + ch.str() + " of " + c.in(0).str() +
             " are not divisible by blocksize^2 = " + std::to_string(bb));
    ch = ch.value / bb;
  }
  c.out[0] = {c.dtype(0), {s[0], ch, mul_dim(c, s[2], b, "height"), mul_dim(c, s[3], b, "width")}};
}

void space_to_depth_rule(InferCtx& c) {
  int64_t b = blocksize(c);
  const Shape& s = c.shape(0);
  Shape out = {s[0], mul_dim(c, s[1], checked_mul(c, b, b), "channels"), s[2], s[3]};
  for (size_t i = 2; i < 4 && b != 1; ++i) {
    const char* what = i == 2 ? "height" : "width";
    if (!s[i].is_static())
      c.fail(std::string(what) + " is the symbolic size '" + s[i].symbol +
             "'; it must be static to divide by blocksize");
    if (s[i].value % b != 0)
      c.fail(std::string(what) + " " + s[i].str() + " of " + c.in(0).str() +
             " is not divisible by blocksize " + std::to_string(b));
    out[i] = s[i].value / b;
  }
  c.out[0] = {c.dtype(0), out};
}

void constant_of_shape_rule(InferCtx& c) {
  Shape out = const_shape(c, 0, "shape");
  DType t = DType::F32;
  if (TensorPtr value = c.attr_tensor("value")) {
    if (value->type.numel() != 1)
      c.fail("attribute value must hold one element, got " + value->type.str());
    t = value->type.dtype;
  }
  c.out[0] = {t, out};
}

// The value of a scalar constant; f16 and bf16 are decoded here (TensorData reads neither).
double scalar_value(const TensorData& t) {
  if (t.type.dtype == DType::BF16) {  // the upper half of a float32
    uint32_t bits = static_cast<uint32_t>(t.as<uint16_t>()[0]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  if (t.type.dtype != DType::F16) return t.to_doubles()[0];
  uint16_t h = t.as<uint16_t>()[0];
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0    ? std::ldexp(m, -24)
             : e == 31 ? (m ? NAN : INFINITY)
                       : std::ldexp(m | 0x400, e - 25);
  return (h >> 15) ? -v : v;
}

// x rounded to the precision of float type t, as arithmetic in t would round it.
double round_to(DType t, double x) {
  if (t == DType::F32) return static_cast<float>(x);
  if (t == DType::BF16 && std::isfinite(x) && x != 0) {  // 8 significant bits, float32's exponent range
    int e;
    std::frexp(x, &e);
    double quantum = std::ldexp(1.0, std::max(e, -125) - 8);
    double r = std::nearbyint(x / quantum) * quantum;
    return std::fabs(r) > 3.3895313892515355e38 ? std::copysign(INFINITY, r) : r;
  }
  if (t != DType::F16 || !std::isfinite(x) || x == 0) return x;
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e); f16 keeps 11 bits, subnormal below 2^-14
  double quantum = std::ldexp(1.0, std::max(e, -13) - 11);
  double r = std::nearbyint(x / quantum) * quantum;
  return std::fabs(r) > 65504 ? std::copysign(INFINITY, r) : r;
}

void range_rule(InferCtx& c) {
  const char* names[] = {"start", "limit", "delta"};
  DType t = c.dtype(0);
  if (t == DType::Bool || t == DType::U8 || t == DType::I8 || t == DType::U16 || t == DType::U32 ||
      t == DType::U64)
    c.fail("start must be f16, f32, f64, i16, i32 or i64, got " + c.in(0).str());
  TensorPtr v[3];
  for (size_t i = 0; i < 3; ++i) {
    if (c.dtype(i) != t)
      c.fail(std::string(names[i]) + " must have the element type of start (" + dtype_name(t) +
             "), got " + c.in(i).str());
    if (!is_scalar_like(c, i))
      c.fail(std::string(names[i]) + " must be a scalar, got " + c.in(i).str());
    v[i] = c.const_input(i);
    if (!v[i])
      c.fail(std::string(names[i]) + " (input " + std::to_string(i) +
             ") must be a constant to infer static shapes");
  }
  int64_t n = 0;
  if (is_integer(t)) {
    __int128 s = v[0]->to_ints()[0], l = v[1]->to_ints()[0], d = v[2]->to_ints()[0];
    if (d == 0) c.fail("delta must not be 0");
    __int128 diff = l - s, q = diff / d;
    if (q * d != diff && (diff > 0) == (d > 0)) ++q;  // ceil
    if (q > std::numeric_limits<int64_t>::max()) c.fail("the element count overflows int64");
    n = static_cast<int64_t>(std::max<__int128>(q, 0));
  } else {
    double s = scalar_value(*v[0]), l = scalar_value(*v[1]), d = scalar_value(*v[2]);
    if (d == 0) c.fail("delta must not be 0");
    // ceil((limit - start) / delta) in the operands' type, as numpy.arange and the reference
    // kernel compute it
    double q = std::ceil(round_to(t, round_to(t, l - s) / d));
    if (!std::isfinite(q) || q > 9.0e18)
      c.fail("start " + std::to_string(s) + ", limit " + std::to_string(l) + ", delta " +
             std::to_string(d) + " give no finite element count");
    n = q > 0 ? static_cast<int64_t>(q) : 0;
  }
  c.out[0] = {t, {n}};
}

}  // namespace

void add_tensor_shape_rules(ShapeRuleTable& t) {
  t.set(OpKind::Reshape, reshape_rule);
  t.set(OpKind::Flatten, flatten_rule);
  t.set(OpKind::Squeeze, squeeze_rule);
  t.set(OpKind::Unsqueeze, unsqueeze_rule);
  t.set(OpKind::Concat, concat_rule);
  t.set(OpKind::Split, split_rule);
  t.set(OpKind::Shape, shape_rule);
  t.set(OpKind::Size, size_rule);
  t.set(OpKind::Transpose, transpose_rule);
  t.set(OpKind::DepthToSpace, depth_to_space_rule);
  t.set(OpKind::SpaceToDepth, space_to_depth_rule);
  t.set(OpKind::ConstantOfShape, constant_of_shape_rule);
  t.set(OpKind::Range, range_rule);
}

}  // namespace dnnf
