// Fusion plans (paper §4.3): the shared back half of every planner. finalize_plan turns a
// node->group assignment into ordered, checked blocks with statistics; plans print as JSON
// and Graphviz; plan_fusion dispatches to the chosen planner.
#include "plan/plan.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>

#include "ir/errors.h"
#include "ir/mapping.h"
#include "plan/baselines.h"
#include "plan/json.h"

namespace dnnf {

namespace {

constexpr int kOpenClMaxKernelArgs = 128;  // CL_DEVICE_MAX_PARAMETER_SIZE / pointer, typical

// The block graph of a node->group assignment: successor lists over group - lo (lo the
// smallest label; duplicates kept, the walk below skips them).
struct BlockGraph {
  int lo = 0;
  std::vector<std::vector<int>> succ;
};

BlockGraph block_graph(const Graph& g, const std::vector<int>& group_of) {
  BlockGraph bg;
  if (group_of.empty()) return bg;
  const auto [mn, mx] = std::minmax_element(group_of.begin(), group_of.end());
  bg.lo = *mn;
  bg.succ.resize(static_cast<size_t>(*mx - *mn) + 1);
  for (const Node& c : g.nodes())
    for (ValueId v : c.inputs) {
      if (v == kNoValue) continue;
      NodeId p = g.value(v).producer;
      if (p >= 0 && group_of[p] != group_of[c.id]) bg.succ[group_of[p] - bg.lo].push_back(group_of[c.id] - bg.lo);
    }
  return bg;
}

// Whether some path leaves block `from` and reaches block `to` through another block.
// Reachability is between blocks, not nodes: a block runs as one unit once all its inputs
// exist, so a path that enters block C at one node and leaves it at another, unrelated
// node still orders `from` before C before `to`. (Vectors, not maps of sets: the planner
// asks this for every join it tries, and MobileBERT's plan took 0.7 s with maps.)
bool path_through_other(const BlockGraph& bg, int from, int to) {
  const int n = static_cast<int>(bg.succ.size());
  from -= bg.lo;
  to -= bg.lo;
  if (from < 0 || from >= n) return false;
  std::vector<char> seen(static_cast<size_t>(n), 0);
  std::vector<int> stack;
  for (int s : bg.succ[from])
    if (s != to && !seen[s]) {
      seen[s] = 1;
      stack.push_back(s);
    }
  while (!stack.empty()) {
    int x = stack.back();
    stack.pop_back();
    for (int s : bg.succ[x]) {
      if (s == to) return true;
      if (s != from && !seen[s]) {
        seen[s] = 1;
        stack.push_back(s);
      }
    }
  }
  return false;
}

// DOT string literal: quotes and backslashes escaped, newlines as \n line breaks.
std::string dot_str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out + "\"";
}

const char* type_color(MappingType t) {
  switch (t) {
    case MappingType::OneToOne: return "#d9f0d3";
    case MappingType::Reorganize: return "#deebf7";
    case MappingType::Shuffle: return "#c6dbef";
    case MappingType::OneToMany: return "#fee6ce";
    case MappingType::ManyToMany: return "#fcbba1";
  }
  return "white";
}

}  // namespace

bool written_apart(const Graph& g, ValueId v) {
  if (v == kNoValue) return false;
  const NodeId p = g.value(v).producer;
  if (p < 0) return false;
  const Node& n = g.node(p);
  return n.op == OpKind::MaxPool && n.outputs.size() > 1 && n.outputs[1] == v;
}

bool would_create_cycle(const Graph& g, const std::vector<int>& group_of, int a, int b) {
  if (a == b) return false;
  const BlockGraph bg = block_graph(g, group_of);
  return path_through_other(bg, a, b) || path_through_other(bg, b, a);
}

FusionPlan finalize_plan(const Graph& g, std::string planner, const std::vector<int>& group_of,
                         const std::vector<NodeId>& seeds, std::vector<Reason> reasons) {
  const auto& nodes = g.nodes();
  const size_t n = nodes.size();
  if (group_of.size() != n)
    throw InternalError("plan '" + planner + "': " + std::to_string(group_of.size()) +
                        " group labels for " + std::to_string(n) + " nodes");
  // Dense group indices in order of each group's first node.
  std::map<int, int> dense;
  std::vector<std::vector<NodeId>> members;
  std::vector<int> grp(n);
  for (size_t i = 0; i < n; ++i) {
    if (group_of[i] < 0)
      throw InternalError("plan '" + planner + "': node '" + nodes[i].name + "' is in no block");
    auto [it, fresh] = dense.emplace(group_of[i], static_cast<int>(members.size()));
    if (fresh) members.emplace_back();
    members[it->second].push_back(static_cast<NodeId>(i));
    grp[i] = it->second;
  }
  const int nb = static_cast<int>(members.size());

  // Block graph, then a topological order (Kahn; ties by first node, so plans are stable).
  std::vector<std::set<int>> succ(nb);
  std::vector<int> indeg(nb, 0);
  for (const Node& c : nodes)
    for (ValueId v : c.inputs) {
      if (v == kNoValue) continue;
      NodeId p = g.value(v).producer;
      if (p >= 0 && grp[p] != grp[c.id] && succ[grp[p]].insert(grp[c.id]).second) ++indeg[grp[c.id]];
    }
  std::priority_queue<std::pair<NodeId, int>, std::vector<std::pair<NodeId, int>>, std::greater<>> ready;
  for (int b = 0; b < nb; ++b)
    if (indeg[b] == 0) ready.push({members[b].front(), b});
  std::vector<int> order;
  while (!ready.empty()) {
    int b = ready.top().second;
    ready.pop();
    order.push_back(b);
    for (int s : succ[b])
      if (--indeg[s] == 0) ready.push({members[s].front(), s});
  }
  if (static_cast<int>(order.size()) != nb) {
    std::string names;
    for (int b = 0; b < nb; ++b)
      if (indeg[b] > 0) names += (names.empty() ? "" : ", ") + nodes[members[b].front()].name;
    throw InternalError("plan '" + planner + "': blocks form a cycle (blocks of " + names +
                        "): a block is not convex");
  }

  FusionPlan p;
  p.planner = std::move(planner);
  p.block_of.assign(n, -1);
  std::vector<int> new_id(nb);
  for (int i = 0; i < nb; ++i) new_id[order[i]] = i;
  for (size_t i = 0; i < n; ++i) p.block_of[i] = new_id[grp[i]];

  // Which values are read outside their producer's block, and which are read at all.
  std::vector<char> read_outside(g.values().size(), 0), read(g.values().size(), 0);
  for (const Node& c : nodes)
    for (ValueId v : c.inputs) {
      if (v == kNoValue) continue;
      read[v] = 1;
      NodeId prod = g.value(v).producer;
      if (prod >= 0 && p.block_of[prod] != p.block_of[c.id]) read_outside[v] = 1;
    }

  p.blocks.resize(nb);
  for (int i = 0; i < nb; ++i) {
    Block& b = p.blocks[i];
    b.id = i;
    b.nodes = members[order[i]];
    b.fused_type = node_mapping_type(g, nodes[b.nodes.front()]);
    for (size_t k = 1; k < b.nodes.size(); ++k)
      b.fused_type = fusion_rule(b.fused_type, node_mapping_type(g, nodes[b.nodes[k]])).fused;
    std::set<ValueId> seen;
    for (NodeId id : b.nodes) {
      for (ValueId v : nodes[id].inputs) {
        if (v == kNoValue) continue;
        NodeId prod = g.value(v).producer;
        if ((prod < 0 || p.block_of[prod] != i) && seen.insert(v).second) b.inputs.push_back(v);
      }
      for (ValueId v : nodes[id].outputs)
        if (g.is_graph_output(v) || read_outside[v]) b.outputs.push_back(v);
    }
  }
  for (NodeId s : seeds) {
    if (s < 0 || static_cast<size_t>(s) >= n)
      throw InternalError("plan '" + p.planner + "': seed " + std::to_string(s) + " is not a node");
    Block& b = p.blocks[p.block_of[s]];
    if (b.seed < 0) b.seed = s;  // a block merged from several (horizontal) keeps the first
  }

  p.stats.operators_before = static_cast<int64_t>(n);
  p.stats.kernels_after = nb;
  for (const Value& v : g.values()) {
    if (!g.is_removable(v.id) || !read[v.id] || read_outside[v.id]) continue;
    ++p.stats.intermediates_removed;
    if (v.type.is_static()) p.stats.intermediate_bytes_removed += static_cast<int64_t>(v.type.nbytes());
  }
  p.reasons = std::move(reasons);
  return p;
}

std::string plan_to_json(const Graph& g, const FusionPlan& p) {
  const auto& nodes = g.nodes();
  std::string s = "{\n  \"planner\": " + json_quote(p.planner) + ",\n  \"graph\": " + json_quote(g.name()) +
                  ",\n  \"stats\": {\"operators_before\": " + std::to_string(p.stats.operators_before) +
                  ", \"kernels_after\": " + std::to_string(p.stats.kernels_after) +
                  ", \"intermediates_removed\": " + std::to_string(p.stats.intermediates_removed) +
                  ", \"intermediate_bytes_removed\": " + std::to_string(p.stats.intermediate_bytes_removed) +
                  "},\n  \"blocks\": [";
  auto names = [&](const std::vector<ValueId>& vs) {
    std::string out = "[";
    for (size_t i = 0; i < vs.size(); ++i) out += (i ? ", " : "") + json_quote(g.value(vs[i]).name);
    return out + "]";
  };
  for (size_t bi = 0; bi < p.blocks.size(); ++bi) {
    const Block& b = p.blocks[bi];
    s += std::string(bi ? "," : "") + "\n    {\"id\": " + std::to_string(b.id) +
         ", \"seed\": " + (b.seed < 0 ? std::string("null") : json_quote(nodes[b.seed].name)) +
         ", \"fused_type\": " + json_quote(mapping_type_name(b.fused_type)) + ", \"nodes\": [";
    for (size_t k = 0; k < b.nodes.size(); ++k) {
      const Node& nd = nodes[b.nodes[k]];
      s += std::string(k ? ", " : "") + "{\"name\": " + json_quote(nd.name) + ", \"op\": " +
           json_quote(nd.info().name) + ", \"mapping_type\": " +
           json_quote(mapping_type_name(node_mapping_type(g, nd))) + "}";
    }
    s += "], \"inputs\": " + names(b.inputs) + ", \"outputs\": " + names(b.outputs) + "}";
  }
  s += "\n  ],\n  \"reasons\": [";
  for (size_t i = 0; i < p.reasons.size(); ++i) {
    const Reason& r = p.reasons[i];
    s += std::string(i ? "," : "") + "\n    {\"producer\": " + json_quote(nodes[r.producer].name) +
         ", \"consumer\": " + json_quote(nodes[r.consumer].name) +
         ", \"fused\": " + (r.fused ? "true" : "false") + ", \"why\": " + json_quote(r.why) + "}";
  }
  s += "\n  ]\n}\n";
  return s;
}

std::string plan_to_dot(const Graph& g, const FusionPlan& p) {
  const auto& nodes = g.nodes();
  std::string s = "digraph " + dot_str(g.name() + " (" + p.planner + ")") +
                  " {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, "
                  "fontname=\"Helvetica\"];\n";
  for (const Block& b : p.blocks) {
    std::string label = "block " + std::to_string(b.id) + ": " + mapping_type_name(b.fused_type);
    s += "  subgraph cluster_" + std::to_string(b.id) + " {\n    label=" + dot_str(label) +
         ";\n    style=filled;\n    color=\"#999999\";\n    fillcolor=" +
         dot_str(type_color(b.fused_type)) + ";\n";
    for (NodeId id : b.nodes) {
      const Node& nd = nodes[id];
      s += "    n" + std::to_string(id) + " [label=" + dot_str(nd.name + "\n" + nd.info().name) +
           (id == b.seed ? ", penwidth=2" : "") + "];\n";
    }
    s += "  }\n";
  }
  std::set<std::pair<NodeId, NodeId>> edges;
  for (const Node& c : nodes)
    for (ValueId v : c.inputs) {
      if (v == kNoValue) continue;
      NodeId prod = g.value(v).producer;
      if (prod >= 0 && edges.insert({prod, c.id}).second)
        s += "  n" + std::to_string(prod) + " -> n" + std::to_string(c.id) +
             (p.block_of[prod] != p.block_of[c.id] ? " [style=dashed]" : "") + ";\n";
    }
  s += "}\n";
  return s;
}

FusionPlan plan_fusion(const Graph& g, const PlanOptions& options) {
  PlanOptions opt = options;
  if (opt.target != "cpu" && opt.target != "opencl")
    throw Error("unknown target '" + opt.target + "'; expected cpu or opencl");
  if (opt.max_kernel_args < 0)
    throw Error("max_kernel_args must be >= 0 (0: no limit), got " + std::to_string(opt.max_kernel_args));
  if (opt.target == "opencl" && opt.max_kernel_args == 0) opt.max_kernel_args = kOpenClMaxKernelArgs;
  using Planner = FusionPlan (*)(const Graph&, const PlanOptions&);
  static const std::pair<const char*, Planner> kPlanners[] = {
      {"dnnfusion", plan_dnnfusion}, {"none", plan_none}, {"patterns", plan_patterns},
      {"tvm", plan_tvm},             {"dp", plan_dp},
  };
  for (const auto& [name, fn] : kPlanners)
    if (opt.planner == name) return fn(g, opt);
  throw Error("unknown planner '" + opt.planner + "'; expected dnnfusion, none, patterns, tvm or dp");
}

}  // namespace dnnf
