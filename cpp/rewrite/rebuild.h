// How every rewrite pass edits the ECG: it walks the source graph in topological order
// and rebuilds it into a fresh graph, copying each node or emitting a replacement. The
// graph stays topologically ordered and fully typed after every pass by construction;
// dead producers left behind are removed by eliminate_dead_code.
#pragma once
#include <vector>

#include "ir/graph.h"

namespace dnnf {

class Rebuilder {
 public:
  // Copies the inputs and constants of `src` (constants share their data).
  explicit Rebuilder(const Graph& src);

  const Graph& src() const { return src_; }
  Graph& dst() { return dst_; }
  // The value in the new graph that stands for `old` of the source graph.
  ValueId map(ValueId old) const;
  std::vector<ValueId> map(const std::vector<ValueId>& old) const;
  // Copies `n` with its inputs mapped; keeps its name and output names.
  std::vector<ValueId> copy(const Node& n);
  // Declares that `n`'s outputs are now `outs` (values of the new graph).
  void replace(const Node& n, const std::vector<ValueId>& outs);
  // Declares that source value `old` (an input or a constant) is now `now`, of the same type.
  void alias(ValueId old, ValueId now);
  // Emits a new node into the new graph (types inferred).
  ValueId emit(OpKind op, const std::vector<ValueId>& inputs, Attrs attrs = {},
               const std::string& name = "");
  // A new constant in the new graph.
  ValueId constant(TensorPtr data, const std::string& hint = "c");
  // Sets the new graph's outputs, keeping the source's output names.
  Graph finish();

 private:
  bool taken(const std::string& name) const;

  const Graph& src_;
  Graph dst_;
  std::vector<ValueId> map_;
  int fresh_ = 0;
};

// How many distinct nodes read each value (a node reading it twice counts once).
std::vector<int> reader_counts(const Graph& g);

// Runs `visit(rebuilder, node)` for every node; visit copies or replaces it.
template <typename Visit>
Graph rebuild(const Graph& src, Visit visit) {
  Rebuilder rb(src);
  for (const Node& n : src.nodes()) visit(rb, n);
  return rb.finish();
}

}  // namespace dnnf
