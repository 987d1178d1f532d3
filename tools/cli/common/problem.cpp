// fmha CLI core: problem defaults derivation (docs/seed.md §2.1, §2.5) and FLOP formulas (docs/seed.md §7). See problem.h.
#include "common/problem.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <utility>

#include "common/init.h"
#include "reference/flops.h"

namespace fmha::cli {

ProblemDefaults ProblemDefaults::forward() { return ProblemDefaults{}; }

ProblemDefaults ProblemDefaults::backward() {
  ProblemDefaults d;
  d.family = ProblemFamily::kBackward;
  d.fallback_seqlen = 1024;
  return d;
}

int FwdProblemArgs::max_seqlen_q() const {
  return seqlens_q.empty() ? 0 : *std::max_element(seqlens_q.begin(), seqlens_q.end());
}
int FwdProblemArgs::max_seqlen_k() const {
  return seqlens_k.empty() ? 0 : *std::max_element(seqlens_k.begin(), seqlens_k.end());
}
int64_t FwdProblemArgs::total_q() const { return std::accumulate(seqlens_q.begin(), seqlens_q.end(), int64_t{0}); }
int64_t FwdProblemArgs::total_k() const { return std::accumulate(seqlens_k.begin(), seqlens_k.end(), int64_t{0}); }
int64_t FwdProblemArgs::sum_qk() const {
  int64_t s = 0;
  for (size_t i = 0; i < seqlens_q.size() && i < seqlens_k.size(); ++i) {
    s += static_cast<int64_t>(seqlens_q[i]) * seqlens_k[i];
  }
  return s;
}

const char* FwdProblemArgs::mask_word() const {
  switch (mask) {
    case fmha::MaskType::kCausal: return "Causal";
    case fmha::MaskType::kResidual: return "Residual";
    case fmha::MaskType::kNone: return "None";
  }
  return "None";
}

namespace {

std::string at_least_msg(const char* name, int min, int got) {
  return std::string("--") + name + ": expected an integer ≥ " + std::to_string(min) + ", got " + std::to_string(got);
}

// Applies one varlen list (step 1 of the derivation) to `scalar` and `b`. Returns an error or "".
std::string apply_list(const char* list_name, const char* scalar_name, const std::vector<int>& list,
                       std::optional<int>& scalar, std::optional<int>& b, bool b_from_user) {
  if (scalar) return std::string("Can't provide --") + scalar_name + " and --" + list_name;
  if (list.empty()) return std::string("--") + list_name + ": expected at least one length, got an empty list";
  for (int x : list) {
    if (x < 0) return std::string("--") + list_name + ": expected lengths ≥ 0, got " + std::to_string(x);
  }
  const int n = static_cast<int>(list.size());
  if (b && *b != n) {
    // Name where b came from: the user's --b, or the other list's length.
    const std::string source = b_from_user ? "--b=" + std::to_string(*b) : "the other list's length";
    return std::string("Invalid --") + list_name + " length: expected " + std::to_string(*b) + " entries (" +
           source + "), got " + std::to_string(n);
  }
  b = n;
  int64_t sum = 0;
  for (int x : list) sum += x;
  if (sum > INT32_MAX) return std::string("--") + list_name + ": total length exceeds 2^31-1";
  scalar = static_cast<int>(sum);
  return "";
}

// Seeded per-batch lengths for the backward's --varlen without lists: round(Normal(mean, mean/2)) clamped at 0.
std::vector<int> random_lengths(int b, int mean, uint64_t seed) {
  std::vector<int> out(static_cast<size_t>(b));
  for (int i = 0; i < b; ++i) {
    const double x = mean + 0.5 * mean * normal_at(seed, static_cast<uint64_t>(i));
    out[static_cast<size_t>(i)] = static_cast<int>(std::max(0.0, std::round(x)));
  }
  return out;
}

}  // namespace

FwdProblemResult derive_fwd_problem(const FwdProblemInput& in, const ProblemDefaults& dflt) {
  FwdProblemResult r;
  FwdProblemArgs& p = r.args;

  // Head dims and heads.
  p.d = in.d.value_or(dflt.default_d);
  if (p.d < 1) {
    r.error = at_least_msg("d", 1, p.d);
    return r;
  }
  p.d_v = in.d_v.value_or(p.d);
  if (p.d_v < 1) {
    r.error = at_least_msg("d_vo", 1, p.d_v);
    return r;
  }
  const int h_dim = in.h_default_dim.value_or(p.d);
  p.h = in.h.value_or(std::max(1, dflt.head_budget / std::max(1, h_dim)));
  if (p.h < 1) {
    r.error = at_least_msg("h", 1, p.h);
    return r;
  }
  p.h_k = in.h_k.value_or(p.h);
  if (p.h_k < 1) {
    r.error = at_least_msg("h_k", 1, p.h_k);
    return r;
  }
  if (p.h % p.h_k != 0) {
    r.error = "--h_k: expected a divisor of --h=" + std::to_string(p.h) + ", got " + std::to_string(p.h_k);
    return r;
  }

  // Sequence lengths and batch: steps 1-5 of docs/seed.md §2.1.
  std::optional<int> b = in.b, q = in.q, k = in.k;
  if (b && *b < 1) {
    r.error = at_least_msg("b", 1, *b);
    return r;
  }
  if (q && *q < 0) {
    r.error = at_least_msg("q", 0, *q);
    return r;
  }
  if (k && *k < 0) {
    r.error = at_least_msg("k", 0, *k);
    return r;
  }
  p.varlen = in.varlen;
  const bool use_q_list = in.varlen && in.varlen_q.has_value();
  const bool use_k_list = in.varlen && in.varlen_k.has_value();
  if (!in.varlen && in.varlen_q) p.warnings.push_back("--varlen-q is ignored without --varlen");
  if (!in.varlen && in.varlen_k) p.warnings.push_back("--varlen-k is ignored without --varlen");
  if (use_q_list) {
    r.error = apply_list("varlen-q", "q", *in.varlen_q, q, b, in.b.has_value());
    if (!r.ok()) return r;
  }
  if (use_k_list) {
    r.error = apply_list("varlen-k", "k", *in.varlen_k, k, b, in.b.has_value());
    if (!r.ok()) return r;
  }
  if (!q) q = k;
  if (!k) k = q;
  if (!q) q = k = dflt.fallback_seqlen;
  if (!b) b = *k > 0 ? std::max(1, dflt.token_budget / *k) : 1;
  p.b = *b;
  p.q = *q;
  p.k = *k;

  // Per-batch lengths.
  const bool draw = in.varlen && dflt.family == ProblemFamily::kBackward;
  if (use_q_list) {
    p.seqlens_q = *in.varlen_q;
  } else if (draw) {
    p.seqlens_q = random_lengths(p.b, p.q, dflt.varlen_seed);
  } else {
    p.seqlens_q.assign(static_cast<size_t>(p.b), p.q);
  }
  if (use_k_list) {
    p.seqlens_k = *in.varlen_k;
  } else if (draw) {
    p.seqlens_k = random_lengths(p.b, p.k, dflt.varlen_seed + 1);
  } else {
    p.seqlens_k.assign(static_cast<size_t>(p.b), p.k);
  }

  // Mask and alignment.
  const std::string& m = in.mask;
  if (m.empty() || m == "no" || m == "none") {
    p.mask = in.varlen ? fmha::MaskType::kResidual : fmha::MaskType::kNone;
  } else if (m == "residual") {
    p.mask = fmha::MaskType::kResidual;
  } else if (m == "causal") {
    p.mask = fmha::MaskType::kCausal;
  } else {
    r.error = "--mask: expected one of no|residual|causal, got \"" + m + "\"";
    return r;
  }
  if (in.causal_type.empty() || in.causal_type == "qbegin") {
    p.align = fmha::CausalAlign::kQBegin;
  } else if (in.causal_type == "qend") {
    p.align = fmha::CausalAlign::kQEnd;
  } else {
    r.error = "--causal-type: expected one of qbegin|qend, got \"" + in.causal_type + "\"";
    return r;
  }
  return r;
}

void add_problem_options(OptionTable& t, const ProblemOptionSet& set) {
  const bool bwd = set.family == ProblemFamily::kBackward;
  if (set.head_dim) t.add_int("d", set.head_dim_help, 128).at_least(1);
  if (set.d_vo) t.add_int("d_vo", "Head dim of V and O.").at_least(1).default_text_is("= d");
  t.add_int("h", "Query heads.").at_least(1).default_text_is("2048/d");
  t.add_int("h_k", "K/V heads (GQA/MQA); must divide h.").at_least(1).default_text_is("= h");
  const std::string fallback = bwd ? "1024" : "256";
  t.add_int("q", "Query length per batch entry (total length when --varlen-q is given).")
      .at_least(0)
      .default_text_is("= k, else " + fallback);
  t.add_int("k", "Key length per batch entry (total length when --varlen-k is given).")
      .at_least(0)
      .default_text_is("= q, else " + fallback);
  t.add_int("b", "Batch count.").at_least(1).default_text_is("16384/k, at least 1; list length with --varlen-q/k");
  t.add_flag("varlen",
             bwd ? "Variable-length (packed) layout; without lists each entry's length is drawn from "
                   "Normal(q, q/2) (seeded). Implies the residual mask."
                 : "Variable-length (packed) layout; without lists every entry has q / k tokens. Implies the "
                   "residual mask when --mask is no.");
  t.add_int_list("varlen-q", "Per-entry query lengths, e.g. 128:0:256 (read only with --varlen; sets b).")
      .at_least(0);
  t.add_int_list("varlen-k", "Per-entry key lengths, zeros allowed (read only with --varlen; sets b).").at_least(0);
  t.add_string("mask", "Mask: no (residual with --varlen), residual or causal.", "no",
               {"", "no", "none", "residual", "causal"});
  if (set.causal_type) {
    t.add_string("causal-type", "Causal diagonal: qbegin (top-left) or qend (bottom-right).", "qbegin",
                 {"qbegin", "qend"});
  }
}

std::string with_option_names(const std::string& m) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"batch", "--b"},       {"heads_q", "--h"},    {"heads_kv", "--h_k"},          {"head_dim", "--d"},
      {"head_dim_v", "--d_vo"}, {"seqlen_q", "--q"}, {"seqlen_k", "--k"},            {"softmax_scale", "--scale"},
      {"sm_count", "--sm-count"}};
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (size_t i = 0; i < m.size();) {
    if (!word_char(m[i])) {
      out += m[i++];
      continue;
    }
    size_t j = i;
    while (j < m.size() && word_char(m[j])) ++j;
    const std::string word = m.substr(i, j - i);
    const char* option = nullptr;
    for (const auto& [field, opt] : kNames)
      if (word == field) option = opt;
    out += option ? option : word;
    i = j;
  }
  return out;
}

FwdProblemInput problem_input_from(const ParsedOptions& o) {
  FwdProblemInput in;
  auto int_opt = [&](const char* name) { return o.declared(name) ? o.find_int(name) : std::nullopt; };
  in.b = int_opt("b");
  in.h = int_opt("h");
  in.h_k = int_opt("h_k");
  in.d = int_opt("d");
  in.d_v = int_opt("d_vo");
  in.q = int_opt("q");
  in.k = int_opt("k");
  if (o.declared("varlen")) in.varlen = o.flag("varlen");
  if (o.declared("varlen-q")) in.varlen_q = o.find_int_list("varlen-q");
  if (o.declared("varlen-k")) in.varlen_k = o.find_int_list("varlen-k");
  if (o.declared("mask")) in.mask = o.find_string("mask").value_or("");
  if (o.declared("causal-type")) in.causal_type = o.find_string("causal-type").value_or("");
  return in;
}

// The formulas live once, in reference/flops.h; these adapt a derived problem to them.
double fwd_flops(const FwdProblemArgs& p) {
  return fmha::ref::fwd_flops(p.seqlens_q, p.seqlens_k, p.h, p.d, p.d, p.mask == fmha::MaskType::kCausal);
}

double mla_fwd_flops(const FwdProblemArgs& p, int dl, int dr) {
  return fmha::ref::fwd_flops(p.seqlens_q, p.seqlens_k, p.h, dl + dr, dl, p.mask == fmha::MaskType::kCausal);
}

double bwd_flops(const FwdProblemArgs& p) {
  const int sq = p.varlen ? p.max_seqlen_q() : p.q;
  const int sk = p.varlen ? p.max_seqlen_k() : p.k;
  return fmha::ref::bwd_flops(p.b, sq, sk, p.h, p.d, p.d_v, p.mask == fmha::MaskType::kCausal);
}

double tflops_per_s(double flops, double time_ms) { return fmha::ref::per_second_tera(flops, time_ms); }

double tbytes_per_s(double bytes, double time_ms) { return fmha::ref::per_second_tera(bytes, time_ms); }

std::vector<std::string> problem_warnings(const ParsedOptions& options, const ProblemDefaults& defaults) {
  if (options.flag("list-kernels")) return {};
  FwdProblemResult pr = derive_fwd_problem(problem_input_from(options), defaults);
  return pr.ok() ? pr.args.warnings : std::vector<std::string>{};
}

}  // namespace fmha::cli
