// The profiling database that settles the yellow cells of the fusion table (paper §4.3):
// measured fused vs. unfused times per target and producer/consumer pair signature, and
// the analytic estimate used where no measurement exists.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/ops.h"

namespace dnnf {

// What a measurement is keyed by. `target` is the machine (see profile_target_key); the
// rest is the pair signature: the two ops, the mapping types the table looked at (a side
// that is a fused block has the block's fused type), and a shape bucket of the
// intermediate tensor (shape_bucket).
struct ProfileKey {
  std::string target;
  std::string producer_op, consumer_op;
  MappingType producer_type = MappingType::OneToOne, consumer_type = MappingType::OneToOne;
  std::string bucket;
  // The threads the code ran on: which of two kernels wins depends on it (one thread's
  // L2 and bandwidth against two threads' shares; 7 of 37 keys measured at 1 and 2 threads on
  // one Xeon decided differently). An entry with 0 (none recorded: written by hand, or before
  // entries had the field) applies at any thread count where none measured at it exists.
  int threads = 0;

  bool operator==(const ProfileKey& o) const;
};

// The version of what the code generator makes of a fused pair, stamped on every measurement
// written; bump it when fused blocks are generated differently (2: fused GEMM prologues, so a
// Transpose/Reshape producer no longer goes through scratch). Rows with another stamp are stale.
constexpr int kProfileGenerator = 2;

struct ProfileEntry {
  ProfileKey key;
  double fused_ms = 0, unfused_ms = 0;  // one fused kernel vs. the two kernels apart
  // Optional. noise_ms: how far apart two timings of the same code can be on this machine
  // (from the measurement's own spread); a difference within it is a tie, decided for
  // fusion (fewer passes), or for an expansion by the estimate. how: a free-text note on how
  // it was measured.
  double noise_ms = 0;
  std::string how;
  // The code generator whose output was measured (kProfileGenerator when it was written; 0 for
  // entries from before the stamp). A row measured on other generated code is stale: it is
  // kept in the file but settles nothing (find skips it; profile="auto" measures the pair anew).
  int generator = 0;
  std::string origin;  // the file it was read from (not stored in the file)
};

// The file is JSON lines, one measurement per line:
//   {"target": "cpu:<model>|avx2,fma", "producer": "Transpose", "consumer": "MatMul",
//    "producer_type": "Shuffle", "consumer_type": "Many-to-Many", "bucket": "2^16",
//    "threads": 2, "fused_ms": 1.2, "unfused_ms": 1.5, "noise_ms": 0.02, "how": "...",
//    "generator": 2}
// threads, noise_ms, how and generator are optional; other keys are allowed and ignored. Blank lines are
// skipped. A later line for the same key replaces an earlier one.
class ProfileDb {
 public:
  // Throws ModelFormatError naming the file and line for anything malformed, and for a
  // path that does not exist. An empty path is the empty database.
  static ProfileDb load(const std::string& path);
  // Several files in order; a later file's entry replaces an earlier one with the same key.
  static ProfileDb load(const std::vector<std::string>& paths);
  // Writes every entry, atomically (a temporary file renamed over the old one).
  void save(const std::string& path) const;

  void add(const ProfileEntry& e);  // replaces an entry with the same key
  // A current entry (kProfileGenerator) for k: measured at k.threads, else one recording no
  // thread count.
  const ProfileEntry* find(const ProfileKey& k) const;
  const ProfileEntry* find_stale(const ProfileKey& k) const;  // one measured on other generated code
  const std::vector<ProfileEntry>& entries() const { return entries_; }

 private:
  std::vector<ProfileEntry> entries_;
};

// The target part of the key: "cpu:<model name>|<ISA flags>" from /proc/cpuinfo, or
// "opencl:<device>" (no device is queried before the OpenCL runtime exists:
// "opencl:default").
std::string profile_target_key(const std::string& target);
// Power-of-two bucket of an element count: "2^k" with 2^k <= numel < 2^(k+1); "?" for
// symbolic sizes (numel < 0).
std::string shape_bucket(int64_t numel);

// The numbers the analytic estimate needs for one yellow pair (the planner computes them
// from the graph; see estimate_fusion for the formula).
struct PairCost {
  int64_t bytes = 0;           // bytes of the intermediate tensor(s) fusion removes (-1: symbolic)
  int64_t elements = 0;        // their element count
  int64_t reads = 1;           // how many times the fused kernel reads each of those elements
  int64_t index_ops = 0;       // integer ops per access for the composed index map
  int64_t producer_flops = 0;  // flops of the producer side, recomputed per extra read
};

// What an explanation adds after an entry's decision: " (how) [file]", each where known.
std::string entry_source(const ProfileEntry& e);

struct Settlement {
  bool fuse = false;
  std::string why;  // "profile: fused 1.200 ms < unfused 1.500 ms -> fuse", or the estimate
};

// Measured decision when the database has the exact key, the analytic estimate otherwise.
// A difference within the measured noise is a tie, decided for fusion (fewer passes over
// memory). Expansions, whose fused kernel does its GEMM a row at a time and is not free where
// the tensor stays in cache, decide their ties by the size estimate before asking this
// (dnnfusion_planner.cc fuse_expansions).
Settlement settle_yellow(const ProfileDb& db, const ProfileKey& key, const PairCost& cost);

}  // namespace dnnf
