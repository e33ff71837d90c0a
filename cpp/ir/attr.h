// Node attributes and constant tensors of the ECG. Constants (weights) reference the
// user's memory through a shared owner instead of copying it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/types.h"

namespace dnnf {

// An immutable tensor value. `data` points into memory kept alive by `owner` (a NumPy
// array's reference in the bindings, or a byte vector for values the core computes).
struct TensorData {
  TensorType type;  // always static
  const void* data = nullptr;
  std::shared_ptr<const void> owner;

  size_t nbytes() const { return type.nbytes(); }
  template <typename T> const T* as() const { return static_cast<const T*>(data); }
  // Copies `bytes` into a new owned buffer.
  static std::shared_ptr<TensorData> copy_of(TensorType type, const void* bytes);
  // The same type and bytes (a constant repeated by an export or a rewrite).
  bool same_as(const TensorData& o) const;
  // Reads the elements as int64 (integer or bool dtypes) or double (any numeric dtype).
  std::vector<int64_t> to_ints() const;
  std::vector<double> to_doubles() const;
};
using TensorPtr = std::shared_ptr<const TensorData>;

struct Attr {
  enum class Kind : uint8_t { Int, Float, String, Ints, Floats, Strings, Tensor };
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  TensorPtr t;

  static Attr of_int(int64_t v) { Attr a; a.kind = Kind::Int; a.i = v; return a; }
  static Attr of_float(double v) { Attr a; a.kind = Kind::Float; a.f = v; return a; }
  static Attr of_string(std::string v) { Attr a; a.kind = Kind::String; a.s = std::move(v); return a; }
  static Attr of_ints(std::vector<int64_t> v) { Attr a; a.kind = Kind::Ints; a.ints = std::move(v); return a; }
  static Attr of_floats(std::vector<double> v) { Attr a; a.kind = Kind::Floats; a.floats = std::move(v); return a; }
  static Attr of_strings(std::vector<std::string> v) { Attr a; a.kind = Kind::Strings; a.strings = std::move(v); return a; }
  static Attr of_tensor(TensorPtr v) { Attr a; a.kind = Kind::Tensor; a.t = std::move(v); return a; }
  bool operator==(const Attr& o) const;
};

const char* attr_kind_name(Attr::Kind k);

// Sorted by name, so printing and comparison are canonical.
using Attrs = std::map<std::string, Attr>;

}  // namespace dnnf
