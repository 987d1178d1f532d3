// fmha_gen: decode (generation) attention against a KV cache on Hopper, with the seed's options (docs/seed.md §2.2)
// plus --dtype, --q (new tokens), --page, --split, --scale and --json. Runs fmha::decode on generated inputs,
// optionally verifies O, LSE and the appended cache rows against the CPU reference, reports TB/s.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <random>
#include <regex>
#include <stdexcept>

#include "common/cli.h"
#include "testing/decode_runner.h"

using namespace fmha::cli;

namespace {

/// The seed's generators, drawn the way its example does (docs/seed.md §2.2): lengths int(Normal(k, k / 2)) redrawn
/// until positive (--varlen) and a shuffled slot permutation (--remap), each from std::mt19937 with the seed's
/// constant (truncated to the generator's 32-bit seed). std::normal_distribution and std::shuffle are the standard
/// library's, so the draws equal the seed's where both are built against the same one (libstdc++ here).
constexpr uint64_t kVarlenSeed = 0x202305151552ull;
constexpr uint64_t kRemapSeed = 0x202305291305ull;

/// The problem of one run: shape defaults as the seed's (h = 2048 / d, b = 16384 / k, h_k = h).
struct GenProblem {
  int b = 0, h = 0, h_k = 0, k = 0, d = 0, n = 1, page = 0, split = 0;
  bool varlen = false, remap = false, cache_only = false;
  std::vector<int> seqlens, slots;
};

GenProblem derive(const ParsedOptions& o) {
  GenProblem g;
  g.d = o.get_int("d");
  g.k = o.get_int("k");
  g.h = o.find_int("h").value_or(std::max(1, 2048 / g.d));
  g.h_k = o.find_int("h_k").value_or(g.h);
  g.b = o.find_int("b").value_or(std::max(1, 16384 / std::max(1, g.k)));
  g.n = o.get_int("q");
  g.page = o.get_int("page");
  g.split = o.get_int("split");
  g.varlen = o.flag("varlen"), g.remap = o.flag("remap"), g.cache_only = o.flag("cache-only");
  g.seqlens.assign(g.b, g.k);
  if (g.varlen && g.k >= 1) {  // k = 0 with --varlen is refused by check_gen (no positive draw would come)
    std::mt19937 gen(static_cast<std::mt19937::result_type>(kVarlenSeed));
    std::normal_distribution<double> dist(g.k, std::max(g.k / 2, 1));  // σ > 0 (k = 1)
    for (int& L : g.seqlens) {
      do L = static_cast<int>(dist(gen));
      while (L <= 0);
    }
  }
  if (g.cache_only)  // the n query tokens are the cache's last n: each sequence holds at least n keys
    for (int& L : g.seqlens) L = std::max(L, g.n);
  g.slots.resize(g.b);
  std::iota(g.slots.begin(), g.slots.end(), 0);
  if (g.remap)
    std::shuffle(g.slots.begin(), g.slots.end(), std::mt19937(static_cast<std::mt19937::result_type>(kRemapSeed)));
  return g;
}

fmha::DType parse_dtype(const std::string& s) { return s == "fp16" ? fmha::DType::kFP16 : fmha::DType::kBF16; }

/// The harness case of a run (its inputs, init styles and timing from the options).
fmha::testing::DecodeCase case_from(const ParsedOptions& o, const GenProblem& g) {
  fmha::testing::DecodeCase c;
  c.name = "fmha_gen";
  c.dtype = parse_dtype(o.get_string("dtype"));
  c.batch = g.b, c.heads_q = g.h, c.heads_kv = g.h_k, c.head_dim = g.d, c.new_tokens = g.n;
  c.seqlens = g.seqlens;
  const int longest = *std::max_element(g.seqlens.begin(), g.seqlens.end());
  c.capacity = longest + (g.cache_only ? 0 : g.n);
  c.append = !g.cache_only;
  c.remap = g.remap;
  c.slot_of = g.slots;
  c.splits = g.split;
  c.sm_count = o.get_int("sm-count");
  c.page_size = g.page;
  c.scale = float(o.get_float("scale"));
  return c;
}

/// ToolSpec::check: the library's validation of the run's problem (on placeholder pointers: decode_plan reads none),
/// before any GPU work; a refusal is a usage error in the options' names.
std::string check_gen(const ParsedOptions& o) {
  if (o.flag("varlen") && o.get_int("k") < 1)
    return "--k: expected ≥ 1 with --varlen (the mean of the lengths, redrawn until positive), got " +
           std::to_string(o.get_int("k"));
  const GenProblem g = derive(o);
  if (g.h % g.h_k != 0)
    return "--h % --h_k: expected 0, got " + std::to_string(g.h % g.h_k) + " (--h=" + std::to_string(g.h) +
           ", --h_k=" + std::to_string(g.h_k) + ")";
  alignas(16) static char dummy[16];
  fmha::DecodeParams p;
  p.dtype = parse_dtype(o.get_string("dtype"));
  p.batch = g.b, p.heads_q = g.h, p.heads_kv = g.h_k, p.head_dim = g.d, p.new_tokens = g.n;
  const int longest = *std::max_element(g.seqlens.begin(), g.seqlens.end()) + (g.cache_only ? 0 : g.n);
  p.slots = g.b, p.capacity = longest;
  if (g.page > 0) {
    p.page_size = g.page, p.pages_per_seq = (longest + g.page - 1) / g.page;
    p.slots = g.b * p.pages_per_seq, p.capacity = 0, p.page_table = reinterpret_cast<const int*>(dummy);
  }
  fmha::set_decode_contiguous_strides(p);
  p.q = dummy, p.o = dummy, p.k_cache = dummy, p.v_cache = dummy;
  p.seqlens_k = reinterpret_cast<const int*>(dummy);
  if (!g.cache_only) p.k_new = dummy, p.v_new = dummy;
  p.splits = g.split;
  p.sm_count = o.get_int("sm-count") > 0 ? o.get_int("sm-count") : 132;  // plan without a device
  p.softmax_scale = float(o.get_float("scale"));
  fmha::DecodePlan plan;
  const fmha::Status s = fmha::decode_plan(p, &plan);
  if (s.code() == fmha::StatusCode::kInvalidArgument) {
    std::string m = with_option_names(s.message());
    m = std::regex_replace(m, std::regex("\\bnew_tokens\\b"), "--q");
    m = std::regex_replace(m, std::regex("\\bpage_size\\b"), "--page");
    m = std::regex_replace(m, std::regex("\\bsplits\\b"), "--split");
    return m;
  }
  return "";
}

void run_gen(const ParsedOptions& o, Reporter& rep) {
  const GenProblem g = derive(o);
  fmha::testing::DecodeCase c = case_from(o, g);
  const std::string tensors[5] = {"q", "new-k", "new-v", "cache-k", "cache-v"};
  char styles[5];
  for (int i = 0; i < 5; ++i) styles[i] = init_style_for(o, tensors[i]);
  c.fill = [&](const std::string& t, std::vector<float>& vals) {
    const int i = int(std::find(tensors, tensors + 5, t) - tensors);
    InitParams ip;
    ip.seed = 2023 + uint64_t(i) * 7919;
    const std::string err = init_buffer(vals.data(), vals.size(), styles[i], ip);
    if (!err.empty()) throw std::runtime_error(err);
  };
  // The seed's timing: one untimed run (the checked one), then --iterations runs each timed by its own events.
  c.iterations = o.get_int("iterations");
  std::unique_ptr<L2Flusher> flusher;
  if (o.flag("clear-cache")) {
    flusher = std::make_unique<L2Flusher>(size_t(1) << 30);  // the seed's 1 GiB scratch buffer
    c.before_timed = [&](cudaStream_t s) { flusher->flush(s); };
  }
  const int sms = [] { auto gi = query_gpu(nullptr); return gi ? gi->sm_count : 0; }();
  std::printf("###### B %d H %d H_K %d K %d D %d Gen %s %s #SM %d\n", g.b, g.h, g.h_k, g.k, g.d,
              g.varlen ? "Variable" : "Uniform", g.remap ? "Remap" : "Linear", sms);

  const bool verify = o.flag("verify");
  const fmha::testing::DecodeOutcome r = fmha::testing::run_decode_case(c, verify);
  RunRecord rec;
  rec.kernel = r.kernel.empty() ? "decode" : r.kernel;
  if (o.given("kernel-filter") && !std::regex_search(rec.kernel, std::regex(o.get_string("kernel-filter")))) return;
  rec.problem = {{"dtype", fmha::to_string(c.dtype)}, {"b", g.b}, {"h", g.h}, {"h_k", g.h_k}, {"k", g.k},
                 {"d", g.d}, {"q", g.n}, {"page", g.page}, {"split", g.split}, {"varlen", g.varlen},
                 {"remap", g.remap}, {"cache_only", g.cache_only}, {"seqlens_k", g.seqlens}};
  if (set_failed_status(rec, r.status)) return rep.report(rec);
  rec.tbps = tbytes_per_s(r.bytes, set_times(rec, r.times_ms));
  rec.extra = {{"bytes", r.bytes}, {"splits", r.plan.splits}, {"grid", r.plan.grid}, {"block_m", r.plan.block_m}};
  if (verify) {
    rec.verified = true;
    rec.checks.push_back(TensorCheck{"O", r.o.max_abs, r.o.mean_abs, 0.0, 0.0, r.o.ok});
    rec.checks.push_back(TensorCheck{"LSE", r.lse.max_abs, r.lse.mean_abs, 0.0, 0.0, r.lse.ok});
    rec.checks.push_back(TensorCheck{"cache K", double(r.k_cache_diffs), 0.0, 0.0, 0.0, r.k_cache_diffs == 0});
    rec.checks.push_back(TensorCheck{"cache V", double(r.v_cache_diffs), 0.0, 0.0, 0.0, r.v_cache_diffs == 0});
    rec.tag = r.ok() ? ResultTag::kOk : ResultTag::kFail;
    if (!r.ok()) {
      rec.message = r.summary();
      std::cerr << "Reference check failed: " << r.summary() << "\n";
    }
  } else {
    rec.tag = ResultTag::kUnverified;
  }
  rep.report(rec);
}

}  // namespace

int main(int argc, char** argv) {
  OptionTable t("fmha_gen",
                "Decode against a KV cache on Hopper: --q new tokens per sequence attend the cache (and, unless "
                "--cache-only, their own K/V, appended to it). O, LSE; TB/s.");
  t.add_int("d", "Head dim: a multiple of 8 up to 128 (64 and 128 have their own tiles; others are predicated).", 128)
      .range(8, 128);
  t.add_int("h", "Query heads.").at_least(1).default_text_is("2048/d");
  t.add_int("h_k", "K/V heads (divides --h).").at_least(1).default_text_is("= h");
  t.add_int("k", "Cached tokens per sequence before the call; with --varlen the mean.", 512).at_least(0);
  t.add_int("b", "Batch (sequences).").at_least(1).default_text_is("16384/k");
  t.add_int("q", "New query tokens per sequence (1 … 16; causal among themselves).", 1).range(1, 16);
  t.add_flag("varlen", "Per-sequence lengths ~ Normal(k, k/2), redrawn until positive (fixed seed).");
  t.add_flag("remap", "Sequence i uses cache slot cache_batch_idx[i], a fixed random permutation of 0 … b−1.");
  t.add_flag("cache-only", "No new K/V: the --q tokens are the cache's last ones (nothing is appended).");
  t.add_flag("clear-cache", "Write a 1 GiB scratch buffer before each timed run (L2 flushed).");
  t.add_int("page", "Paged cache with this many keys per page; 0 = contiguous. Pages shuffled over a pool.", 0)
      .at_least(0);
  t.add_int("split", "Key splits (split-KV); 0 = the library's heuristic.", 0).at_least(0);
  t.add_float("scale", "Softmax scale; 0 means 1/sqrt(d).", 0.0).at_least(0.0);
  t.add_string("dtype", "Element type of Q, the caches, the new K/V and O.", std::string("bf16"))
      .one_of({"fp16", "bf16"});
  CommonOptionSet common;
  common.warmup = false, common.ring_buffers = false, common.list_kernels = false;
  common.init_styles = "r10dsn";
  common.init_tensors = {"q", "cache-k", "cache-v", "new-k", "new-v"};
  common.verify_help = "Check O, LSE and the appended cache rows against the CPU reference; without it the tag is "
                       "[--].";
  add_common_options(t, common);
  ToolSpec spec;
  spec.name = "fmha_gen";
  spec.options = &t;
  spec.run = run_gen;
  spec.check = check_gen;
  spec.needs_gpu = [](const ParsedOptions&) { return true; };
  return run_tool(argc, argv, spec);
}
