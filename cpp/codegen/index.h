// Symbolic index expressions for the intra-block optimisation of paper §4.4: a Reorganize or
// Shuffle operator inside a fused block emits no copy; its index map is composed into the
// consumer's loads. Indices are sums of terms coef * ((var / div) % mod) over loop
// variables with known ranges, so Reshape's linearise/delinearise pairs cancel exactly
// (((v / D) % M) * D + v % D == v % (D * M)) and the generator can tell a contiguous load
// from a broadcast or a gather. What the algebra cannot express stays an opaque C string.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dnnf::cg {

// A loop variable of the generated code: its C name and its range [0, range).
struct Var {
  std::string name;
  int64_t range = 1;
};

struct Term {
  int64_t coef = 0;
  int var = -1;
  int64_t div = 1;
  int64_t mod = 0;  // 0: no modulus
};

// c + sum(terms) + opaque. `opaque` (C code over the vars' names, int64 arithmetic) is set
// only for what the term algebra cannot express; `opaque_vars` lists the vars it reads.
struct IExpr {
  int64_t c = 0;
  std::vector<Term> terms;
  std::string opaque;
  std::vector<int> opaque_vars;

  static IExpr constant(int64_t v) { IExpr e; e.c = v; return e; }
  static IExpr var(int v) { IExpr e; e.terms.push_back({1, v, 1, 0}); return e; }
  bool affine() const { return opaque.empty(); }
  bool is_constant() const { return opaque.empty() && terms.empty(); }
  bool uses(int var) const;
};

// Variables live in one table per generated loop nest.
class VarTable {
 public:
  int add(std::string name, int64_t range);
  const Var& operator[](int i) const { return vars_.at(i); }
  int size() const { return static_cast<int>(vars_.size()); }

 private:
  std::vector<Var> vars_;
};

IExpr add(const IExpr& a, const IExpr& b, const VarTable& vt);
IExpr scale(const IExpr& a, int64_t k, const VarTable& vt);
IExpr floordiv(const IExpr& a, int64_t k, const VarTable& vt);  // a >= 0 assumed
IExpr mod(const IExpr& a, int64_t k, const VarTable& vt);       // a >= 0 assumed
// Wraps arbitrary C code (reading `vars`) as an index.
IExpr opaque(std::string code, std::vector<int> vars);
// Row-major flat offset of a multi-index in `shape`, and its inverse.
IExpr linearize(const std::vector<IExpr>& idx, const std::vector<int64_t>& shape,
                const VarTable& vt);
std::vector<IExpr> delinearize(const IExpr& flat, const std::vector<int64_t>& shape,
                               const VarTable& vt);
// Largest value the expression can take (affine only; opaque: -1 = unknown).
int64_t max_value(const IExpr& e, const VarTable& vt);
// C code (a `long` expression), target-neutral: integer min and max inside opaque parts
// (Pad's edge mode) are written @min(a, b) and @max(a, b); spell_index gives a renderer's
// names for them (std::min<long> in C++, min in OpenCL C).
std::string render(const IExpr& e, const VarTable& vt);
std::string spell_index(std::string rendered, const std::string& min_fn, const std::string& max_fn);

// How a load at `e` behaves along var `inner` (stepped by whole vectors). `aligned`: every
// vector starts at a multiple of its width (a divisor of kMaxVecWidth), so a term
// (inner / d) with d a multiple of kMaxVecWidth is the same in all lanes, and inner % m
// (m a multiple of it) runs on without wrapping: attention's [S, H*D] <- [H, S, D] reads
// are then whole vectors.
enum class Stride { Broadcast, Contiguous, Gather };
Stride stride_along(const IExpr& e, int inner, bool aligned = false);

}  // namespace dnnf::cg
