// Shape rules of the One-to-One operators: unary and binary elementwise math,
// comparisons, logic, Where, Cast, Clip, Quantize/DequantizeLinear, BatchNormalization, Constant.
#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf {
namespace {

void same_as_input0(InferCtx& c) {
  for (auto& o : c.out) o = c.in(0);
}

void float_unary(InferCtx& c) {
  if (!is_float(c.dtype(0))) c.fail("needs a float input, got " + c.in(0).str());
  same_as_input0(c);
}

void float_test(InferCtx& c) {  // IsNaN, IsInf: float in, bool out
  if (!is_float(c.dtype(0))) c.fail("needs a float input, got " + c.in(0).str());
  c.out[0] = {DType::Bool, c.shape(0)};
}

void bool_unary(InferCtx& c) {
  if (c.dtype(0) != DType::Bool) c.fail("needs a bool input, got " + c.in(0).str());
  same_as_input0(c);
}

// Inputs of a binary/variadic op must agree on the element type (ONNX type constraint T).
DType common_dtype(const InferCtx& c, size_t first, size_t last) {
  DType t = c.dtype(first);
  for (size_t i = first + 1; i < last && i < c.num_inputs(); ++i)
    if (c.has_input(i) && c.dtype(i) != t)
      c.fail(std::string("inputs must have one element type, got ") + dtype_name(t) + " and " +
             dtype_name(c.dtype(i)));
  return t;
}

std::vector<size_t> all_inputs(const InferCtx& c) {
  std::vector<size_t> v;
  for (size_t i = 0; i < c.num_inputs(); ++i) v.push_back(i);
  return v;
}

void binary_math(InferCtx& c) {
  DType t = common_dtype(c, 0, c.num_inputs());
  if (t == DType::Bool) c.fail("arithmetic on bool tensors is not defined");
  c.out[0] = {t, broadcast_all(c, all_inputs(c))};
}

void pow_rule(InferCtx& c) {  // the exponent may have another numeric type
  if (c.dtype(0) == DType::Bool || c.dtype(1) == DType::Bool) c.fail("Pow of bool tensors");
  c.out[0] = {c.dtype(0), broadcast_all(c, {0, 1})};
}

void compare(InferCtx& c) {
  common_dtype(c, 0, 2);
  c.out[0] = {DType::Bool, broadcast_all(c, {0, 1})};
}

void logic(InferCtx& c) {
  if (c.dtype(0) != DType::Bool || c.dtype(1) != DType::Bool)
    c.fail("needs bool inputs, got " + c.in(0).str() + " and " + c.in(1).str());
  c.out[0] = {DType::Bool, broadcast_all(c, {0, 1})};
}

void bitwise(InferCtx& c) {
  DType t = common_dtype(c, 0, 2);
  if (!is_integer(t)) c.fail(std::string("needs integer inputs, got ") + dtype_name(t));
  c.out[0] = {t, broadcast_all(c, {0, 1})};
}

void bitwise_not(InferCtx& c) {
  if (!is_integer(c.dtype(0))) c.fail("needs an integer input, got " + c.in(0).str());
  same_as_input0(c);
}

void bit_shift(InferCtx& c) {
  DType t = common_dtype(c, 0, 2);
  if (!is_integer(t)) c.fail(std::string("needs integer inputs, got ") + dtype_name(t));
  const std::string d = c.attr_string("direction", "");
  if (d != "LEFT" && d != "RIGHT") c.fail("attribute 'direction' must be \"LEFT\" or \"RIGHT\"");
  c.out[0] = {t, broadcast_all(c, {0, 1})};
}

void where_rule(InferCtx& c) {
  if (c.dtype(0) != DType::Bool) c.fail("condition must be bool, got " + c.in(0).str());
  DType t = common_dtype(c, 1, 3);
  c.out[0] = {t, broadcast_all(c, {0, 1, 2})};
}

void cast_rule(InferCtx& c) {
  if (!c.has_attr("to")) c.fail("attribute 'to' is required");
  auto t = dtype_from_onnx(static_cast<int>(c.attr_int("to", 0)));
  if (!t) c.fail("cannot cast to ONNX data type " + std::to_string(c.attr_int("to", 0)));
  c.out[0] = {*t, c.shape(0)};
}

void bitcast_rule(InferCtx& c) {
  cast_rule(c);
  const DType from = c.dtype(0), to = c.out[0].dtype;
  if (is_half(from) || is_half(to))
    c.fail("float16 and bfloat16 are computed in float32 (compile's float16='f32'), so its bits are not there to reinterpret");
  if (dtype_size(from) != dtype_size(to))
    c.fail(std::string("needs a target type of the input's width: ") + dtype_name(from) + " to " + dtype_name(to));
}

void clip_rule(InferCtx& c) {
  for (size_t i = 1; i < 3; ++i)
    if (c.has_input(i)) {
      if (c.dtype(i) != c.dtype(0)) c.fail("min/max must have the input's element type");
      if (!is_scalar_like(c, i))
        c.fail("min/max must be scalars, got " + c.in(i).str());
    }
  same_as_input0(c);
}

void dropout_rule(InferCtx& c) {
  c.out[0] = c.in(0);
  if (c.out.size() > 1) c.out[1] = {DType::Bool, c.shape(0)};
}

void prelu_rule(InferCtx& c) {
  common_dtype(c, 0, 2);
  auto b = broadcast_shapes(c.shape(0), c.shape(1));
  if (!b || *b != c.shape(0))
    c.fail("slope " + c.in(1).str() + " must broadcast to the input " + c.in(0).str());
  c.out[0] = c.in(0);
}

// QuantizeLinear / DequantizeLinear: scale (and zero point, of the scale's shape) one element
// or of x's rank, broadcast to x without growing it, as PRelu's slope; a per-axis ONNX node
// reaches here reshaped ([C] along axis 1 as [1, C, 1, 1]), with no axis.
void quant_operands(InferCtx& c) {
  for (const char* a : {"axis", "block_size"})
    if (c.has_attr(a))
      c.fail(std::string("attribute '") + a + "' is not taken: a per-axis scale has x's rank and broadcasts "
             "(the ONNX front-end writes it so; blocked quantization is not supported)");
  if (!is_float(c.dtype(1)) || c.dtype(1) == DType::F64)
    c.fail("scale must be float32 or float16, got " + c.in(1).str());
  const bool single = c.in(1).is_static() && c.in(1).numel() == 1;
  if (c.rank(1) != 0 && c.rank(1) != c.rank(0) && !single)
    c.fail("scale " + c.in(1).str() + " must be one element or have x's rank (" + c.in(0).str() +
           "): a per-axis scale [C] along axis 1 is written [1, C, 1, ..]");
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    auto b = broadcast_shapes(c.shape(0), c.shape(i));
    if (!b || *b != c.shape(0))
      c.fail("input " + std::to_string(i) + " " + c.in(i).str() + " must broadcast to x " + c.in(0).str());
  }
  if (c.has_input(2) && c.shape(2) != c.shape(1))
    c.fail("zero point " + c.in(2).str() + " must have the scale's shape " + c.in(1).str());
}

bool is_quantized_int(DType t) {
  return t == DType::I8 || t == DType::U8 || t == DType::I16 || t == DType::U16 || is_narrow(t) ||
         (is_small_float(t) && t != DType::F8E8M0);  // (float8, float6, float4: ONNX's quantized types too)
}

void quantize_rule(InferCtx& c) {
  if (!is_float(c.dtype(0)) || c.dtype(0) == DType::F64) c.fail("x must be float32 or float16, got " + c.in(0).str());
  quant_operands(c);
  const DType t = c.has_input(2) ? c.dtype(2) : DType::U8;
  if (!is_quantized_int(t))
    c.fail(std::string("quantizes to int8, uint8, int16, uint16, int4, uint4, int2, uint2, float8 (not e8m0), float6 or "
                       "float4 (the zero point's type), got ") + dtype_name(t));
  c.out[0] = {t, c.shape(0)};
}

void dequantize_rule(InferCtx& c) {
  if (!is_quantized_int(c.dtype(0)) && c.dtype(0) != DType::I32)
    c.fail("x must be int8, uint8, int16, uint16, int32, int4, uint4, int2, uint2, float8 (not e8m0), float6 or float4, "
           "got " + c.in(0).str());
  quant_operands(c);
  if (c.has_input(2) && c.dtype(2) != c.dtype(0))
    c.fail("zero point must have x's element type " + std::string(dtype_name(c.dtype(0))) + ", got " +
           c.in(2).str());
  c.out[0] = {c.dtype(1), c.shape(0)};
}

void trilu_rule(InferCtx& c) {
  if (c.rank(0) < 2) c.fail("needs rank >= 2, got " + c.in(0).str());
  same_as_input0(c);
}

void batchnorm_rule(InferCtx& c) {
  if (c.rank(0) < 2) c.fail("needs an input of rank >= 2 (N, C, ...), got " + c.in(0).str());
  const Dim& ch = c.shape(0)[1];
  for (size_t i = 1; i < 5; ++i) {
    if (c.rank(i) != 1 || (ch.is_static() && c.shape(i)[0] != ch))
      c.fail("parameter " + std::to_string(i) + " must have shape [" + ch.str() + "], got " +
             c.in(i).str());
  }
  if (c.out.size() != 1) c.fail("only inference mode (one output) is supported");
  c.out[0] = c.in(0);
}

void constant_rule(InferCtx& c) {
  TensorPtr t = c.attr_tensor("value");
  if (!t) c.fail("needs a tensor attribute 'value'");
  c.out[0] = t->type;
}

}  // namespace

void add_elementwise_shape_rules(ShapeRuleTable& t) {
  for (OpKind k : {OpKind::Relu, OpKind::LeakyRelu, OpKind::Elu, OpKind::Selu, OpKind::Sigmoid,
                   OpKind::HardSigmoid, OpKind::HardSwish, OpKind::Tanh, OpKind::Softplus,
                   OpKind::Softsign, OpKind::Mish, OpKind::Gelu, OpKind::Erf, OpKind::Sqrt,
                   OpKind::Reciprocal, OpKind::Exp, OpKind::Log, OpKind::Floor, OpKind::Ceil,
                   OpKind::Round, OpKind::Sin, OpKind::Cos, OpKind::Tan, OpKind::Asin,
                   OpKind::Acos, OpKind::Atan, OpKind::Sinh, OpKind::Cosh, OpKind::Asinh,
                   OpKind::Acosh, OpKind::Atanh})
    t.set(k, float_unary);
  for (OpKind k : {OpKind::Neg, OpKind::Abs, OpKind::Sign, OpKind::Identity})
    t.set(k, same_as_input0);
  t.set(OpKind::Not, bool_unary);
  t.set(OpKind::IsNaN, float_test);
  t.set(OpKind::IsInf, float_test);
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Mod, OpKind::Max,
                   OpKind::Min, OpKind::Sum, OpKind::Mean})
    t.set(k, binary_math);
  t.set(OpKind::Pow, pow_rule);
  for (OpKind k : {OpKind::Equal, OpKind::Less, OpKind::LessOrEqual, OpKind::Greater,
                   OpKind::GreaterOrEqual})
    t.set(k, compare);
  for (OpKind k : {OpKind::And, OpKind::Or, OpKind::Xor}) t.set(k, logic);
  for (OpKind k : {OpKind::BitwiseAnd, OpKind::BitwiseOr, OpKind::BitwiseXor}) t.set(k, bitwise);
  t.set(OpKind::BitwiseNot, bitwise_not);
  t.set(OpKind::BitShift, bit_shift);
  t.set(OpKind::Where, where_rule);
  t.set(OpKind::Cast, cast_rule);
  t.set(OpKind::BitCast, bitcast_rule);
  t.set(OpKind::Clip, clip_rule);
  t.set(OpKind::Dropout, dropout_rule);
  t.set(OpKind::PRelu, prelu_rule);
  t.set(OpKind::Trilu, trilu_rule);
  t.set(OpKind::QuantizeLinear, quantize_rule);
  t.set(OpKind::DequantizeLinear, dequantize_rule);
  t.set(OpKind::BatchNormalization, batchnorm_rule);
  t.set(OpKind::Constant, constant_rule);
}

}  // namespace dnnf
