// The operator table, derived from ops.def: the OpKind enum and, per op, its ONNX name,
// mapping type (paper §3), arity and algebraic properties.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace dnnf {

// The paper's five mapping types, ordered from least to most complex where an order
// exists (Reorganize and Shuffle are equally complex; see fused_type in plan/).
enum class MappingType : uint8_t { OneToOne, Reorganize, Shuffle, OneToMany, ManyToMany };
const char* mapping_type_name(MappingType t);  // "One-to-One", ...
std::optional<MappingType> parse_mapping_type(std::string_view s);

// Algebraic properties (bit flags).
enum : uint32_t { kNone = 0, kComm = 1u << 0, kAssoc = 1u << 1, kDist = 1u << 2, kInternal = 1u << 3 };

enum class OpKind : uint16_t {
#define DNNF_OP(name, onnx, mapping, min_in, max_in, min_out, max_out, props) name,
#include "ir/ops.def"
#undef DNNF_OP
};

// Ops whose output keeps the input's linear element order (Reshape, Flatten, Squeeze,
// Unsqueeze): their index map is the identity on memory, so composing it costs nothing.
inline bool is_reshape_view(OpKind k) {
  return k == OpKind::Reshape || k == OpKind::Flatten || k == OpKind::Squeeze || k == OpKind::Unsqueeze;
}

struct OpInfo {
  OpKind kind;
  const char* name;       // ECG name (equal to the ONNX name for every ONNX op)
  const char* onnx_name;  // ONNX op_type in the default domain; "" for internal ops
  MappingType mapping;
  int min_inputs, max_inputs;    // max -1: variadic
  int min_outputs, max_outputs;  // max -1: variadic
  uint32_t properties;

  bool commutative() const { return properties & kComm; }
  bool associative() const { return properties & kAssoc; }
  bool distributive() const { return properties & kDist; }
  bool internal() const { return properties & kInternal; }
};

constexpr int kNumOps = 0
#define DNNF_OP(name, onnx, mapping, min_in, max_in, min_out, max_out, props) +1
#include "ir/ops.def"
#undef DNNF_OP
    ;

const OpInfo& op_info(OpKind k);
std::optional<OpKind> op_from_name(std::string_view name);       // ECG name
std::optional<OpKind> op_from_onnx_name(std::string_view name);  // ONNX op_type; never internal

}  // namespace dnnf
