// Index algebra for composed index maps (paper §4.4, intra-block optimisation); see index.h.
#include "codegen/index.h"

#include <algorithm>
#include <stdexcept>

#include "ir/errors.h"
#include "target/isa.h"

namespace dnnf::cg {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Number of distinct values of (v / div) % mod.
int64_t atom_range(const Term& t, const VarTable& vt) {
  int64_t r = ceil_div(vt[t.var].range, t.div);
  return t.mod ? std::min(r, t.mod) : r;
}

// Canonical form: drop terms that are always 0, drop moduli that never wrap, merge
// ((v / d) % m) * k + ((v / (d*m)) % m2) * k*m into ((v / d) % (m*m2)) * k.
void simplify(IExpr& e, const VarTable& vt) {
  std::vector<Term> ts;
  for (Term t : e.terms) {
    if (t.coef == 0) continue;
    int64_t r = ceil_div(vt[t.var].range, t.div);
    if (r <= 1 || t.mod == 1) continue;  // always 0
    if (t.mod && t.mod >= r) t.mod = 0;
    ts.push_back(t);
  }
  bool changed = true;
  while (changed) {
    changed = false;
    std::sort(ts.begin(), ts.end(), [](const Term& a, const Term& b) {
      return a.var != b.var ? a.var < b.var : a.div != b.div ? a.div < b.div : a.mod < b.mod;
    });
    for (size_t i = 0; i < ts.size() && !changed; ++i) {
      for (size_t j = 0; j < ts.size() && !changed; ++j) {
        if (i == j || ts[i].var != ts[j].var) continue;
        Term& a = ts[i];
        const Term& b = ts[j];
        if (a.div == b.div && a.mod == b.mod) {
          a.coef += b.coef;
        } else if (a.mod != 0 && b.div == a.div * a.mod && b.coef == a.coef * a.mod) {
          a.mod = b.mod == 0 ? 0 : a.mod * b.mod;
          int64_t r = ceil_div(vt[a.var].range, a.div);
          if (a.mod && a.mod >= r) a.mod = 0;
        } else {
          continue;
        }
        ts.erase(ts.begin() + static_cast<long>(j));
        changed = true;
      }
    }
    ts.erase(std::remove_if(ts.begin(), ts.end(), [](const Term& t) { return t.coef == 0; }),
             ts.end());
  }
  e.terms = std::move(ts);
}

void merge_vars(std::vector<int>& into, const std::vector<int>& from) {
  for (int v : from)
    if (std::find(into.begin(), into.end(), v) == into.end()) into.push_back(v);
}

std::vector<int> vars_of(const IExpr& e) {
  std::vector<int> vs = e.opaque_vars;
  for (const Term& t : e.terms) merge_vars(vs, {t.var});
  return vs;
}

IExpr as_opaque(const IExpr& e, const std::string& code, const VarTable& vt) {
  (void)vt;
  return opaque(code, vars_of(e));
}

// Splits e into high terms (coef a multiple of k) and low terms (coef < k), splitting an
// atom X = (v/d)%m with coef | k into k*(X / q) + coef*(X % q), q = k / coef (X itself low
// where it never reaches q). False when
// some term fits neither (then the caller falls back to opaque code).
bool split_at(const IExpr& e, int64_t k, const VarTable& vt, IExpr& high, IExpr& low) {
  if (!e.affine() || e.c < 0) return false;
  high = IExpr{};
  low = IExpr{};
  high.c = e.c / k;
  low.c = e.c % k;
  for (const Term& t : e.terms) {
    if (t.coef <= 0) return false;
    if (t.coef % k == 0) {
      high.terms.push_back({t.coef / k, t.var, t.div, t.mod});
    } else if (k % t.coef == 0) {
      int64_t q = k / t.coef;
      if (atom_range(t, vt) <= q) {  // X < q: X / q is 0 (DepthToSpace's (v % 2) * 64 under 256)
        low.terms.push_back(t);
        continue;
      }
      if (t.mod != 0 && t.mod % q != 0) return false;
      high.terms.push_back({1, t.var, t.div * q, t.mod ? t.mod / q : 0});
      low.terms.push_back({t.coef, t.var, t.div, q});
    } else {
      return false;
    }
  }
  simplify(high, vt);
  simplify(low, vt);
  return max_value(low, vt) < k;
}

}  // namespace

bool IExpr::uses(int v) const {
  for (const Term& t : terms)
    if (t.var == v) return true;
  return std::find(opaque_vars.begin(), opaque_vars.end(), v) != opaque_vars.end();
}

int VarTable::add(std::string name, int64_t range) {
  vars_.push_back({std::move(name), std::max<int64_t>(1, range)});
  return static_cast<int>(vars_.size()) - 1;
}

IExpr opaque(std::string code, std::vector<int> vars) {
  IExpr e;
  e.opaque = std::move(code);
  e.opaque_vars = std::move(vars);
  return e;
}

IExpr add(const IExpr& a, const IExpr& b, const VarTable& vt) {
  IExpr r;
  r.c = a.c + b.c;
  r.terms = a.terms;
  r.terms.insert(r.terms.end(), b.terms.begin(), b.terms.end());
  if (!a.opaque.empty() && !b.opaque.empty()) {
    r.opaque = "(" + a.opaque + ") + (" + b.opaque + ")";
  } else {
    r.opaque = a.opaque.empty() ? b.opaque : a.opaque;
  }
  r.opaque_vars = a.opaque_vars;
  merge_vars(r.opaque_vars, b.opaque_vars);
  simplify(r, vt);
  return r;
}

IExpr scale(const IExpr& a, int64_t k, const VarTable& vt) {
  if (k == 0) return IExpr::constant(0);
  IExpr r = a;
  r.c *= k;
  for (Term& t : r.terms) t.coef *= k;
  if (!r.opaque.empty()) r.opaque = std::to_string(k) + "L * (" + r.opaque + ")";
  simplify(r, vt);
  return r;
}

IExpr floordiv(const IExpr& a, int64_t k, const VarTable& vt) {
  if (k <= 0) throw InternalError("codegen: index division by " + std::to_string(k));
  if (k == 1) return a;
  IExpr high, low;
  if (split_at(a, k, vt, high, low)) return high;
  return as_opaque(a, "(" + render(a, vt) + ") / " + std::to_string(k) + "L", vt);
}

IExpr mod(const IExpr& a, int64_t k, const VarTable& vt) {
  if (k <= 0) throw InternalError("codegen: index modulo " + std::to_string(k));
  if (k == 1) return IExpr::constant(0);
  if (a.affine() && a.c >= 0 && max_value(a, vt) < k) {
    bool nonneg = true;
    for (const Term& t : a.terms) nonneg = nonneg && t.coef > 0;
    if (nonneg) return a;
  }
  IExpr high, low;
  if (split_at(a, k, vt, high, low)) return low;
  return as_opaque(a, "(" + render(a, vt) + ") % " + std::to_string(k) + "L", vt);
}

IExpr linearize(const std::vector<IExpr>& idx, const std::vector<int64_t>& shape,
                const VarTable& vt) {
  IExpr r;
  int64_t stride = 1;
  for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
    r = add(r, scale(idx.at(k), stride, vt), vt);
    stride *= shape[k];
  }
  return r;
}

std::vector<IExpr> delinearize(const IExpr& flat, const std::vector<int64_t>& shape,
                               const VarTable& vt) {
  const int n = static_cast<int>(shape.size());
  std::vector<IExpr> out(n);
  if (n == 0) return out;
  int64_t stride = 1;
  for (int k = n - 1; k >= 0; --k) {
    IExpr q = floordiv(flat, stride, vt);
    out[k] = k == 0 ? q : mod(q, shape[k], vt);
    stride *= shape[k];
  }
  return out;
}

int64_t max_value(const IExpr& e, const VarTable& vt) {
  if (!e.affine()) return -1;
  int64_t m = e.c;
  for (const Term& t : e.terms)
    if (t.coef > 0) m += t.coef * (atom_range(t, vt) - 1);
  return m;
}

std::string render(const IExpr& e, const VarTable& vt) {
  std::string s;
  auto append = [&](const std::string& part, bool negative) {
    if (s.empty()) {
      s = negative ? "-" + part : part;
    } else {
      s += negative ? " - " + part : " + " + part;
    }
  };
  for (const Term& t : e.terms) {
    std::string atom = vt[t.var].name;
    if (t.div != 1) atom = "(" + atom + " / " + std::to_string(t.div) + "L)";
    if (t.mod != 0) atom = "(" + atom + " % " + std::to_string(t.mod) + "L)";
    int64_t c = t.coef < 0 ? -t.coef : t.coef;
    append(c == 1 ? atom : std::to_string(c) + "L * " + atom, t.coef < 0);
  }
  if (!e.opaque.empty()) append("(" + e.opaque + ")", false);
  if (e.c != 0 || s.empty()) append(std::to_string(e.c < 0 ? -e.c : e.c) + "L", e.c < 0);
  return s;
}

std::string spell_index(std::string s, const std::string& min_fn, const std::string& max_fn) {
  for (const auto& [tok, fn] : {std::pair<std::string, const std::string&>{"@min(", min_fn}, {"@max(", max_fn}})
    for (size_t at = s.find(tok); at != std::string::npos; at = s.find(tok, at + fn.size()))
      s.replace(at, tok.size(), fn + "(");
  return s;
}

Stride stride_along(const IExpr& e, int inner, bool aligned) {
  if (std::find(e.opaque_vars.begin(), e.opaque_vars.end(), inner) != e.opaque_vars.end())
    return Stride::Gather;
  const Term* hit = nullptr;
  for (const Term& t : e.terms) {
    if (t.var != inner) continue;
    if (aligned && t.div % kMaxVecWidth == 0) continue;  // one value per aligned vector
    if (hit) return Stride::Gather;
    hit = &t;
  }
  if (!hit) return Stride::Broadcast;
  const bool runs = hit->mod == 0 || (aligned && hit->mod % kMaxVecWidth == 0);
  return hit->coef == 1 && hit->div == 1 && runs ? Stride::Contiguous : Stride::Gather;
}

}  // namespace dnnf::cg
