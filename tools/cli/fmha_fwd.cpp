// fmha_fwd: forward (context / prefill) attention on Hopper, with the seed's options (docs/seed.md §2.1), --dtype and
// --json. Runs the kernel on generated inputs, optionally verifies against the reference that --reference names (the
// GPU one by default), reports TFLOPS/s.
#include <cstdio>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "common/cli.h"
#include "testing/fwd_runner.h"

using namespace fmha::cli;

namespace {

fmha::DType parse_dtype(const std::string& s) { return s == "fp16" ? fmha::DType::kFP16 : fmha::DType::kBF16; }

/// The case of one run: the derived problem (docs/seed.md §2.1) plus this tool's options. Throws std::runtime_error with
/// the derivation's message when the problem is inconsistent.
fmha::testing::FwdCase case_from(const ParsedOptions& o, FwdProblemArgs* args_out) {
  FwdProblemResult pr = derive_fwd_problem(problem_input_from(o), ProblemDefaults::forward());
  if (!pr.ok()) throw std::runtime_error(pr.error);
  const FwdProblemArgs& a = pr.args;
  fmha::testing::FwdCase c;
  c.dtype = parse_dtype(o.get_string("dtype"));
  c.batch = a.b, c.heads_q = a.h, c.heads_kv = a.h_k, c.head_dim = a.d;
  c.seqlens_q = a.seqlens_q, c.seqlens_k = a.seqlens_k;
  c.varlen = a.varlen, c.mask = a.mask, c.align = a.align;
  const std::string sched = o.flag("persistent") ? "persistent" : o.get_string("scheduler");
  c.scheduler = sched == "persistent"   ? fmha::TileScheduler::kPersistent
                : sched == "individual" ? fmha::TileScheduler::kIndividual
                                        : fmha::TileScheduler::kAuto;
  const std::string pp = o.get_string("pingpong");
  c.pingpong = pp == "on" ? fmha::Toggle::kOn : pp == "off" ? fmha::Toggle::kOff : fmha::Toggle::kAuto;
  c.sm_count = o.get_int("sm-count");
  c.scale = float(o.get_float("scale"));
  if (args_out) *args_out = a;
  return c;
}

/// The library's parameters for a case, on placeholder (aligned, never dereferenced) buffers: for validation
/// and the kernel name without a GPU.
fmha::FwdParams probe_params(const fmha::testing::FwdCase& c) {
  alignas(16) static char dummy[16];
  const int* cu = c.varlen ? reinterpret_cast<const int*>(dummy) : nullptr;
  return fmha::testing::make_fwd_params(c, dummy, dummy, dummy, dummy, nullptr, cu, cu);
}

/// ToolSpec::check: the problem derivation and the library's validation, before any GPU work. Any problem the
/// library refuses (an invalid argument, or a head dim or dtype it has no kernel for, e.g. --d=136) is a usage
/// error, with the library's field names replaced by the option names.
std::string check_fwd(const ParsedOptions& o) {
  if (o.flag("list-kernels")) return "";
  try {
    const fmha::Status s = fmha::fwd_validate(probe_params(case_from(o, nullptr)));
    if (!s) return with_option_names(s.message());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// ToolSpec::warnings: the problem derivation's notes (e.g. a --varlen-q list given without --varlen).
std::vector<std::string> warn_fwd(const ParsedOptions& o) { return problem_warnings(o, ProblemDefaults::forward()); }

void run_fwd(const ParsedOptions& o, Reporter& rep) {
  if (o.flag("list-kernels")) {
    for (const std::string& k : fmha::fwd_kernel_variants()) std::printf("%s\n", k.c_str());
    return;
  }
  FwdProblemArgs a;
  fmha::testing::FwdCase c = case_from(o, &a);  // its warnings were printed before the GPU check (warn_fwd)
  c.warmup = o.get_int("warmup_iterations");
  c.iterations = o.get_int("iterations");
  c.ring_sets = o.get_int("tensor_ring_buffers");
  c.check_rows = o.get_int("verify-rows");
  c.reference = o.get_string("reference") == "cpu" ? fmha::testing::RefImpl::kCpu : fmha::testing::RefImpl::kGpu;
  const char styles[3] = {init_style_for(o, "q"), init_style_for(o, "k"), init_style_for(o, "v")};
  c.fill = [&](const std::string& t, std::vector<float>& vals) {
    InitParams ip;
    ip.seed = 2023 + uint64_t(t[0]);
    const char code = styles[t == "q" ? 0 : t == "k" ? 1 : 2];
    const std::string err = init_buffer(vals.data(), vals.size(), code, ip);
    if (!err.empty()) throw std::runtime_error(err);
  };

  std::printf("###### B %d H %d H_K %d Q %d K %d D %d Forward %s #SM %d\n", a.b, a.h, a.h_k, a.q, a.k, a.d,
              a.mask_word(), [] { auto g = query_gpu(nullptr); return g ? g->sm_count : 0; }());
  if (a.varlen) {
    std::printf("N: %d, Q: %d, KV: %d\n", a.b, a.q, a.k);
    std::printf("Q max: %d total: %lld vs even %lld\n", a.max_seqlen_q(), (long long)a.total_q(), (long long)a.b * a.q);
    std::printf("KV max: %d total: %lld vs even %lld\n", a.max_seqlen_k(), (long long)a.total_k(), (long long)a.b * a.k);
  }

  // The kernel's display name, as the library reports it for this problem.
  const std::string name = fmha::fwd_kernel_name(probe_params(c));
  if (o.given("kernel-filter") && !std::regex_search(name, std::regex(o.get_string("kernel-filter")))) return;

  const bool verify = o.flag("verify");
  fmha::testing::FwdOutcome r = fmha::testing::run_fwd_case(c, verify);
  RunRecord rec;
  rec.kernel = name;
  rec.problem = {{"dtype", fmha::to_string(c.dtype)}, {"b", a.b}, {"h", a.h}, {"h_k", a.h_k}, {"q", a.q}, {"k", a.k},
                 {"d", a.d}, {"varlen", a.varlen}, {"mask", fmha::to_string(a.mask)},
                 {"causal_type", fmha::to_string(a.align)}, {"scheduler", o.flag("persistent") ? "persistent" : o.get_string("scheduler")},
                 {"pingpong", o.get_string("pingpong")}};
  if (set_failed_status(rec, r.status)) return rep.report(rec);
  rec.tflops = tflops_per_s(fwd_flops(a), set_times(rec, r.times_ms));
  rec.extra = {{"flops", fwd_flops(a)}, {"tolerance", o.get_string("tolerance")}};
  if (verify) {
    rec.verified = true;
    const bool scaled = o.get_string("tolerance") == "scaled";
    const auto& co = scaled ? r.o : r.o_fixed;
    const auto& cl = scaled ? r.lse : r.lse_fixed;
    const fmha::ref::FixedThresholds th = fmha::ref::seed_thresholds(c.dtype, false);
    rec.checks.push_back(TensorCheck{"O", co.max_abs, co.mean_abs, scaled ? 0.0 : th.max, scaled ? 0.0 : th.mean, co.ok});
    rec.checks.push_back(TensorCheck{"LSE", cl.max_abs, cl.mean_abs, scaled ? 0.0 : th.max, scaled ? 0.0 : th.mean, cl.ok});
    const bool pass = co.ok && cl.ok && r.untouched && r.all_written;
    rec.tag = pass ? ResultTag::kOk : ResultTag::kFail;
    if (!r.untouched || !r.all_written) rec.message = r.summary();
    if (!pass) std::cerr << "Reference check failed: " << r.summary() << "\n";
  } else {
    rec.tag = ResultTag::kUnverified;
  }
  rep.report(rec);
}

}  // namespace

int main(int argc, char** argv) {
  OptionTable t("fmha_fwd", "Forward (context / prefill) attention on Hopper: O = softmax(scale·mask(Q·Kᵀ))·V and LSE.");
  ProblemOptionSet problem;
  problem.head_dim_help = "Head dim of Q, K and V: a multiple of 8 from 8 to 128 (32, 64 and 128 have their own "
                          "tiles; other values run on the next larger one with the tail predicated).";
  add_problem_options(t, problem);
  CommonOptionSet common;
  common.verify_help = "Check O and LSE against the reference that --reference names (the GPU one by default); "
                       "without it the tag is [--].";
  add_common_options(t, common);
  t.add_string("dtype", "Element type of Q, K, V and O.", std::string("bf16")).one_of({"fp16", "bf16"});
  t.add_flag("persistent", "Use the persistent tile scheduler (grid = SMs); same as --scheduler=persistent.");
  t.add_string("scheduler", "Tile scheduler: auto (the library chooses), individual (one CTA per tile) or persistent.",
               std::string("auto")).one_of({"auto", "individual", "persistent"});
  t.add_string("pingpong", "Inter-warpgroup ping-pong of the consumer warpgroups: auto, on or off.",
               std::string("auto")).one_of({"auto", "on", "off"});
  t.add_float("scale", "Softmax scale; 0 means 1/sqrt(d).", 0.0).at_least(0.0);
  t.add_string("tolerance",
               "Verification rule: scaled (the library's scale-aware bound, docs/numerics.md) or seed (the seed's "
               "fixed thresholds, docs/seed.md §6).",
               std::string("scaled")).one_of({"scaled", "seed"});
  t.add_string("reference",
               "Reference for --verify: gpu (a plain fp64 CUDA kernel, every row in seconds) or cpu (the CPU "
               "reference on all cores).",
               std::string("gpu")).one_of({"gpu", "cpu"});
  t.add_int("verify-rows", "Rows per batch entry and head checked by --verify (the last ones); 0 = all.", 0)
      .at_least(0);
  ToolSpec spec;
  spec.name = "fmha_fwd";
  spec.options = &t;
  spec.run = run_fwd;
  spec.check = check_fwd;
  spec.warnings = warn_fwd;
  return run_tool(argc, argv, spec);
}
