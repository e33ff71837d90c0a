// Tensor types of the ECG: element type and shape. A dimension is either static (a value
// >= 0) or symbolic (a name such as "batch"), so dynamic batch/sequence sizes are
// representable; later stages specialize them (paper §3 works on static shapes).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dnnf {

// Element types. The text names (f32, i64, ...) are the canonical spelling everywhere.
#define DNNF_FOR_EACH_DTYPE(X) \
  X(F16, "f16", 2, 10)         \
  X(BF16, "bf16", 2, 16)       \
  X(F32, "f32", 4, 1)          \
  X(F64, "f64", 8, 11)         \
  X(I8, "i8", 1, 3)            \
  X(I16, "i16", 2, 5)          \
  X(I32, "i32", 4, 6)          \
  X(I64, "i64", 8, 7)          \
  X(U8, "u8", 1, 2)            \
  X(U16, "u16", 2, 4)          \
  X(U32, "u32", 4, 12)         \
  X(U64, "u64", 8, 13)         \
  X(Bool, "bool", 1, 9)         \
  X(I4, "i4", 1, 22)           \
  X(U4, "u4", 1, 21)           \
  X(I2, "i2", 1, 26)           \
  X(U2, "u2", 1, 25)           \
  X(F8E4M3FN, "f8e4m3fn", 1, 17) \
  X(F8E4M3FNUZ, "f8e4m3fnuz", 1, 18) \
  X(F8E5M2, "f8e5m2", 1, 19)   \
  X(F8E5M2FNUZ, "f8e5m2fnuz", 1, 20) \
  X(F4E2M1, "f4e2m1", 1, 23)   \
  X(F8E8M0, "f8e8m0", 1, 24)   \
  X(F6E2M3, "f6e2m3", 1, 27)   \
  X(F6E3M2, "f6e3m2", 1, 28)

enum class DType : uint8_t {
#define X(name, text, size, onnx) name,
  DNNF_FOR_EACH_DTYPE(X)
#undef X
};

const char* dtype_name(DType t);
size_t dtype_size(DType t);
std::optional<DType> parse_dtype(std::string_view name);
// ONNX TensorProto.DataType codes; used by Cast's `to` attribute.
int dtype_to_onnx(DType t);
std::optional<DType> dtype_from_onnx(int code);
bool is_float(DType t);
// f16 and bf16: stored in 16 bits, computed in float32 (compile's float16='f32'), never read
// element-wise by the core except through scalar_value.
bool is_half(DType t);
bool is_integer(DType t);  // signed or unsigned, not bool
// i4, u4, i2, u2: one element a byte, as ml_dtypes holds them (the value's low bits; a signed
// one is not sign-extended in its byte). Only Cast, QuantizeLinear, DequantizeLinear and the
// operators that move data take them; compile() computes them in i8 / u8
// (rewrite.narrow_to_wide), the reference with ml_dtypes.
bool is_narrow(DType t);
// The value of byte b as an element of narrow type t.
int narrow_value(DType t, uint8_t b);
// float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, and e8m0, MX scales: a power of two), float6
// (e2m3, e3m2) and float4 (e2m1): one element a byte (float6 and float4 in its low bits), as
// ml_dtypes holds them; like the narrow integers, only Cast, QuantizeLinear,
// DequantizeLinear and the data-moving operators take them, compile() computes them in
// float32 (values exactly representable, rounded where ONNX rounds), the reference with ml_dtypes.
bool is_small_float(DType t);
double small_float_value(DType t, uint8_t b);

struct Dim {
  int64_t value = 0;   // meaningful when symbol is empty
  std::string symbol;  // non-empty: a symbolic (dynamic) dimension

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: implicit, shapes read naturally as {1, 3, 224}
  static Dim sym(std::string name) { Dim d; d.symbol = std::move(name); return d; }
  bool is_static() const { return symbol.empty(); }
  bool operator==(const Dim& o) const { return symbol == o.symbol && (!is_static() || value == o.value); }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  std::string str() const { return is_static() ? std::to_string(value) : symbol; }
};

using Shape = std::vector<Dim>;

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  bool is_static() const;
  int64_t numel() const;   // requires is_static()
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  std::vector<int64_t> dims() const;  // requires is_static()
  std::string str() const;  // "f32[1,3,224,224]", "f32[batch,128]", scalar "f32[]"
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};

std::string shape_str(const Shape& s);

}  // namespace dnnf
