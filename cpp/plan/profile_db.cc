// Profiling database for the yellow cells of the fusion table (paper §4.3): a JSON-lines
// file of measured fused/unfused times, and the analytic estimate used without one.
#include "plan/profile_db.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <unistd.h>

#include "ir/errors.h"
#include "plan/json.h"

namespace dnnf {

namespace {

// ---- A minimal reader for one flat JSON object per line ------------------------------
// Only what the file format needs: string and number values (true/false/null are read and
// ignored); nested objects and arrays are rejected.
struct JsonValue {
  enum class Kind { String, Number, Other } kind = Kind::Other;
  std::string s;
  double num = 0;
};

class LineReader {
 public:
  LineReader(const std::string& text, const std::string& where) : s_(text), where_(where) {}

  std::map<std::string, JsonValue> object() {
    std::map<std::string, JsonValue> out;
    skip_ws();
    expect('{');
    skip_ws();
    if (peek() == '}') { ++pos_; return finish(out); }
    for (;;) {
      skip_ws();
      std::string key = string();
      skip_ws();
      expect(':');
      skip_ws();
      if (out.count(key)) fail("key \"" + key + "\" appears twice");
      out[key] = value();
      skip_ws();
      if (peek() == ',') { ++pos_; continue; }
      expect('}');
      return finish(out);
    }
  }

 private:
  std::map<std::string, JsonValue> finish(std::map<std::string, JsonValue>& out) {
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the object");
    return out;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() { while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_; }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  [[noreturn]] void fail(const std::string& msg) const {
    throw ModelFormatError(where_ + ", column " + std::to_string(pos_ + 1) + ": " + msg +
                           " (each line must be one JSON object, see cpp/plan/profile_db.h)");
  }

  JsonValue value() {
    JsonValue v;
    char c = peek();
    if (c == '"') {
      v.kind = JsonValue::Kind::String;
      v.s = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t start = pos_;
      while (pos_ < s_.size() && std::strchr("+-0123456789.eE", s_[pos_])) ++pos_;
      std::string tok = s_.substr(start, pos_ - start);
      char* end = nullptr;
      v.num = std::strtod(tok.c_str(), &end);
      if (end != tok.c_str() + tok.size()) { pos_ = start; fail("malformed number '" + tok + "'"); }
      v.kind = JsonValue::Kind::Number;
    } else if (s_.compare(pos_, 4, "true") == 0 || s_.compare(pos_, 4, "null") == 0) {
      pos_ += 4;
    } else if (s_.compare(pos_, 5, "false") == 0) {
      pos_ += 5;
    } else if (c == '{' || c == '[') {
      fail("nested objects and arrays are not part of the format");
    } else {
      fail("expected a value");
    }
    return v;
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') { out += c; continue; }
      char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': out += unicode(); break;
        default: fail("bad escape in a string");
      }
    }
  }

  // \uXXXX (the 'u' already read) as UTF-8; surrogate pairs are combined.
  std::string unicode() {
    auto hex4 = [&] {
      if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
      unsigned v = 0;
      for (int i = 0; i < 4; ++i) {
        char c = s_[pos_++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else fail("bad \\u escape");
      }
      return v;
    };
    unsigned cp = hex4();
    if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(pos_, 2, "\\u") == 0) {
      pos_ += 2;
      unsigned lo = hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) fail("bad surrogate pair");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    std::string out;
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) { out += static_cast<char>(0xC0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
  }

  const std::string& s_;
  std::string where_;
  size_t pos_ = 0;
};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

ProfileEntry entry_from(const std::map<std::string, JsonValue>& obj, const std::string& where) {
  auto str = [&](const char* k) {
    auto it = obj.find(k);
    if (it == obj.end()) throw ModelFormatError(where + ": missing key \"" + k + "\"");
    if (it->second.kind != JsonValue::Kind::String)
      throw ModelFormatError(where + ": \"" + k + "\" must be a string");
    return it->second.s;
  };
  auto type = [&](const char* k) {
    std::string s = str(k);
    auto t = parse_mapping_type(s);
    if (!t) throw ModelFormatError(where + ": \"" + k + "\" is '" + s + "', not a mapping type "
                                   "(One-to-One, Reorganize, Shuffle, One-to-Many, Many-to-Many)");
    return *t;
  };
  auto ms = [&](const char* k) {
    auto it = obj.find(k);
    if (it == obj.end()) throw ModelFormatError(where + ": missing key \"" + k + "\"");
    if (it->second.kind != JsonValue::Kind::Number || !std::isfinite(it->second.num) ||
        it->second.num <= 0)
      throw ModelFormatError(where + ": \"" + k + "\" must be a positive number of milliseconds");
    return it->second.num;
  };
  ProfileEntry e;
  e.key.target = str("target");
  e.key.producer_op = str("producer");
  e.key.consumer_op = str("consumer");
  e.key.producer_type = type("producer_type");
  e.key.consumer_type = type("consumer_type");
  e.key.bucket = str("bucket");
  if (auto it = obj.find("threads"); it != obj.end()) {
    if (it->second.kind != JsonValue::Kind::Number || !(it->second.num >= 0 && it->second.num < 1e6) ||
        it->second.num != std::floor(it->second.num))
      throw ModelFormatError(where + ": \"threads\" must be a non-negative integer");
    e.key.threads = static_cast<int>(it->second.num);
  }
  e.fused_ms = ms("fused_ms");
  e.unfused_ms = ms("unfused_ms");
  if (auto it = obj.find("noise_ms"); it != obj.end()) {
    if (it->second.kind != JsonValue::Kind::Number || !std::isfinite(it->second.num) || it->second.num < 0)
      throw ModelFormatError(where + ": \"noise_ms\" must be a non-negative number of milliseconds");
    e.noise_ms = it->second.num;
  }
  if (obj.count("how")) e.how = str("how");
  if (auto it = obj.find("generator"); it != obj.end()) {
    if (it->second.kind != JsonValue::Kind::Number || !(it->second.num >= 0 && it->second.num < 1e6) ||
        it->second.num != std::floor(it->second.num))
      throw ModelFormatError(where + ": \"generator\" must be a non-negative integer");
    e.generator = static_cast<int>(it->second.num);
  }
  return e;
}

std::string entry_line(const ProfileEntry& e) {
  return "{\"target\": " + json_quote(e.key.target) +
         ", \"producer\": " + json_quote(e.key.producer_op) +
         ", \"consumer\": " + json_quote(e.key.consumer_op) +
         ", \"producer_type\": " + json_quote(mapping_type_name(e.key.producer_type)) +
         ", \"consumer_type\": " + json_quote(mapping_type_name(e.key.consumer_type)) +
         ", \"bucket\": " + json_quote(e.key.bucket) +
         (e.key.threads > 0 ? ", \"threads\": " + std::to_string(e.key.threads) : std::string()) +
         ", \"fused_ms\": " + number(e.fused_ms) + ", \"unfused_ms\": " + number(e.unfused_ms) +
         (e.noise_ms > 0 ? ", \"noise_ms\": " + number(e.noise_ms) : std::string()) +
         (e.how.empty() ? std::string() : ", \"how\": " + json_quote(e.how)) +
         (e.generator > 0 ? ", \"generator\": " + std::to_string(e.generator) : std::string()) + "}";
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

bool ProfileKey::operator==(const ProfileKey& o) const {
  return target == o.target && producer_op == o.producer_op && consumer_op == o.consumer_op &&
         producer_type == o.producer_type && consumer_type == o.consumer_type && bucket == o.bucket &&
         threads == o.threads;
}

ProfileDb ProfileDb::load(const std::string& path) {
  ProfileDb db;
  if (path.empty()) return db;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelFormatError("profile database '" + path + "' cannot be read (missing file?)");
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (trim(line).empty()) continue;
    std::string where = "profile database '" + path + "', line " + std::to_string(lineno);
    LineReader r(line, where);
    ProfileEntry e = entry_from(r.object(), where);
    e.origin = path;
    db.add(e);
  }
  if (in.bad()) throw ModelFormatError("profile database '" + path + "': read error");
  return db;
}

ProfileDb ProfileDb::load(const std::vector<std::string>& paths) {
  ProfileDb db;
  for (const std::string& p : paths) {
    ProfileDb one = load(p);  // named: a temporary's entries() would dangle in the loop
    for (const ProfileEntry& e : one.entries()) db.add(e);
  }
  return db;
}

void ProfileDb::save(const std::string& path) const {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write profile database '" + path + "'");
    for (const ProfileEntry& e : entries_) out << entry_line(e) << "\n";
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error("cannot write profile database '" + path + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot replace profile database '" + path + "'");
  }
}

void ProfileDb::add(const ProfileEntry& e) {
  for (ProfileEntry& old : entries_)
    if (old.key == e.key) { old = e; return; }
  entries_.push_back(e);
}

namespace {
// The entry for `k` among those `current` selects: one measured at k's thread count, else one
// that records none (written by hand, or before entries had the field), which applies to any.
const ProfileEntry* lookup(const std::vector<ProfileEntry>& entries, const ProfileKey& k, bool current) {
  ProfileKey any = k;
  any.threads = 0;
  const ProfileEntry* fallback = nullptr;
  for (const ProfileEntry& e : entries) {
    if ((e.generator == kProfileGenerator) != current) continue;
    if (e.key == k) return &e;
    if (!fallback && k.threads != 0 && e.key == any) fallback = &e;
  }
  return fallback;
}
}  // namespace

const ProfileEntry* ProfileDb::find(const ProfileKey& k) const { return lookup(entries_, k, true); }

const ProfileEntry* ProfileDb::find_stale(const ProfileKey& k) const { return lookup(entries_, k, false); }

std::string profile_target_key(const std::string& target) {
  if (target == "opencl") return "opencl:default";
  // The CPU model and the ISA flags the generated code can use: a measurement taken on one
  // machine says nothing about a machine that differs in either.
  static const std::string cpu = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, model = "unknown", flags_line;
    while (std::getline(in, line)) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string k = trim(line.substr(0, colon)), v = trim(line.substr(colon + 1));
      if ((k == "model name" || k == "Model" || k == "CPU part") && model == "unknown") model = v;
      if ((k == "flags" || k == "Features") && flags_line.empty()) flags_line = v;
    }
    std::set<std::string> have;
    std::istringstream fs(flags_line);
    for (std::string f; fs >> f;) have.insert(f);
    std::string isa;
    for (const char* f : {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                          "avx512_vnni", "asimd", "asimdhp", "sve"}) {
      if (!have.count(f)) continue;
      if (!isa.empty()) isa += ",";
      isa += f;
    }
    return "cpu:" + model + "|" + isa;
  }();
  return cpu;
}

std::string shape_bucket(int64_t numel) {
  if (numel < 0) return "?";
  int k = 0;
  while (k < 62 && (int64_t{1} << (k + 1)) <= numel) ++k;
  return "2^" + std::to_string(k);
}

// The analytic estimate (no measurement for this target and signature). In scalar
// integer-op equivalents:
//   saved = 2 * bytes * kOpsPerDramByte          the tensor is neither written nor read back
//   extra = elements * reads * index_ops         every access goes through the composed index
//                                                map (a divide and a modulo per dimension for
//                                                a non-view Reorganize/Shuffle; the access is
//                                                no longer a contiguous vector load/store)
//         + (reads - 1) * producer_flops         a broadcasting consumer re-reads each element,
//                                                so the fused producer is recomputed per read
//   fuse iff saved > extra.
// kOpsPerDramByte = 4: a core streams about 10 GB/s from DRAM while it can retire about
// 40 G simple integer ops/s, so moving one byte costs about as much as four ops.
std::string entry_source(const ProfileEntry& e) {
  return (e.how.empty() ? std::string() : " (" + e.how + ")") + (e.origin.empty() ? std::string() : " [" + e.origin + "]");
}

Settlement settle_yellow(const ProfileDb& db, const ProfileKey& key, const PairCost& c) {
  constexpr int64_t kOpsPerDramByte = 4;
  Settlement s;
  if (const ProfileEntry* e = db.find(key)) {
    // A difference within the measurement's noise is a tie, decided for fewer passes.
    bool tie = e->fused_ms >= e->unfused_ms && e->fused_ms - e->unfused_ms <= e->noise_ms;
    s.fuse = e->fused_ms < e->unfused_ms || tie;
    char buf[240];
    if (tie)
      std::snprintf(buf, sizeof buf, "profile: fused %.4f ms vs unfused %.4f ms, within the measured "
                    "noise %.4f ms: a tie, decided for fewer passes -> fuse", e->fused_ms, e->unfused_ms,
                    e->noise_ms);
    else
      std::snprintf(buf, sizeof buf, "profile: fused %.4f ms %s unfused %.4f ms -> %s", e->fused_ms,
                    s.fuse ? "<" : ">=", e->unfused_ms, s.fuse ? "fuse" : "keep apart");
    s.why = buf + entry_source(*e);
    return s;
  }
  // A row measured on another generator's code settles nothing; the explanation names it.
  std::string none = "no profile entry";
  if (const ProfileEntry* e = db.find_stale(key))
    none += " for this code generator (the row" + (e->origin.empty() ? std::string() : " in " + e->origin) +
            " measured generator " + std::to_string(e->generator) + "'s code, now " + std::to_string(kProfileGenerator) +
            ")";
  std::string others;  // measured, but at other thread counts: they settle nothing here
  for (const ProfileEntry& e : db.entries()) {
    ProfileKey k = e.key;
    k.threads = key.threads;
    if (key.threads != 0 && e.key.threads != key.threads && e.key.threads != 0 && k == key)
      others += (others.empty() ? "" : ", ") + std::to_string(e.key.threads);
  }
  if (!others.empty())
    none += " at " + std::to_string(key.threads) + " thread" + (key.threads == 1 ? "" : "s") +
            " (measured at " + others + " only)";
  if (c.bytes < 0) {
    s.why = none + "; analytic estimate needs static shapes (the tensor's size is "
            "symbolic) -> keep apart";
    return s;
  }
  int64_t reads = std::max<int64_t>(1, c.reads);
  int64_t saved = 2 * c.bytes * kOpsPerDramByte;
  int64_t index = c.elements * reads * c.index_ops;
  int64_t recompute = (reads - 1) * c.producer_flops;
  int64_t extra = index + recompute;
  s.fuse = saved > extra;
  s.why = none + "; analytic estimate: saved 2*" + std::to_string(c.bytes) + " B*" +
          std::to_string(kOpsPerDramByte) + " = " + std::to_string(saved) + " ops " +
          (s.fuse ? "> " : "<= ") + "extra " + std::to_string(c.elements) + "*" +
          std::to_string(reads) + " reads*" + std::to_string(c.index_ops) + " index ops + " +
          std::to_string(reads - 1) + "*" + std::to_string(c.producer_flops) +
          " recomputed flops = " + std::to_string(extra) + " ops -> " +
          (s.fuse ? "fuse" : "keep apart");
  return s;
}

}  // namespace dnnf
