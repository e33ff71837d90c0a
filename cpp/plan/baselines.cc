// Baseline planners (paper §5) without a search: no fusion, and the fixed fusion patterns
// of TFLite and ONNX Runtime. Also the graph index and reason book the baselines share.
#include "plan/baselines.h"

#include <algorithm>
#include <set>

#include "ir/errors.h"
#include "ir/mapping.h"

namespace dnnf {
namespace baseline {

GraphIndex::GraphIndex(const Graph& graph) : g(graph) {
  const size_t n = g.nodes().size();
  readers.resize(g.values().size());
  producers.resize(n);
  consumers.resize(n);
  is_output.assign(g.values().size(), 0);
  type.resize(n);
  for (ValueId v : g.outputs()) is_output[v] = 1;
  for (const Node& nd : g.nodes()) {
    type[nd.id] = node_mapping_type(g, nd);
    for (ValueId v : nd.inputs) {
      if (v == kNoValue) continue;
      if (readers[v].empty() || readers[v].back() != nd.id) readers[v].push_back(nd.id);
      NodeId p = g.value(v).producer;
      if (p < 0) continue;
      auto& ps = producers[nd.id];
      if (std::find(ps.begin(), ps.end(), p) == ps.end()) {
        ps.push_back(p);
        consumers[p].push_back(nd.id);
      }
    }
  }
}

std::vector<std::pair<NodeId, NodeId>> GraphIndex::edges() const {
  std::vector<std::pair<NodeId, NodeId>> out;
  for (const Node& c : g.nodes())
    for (NodeId p : producers[c.id]) out.push_back({p, c.id});
  return out;
}

int GraphIndex::kernel_args(const std::vector<NodeId>& nodes) const {
  std::set<NodeId> inside(nodes.begin(), nodes.end());
  std::set<ValueId> args;
  for (NodeId n : nodes) {
    for (ValueId v : node(n).inputs)
      if (v != kNoValue && !inside.count(g.value(v).producer)) args.insert(v);
    for (ValueId v : node(n).outputs) {
      bool out = is_output[v];
      for (NodeId r : readers[v]) out |= !inside.count(r);
      if (out) args.insert(v);
    }
  }
  return static_cast<int>(args.size());
}

void Reasons::add(NodeId p, NodeId c, bool fused, std::string why) {
  by_pair_.emplace(std::make_pair(p, c), Reason{p, c, fused, std::move(why)});
}

std::vector<Reason> Reasons::take() {
  std::vector<Reason> out;
  for (auto& [k, r] : by_pair_) out.push_back(std::move(r));
  by_pair_.clear();
  return out;
}

}  // namespace baseline

// ---- none ------------------------------------------------------------------------------
FusionPlan plan_none(const Graph& g, const PlanOptions&) {
  baseline::GraphIndex ix(g);
  std::vector<int> group_of(g.nodes().size());
  for (const Node& n : g.nodes()) group_of[n.id] = n.id;
  baseline::Reasons reasons;
  for (auto [p, c] : ix.edges())
    reasons.add(p, c, false, "none: no fusion, every operator is its own kernel");
  return finalize_plan(g, "none", group_of, {}, reasons.take());
}

// ---- patterns --------------------------------------------------------------------------
// Fixed fusion patterns, as the CPU paths of TFLite and ONNX Runtime apply them. A pattern
// is a sequence of steps; each step is a set of op kinds, a condition on the operands other
// than the one the previous step produced, and whether it may be skipped. A match is a
// chain in which every step reads the previous step's output; every intermediate must be
// read only inside the match (no graph output), as ORT's fusions require, which also makes
// every match convex (a side op, below, reads only the pattern's input and constants and
// feeds only the match, so it keeps it so). Matching goes in topological order; at each unmatched op the first
// pattern of the list that matches two or more ops wins; a match that breaks off keeps its
// longest prefix that ends after the last required step.
//
// Sources (ORT: onnxruntime/core/optimizer/*, "Graph optimizations" in the ORT docs;
// TFLite: the converter's fused_activation_function on CONV_2D, TRANSPOSE_CONV,
// FULLY_CONNECTED, ADD, SUB, MUL, DIV):
//  * Conv: ConvBNFusion, ConvMulFusion, ConvAddFusion fold BN / a constant scale / a
//    constant per-channel bias into the weights; ConvAddActivationFusion adds a same-shape
//    tensor (the residual "Z" input of FusedConv); ConvActivationFusion the activation.
//  * Gemm/MatMul: MatMulScaleFusion (a constant scale), MatMulAddFusion (bias -> Gemm),
//    GemmActivationFusion; TFLite FULLY_CONNECTED bias + activation. BN after a dense op
//    is folded by TFLite's converter.
//  * Decomposed LayerNormalization (LayerNormFusion) and RMS norm
//    (SimplifiedLayerNormFusion); decomposed erf GELU (GeluFusion, dividing or multiplying
//    by sqrt 2, with 0.5 applied last or to x on a side branch), tanh GELU (FastGeluFusion)
//    and x * sigmoid(a * x) (QuickGeluFusion, SiLU for a = 1): each becomes one op, so one
//    kernel. The trailing 0.5 of the GELUs is optional so the side-branch variant matches.
//  * SkipLayerNormFusion (Add + LayerNormalization), BiasGeluFusion (bias Add + Gelu),
//    ReluClipFusion (Relu + Clip).
//  * TFLite: elementwise ADD/SUB/MUL/DIV carry a fused RELU, RELU6 (Clip) or TANH.
// Not included: ORT's Attention and EmbedLayerNorm fusions, whose subgraphs are not
// chains, SkipLayerNorm's variant that also returns the sum, and the MatMul+Transpose
// prologue fusions (FusedMatMul).
namespace {

enum class Operands : uint8_t {
  Any,        // anything
  Weights,    // constants (BatchNormalization's parameters, Clip's bounds, axes)
  Bias,       // constants with at most one dimension above 1: a per-channel vector or scalar
  SameShape,  // a tensor of the output's shape, and the chain's value has it too
  Closed,     // constants, the pattern's input, values computed inside the match, or (if
              // the step lists side ops) a side op's value from the input and constants
};

struct Step {
  std::vector<OpKind> ops;
  Operands operands;
  bool optional;
  std::vector<OpKind> side = {};  // ops a Closed operand may come from as a side op
};

struct Pattern {
  const char* name;
  const char* source;
  std::vector<Step> steps;
};

using K = OpKind;
using O = Operands;
Step one(std::vector<OpKind> ops, Operands o) { return {std::move(ops), o, false}; }
Step opt(std::vector<OpKind> ops, Operands o) { return {std::move(ops), o, true}; }
// A required Closed step that also accepts a side op of the given kinds (0.5 * x).
Step with_side(std::vector<OpKind> ops, std::vector<OpKind> side) { return {std::move(ops), O::Closed, false, std::move(side)}; }

const std::vector<Pattern>& pattern_list() {
  static const std::vector<OpKind> act = {K::Relu, K::Clip, K::LeakyRelu, K::Sigmoid, K::Tanh,
                                          K::HardSwish, K::HardSigmoid, K::Gelu};
  static const std::vector<Pattern> kList = {
      {"LayerNorm", "ORT LayerNormFusion", {one({K::ReduceMean}, O::Any), one({K::Sub}, O::Closed), one({K::Pow}, O::Weights), one({K::ReduceMean}, O::Weights), one({K::Add}, O::Weights), one({K::Sqrt}, O::Any), one({K::Div}, O::Closed), one({K::Mul}, O::Weights), one({K::Add}, O::Weights)}},
      {"RMSNorm", "ORT SimplifiedLayerNormFusion", {one({K::Pow}, O::Weights), one({K::ReduceMean}, O::Weights), one({K::Add}, O::Weights), one({K::Sqrt}, O::Any), one({K::Div}, O::Closed), one({K::Mul}, O::Weights)}},
      {"GELU", "ORT GeluFusion", {one({K::Div, K::Mul}, O::Bias), one({K::Erf}, O::Any), one({K::Add}, O::Bias), with_side({K::Mul}, {K::Mul}), opt({K::Mul}, O::Bias)}},
      {"FastGelu", "ORT FastGeluFusion", {one({K::Pow}, O::Weights), one({K::Mul}, O::Bias), one({K::Add}, O::Closed), one({K::Mul}, O::Bias), one({K::Tanh}, O::Any), one({K::Add}, O::Bias), with_side({K::Mul}, {K::Mul}), opt({K::Mul}, O::Bias)}},
      {"QuickGelu", "ORT QuickGeluFusion", {one({K::Mul}, O::Bias), one({K::Sigmoid}, O::Any), one({K::Mul}, O::Closed)}},
      {"SiLU", "ORT QuickGeluFusion (alpha 1)", {one({K::Sigmoid}, O::Any), one({K::Mul}, O::Closed)}},
      {"Conv+BN+scale+bias+sum+activation", "ORT ConvBN/ConvMul/ConvAdd/ConvAddActivation/ConvActivationFusion, TFLite CONV_2D", {one({K::Conv, K::ConvTranspose, K::NhwcConv}, O::Any), opt({K::BatchNormalization}, O::Weights), opt({K::Mul}, O::Bias), opt({K::Add}, O::Bias), opt({K::Add}, O::SameShape), opt(act, O::Weights)}},
      {"Gemm+BN+scale+bias+activation", "ORT MatMulScale/MatMulAdd/GemmActivationFusion, TFLite FULLY_CONNECTED", {one({K::Gemm, K::MatMul}, O::Any), opt({K::BatchNormalization}, O::Weights), opt({K::Mul, K::Div}, O::Bias), opt({K::Add}, O::Bias), opt(act, O::Weights)}},
      {"SkipLayerNorm", "ORT SkipLayerNormFusion", {one({K::Add}, O::SameShape), one({K::LayerNormalization}, O::Weights)}},
      {"BiasGelu", "ORT BiasGeluFusion", {one({K::Add}, O::Bias), one({K::Gelu}, O::Any)}},
      {"Relu+Clip", "ORT ReluClipFusion", {one({K::Relu}, O::Any), one({K::Clip}, O::Weights)}},
      {"elementwise+activation", "TFLite ADD/SUB/MUL/DIV fused activation", {one({K::Add, K::Sub, K::Mul, K::Div}, O::Any), one({K::Relu, K::Clip, K::Tanh}, O::Weights)}},
  };
  return kList;
}

bool has_op_in(const std::vector<OpKind>& ops, OpKind k) { return std::find(ops.begin(), ops.end(), k) != ops.end(); }
bool has_op(const Step& s, OpKind k) { return has_op_in(s.ops, k); }

std::string sequence(const Pattern& p) {
  std::string s;
  for (const Step& st : p.steps) {
    std::string alt;
    for (OpKind k : st.ops) alt += (alt.empty() ? "" : "|") + std::string(op_info(k).name);
    if (st.ops.size() > 3) alt = "activation";
    s += (s.empty() ? "" : ", ") + alt + (st.optional ? "?" : "");
  }
  return "[" + s + "]";
}

class PatternMatcher {
 public:
  PatternMatcher(const Graph& g, const PlanOptions& opt) : ix_(g), opt_(opt) {
    group_of_.resize(g.nodes().size());
    match_of_.assign(g.nodes().size(), nullptr);
    for (const Node& n : g.nodes()) group_of_[n.id] = n.id;
  }

  FusionPlan run() {
    for (const Node& n : ix_.g.nodes()) {
      if (match_of_[n.id]) continue;
      for (const Pattern& p : pattern_list()) {
        std::vector<NodeId> m = match_at(n.id, p);
        if (m.size() < 2) continue;
        for (NodeId x : m) {
          group_of_[x] = n.id;
          match_of_[x] = &p;
        }
        break;
      }
    }
    for (auto [p, c] : ix_.edges()) {
      if (group_of_[p] == group_of_[c]) {
        const Pattern& pat = *match_of_[p];
        reasons_.add(p, c, true, std::string("patterns: ") + pat.name + " " + sequence(pat) + " (" +
                                     pat.source + ") covers " + op(p) + " -> " + op(c));
      } else {
        reasons_.add(p, c, false, "patterns: " + why_not(p, c));
      }
    }
    return finalize_plan(ix_.g, "patterns", group_of_, {}, reasons_.take());
  }

 private:
  std::string op(NodeId n) const { return ix_.node(n).info().name; }

  // Whether node n fits step s, given the chain value it reads, the pattern's input and the
  // match so far. A Closed operand computed outside the match by a side op of a kind the
  // step allows, reading only the pattern's input and constants, for n alone (ORT's GELU
  // variants compute 0.5*x so), is accepted and the side op is appended to `sides`.
  bool operands_ok(const Step& s, NodeId n, ValueId chain, ValueId pattern_input,
                   const std::vector<NodeId>& match, std::vector<NodeId>* sides) const {
    const Graph& g = ix_.g;
    const Node& nd = g.node(n);
    const TensorType& out = g.value(nd.outputs[0]).type;
    if (s.operands == O::SameShape && g.value(chain).type.shape != out.shape) return false;
    for (ValueId v : nd.inputs) {
      if (v == kNoValue || v == chain) continue;
      const Value& val = g.value(v);
      switch (s.operands) {
        case O::Any: break;
        case O::Weights:
          if (!val.constant) return false;
          break;
        case O::Bias: {
          if (!val.constant) return false;
          int wide = 0;
          for (const Dim& d : val.type.shape) wide += !d.is_static() || d.value > 1;
          if (wide > 1) return false;
          break;
        }
        case O::SameShape:
          if (val.type.shape != out.shape) return false;
          break;
        case O::Closed:
          if (val.constant || v == pattern_input ||
              std::find(match.begin(), match.end(), val.producer) != match.end())
            break;
          if (val.producer < 0 || !has_op_in(s.side, g.node(val.producer).op) ||
              !is_side(val.producer, n, pattern_input))
            return false;
          sides->push_back(val.producer);
          break;
      }
    }
    return true;
  }

  // An unmatched single-output op reading only the pattern's input and constants, whose
  // output only `reader` reads.
  bool is_side(NodeId side, NodeId reader, ValueId pattern_input) const {
    if (side < 0 || match_of_[side]) return false;
    const Node& sn = ix_.node(side);
    if (sn.outputs.size() != 1 || ix_.is_output[sn.outputs[0]]) return false;
    if (ix_.readers[sn.outputs[0]] != std::vector<NodeId>{reader}) return false;
    for (ValueId v : sn.inputs)
      if (v != kNoValue && v != pattern_input && !ix_.g.value(v).constant) return false;
    return true;
  }

  // The longest valid match of `p` starting at `start` (empty if none): the chain's ops in
  // order, each followed by the side ops its step took in.
  std::vector<NodeId> match_at(NodeId start, const Pattern& p) const {
    const Graph& g = ix_.g;
    const Node& s0 = g.node(start);
    if (!has_op(p.steps[0], s0.op) || s0.inputs.empty() || s0.inputs[0] == kNoValue ||
        s0.outputs.empty())
      return {};
    const ValueId input = s0.inputs[0];
    std::vector<NodeId> sides;
    if (!operands_ok(p.steps[0], start, input, input, {}, &sides)) return {};
    std::vector<NodeId> m = {start};           // the chain
    std::vector<size_t> step_of = {0};         // per chain op: its step
    std::vector<std::vector<NodeId>> side_of = {sides};  // per chain op: its side ops
    for (size_t s = 1; s < p.steps.size(); ++s) {
      const Step& st = p.steps[s];
      ValueId chain = g.node(m.back()).outputs[0];
      bool found = false;
      for (NodeId r : ix_.readers[chain]) {
        sides.clear();
        if (match_of_[r] || !has_op(st, g.node(r).op) || g.node(r).outputs.empty() ||
            !operands_ok(st, r, chain, input, m, &sides))
          continue;
        m.push_back(r);
        step_of.push_back(s);
        side_of.push_back(sides);
        found = true;
        break;
      }
      if (!found && !st.optional) break;
    }
    // Longest prefix that is complete, closed and within the kernel-argument limit.
    for (size_t k = m.size(); k >= 2; --k) {
      bool complete = true;
      for (size_t s = step_of[k - 1] + 1; s < p.steps.size(); ++s) complete &= p.steps[s].optional;
      if (!complete) continue;
      std::vector<NodeId> block;
      for (size_t i = 0; i < k; ++i) {
        block.push_back(m[i]);
        block.insert(block.end(), side_of[i].begin(), side_of[i].end());
      }
      bool closed = true;
      for (size_t i = 0; i + 1 < k && closed; ++i)
        for (ValueId v : g.node(m[i]).outputs) {
          closed &= !ix_.is_output[v];
          for (NodeId r : ix_.readers[v])
            closed &= std::find(block.begin(), block.end(), r) != block.end();
        }
      if (!closed) continue;
      if (opt_.max_kernel_args > 0 && ix_.kernel_args(block) > opt_.max_kernel_args) continue;
      return block;
    }
    return {};
  }

  // Why the edge p -> c is not inside a match: the first pattern that has a step for p's
  // op followed (possibly after optional steps) by one for c's op, and what stopped it.
  std::string why_not(NodeId p, NodeId c) const {
    const Graph& g = ix_.g;
    for (const Pattern& pat : pattern_list())
      for (size_t i = 0; i < pat.steps.size(); ++i) {
        if (!has_op(pat.steps[i], g.node(p).op)) continue;
        for (size_t j = i + 1; j < pat.steps.size(); ++j) {
          if (has_op(pat.steps[j], g.node(c).op)) {
            std::string head = std::string(pat.name) + " " + sequence(pat) + " has " + op(p) + " -> " +
                               op(c) + ", but ";
            if (match_of_[c] && group_of_[c] != group_of_[p])
              return head + ix_.name(c) + " already belongs to a " + match_of_[c]->name + " match";
            if (match_of_[p] && match_of_[p] != &pat)
              return head + ix_.name(p) + " already belongs to a " + match_of_[p]->name + " match";
            for (ValueId v : g.node(p).outputs) {
              if (ix_.is_output[v] && ix_.readers[v].size() > 0)
                return head + "%" + g.value(v).name + " is a graph output";
              if (ix_.readers[v].size() > 1)
                return head + "%" + g.value(v).name + " is also read outside the chain";
            }
            return head + "the operands or the rest of the chain do not fit it" +
                   (opt_.max_kernel_args > 0 ? " (or the kernel-argument limit)" : "");
          }
          if (!pat.steps[j].optional) break;
        }
      }
    return "no pattern in the list has " + op(p) + " followed by " + op(c) + " -> separate kernels";
  }

  baseline::GraphIndex ix_;
  const PlanOptions& opt_;
  std::vector<int> group_of_;
  std::vector<const Pattern*> match_of_;
  baseline::Reasons reasons_;
};

}  // namespace

FusionPlan plan_patterns(const Graph& g, const PlanOptions& opt) { return PatternMatcher(g, opt).run(); }

}  // namespace dnnf
