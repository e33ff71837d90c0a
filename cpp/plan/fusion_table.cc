// The mapping-type fusion table (paper §4.3, Table 3): for a producer of one mapping type
// followed by a consumer of another, the fused type and whether to fuse, reject or profile.
// Legality is this data, not code: the planner never looks at op names to decide.
#include <array>

#include "ir/errors.h"
#include "plan/plan.h"

namespace dnnf {

namespace {

constexpr MappingType O2O = MappingType::OneToOne;
constexpr MappingType REO = MappingType::Reorganize;
constexpr MappingType SHU = MappingType::Shuffle;
constexpr MappingType O2M = MappingType::OneToMany;
constexpr MappingType M2M = MappingType::ManyToMany;
constexpr Decision FUSE = Decision::Fuse;
constexpr Decision REJECT = Decision::Reject;
constexpr Decision PROFILE = Decision::Profile;

struct Cell {
  MappingType first, second;  // producer, consumer
  FusionRule rule;
};

// One row per cell. The fused type is the more complex of the two
// (One-to-One < Reorganize, Shuffle < One-to-Many, Many-to-Many; Reorganize + Shuffle is a
// Shuffle, a permutation of moved elements).
constexpr Cell kCells[] = {
    // One-to-One with anything fuses (green): the elementwise op applies to each element as
    // it is produced or loaded, without changing which elements are read.
    {O2O, O2O, {O2O, FUSE, "One-to-One with anything fuses"}},
    {O2O, REO, {REO, FUSE, "One-to-One with anything fuses"}},
    {O2O, SHU, {SHU, FUSE, "One-to-One with anything fuses"}},
    {O2O, O2M, {O2M, FUSE, "One-to-One with anything fuses"}},
    {O2O, M2M, {M2M, FUSE, "One-to-One with anything fuses"}},
    {REO, O2O, {REO, FUSE, "One-to-One with anything fuses"}},
    {SHU, O2O, {SHU, FUSE, "One-to-One with anything fuses"}},
    {O2M, O2O, {O2M, FUSE, "One-to-One with anything fuses"}},
    {M2M, O2O, {M2M, FUSE, "One-to-One with anything fuses"}},
    // Reorganize and Shuffle among themselves fuse (green): both are index maps with no
    // arithmetic on the data, and two index maps compose into one.
    {REO, REO, {REO, FUSE, "Reorganize/Shuffle among themselves compose their index maps"}},
    {REO, SHU, {SHU, FUSE, "Reorganize/Shuffle among themselves compose their index maps"}},
    {SHU, REO, {SHU, FUSE, "Reorganize/Shuffle among themselves compose their index maps"}},
    {SHU, SHU, {SHU, FUSE, "Reorganize/Shuffle among themselves compose their index maps"}},
    // One-to-Many followed by One-to-Many fuses (green): two broadcasts compose into one
    // index map and nothing is computed twice.
    {O2M, O2M, {O2M, FUSE, "One-to-Many followed by One-to-Many composes its index maps"}},
    // Reorganize or Shuffle with One-to-Many or Many-to-Many, either order, is yellow: the
    // composed index map adds arithmetic to every load or store, which may or may not cost
    // more than the intermediate tensor fusion removes.
    {REO, O2M, {O2M, PROFILE, "Reorganize/Shuffle with One-to-Many needs profiling"}},
    {SHU, O2M, {O2M, PROFILE, "Reorganize/Shuffle with One-to-Many needs profiling"}},
    {O2M, REO, {O2M, PROFILE, "Reorganize/Shuffle with One-to-Many needs profiling"}},
    {O2M, SHU, {O2M, PROFILE, "Reorganize/Shuffle with One-to-Many needs profiling"}},
    {REO, M2M, {M2M, PROFILE, "Reorganize/Shuffle with Many-to-Many needs profiling"}},
    {SHU, M2M, {M2M, PROFILE, "Reorganize/Shuffle with Many-to-Many needs profiling"}},
    {M2M, REO, {M2M, PROFILE, "Reorganize/Shuffle with Many-to-Many needs profiling"}},
    {M2M, SHU, {M2M, PROFILE, "Reorganize/Shuffle with Many-to-Many needs profiling"}},
    // Many-to-Many followed by One-to-Many is yellow: the broadcast reads each produced
    // element several times, so fusing may recompute it.
    {M2M, O2M, {M2M, PROFILE, "Many-to-Many followed by One-to-Many needs profiling"}},
    // Rejected (red): a Many-to-Many consumer reads each element of its input many times,
    // so a fused One-to-Many or Many-to-Many producer would be recomputed per read.
    {O2M, M2M, {M2M, REJECT, "One-to-Many followed by Many-to-Many is rejected"}},
    {M2M, M2M, {M2M, REJECT, "Many-to-Many followed by Many-to-Many is rejected"}},
};

constexpr int kTypes = 5;
static_assert(sizeof(kCells) / sizeof(kCells[0]) == kTypes * kTypes, "one row per cell");

using Table = std::array<std::array<const FusionRule*, kTypes>, kTypes>;

Table build_table() {
  Table t{};
  for (const Cell& c : kCells) {
    auto& slot = t[static_cast<int>(c.first)][static_cast<int>(c.second)];
    if (slot) throw InternalError("fusion table: a cell is listed twice");
    slot = &c.rule;
  }
  for (const auto& row : t)
    for (const FusionRule* r : row)
      if (!r) throw InternalError("fusion table: a cell is missing");
  return t;
}

}  // namespace

const char* decision_name(Decision d) {
  switch (d) {
    case Decision::Fuse: return "fuse";
    case Decision::Reject: return "reject";
    case Decision::Profile: return "profile";
  }
  return "?";
}

const char* decision_color(Decision d) {
  switch (d) {
    case Decision::Fuse: return "green";
    case Decision::Reject: return "red";
    case Decision::Profile: return "yellow";
  }
  return "?";
}

const FusionRule& fusion_rule(MappingType first, MappingType second) {
  static const Table table = build_table();
  return *table[static_cast<int>(first)][static_cast<int>(second)];
}

}  // namespace dnnf
