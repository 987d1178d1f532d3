// fmha CLI core: problem-shape options and their default derivation for the forward-style tools (fmha_fwd,
// mla_fwd) and the backward tool (fmha_bwd), exactly as docs/seed.md §2.1 / §2.5, plus the FLOP formulas of docs/seed.md §7.
//
// The derivation is a pure function of a plain input struct so it can be unit-tested without a command line;
// problem_input_from() fills that struct from a ParsedOptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/options.h"
#include "fmha/types.h"

namespace fmha::cli {

/// Which tool family's rules apply.
enum class ProblemFamily {
  kForward,   ///< fmha_fwd / mla_fwd: 256-token fallback, varlen without lists gives every batch exactly q / k
  kBackward,  ///< fmha_bwd: 1024-token fallback, varlen without lists draws each batch's length (seeded)
};

/// Constants of the derivation. forward() and backward() return the seed's values.
struct ProblemDefaults {
  ProblemFamily family = ProblemFamily::kForward;
  int fallback_seqlen = 256;     ///< q = k = this when neither is given
  int default_d = 128;           ///< --d default
  int head_budget = 2048;        ///< h defaults to head_budget / d (at least 1)
  int token_budget = 16384;      ///< b defaults to token_budget / k (at least 1)
  /// kBackward, --varlen without a list: length of batch i ~ round(Normal(q, q/2)) clamped to ≥ 0, from a
  /// counter-based generator seeded with this value (stream 0 for queries, 1 for keys): deterministic on every
  /// platform.
  uint64_t varlen_seed = 0x5eed0b3d2024ull;

  static ProblemDefaults forward();   ///< docs/seed.md §2.1
  static ProblemDefaults backward();  ///< docs/seed.md §2.5
};

/// What the user gave; nullopt / empty = not given. Lists are only used when `varlen` is true (as in the seed).
struct FwdProblemInput {
  std::optional<int> b, h, h_k, d, d_v, q, k;
  bool varlen = false;
  std::optional<std::vector<int>> varlen_q, varlen_k;
  std::string mask;         ///< "", "no", "none", "residual" or "causal"
  std::string causal_type;  ///< "", "qbegin" or "qend"
  /// Head dim used for the h = head_budget / x default when it is not d (mla_fwd passes dl = 128, so h = 16 while
  /// d = 192). nullopt: d.
  std::optional<int> h_default_dim;
};

/// The derived problem. All lengths are tokens; vectors have `b` entries.
struct FwdProblemArgs {
  int b = 0;
  int h = 0;      ///< query heads
  int h_k = 0;    ///< K/V heads (divides h)
  int d = 0;      ///< QK head dim
  int d_v = 0;    ///< V/O head dim (= d unless given)
  int q = 0;      ///< the seed's q: per-batch query length, or the list's sum when --varlen-q was given
  int k = 0;      ///< the seed's k: per-batch key length, or the list's sum when --varlen-k was given
  std::vector<int> seqlens_q;  ///< query length of each batch entry
  std::vector<int> seqlens_k;  ///< key length of each batch entry
  bool varlen = false;         ///< packed (variable-length) layout
  fmha::MaskType mask = fmha::MaskType::kNone;
  fmha::CausalAlign align = fmha::CausalAlign::kQBegin;
  std::vector<std::string> warnings;  ///< non-fatal notes for the user (e.g. a list ignored without --varlen)

  int max_seqlen_q() const;       ///< max over seqlens_q (0 when empty)
  int max_seqlen_k() const;       ///< max over seqlens_k
  int64_t total_q() const;        ///< Σ seqlens_q
  int64_t total_k() const;        ///< Σ seqlens_k
  int64_t sum_qk() const;         ///< Σ_b seqlens_q[b]·seqlens_k[b] (score elements per head)
  /// The seed's header word for the mask: "Causal", "Residual" or "None".
  const char* mask_word() const;
};

/// Outcome of derive_fwd_problem: the problem, or an error (spec wording where the seed has one, e.g.
/// "Can't provide --q and --varlen-q", "Invalid --varlen-q length: expected 4 entries (--b=4), got 2").
struct FwdProblemResult {
  FwdProblemArgs args;  ///< valid only when ok()
  std::string error;  ///< "" on success
  /// True when error is empty.
  bool ok() const { return error.empty(); }
};

/// Derives b, h, h_k, d, d_v, per-batch lengths, mask and alignment (docs/seed.md §2.1, backward variant §2.5):
///  1. with --varlen, apply the lists: a list and its scalar (--q / --k) together is an error; the list sets b when
///     b is unset, otherwise its length must equal b; the scalar becomes the list's sum;
///  2. q unset → q = k;  3. k unset → k = q;  4. both unset → q = k = fallback_seqlen;
///  5. b unset → b = token_budget / k, at least 1 (also when k = 0);
///  d defaults to default_d, d_v to d, h to head_budget / d (≥ 1), h_k to h; h % h_k must be 0.
///  Per-batch lengths: the list when given; otherwise q (resp. k) for every entry, except kBackward + --varlen,
///  which draws them (see ProblemDefaults::varlen_seed).
///  Mask: ""/"no"/"none" → none, or residual with --varlen; "residual"; "causal" with causal_type "qend" →
///  bottom-right, else top-left. Any other mask or causal_type string is an error naming it.
FwdProblemResult derive_fwd_problem(const FwdProblemInput& in, const ProblemDefaults& defaults);

/// Which problem options add_problem_options declares.
struct ProblemOptionSet {
  ProblemFamily family = ProblemFamily::kForward;
  bool head_dim = true;     ///< --d (mla_fwd declares its own --d/--dl/--dr instead)
  bool d_vo = false;        ///< --d_vo (backward)
  bool causal_type = true;  ///< --causal-type (the backward has none: always q-begin)
  /// Help text of --d: the tool states the head dims its kernels take.
  std::string head_dim_help = "Head dim of Q and K.";
};

/// Declares --d, --d_vo, --h, --h_k, --q, --k, --b, --varlen, --varlen-q, --varlen-k, --mask, --causal-type with
/// the seed's help texts and derived-default notes. Values are range-checked at parse time (b, h, h_k, d ≥ 1;
/// q, k, list elements ≥ 0).
void add_problem_options(OptionTable& table, const ProblemOptionSet& set = {});

/// A library message (fmha::Status::message(), which names FwdParams fields) rewritten in the command line's terms:
/// every whole-word field name with a problem option is replaced by that option, e.g.
/// "heads_q % heads_kv: expected 0, got 3 (heads_q=9, heads_kv=6)" → "--h % --h_k: expected 0, got 3 (--h=9,
/// --h_k=6)". Names: batch --b, heads_q --h, heads_kv --h_k, head_dim --d, head_dim_v --d_vo, seqlen_q --q,
/// seqlen_k --k, softmax_scale --scale, sm_count --sm-count. Other words are left as they are.
std::string with_option_names(const std::string& library_message);

/// Reads whichever of the add_problem_options names the table declares into a FwdProblemInput.
FwdProblemInput problem_input_from(const ParsedOptions& options);

/// A ToolSpec::warnings of the forward-style tools and fmha_bwd: the derivation's notes for `options` under
/// `defaults` (e.g. a --varlen-q list given without --varlen); none with --list-kernels or when the problem is
/// inconsistent (the check reports that).
std::vector<std::string> problem_warnings(const ParsedOptions& options, const ProblemDefaults& defaults);

/// Forward FLOPs (docs/seed.md §7): 4 · Σ_b(Sq_b·Sk_b) · d · h, halved for a causal mask (either alignment).
double fwd_flops(const FwdProblemArgs& p);
/// MLA prefill FLOPs (docs/seed.md §7): 2 · Σ_b(Sq_b·Sk_b) · h · c · ((dl + dr) + dl), c = 0.5 for causal.
double mla_fwd_flops(const FwdProblemArgs& p, int dl, int dr);
/// Backward FLOPs (docs/seed.md §7): 2 · c · Sq · Sk · (3·d + 2·d_v) · h · b with c = 0.5 for causal; Sq/Sk are the
/// per-batch lengths, or for varlen the maximum lengths (the seed's accounting, kept for comparable numbers).
double bwd_flops(const FwdProblemArgs& p);
/// Throughput in TFLOP/s of `flops` done in `time_ms` milliseconds (inf/nan for time 0, as the seed prints).
double tflops_per_s(double flops, double time_ms);
/// Bandwidth in TB/s of `bytes` moved in `time_ms` milliseconds.
double tbytes_per_s(double bytes, double time_ms);

}  // namespace fmha::cli
