// Attributes and constant tensors.
#include "ir/attr.h"

#include <cstring>

#include "ir/errors.h"

namespace dnnf {

bool TensorData::same_as(const TensorData& o) const {
  if (type != o.type) return false;
  const size_t n = nbytes();
  return n == 0 || std::memcmp(data, o.data, n) == 0;
}

std::shared_ptr<TensorData> TensorData::copy_of(TensorType type, const void* bytes) {
  auto buf = std::make_shared<std::vector<uint8_t>>(type.nbytes());
  if (!buf->empty()) std::memcpy(buf->data(), bytes, buf->size());
  auto t = std::make_shared<TensorData>();
  t->type = std::move(type);
  t->data = buf->data();
  t->owner = std::shared_ptr<const void>(buf, buf->data());
  return t;
}

namespace {
template <typename Out>
std::vector<Out> read_as(const TensorData& t) {
  int64_t n = t.type.numel();
  std::vector<Out> out(static_cast<size_t>(n));
  const DType dt = t.type.dtype;
  for (int64_t i = 0; i < n; ++i) {
    if (is_narrow(dt) || is_small_float(dt)) {  // a byte an element, ml_dtypes' encodings
      const uint8_t b = t.as<uint8_t>()[i];
      out[i] = static_cast<Out>(is_narrow(dt) ? narrow_value(dt, b) : small_float_value(dt, b));
      continue;
    }
    switch (dt) {
      case DType::F16:
      case DType::BF16: throw Error("reading f16 or bf16 constants element-wise is not supported");
      case DType::F32: out[i] = static_cast<Out>(t.as<float>()[i]); break;
      case DType::F64: out[i] = static_cast<Out>(t.as<double>()[i]); break;
      case DType::I8: out[i] = static_cast<Out>(t.as<int8_t>()[i]); break;
      case DType::I16: out[i] = static_cast<Out>(t.as<int16_t>()[i]); break;
      case DType::I32: out[i] = static_cast<Out>(t.as<int32_t>()[i]); break;
      case DType::I64: out[i] = static_cast<Out>(t.as<int64_t>()[i]); break;
      case DType::U8: out[i] = static_cast<Out>(t.as<uint8_t>()[i]); break;
      case DType::U16: out[i] = static_cast<Out>(t.as<uint16_t>()[i]); break;
      case DType::U32: out[i] = static_cast<Out>(t.as<uint32_t>()[i]); break;
      case DType::U64: out[i] = static_cast<Out>(t.as<uint64_t>()[i]); break;
      case DType::Bool: out[i] = static_cast<Out>(t.as<uint8_t>()[i] != 0); break;
      default: throw InternalError(std::string("read_as: element type ") + dtype_name(dt));
    }
  }
  return out;
}
}  // namespace

std::vector<int64_t> TensorData::to_ints() const { return read_as<int64_t>(*this); }
std::vector<double> TensorData::to_doubles() const { return read_as<double>(*this); }

bool Attr::operator==(const Attr& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::Int: return i == o.i;
    case Kind::Float: return f == o.f || (f != f && o.f != o.f);
    case Kind::String: return s == o.s;
    case Kind::Ints: return ints == o.ints;
    case Kind::Floats: return floats == o.floats;
    case Kind::Strings: return strings == o.strings;
    case Kind::Tensor:
      return t->type == o.t->type && std::memcmp(t->data, o.t->data, t->nbytes()) == 0;
  }
  return false;
}

const char* attr_kind_name(Attr::Kind k) {
  switch (k) {
    case Attr::Kind::Int: return "int";
    case Attr::Kind::Float: return "float";
    case Attr::Kind::String: return "string";
    case Attr::Kind::Ints: return "ints";
    case Attr::Kind::Floats: return "floats";
    case Attr::Kind::Strings: return "strings";
    case Attr::Kind::Tensor: return "tensor";
  }
  return "?";
}

}  // namespace dnnf
