// Element types and tensor types of the ECG.
#include "ir/types.h"

#include <cmath>

#include "ir/errors.h"

namespace dnnf {

const char* dtype_name(DType t) {
  switch (t) {
#define X(name, text, size, onnx) case DType::name: return text;
    DNNF_FOR_EACH_DTYPE(X)
#undef X
  }
  throw InternalError("dtype_name: bad dtype");
}

size_t dtype_size(DType t) {
  switch (t) {
#define X(name, text, size, onnx) case DType::name: return size;
    DNNF_FOR_EACH_DTYPE(X)
#undef X
  }
  throw InternalError("dtype_size: bad dtype");
}

int dtype_to_onnx(DType t) {
  switch (t) {
#define X(name, text, size, onnx) case DType::name: return onnx;
    DNNF_FOR_EACH_DTYPE(X)
#undef X
  }
  throw InternalError("dtype_to_onnx: bad dtype");
}

std::optional<DType> parse_dtype(std::string_view s) {
#define X(name, text, size, onnx) if (s == text) return DType::name;
  DNNF_FOR_EACH_DTYPE(X)
#undef X
  return std::nullopt;
}

std::optional<DType> dtype_from_onnx(int code) {
#define X(name, text, size, onnx) if (code == onnx) return DType::name;
  DNNF_FOR_EACH_DTYPE(X)
#undef X
  return std::nullopt;
}

bool is_float(DType t) { return is_half(t) || t == DType::F32 || t == DType::F64 || is_small_float(t); }
bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }
bool is_integer(DType t) { return !is_float(t) && t != DType::Bool; }
bool is_small_float(DType t) {
  return t == DType::F8E4M3FN || t == DType::F8E4M3FNUZ || t == DType::F8E5M2 || t == DType::F8E5M2FNUZ ||
         t == DType::F4E2M1 || t == DType::F8E8M0 || t == DType::F6E2M3 || t == DType::F6E3M2;
}
double small_float_value(DType t, uint8_t b) {
  int ebits = 4, mbits = 3, bias = 7;
  bool fnuz = false, has_inf = false;
  switch (t) {
    case DType::F8E4M3FN: break;
    case DType::F8E4M3FNUZ: bias = 8; fnuz = true; break;
    case DType::F8E5M2: ebits = 5; mbits = 2; bias = 15; has_inf = true; break;
    case DType::F8E5M2FNUZ: ebits = 5; mbits = 2; bias = 16; fnuz = true; break;
    case DType::F4E2M1: ebits = 2; mbits = 1; bias = 1; b &= 0xF; break;
    case DType::F6E2M3: ebits = 2; mbits = 3; bias = 1; b &= 0x3F; break;
    case DType::F6E3M2: ebits = 3; mbits = 2; bias = 3; b &= 0x3F; break;
    case DType::F8E8M0: return b == 0xFF ? NAN : std::ldexp(1.0, static_cast<int>(b) - 127);
    default: throw InternalError("small_float_value: not a small float type");
  }
  const int bits = 1 + ebits + mbits, e = (b >> mbits) & ((1 << ebits) - 1), m = b & ((1 << mbits) - 1);
  const bool neg = (b >> (bits - 1)) & 1;
  if (fnuz && b == 0x80) return NAN;
  const int emax = (1 << ebits) - 1;
  if (t == DType::F8E4M3FN && e == emax && m == (1 << mbits) - 1) return NAN;
  if (has_inf && e == emax) return m ? NAN : (neg ? -INFINITY : INFINITY);
  const double v = e == 0 ? std::ldexp(m, 1 - bias - mbits) : std::ldexp((1 << mbits) + m, e - bias - mbits);
  return neg ? -v : v;
}

bool is_narrow(DType t) { return t == DType::I4 || t == DType::U4 || t == DType::I2 || t == DType::U2; }
int narrow_value(DType t, uint8_t b) {
  switch (t) {
    case DType::I4: return ((b & 0xF) ^ 0x8) - 0x8;
    case DType::U4: return b & 0xF;
    case DType::I2: return ((b & 0x3) ^ 0x2) - 0x2;
    case DType::U2: return b & 0x3;
    default: throw InternalError("narrow_value: not a narrow type");
  }
}

bool TensorType::is_static() const {
  for (const Dim& d : shape)
    if (!d.is_static()) return false;
  return true;
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (const Dim& d : shape) {
    if (!d.is_static()) throw InternalError("numel of a symbolic shape " + str());
    n *= d.value;
  }
  return n;
}

std::vector<int64_t> TensorType::dims() const {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const Dim& d : shape) {
    if (!d.is_static()) throw InternalError("dims of a symbolic shape " + str());
    out.push_back(d.value);
  }
  return out;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += s[i].str();
  }
  return out + "]";
}

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape_str(shape); }

}  // namespace dnnf
