// fmha_bwd: backward attention on Hopper (dQ, dK, dV of the forward), with the seed's options (docs/seed.md §2.5)
// plus --causal-type, --dtype, --deterministic, --two-pass (the seed's fmha_2bwd, §2.6), --scale and --json. Built a
// second time as fmha_2bwd (FMHA_TWO_PASS_TOOL): the same options without --two-pass, always the two-pass algorithm.
// fmha_bwd runs one pass at head dims up to 128 (the library's default, kAuto, takes two: --two-pass) and two at
// 192 / 128 (the only kernels there). Runs fmha's forward for O and LSE on generated inputs (the GPU forward
// reference's at 192 / 128, where no forward kernel exists), then the backward; --verify checks every element of dQ, dK and dV against the GPU backward reference;
// reports TFLOPS/s with the seed's backward FLOPs.
#include <cstdio>
#include <iostream>
#include <regex>
#include <stdexcept>

#include "common/cli.h"
#include "testing/bwd_runner.h"

using namespace fmha::cli;

namespace {

#ifdef FMHA_TWO_PASS_TOOL
constexpr bool kTwoPassTool = true;
#else
constexpr bool kTwoPassTool = false;
#endif

/// The case of one run: the derived problem (docs/seed.md §2.5) plus this tool's options. Throws
/// std::runtime_error with the derivation's message when the problem is inconsistent.
fmha::testing::BwdCase case_from(const ParsedOptions& o, FwdProblemArgs* args_out) {
  FwdProblemResult pr = derive_fwd_problem(problem_input_from(o), ProblemDefaults::backward());
  if (!pr.ok()) throw std::runtime_error(pr.error);
  const FwdProblemArgs& a = pr.args;
  fmha::testing::BwdCase c;
  c.dtype = o.get_string("dtype") == "fp16" ? fmha::DType::kFP16 : fmha::DType::kBF16;
  c.batch = a.b, c.heads_q = a.h, c.heads_kv = a.h_k, c.head_dim = a.d, c.head_dim_v = a.d_v;
  c.seqlens_q = a.seqlens_q, c.seqlens_k = a.seqlens_k;
  c.varlen = a.varlen, c.mask = a.mask, c.align = a.align;
  c.scale = float(o.get_float("scale"));
  c.deterministic = o.flag("deterministic");
  // Head dims above 128 (192 / 128) have the two-pass kernels only: fmha_bwd runs them there too.
  c.algorithm = kTwoPassTool || o.flag("two-pass") || a.d > 128 ? fmha::BwdAlgorithm::kTwoPass
                                                                : fmha::BwdAlgorithm::kOnePass;
  if (args_out) *args_out = a;
  return c;
}

/// The library's parameters for a case on placeholder (aligned, never dereferenced) buffers, for validation
/// without a GPU.
fmha::BwdParams probe_params(const fmha::testing::BwdCase& c, const FwdProblemArgs& a) {
  alignas(16) static char dummy[16];
  fmha::BwdParams p;
  p.dtype = c.dtype, p.batch = c.batch, p.heads_q = c.heads_q, p.heads_kv = c.heads_kv, p.head_dim = c.head_dim;
  p.head_dim_v = a.d_v;
  p.seqlen_q = a.max_seqlen_q(), p.seqlen_k = a.max_seqlen_k();
  if (c.varlen) {
    p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int*>(dummy);
    p.total_q = int(a.total_q()), p.total_k = int(a.total_k());
  }
  p.q = p.k = p.v = p.o = p.d_o = dummy;
  p.dq = p.dk = p.dv = dummy;
  p.lse = reinterpret_cast<const float*>(dummy);
  p.mask = c.mask, p.causal_align = c.align, p.softmax_scale = c.scale, p.deterministic = c.deterministic;
  p.algorithm = c.algorithm;
  fmha::set_bwd_contiguous_strides(p);
  return p;
}

/// ToolSpec::check: the problem derivation and the library's validation, before any GPU work (a head dim with no
/// kernel is reported as the library words it).
std::string check_bwd(const ParsedOptions& o) {
  if (o.flag("list-kernels")) return "";
  try {
    FwdProblemArgs a;
    const fmha::testing::BwdCase c = case_from(o, &a);
    const fmha::Status s = fmha::bwd_validate(probe_params(c, a));
    if (!s) return with_option_names(s.message());
    if (o.flag("verify") && o.flag("skip-reference"))
      return "--verify and --skip-reference: expected at most one (the check needs the forward's O and LSE)";
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> warn_bwd(const ParsedOptions& o) { return problem_warnings(o, ProblemDefaults::backward()); }

void run_bwd(const ParsedOptions& o, Reporter& rep) {
  if (o.flag("list-kernels")) {
    for (const char* k : {"bwd fp16 d64", "bwd fp16 d128", "bwd fp16 d192 dv128", "bwd bf16 d64", "bwd bf16 d128",
                          "bwd bf16 d192 dv128"})
      std::printf("%s\n", k);
    return;
  }
  FwdProblemArgs a;
  fmha::testing::BwdCase c = case_from(o, &a);
  c.iterations = o.get_int("iterations");
  c.skip_forward = o.flag("skip-reference");
  const char styles[4] = {init_style_for(o, "q"), init_style_for(o, "k"), init_style_for(o, "v"),
                          init_style_for(o, "do")};
  c.fill = [&](const std::string& t, std::vector<float>& vals) {
    InitParams ip;
    ip.seed = 2023 + uint64_t(t[0]) + uint64_t(t.size() > 1 ? t[1] : 0);
    const char code = styles[t == "q" ? 0 : t == "k" ? 1 : t == "v" ? 2 : 3];
    const std::string err = init_buffer(vals.data(), vals.size(), code, ip);
    if (!err.empty()) throw std::runtime_error(err);
  };
  std::printf("###### B %d H %d H_K %d Q %d K %d D %d D_VO %d Backward %s #SM %d\n", a.b, a.h, a.h_k, a.q, a.k, a.d,
              a.d_v, a.mask == fmha::MaskType::kCausal ? "Causal" : "Full",
              [] { auto g = query_gpu(nullptr); return g ? g->sm_count : 0; }());
  const std::string tile = a.d <= 64 ? "64" : a.d <= 128 ? "128" : std::to_string(a.d) + " dv" + std::to_string(a.d_v);
  const std::string name = std::string("bwd ") + fmha::to_string(c.dtype) + " d" + tile +
                           (c.algorithm == fmha::BwdAlgorithm::kTwoPass ? " two-pass" : "") +
                           (c.deterministic ? " deterministic" : "");
  if (o.given("kernel-filter") && !std::regex_search(name, std::regex(o.get_string("kernel-filter")))) return;
  const bool verify = o.flag("verify");
  const fmha::testing::BwdOutcome r = fmha::testing::run_bwd_case(c, verify);
  RunRecord rec;
  rec.kernel = name;
  rec.problem = {{"dtype", fmha::to_string(c.dtype)}, {"b", a.b}, {"h", a.h}, {"h_k", a.h_k}, {"q", a.q}, {"k", a.k},
                 {"d", a.d}, {"d_vo", a.d_v}, {"varlen", a.varlen}, {"mask", fmha::to_string(a.mask)},
                 {"causal_type", fmha::to_string(a.align)}, {"deterministic", c.deterministic},
                 {"two_pass", c.algorithm == fmha::BwdAlgorithm::kTwoPass}};
  if (set_failed_status(rec, r.status)) return rep.report(rec);
  rec.tflops = tflops_per_s(bwd_flops(a), set_times(rec, r.times_ms));
  rec.extra = {{"flops", bwd_flops(a)}};
  if (verify) {
    rec.verified = true;
    for (const auto& [tensor, cr] : {std::make_pair("dQ", &r.dq), std::make_pair("dK", &r.dk), std::make_pair("dV", &r.dv)})
      rec.checks.push_back(TensorCheck{tensor, cr->max_abs, cr->mean_abs, 0.0, 0.0, cr->ok});
    const bool pass = r.ok();
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
  OptionTable t(kTwoPassTool ? "fmha_2bwd" : "fmha_bwd",
                std::string(kTwoPassTool ? "Two-pass backward" : "Backward") +
                    " attention on Hopper: dQ, dK, dV of O = softmax(scale·mask(Q·Kᵀ))·V.");
  ProblemOptionSet problem;
  problem.family = ProblemFamily::kBackward;
  problem.d_vo = true;
  problem.head_dim_help = "Head dim of Q and K: a multiple of 8 up to 128 (64 and 128 have their own tiles; other "
                          "values run on the next larger one with the tail predicated), or 192 with --d_vo=128 (MLA "
                          "prefill; two passes, O and LSE from the GPU reference).";
  add_problem_options(t, problem);
  CommonOptionSet common;
  common.warmup = false;
  common.ring_buffers = false;
  common.init_tensors = {"q", "k", "v", "do"};
  common.verify_help = "Check every element of dQ, dK and dV against the GPU backward reference (fp64 accumulation); "
                       "without it the tag is [--].";
  add_common_options(t, common);
  t.add_string("dtype", "Element type of Q, K, V, O, dO and the gradients.", std::string("bf16"))
      .one_of({"fp16", "bf16"});
  t.add_flag("deterministic", "Bitwise repeatable gradients (dQ accumulated in a fixed order).");
  if (!kTwoPassTool)
    t.add_flag("two-pass", "Two-pass backward (the seed's fmha_2bwd): a dK/dV kernel, then a dQ kernel; no fp32 dQ "
                           "accumulator, repeatable bits. Without it this tool runs one pass at head dims up to 128 "
                           "(the library's default, kAuto, takes two) and two at 192.");
  t.add_flag("skip-reference", "Skip the forward that produces O and LSE (zeros instead; timing only).");
  t.add_float("scale", "Softmax scale; 0 means 1/sqrt(d).", 0.0).at_least(0.0);
  ToolSpec spec;
  spec.name = kTwoPassTool ? "fmha_2bwd" : "fmha_bwd";
  spec.options = &t;
  spec.run = run_bwd;
  spec.check = check_bwd;
  spec.warnings = warn_bwd;
  return run_tool(argc, argv, spec);
}
