// Mathematical-property rewriting (paper §4.2, Table 3): associative, commutative and
// distributive identities as data, applied where they lower the FLOP count (cost.h).
// The pattern language (variables #c, $s, +a, labels @r) is described in pattern.h.
#include <algorithm>
#include <cctype>
#include <set>

#include "ir/errors.h"
#include "rewrite/cost.h"
#include "rewrite/passes.h"
#include "rewrite/pattern.h"
#include "rewrite/rebuild.h"

namespace dnnf {

// Every rule is value-preserving up to floating-point rounding (and overflow of an
// intermediate that the other form does not compute); integer tensors are never rewritten.
const std::vector<AlgebraRule>& algebra_rules() {
  static const std::vector<AlgebraRule> rules = {
      // clang-format off
      // name                     pattern                                        replacement                    math
      // Operators that compute nothing.
      {"mul_one",                 "Mul(a, 1)",                                   "a",                           "a * 1 = a"},
      {"div_one",                 "Div(a, 1)",                                   "a",                           "a / 1 = a"},
      {"add_zero",                "Add(a, 0)",                                   "a",                           "a + 0 = a"},
      {"sub_zero",                "Sub(a, 0)",                                   "a",                           "a - 0 = a"},
      {"pow_one",                 "Pow(a, 1)",                                   "a",                           "a ^ 1 = a"},
      {"neg_neg",                 "Neg(Neg(a))",                                 "a",                           "-(-a) = a"},
      {"recip_recip",             "Reciprocal(Reciprocal(a))",                   "a",                           "1/(1/a) = a"},
      {"abs_abs",                 "Abs(Abs(a))",                                 "Abs(a)",                      "||a|| = |a|"},
      {"abs_neg",                 "Abs(Neg(a))",                                 "Abs(a)",                      "|-a| = |a|"},
      {"relu_relu",               "Relu(Relu(a))",                               "Relu(a)",                     "relu is idempotent"},
      // Strength reduction: the same value from cheaper operators.
      {"pow_two",                 "Pow(a, 2)",                                   "Mul(a, a)",                   "a ^ 2 = a * a"},
      {"pow_minus_one",           "Pow(a, -1)",                                  "Reciprocal(a)",               "a ^ -1 = 1/a"},
      {"pow_half",                "Pow(+a, 0.5)",                                "Sqrt(a)",                     "a ^ 0.5 = sqrt(a) for a >= 0 (they differ at -0 and -inf)"},
      {"div_to_mul",              "Div(a, b)",                                   "Mul(a, Reciprocal(b))",       "a / b = a * (1/b): pays when b is constant or broadcast"},
      {"mul_recip_to_div",        "Mul(a, Reciprocal(b))",                       "Div(a, b)",                   "a * (1/b) = a / b"},
      {"div_recip",               "Div(a, Reciprocal(b))",                       "Mul(a, b)",                   "a / (1/b) = a * b"},
      {"sqrt_square",             "Sqrt(Mul(a, a))",                             "Abs(a)",                      "sqrt(a * a) = |a|"},
      // Signs.
      {"sub_neg",                 "Sub(a, Neg(b))",                              "Add(a, b)",                   "a - (-b) = a + b"},
      {"add_neg",                 "Add(a, Neg(b))",                              "Sub(a, b)",                   "a + (-b) = a - b"},
      {"neg_sub",                 "Neg(Sub(a, b))",                              "Sub(b, a)",                   "-(a - b) = b - a"},
      {"mul_neg_neg",             "Mul(Neg(a), Neg(b))",                         "Mul(a, b)",                   "(-a)(-b) = ab"},
      {"neg_mul_const",           "Neg(Mul(a, #c))",                             "Mul(a, Neg(#c))",             "-(a c) = a (-c)"},
      {"mul_neg_const",           "Mul(Neg(a), #c)",                             "Mul(a, Neg(#c))",             "(-a) c = a (-c)"},
      // Associativity: chains of scalings and offsets by constants become one (folded) constant.
      {"mul_mul_const",           "Mul(Mul(a, #c1), #c2)",                       "Mul(a, Mul(#c1, #c2))",       "(a c1) c2 = a (c1 c2)"},
      {"const_div_mul_const",     "Mul(Div(#c1, a), #c2)",                       "Div(Mul(#c1, #c2), a)",       "(c1 / a) c2 = (c1 c2) / a"},
      {"const_div_mul",           "Div(#c1, Mul(a, #c2))",                       "Div(Div(#c1, #c2), a)",       "c1 / (a c2) = (c1 / c2) / a"},
      {"add_add_const",           "Add(Add(a, #c1), #c2)",                       "Add(a, Add(#c1, #c2))",       "(a + c1) + c2 = a + (c1 + c2)"},
      {"add_sub_const",           "Add(Sub(a, #c1), #c2)",                       "Add(a, Sub(#c2, #c1))",       "(a - c1) + c2 = a + (c2 - c1)"},
      {"sub_add_const",           "Sub(Add(a, #c1), #c2)",                       "Add(a, Sub(#c1, #c2))",       "(a + c1) - c2 = a + (c1 - c2)"},
      {"sub_sub_const",           "Sub(Sub(a, #c1), #c2)",                       "Sub(a, Add(#c1, #c2))",       "(a - c1) - c2 = a - (c1 + c2)"},
      // Associativity: merging divisions, reciprocals and like functions.
      {"div_div",                 "Div(Div(a, b), c)",                           "Div(a, Mul(b, c))",           "(a / b) / c = a / (b c)"},
      {"div_of_div",              "Div(a, Div(b, c))",                           "Div(Mul(a, c), b)",           "a / (b / c) = (a c) / b"},
      {"recip_mul_recip",         "Mul(Reciprocal(a), Reciprocal(b))",           "Reciprocal(Mul(a, b))",       "(1/a)(1/b) = 1/(a b)"},
      {"recip_div",               "Div(Reciprocal(a), b)",                       "Reciprocal(Mul(a, b))",       "(1/a) / b = 1/(a b)"},
      {"abs_mul_abs",             "Mul(Abs(a), Abs(b))",                         "Abs(Mul(a, b))",              "|a| |b| = |a b|"},
      {"exp_mul_exp",             "Mul(Exp(a), Exp(b))",                         "Exp(Add(a, b))",              "e^a e^b = e^(a+b)"},
      {"exp_div_exp",             "Div(Exp(a), Exp(b))",                         "Exp(Sub(a, b))",              "e^a / e^b = e^(a-b)"},
      {"log_add_log",             "Add(Log(+a), Log(+b))",                       "Log(Mul(a, b))",              "log a + log b = log(a b) for a, b >= 0"},
      {"log_sub_log",             "Sub(Log(+a), Log(+b))",                       "Log(Div(a, b))",              "log a - log b = log(a / b) for a, b >= 0"},
      {"sqrt_mul_sqrt_self",      "Mul(Sqrt(+a), Sqrt(+a))",                     "a",                           "sqrt(a) sqrt(a) = a for a >= 0"},
      {"sqrt_mul_sqrt",           "Mul(Sqrt(+a), Sqrt(+b))",                     "Sqrt(Mul(a, b))",             "sqrt(a) sqrt(b) = sqrt(a b) for a, b >= 0"},
      {"sqrt_div_sqrt",           "Div(Sqrt(+a), Sqrt(+b))",                     "Sqrt(Div(a, b))",             "sqrt(a) / sqrt(b) = sqrt(a / b) for a, b >= 0"},
      // Distributivity: factor a common operand out of a sum.
      {"factor_mul_add",          "Add(Mul(a, b), Mul(a, c))",                   "Mul(a, Add(b, c))",           "a b + a c = a (b + c)"},
      {"factor_mul_sub",          "Sub(Mul(a, b), Mul(a, c))",                   "Mul(a, Sub(b, c))",           "a b - a c = a (b - c)"},
      {"factor_add_self",         "Add(a, Mul(a, b))",                           "Mul(a, Add(b, 1))",           "a + a b = a (b + 1)"},
      {"factor_div_add",          "Add(Div(a, c), Div(b, c))",                   "Div(Add(a, b), c)",           "a / c + b / c = (a + b) / c"},
      {"factor_div_sub",          "Sub(Div(a, c), Div(b, c))",                   "Div(Sub(a, b), c)",           "a / c - b / c = (a - b) / c"},
      {"factor_matmul_add_left",  "Add(MatMul(a, b), MatMul(a, c))",             "MatMul(a, Add(b, c))",        "A B + A C = A (B + C)"},
      {"factor_matmul_add_right", "Add(MatMul(a, c), MatMul(b, c))",             "MatMul(Add(a, b), c)",        "A C + B C = (A + B) C"},
      {"factor_matmul_sub_left",  "Sub(MatMul(a, b), MatMul(a, c))",             "MatMul(a, Sub(b, c))",        "A B - A C = A (B - C)"},
      {"factor_matmul_sub_right", "Sub(MatMul(a, c), MatMul(b, c))",             "MatMul(Sub(a, b), c)",        "A C - B C = (A - B) C"},
      // Reductions of sums (@r: same attributes and input types, so same axes and shapes).
      {"reduce_sum_add",          "Add(ReduceSum@r(a, x), ReduceSum@r(b, x))",   "ReduceSum@r(Add(a, b), x)",   "sum a + sum b = sum (a + b)"},
      {"reduce_sum_sub",          "Sub(ReduceSum@r(a, x), ReduceSum@r(b, x))",   "ReduceSum@r(Sub(a, b), x)",   "sum a - sum b = sum (a - b)"},
      {"reduce_mean_add",         "Add(ReduceMean@r(a, x), ReduceMean@r(b, x))", "ReduceMean@r(Add(a, b), x)",  "mean a + mean b = mean (a + b)"},
      {"reduce_mean_sub",         "Sub(ReduceMean@r(a, x), ReduceMean@r(b, x))", "ReduceMean@r(Sub(a, b), x)",  "mean a - mean b = mean (a - b)"},
      // Commutativity: move a scalar scale to the smaller side of a reduction or MatMul.
      {"reduce_sum_scale",        "ReduceSum@r(Mul(a, $s), x)",                  "Mul(ReduceSum@r(a, x), $s)",  "sum (a s) = (sum a) s"},
      {"reduce_mean_scale",       "ReduceMean@r(Mul(a, $s), x)",                 "Mul(ReduceMean@r(a, x), $s)", "mean (a s) = (mean a) s"},
      {"matmul_scale_out_left",   "MatMul(Mul(a, $s), b)",                       "Mul(MatMul(a, b), $s)",       "(A s) B = (A B) s"},
      {"matmul_scale_out_right",  "MatMul(a, Mul(b, $s))",                       "Mul(MatMul(a, b), $s)",       "A (B s) = (A B) s"},
      {"matmul_scale_in_left",    "Mul(MatMul(a, b), $s)",                       "MatMul(Mul(a, $s), b)",       "(A B) s = (A s) B"},
      {"matmul_scale_in_right",   "Mul(MatMul(a, b), $s)",                       "MatMul(a, Mul(b, $s))",       "(A B) s = A (B s)"},
      {"softmax_shift",           "Softmax@r(Add(a, $s))",                       "Softmax@r(a)",                "softmax(a + s) = softmax(a)"},
      // Activations exported as their definitions: one operator computes them more cheaply.
      {"mish",                    "Mul(a, Tanh(Softplus(a)))",                   "Mish(a)",                     "a tanh(softplus(a)) = mish(a): e^a and one division instead of exp, log1p and tanh"},
      // clang-format on
  };
  return rules;
}

namespace {

constexpr int kMaxSweeps = 16;

struct CompiledRule {
  const AlgebraRule* rule;
  Pattern pattern, replacement;
};

void collect(const Pattern& p, std::set<std::string>& vars, std::set<std::string>& labels) {
  if (p.kind == Pattern::Kind::Var) vars.insert(p.name);
  if (!p.label.empty()) labels.insert(p.label);
  for (const Pattern& a : p.args) collect(a, vars, labels);
}

// The rules parsed once, indexed by the op at the pattern's root.
const std::vector<std::vector<CompiledRule>>& rules_by_root() {
  static const std::vector<std::vector<CompiledRule>> table = [] {
    std::vector<std::vector<CompiledRule>> t(kNumOps);
    for (const AlgebraRule& r : algebra_rules()) {
      CompiledRule c{&r, parse_pattern(r.pattern), parse_pattern(r.replacement)};
      if (c.pattern.kind != Pattern::Kind::Op)
        throw InternalError(std::string("rule ") + r.name + ": a pattern must be an operator");
      std::set<std::string> pv, pl, rv, rl;
      collect(c.pattern, pv, pl);
      collect(c.replacement, rv, rl);
      for (const auto& v : rv)
        if (!pv.count(v)) throw InternalError(std::string("rule ") + r.name + ": '" + v + "' is not bound");
      for (const auto& l : rl)
        if (!pl.count(l)) throw InternalError(std::string("rule ") + r.name + ": label '" + l + "' is not bound");
      t[static_cast<size_t>(c.pattern.op)].push_back(std::move(c));
    }
    return t;
  }();
  return table;
}

struct Rewrite {
  const CompiledRule* rule = nullptr;
  Instance inst;
  int64_t saved_flops = 0;
  int saved_ops = 0;
};

// The rule that saves most at node `n`, if any saves.
std::optional<Rewrite> best_rewrite(const Graph& g, const Node& n, const std::vector<bool>& rewritten) {
  std::optional<Rewrite> best;
  for (const CompiledRule& r : rules_by_root()[static_cast<size_t>(n.op)]) {
    auto m = match_pattern(g, r.pattern, n);
    if (!m) continue;
    bool stale = false;  // an interior node was already replaced in this sweep
    for (NodeId id : m->nodes) stale |= id != n.id && rewritten[id];
    if (stale) continue;
    const TensorType& want = g.value(n.outputs[0]).type;
    auto inst = instantiate(r.replacement, *m, g, want.dtype);
    if (!inst || inst->scratch.value(inst->result).type != want) continue;
    int64_t old_flops = 0;
    for (NodeId id : m->nodes) old_flops += node_flops(g, g.node(id));
    int64_t saved = old_flops - inst->flops;
    int saved_ops = static_cast<int>(m->nodes.size()) - inst->ops;
    if (saved < 0 || (saved == 0 && saved_ops <= 0)) continue;
    if (best && (saved < best->saved_flops || (saved == best->saved_flops && saved_ops <= best->saved_ops)))
      continue;
    best = Rewrite{&r, std::move(*inst), saved, saved_ops};
  }
  return best;
}

std::string lower(const char* s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Copies the replacement's scratch nodes into the graph being built; the result takes the
// replaced value's name, new intermediates are named after it.
ValueId splice(Rebuilder& rb, const Node& root, const Instance& inst) {
  const Graph& s = inst.scratch;
  const Graph& src = rb.src();
  Graph& dst = rb.dst();
  const std::string& root_name = src.value(root.outputs[0]).name;
  auto fresh = [&](const std::string& base) {
    std::string nm = base;
    for (int i = 2; src.find_value(nm) != kNoValue || dst.find_value(nm) != kNoValue; ++i)
      nm = base + "." + std::to_string(i);
    return nm;
  };
  std::vector<ValueId> map(s.values().size(), kNoValue);
  for (const auto& [sv, gv] : inst.leaves) map[sv] = rb.map(gv);
  std::vector<bool> used(s.values().size(), false);  // folded-away literals are not copied
  used[inst.result] = true;
  for (const Node& sn : s.nodes())
    for (ValueId in : sn.inputs)
      if (in != kNoValue) used[in] = true;
  for (ValueId c : s.constants())
    if (map[c] == kNoValue && used[c])
      map[c] = dst.add_constant(c == inst.result ? root_name : fresh(root_name + ".c"), s.value(c).constant);
  for (const Node& sn : s.nodes()) {
    std::vector<ValueId> ins;
    for (ValueId in : sn.inputs) ins.push_back(in == kNoValue ? kNoValue : map[in]);
    bool last = sn.outputs[0] == inst.result;
    std::string nm = last ? root_name : fresh(root_name + "." + lower(sn.info().name));
    map[sn.outputs[0]] = dst.add_node(sn.op, ins, sn.attrs, 1, last ? root.name : nm, {nm})[0];
  }
  return map[inst.result];
}

}  // namespace

Graph apply_algebraic_rules(const Graph& g, std::vector<std::string>& fired) {
  Graph cur = eliminate_dead_code(g);  // dead readers would count as consumers
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    Rebuilder rb(cur);
    std::vector<bool> rewritten(cur.nodes().size(), false);
    bool changed = false;
    for (const Node& n : cur.nodes()) {
      auto rw = n.outputs.size() == 1 ? best_rewrite(cur, n, rewritten) : std::nullopt;
      if (!rw) {
        rb.copy(n);
        continue;
      }
      rb.replace(n, {splice(rb, n, rw->inst)});
      rewritten[n.id] = true;
      fired.push_back(rw->rule->rule->name);
      changed = true;
    }
    cur = eliminate_dead_code(rb.finish());
    if (!changed) break;
  }
  return cur;
}

Graph apply_algebraic_rules(const Graph& g) {
  std::vector<std::string> fired;
  return apply_algebraic_rules(g, fired);
}

}  // namespace dnnf
