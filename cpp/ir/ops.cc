// The operator table (ops.def) as data.
#include "ir/ops.h"

#include <array>

#include "ir/errors.h"

namespace dnnf {

namespace {
constexpr std::array<OpInfo, kNumOps> kOps = {{
#define DNNF_OP(name, onnx, mapping, min_in, max_in, min_out, max_out, props) \
  {OpKind::name, #name, onnx, MappingType::mapping, min_in, max_in, min_out, max_out, props},
#include "ir/ops.def"
#undef DNNF_OP
}};
}  // namespace

const char* mapping_type_name(MappingType t) {
  switch (t) {
    case MappingType::OneToOne: return "One-to-One";
    case MappingType::Reorganize: return "Reorganize";
    case MappingType::Shuffle: return "Shuffle";
    case MappingType::OneToMany: return "One-to-Many";
    case MappingType::ManyToMany: return "Many-to-Many";
  }
  throw InternalError("mapping_type_name: bad mapping type");
}

std::optional<MappingType> parse_mapping_type(std::string_view s) {
  for (auto t : {MappingType::OneToOne, MappingType::Reorganize, MappingType::Shuffle,
                 MappingType::OneToMany, MappingType::ManyToMany})
    if (s == mapping_type_name(t)) return t;
  return std::nullopt;
}

const OpInfo& op_info(OpKind k) {
  auto i = static_cast<size_t>(k);
  if (i >= kOps.size()) throw InternalError("op_info: bad OpKind");
  return kOps[i];
}

std::optional<OpKind> op_from_name(std::string_view name) {
  for (const OpInfo& o : kOps)
    if (name == o.name) return o.kind;
  return std::nullopt;
}

std::optional<OpKind> op_from_onnx_name(std::string_view name) {
  for (const OpInfo& o : kOps)
    if (!o.internal() && name == o.onnx_name) return o.kind;
  return std::nullopt;
}

}  // namespace dnnf
