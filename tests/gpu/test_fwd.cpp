// GPU forward tests: the seed's matrix (docs/seed.md §8) for fp16 and bf16, the edge cases of docs/edge-cases.md,
// real model shapes, determinism and a non-default stream. Every output is poisoned with NaN before the launch and
// compared with the CPU reference (k = 2 scale-aware rule); memory outside valid rows must keep its poison.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/gpu_env.h"
#include "kernels/fwd_tiles.h"
#include "reference/dtype.h"
#include "testing/fwd_runner.h"

using fmha::CausalAlign;
using fmha::DType;
using fmha::MaskType;
using fmha::testing::FwdCase;
using fmha::testing::run_fwd_case;

namespace {

// Causal problems at head-dim tiles ≤ 64 run 128-row tiles (two consumer warpgroups) up to this many keys, 192-row
// tiles (three) beyond: kShortKeys is under the limit, kLongKeys just past it.
constexpr int kShortCausalMax = fmha::tiles::kFwdShortCausalMaxKeys;
constexpr int kShortKeys = kShortCausalMax < 1100 ? kShortCausalMax : 1100;
constexpr int kLongKeys = kShortCausalMax + 52;
// Non-causal problems at head-dim tiles ≤ 64 run 128-row tiles up to kShortNonCausalMax keys and 192-row tiles
// beyond (0: never 128): kNcShortKeys is under the limit (when there is one), kNcLongKeys just past it.
constexpr int kShortNonCausalMax = fmha::tiles::kFwdShortNonCausalMaxKeys;
constexpr int kNcShortKeys = kShortNonCausalMax > 0 && kShortNonCausalMax < 700 ? kShortNonCausalMax : 700;
constexpr int kNcLongKeys = (kShortNonCausalMax > 0 ? kShortNonCausalMax : 0) + 52;

struct Named {
  std::string name;
  FwdCase c;
};

// Test names and failure messages show the case name, not the struct's bytes.
void PrintTo(const Named& n, std::ostream* os) { *os << n.name; }

std::vector<int> rep(int n, int v) { return std::vector<int>(size_t(n), v); }

FwdCase dense(int b, int h, int hk, int sq, int sk, int d, MaskType m, CausalAlign a = CausalAlign::kQBegin) {
  FwdCase c;
  c.batch = b, c.heads_q = h, c.heads_kv = hk, c.head_dim = d;
  c.seqlens_q = rep(b, sq), c.seqlens_k = rep(b, sk);
  c.mask = m, c.align = a;
  return c;
}

FwdCase varlen(int h, int hk, int d, std::vector<int> q, std::vector<int> k, MaskType m,
               CausalAlign a = CausalAlign::kQBegin) {
  FwdCase c;
  c.batch = int(q.size()), c.heads_q = h, c.heads_kv = hk, c.head_dim = d;
  c.seqlens_q = std::move(q), c.seqlens_k = std::move(k);
  c.varlen = true, c.mask = m, c.align = a;
  return c;
}

/// The seed's forward matrix (docs/seed.md §8.1): BASIC … VARLEN_22, with each causal case in both alignments.
std::vector<Named> seed_matrix() {
  std::vector<Named> v;
  v.push_back({"basic", dense(1, 4, 4, 512, 512, 128, MaskType::kNone)});
  v.push_back({"causal_00", dense(1, 4, 4, 512, 512, 128, MaskType::kCausal)});
  v.push_back({"causal_01_qend", dense(1, 1, 1, 1013, 1024, 128, MaskType::kCausal, CausalAlign::kQEnd)});
  v.push_back({"causal_01_qbegin", dense(1, 1, 1, 1013, 1024, 128, MaskType::kCausal, CausalAlign::kQBegin)});
  v.push_back({"varlen", varlen(4, 4, 128, {512}, {512}, MaskType::kResidual)});
  v.push_back({"hdim64", dense(2, 4, 4, 512, 512, 64, MaskType::kNone)});
  v.push_back({"gqa", dense(2, 4, 2, 512, 512, 64, MaskType::kNone)});
  struct L { int d, h, hk; std::vector<int> q, k; };
  const std::vector<L> lists = {
      {128, 8, 4, {128}, {128}}, {64, 4, 4, {128}, {128}}, {128, 4, 2, {128}, {128}},
      {128, 8, 8, {256, 256}, {512, 512}}, {128, 8, 4, {256, 256}, {512, 512}}, {128, 8, 1, {256, 256}, {512, 512}},
      {128, 8, 2, {256, 256, 256, 256}, {256, 768, 512, 512}}, {128, 8, 2, {256, 256, 256, 256}, {256, 0, 1280, 512}},
      {128, 8, 2, {256, 0, 512, 256}, {256, 256, 1024, 512}}, {64, 16, 16, {100, 300}, {100, 300}},
      {64, 4, 4, {3, 2}, {2, 5}}, {64, 4, 2, {17, 10}, {13, 10}}, {64, 4, 4, {177, 845}, {257, 766}},
      {64, 4, 2, {177, 366, 479}, {257, 0, 766}}, {64, 4, 4, {1}, {1}}};
  for (size_t i = 0; i < lists.size(); ++i) {
    const auto& l = lists[i];
    char n[32];
    std::snprintf(n, sizeof n, "varlen_%02zu", i);
    v.push_back({std::string(n) + "_residual", varlen(l.h, l.hk, l.d, l.q, l.k, MaskType::kResidual)});
    v.push_back({std::string(n) + "_causal_qbegin", varlen(l.h, l.hk, l.d, l.q, l.k, MaskType::kCausal)});
    v.push_back({std::string(n) + "_causal_qend", varlen(l.h, l.hk, l.d, l.q, l.k, MaskType::kCausal, CausalAlign::kQEnd)});
  }
  const std::vector<std::pair<int, int>> causal_lists = {{128, 128}, {17, 257}, {17, 25}, {1013, 1024}, {1024, 1035}};
  for (size_t i = 0; i < causal_lists.size(); ++i) {
    for (auto a : {CausalAlign::kQBegin, CausalAlign::kQEnd}) {
      const std::string n = "varlen_causal_" + std::to_string(causal_lists[i].first) + "x" +
                            std::to_string(causal_lists[i].second) + (a == CausalAlign::kQEnd ? "_qend" : "_qbegin");
      v.push_back({n, varlen(4, 4, 128, {causal_lists[i].first}, {causal_lists[i].second}, MaskType::kCausal, a)});
    }
  }
  return v;
}

/// Edge cases of docs/edge-cases.md (E01–E06, E08 sampled, E09) and other shapes.
std::vector<Named> edge_cases() {
  std::vector<Named> v;
  for (auto a : {CausalAlign::kQEnd, CausalAlign::kQBegin}) {
    const std::string s = a == CausalAlign::kQEnd ? "qend" : "qbegin";
    v.push_back({"E01_dense_" + s, dense(1, 8, 8, 2048, 1024, 128, MaskType::kCausal, a)});
    v.push_back({"E01_varlen_" + s, varlen(8, 8, 128, {2048}, {1024}, MaskType::kCausal, a)});
    v.push_back({"E01_tiny_" + s, dense(1, 8, 8, 8, 3, 128, MaskType::kCausal, a)});
  }
  for (int s : {1, 63, 64, 65, 127, 129, 191, 1013})
    for (auto m : {MaskType::kNone, MaskType::kCausal}) {
      Named n{"E02_s" + std::to_string(s) + (m == MaskType::kCausal ? "_causal" : "_none"), dense(1, 4, 4, s, s, 128, m)};
      v.push_back(n);
      n.name += "_fp16";
      n.c.dtype = DType::kFP16;
      v.push_back(n);
    }
  v.push_back({"E02_1013x1024_qend", dense(1, 4, 4, 1013, 1024, 128, MaskType::kCausal, CausalAlign::kQEnd)});
  v.push_back({"E02_1024x1035_qend", dense(1, 4, 4, 1024, 1035, 128, MaskType::kCausal, CausalAlign::kQEnd)});
  {
    Named a{"E03a", varlen(9, 3, 64, {0, 1, 0, 1}, {0, 3, 0, 5}, MaskType::kCausal, CausalAlign::kQEnd)};
    a.c.scale = 1.f;
    v.push_back(a);
    v.push_back({"E03b", varlen(21, 7, 120, {0, 0, 0, 1}, {0, 0, 0, 1}, MaskType::kNone)});
  }
  {
    Named e{"E04_trailing_rows", varlen(16, 16, 64, {144, 288, 512}, {144, 288, 512}, MaskType::kNone)};
    e.c.extra_rows = 2;
    v.push_back(e);
  }
  {
    // NaN rows past the last entry under the causal 128-row kernel, whose tile prologue (two Q·Kᵀ issued together,
    // then the first P·V alone) zeroes the V tail of the first block it walks: the last query tile of the 300-key
    // entry starts on keys 256–383, of which 300–302 are NaN rows.
    Named e{"nan_past_keys_causal_d64", varlen(2, 2, 64, {300}, {300}, MaskType::kCausal)};
    e.c.extra_rows = 3;
    v.push_back(e);
  }
  {
    Named e{"E05_nan_past_keys", varlen(1, 1, 64, {1, 1}, {1, 3}, MaskType::kNone)};
    e.c.dtype = DType::kFP16;
    e.c.init = 'c';
    e.c.q_value = 0.5f;
    e.c.extra_rows = 3;
    v.push_back(e);
    // The same NaN rows past the last entry on the 192-row non-causal tiles (the last entry has kNcLongKeys keys;
    // the small entries above run 128-row tiles), fp16, random inputs.
    Named f{"E05_nan_past_keys_192", varlen(4, 2, 64, {1, 700}, {3, kNcLongKeys}, MaskType::kNone)};
    f.c.dtype = DType::kFP16;
    f.c.extra_rows = 3;
    v.push_back(f);
  }
  {
    Named e{"E06_fused_qkv_stride", varlen(16, 16, 128, {300, 77, 512}, {300, 77, 512}, MaskType::kCausal)};
    e.c.row_pad = 2 * 16 * 128;  // Q, K, V as column views of a [tokens][3·H·D] buffer
    v.push_back(e);
  }
  {
    // E07(b): row stride × row index above 2^31 elements (8192-element rows, 270000 of them).
    Named e{"E07b_offsets_over_2pow31", dense(1, 1, 1, 270000, 270000, 64, MaskType::kCausal)};
    e.c.row_pad = 8192 - 64;
    e.c.check_rows = 64;  // the rows past 2^31 elements (all 270000 rows: 2 minutes of the GPU reference)
    v.push_back(e);
  }
  for (int s : {32767, 32769, 65537}) {
    Named e{"E08_s" + std::to_string(s), dense(1, 1, 1, s, s, 128, MaskType::kCausal)};
    v.push_back(e);
  }
  {
    Named e{"E09_batch70000", dense(70000, 1, 1, 16, 16, 64, MaskType::kNone)};
    v.push_back(e);
    Named f{"E09_heads70000", dense(1, 70000, 1, 16, 16, 64, MaskType::kNone)};
    v.push_back(f);
  }
  // Head dims that run through a larger tile with predication, and d 32.
  // Padded rows (row_pad) put the next row's NaN poison right after each head's last column: an overrun past
  // head_dim into it shows as a NaN mismatch or a written pad.
  for (int d : {32, 40, 96, 120}) {
    Named n{"hdim" + std::to_string(d), dense(2, 4, 2, 333, 271, d, MaskType::kCausal)};
    n.c.row_pad = 8;
    v.push_back(n);
  }
  // Epilogue clipping, 300 query rows. Head dim 40 (head-dim tile 64): the dense TMA store of O is one box cut at
  // column 40; on 128-row tiles (500 keys, within kShortNonCausalMax) the last tile's second warpgroup slice (rows
  // 320..383) lies wholly past the end and is not stored, and the slice before it is cut at row 300; "_192"
  // (kNcLongKeys keys, 192-row tiles, fp16): the second tile's slices 256..319 (cut at 300) and 320..383 (not
  // stored). Head dim 96 (tile 128): the 16-byte stores skip the columns past 96 and the rows past 300. Padded rows
  // catch a write past head_dim.
  for (int d : {96, 40}) {
    Named n{"tma_store_clip_d" + std::to_string(d), dense(2, 3, 1, 300, 500, d, MaskType::kNone)};
    n.c.row_pad = 8;
    v.push_back(n);
  }
  {
    Named n{"tma_store_clip_d40_192", dense(2, 3, 1, 300, kNcLongKeys, 40, MaskType::kNone)};
    n.c.row_pad = 8;
    n.c.dtype = DType::kFP16;
    v.push_back(n);
  }
  // Tensors without rows: no query rows (nothing to do) and no keys (O = 0, LSE = −inf), dense and varlen.
  v.push_back({"dense_sq0", dense(2, 4, 4, 0, 64, 64, MaskType::kNone)});
  v.push_back({"dense_sk0", dense(2, 4, 4, 64, 0, 64, MaskType::kCausal, CausalAlign::kQEnd)});
  v.push_back({"varlen_all_keys_empty", varlen(4, 2, 128, {5, 130}, {0, 0}, MaskType::kNone)});
  // A persistent grid of 1 and 3 CTAs walking many tiles, including tiles of empty entries: every CTA runs
  // several tiles, so both Q buffers and their reuse after a phase flip are exercised. kShortKeys: the 128-row
  // causal tiles of the head-dim ≤ 64 units (two consumer warpgroups); the "_192" cases add one entry with
  // kLongKeys keys, so the same batch runs the 192-row tiles (three consumer warpgroups).
  for (int sms : {1, 3}) {
    for (int long_k : {kShortKeys, kLongKeys}) {
      const std::string tag = std::to_string(sms) + (long_k > kShortCausalMax ? "_192" : "");
      Named n{"persistent_sm" + tag, varlen(4, 2, 64, {300, 0, 129, 1}, {200, 7, 0, long_k}, MaskType::kCausal)};
      n.c.scheduler = fmha::TileScheduler::kPersistent;
      n.c.sm_count = sms;
      v.push_back(n);
      // The same with ping-pong forced on: the consumer warpgroups pass the turn round robin across tiles,
      // including tiles that see no key.
      Named pp{"persistent_pingpong_sm" + tag,
               varlen(4, 2, 64, {300, 0, 129, 1}, {200, 7, 0, long_k}, MaskType::kCausal, CausalAlign::kQEnd)};
      pp.c.scheduler = fmha::TileScheduler::kPersistent;
      pp.c.pingpong = fmha::Toggle::kOn;
      pp.c.sm_count = sms;
      v.push_back(pp);
    }
  }
  // Head-dim tile 32 (its own shared-memory swizzle and Q stage stride) on one persistent CTA, so that it walks
  // many tiles through both Q buffers: non-causal with at most kShortNonCausalMax keys (128-row tiles) and with
  // more (192-row tiles), causal with at most kShortCausalMax keys (128-row tiles) and with more (192-row tiles).
  for (auto [name, sk, mask] : {std::tuple{"d32_persistent_sm1", kNcShortKeys, MaskType::kNone},
                                std::tuple{"d32_persistent_sm1_192", kNcLongKeys, MaskType::kNone},
                                std::tuple{"d32_persistent_sm1_causal", 1000, MaskType::kCausal},
                                std::tuple{"d32_persistent_sm1_causal_192", kLongKeys, MaskType::kCausal}}) {
    Named n{name, dense(2, 3, 3, 900, sk, 32, mask, CausalAlign::kQEnd)};
    n.c.scheduler = fmha::TileScheduler::kPersistent;
    n.c.sm_count = 1;
    v.push_back(n);
  }
  // Head-dim tile 64 on one persistent CTA: each consumer warpgroup stores O of many tiles through the same
  // staging slice, so the wait for the previous tile's TMA store before the slice is rewritten is exercised (also
  // in the sanitizer smoke set of scripts/gpu_check.sh), on 128-row tiles (kNcShortKeys keys) and 192-row tiles
  // ("_192", kNcLongKeys keys; with the non-causal limit at 0 both run 192-row tiles, under distinct names).
  for (int sk : {kNcShortKeys, kNcLongKeys}) {
    Named n{std::string("d64_persistent_sm1") + (sk == kNcLongKeys ? "_192" : ""),
            dense(2, 3, 3, 900, sk, 64, MaskType::kNone)};
    n.c.scheduler = fmha::TileScheduler::kPersistent;
    n.c.sm_count = 1;
    v.push_back(n);
  }
  // Causal q-end with 100 more queries than keys, on one persistent CTA (pipelines and the ping-pong turn ring carry
  // over across many tiles): in the first tiles the first warpgroup's rows see no key at all (O = 0, LSE = −inf)
  // while a later warpgroup's rows of the same tile do, so the tile walks blocks that are wholly masked for some of
  // its warpgroups. Head dim 64 runs 128-row tiles at kShortKeys keys and 192-row tiles at kLongKeys ("_192"),
  // head dim 128 runs 128-row tiles. (Written for an experiment in which such warpgroups skipped those blocks,
  // docs/perf-log.md v8; the main kernel walks them.)
  for (auto pp : {fmha::Toggle::kOff, fmha::Toggle::kOn})
    for (auto [d, sk] : {std::pair{64, kShortKeys}, std::pair{64, kLongKeys}, std::pair{128, 1200}}) {
      Named n{"qend_unseen_d" + std::to_string(d) + "_sm1" + (sk > kShortCausalMax ? "_192" : "") +
                  (pp == fmha::Toggle::kOn ? "_pingpong" : ""),
              dense(sk > kShortCausalMax ? 1 : 2, 3, 3, sk + 100, sk, d, MaskType::kCausal, CausalAlign::kQEnd)};
      n.c.scheduler = fmha::TileScheduler::kPersistent;
      n.c.pingpong = pp;
      n.c.sm_count = 1;
      v.push_back(n);
    }
  // The longest causal problem on the 128-row tiles of the head-dim ≤ 64 units (its tiles' walks are the longest
  // ones of that kernel), GQA 2:1, q-end.
  v.push_back({"short_causal_at_limit_d64",
               dense(1, 4, 2, kShortCausalMax, kShortCausalMax, 64, MaskType::kCausal, CausalAlign::kQEnd)});
  // GQA with a ratio that is not a power of two, persistent scheduler.
  {
    Named g{"gqa_6_2_persistent", dense(3, 6, 2, 700, 900, 128, MaskType::kCausal, CausalAlign::kQEnd)};
    g.c.scheduler = fmha::TileScheduler::kPersistent;
    v.push_back(g);
    Named h{"varlen_persistent", varlen(8, 2, 64, {17, 0, 900, 256}, {25, 5, 1000, 0}, MaskType::kCausal)};
    h.c.scheduler = fmha::TileScheduler::kPersistent;
    v.push_back(h);
  }
  // Real model shapes: Llama-3-8B prefill (32/8 heads, d 128) at 4k and 8k tokens, and a mixed varlen batch.
  for (int s : {4096, 8192}) {
    Named l{"llama3_8b_" + std::to_string(s), dense(1, 32, 8, s, s, 128, MaskType::kCausal)};
    v.push_back(l);
  }
  // Lazy rescaling (a row keeps its running max until a block raises it by more than 8 in log2 units): with the
  // default scale and Gaussian inputs that almost never happens after the first block, so these cases use scale 1
  // and K rows whose norm grows toward the first key (the walk runs from the last block to the first), which makes
  // most blocks raise the max by more than that (a numpy model of the walk counts 1778 such rescales over 512
  // rows non-causal, 420 causal). Skipping a needed O rescale would fail them.
  auto ramp_fill = [](int sk, int hk, int d) {
    return [=](const std::string& name, std::vector<float>& x) {
      std::mt19937 rng(name == "q" ? 11u : name == "k" ? 12u : 13u);
      std::normal_distribution<float> normal(0.f, 1.f);
      for (size_t i = 0; i < x.size(); ++i) {
        float g = normal(rng);
        if (name == "k") {
          const int j = int(i / (size_t(hk) * d)) % sk;  // key row (one dense entry)
          g *= 1.f + 2.f * float(sk - 1 - j) / float(sk);
        }
        x[i] = g;
      }
    };
  };
  for (auto m : {MaskType::kNone, MaskType::kCausal})
    for (auto pp : {fmha::Toggle::kOn, fmha::Toggle::kOff}) {
      Named n{std::string("lazy_rescale_ramp_") + (m == MaskType::kCausal ? "causal" : "none") +
                  (pp == fmha::Toggle::kOn ? "_pingpong" : "_free"),
              dense(1, 4, 4, 512, 1024, 128, m)};
      n.c.scale = 1.f;
      n.c.pingpong = pp;
      n.c.fill = ramp_fill(1024, 4, 128);
      v.push_back(n);
    }
  {
    Named n{"lazy_rescale_ramp_causal_d64_fp16", dense(1, 4, 4, 512, 1024, 64, MaskType::kCausal)};
    n.c.dtype = DType::kFP16;
    n.c.scale = 1.f;
    n.c.fill = ramp_fill(1024, 4, 64);
    v.push_back(n);
  }
  // The same ramp on the 192-row tiles, whose row sums come from the tensor cores and are folded with each block's
  // rescale factor (tiles::fwd_mma_row_sum): factors other than 0 and 1 reach the fold only in these cases, here
  // non-causal and below causal (q-end, so that the rows walk all kLongKeys + 1024 keys).
  for (DType t : {DType::kBF16, DType::kFP16}) {
    Named n{std::string("lazy_rescale_ramp_causal_d64_192_") + (t == DType::kBF16 ? "bf16" : "fp16"),
            dense(1, 4, 4, 512, kLongKeys + 1024, 64, MaskType::kCausal, CausalAlign::kQEnd)};
    n.c.dtype = t;
    n.c.scale = 1.f;
    n.c.fill = ramp_fill(kLongKeys + 1024, 4, 64);
    v.push_back(n);
  }
  for (DType t : {DType::kBF16, DType::kFP16})
    for (auto pp : {fmha::Toggle::kOn, fmha::Toggle::kOff}) {
      Named n{std::string("lazy_rescale_ramp_none_d64_192_") + (t == DType::kBF16 ? "bf16" : "fp16") +
                  (pp == fmha::Toggle::kOn ? "_pingpong" : "_free"),
              dense(1, 4, 4, 512, kNcLongKeys + 1024, 64, MaskType::kNone)};
      n.c.dtype = t;
      n.c.scale = 1.f;
      n.c.pingpong = pp;
      n.c.fill = ramp_fill(kNcLongKeys + 1024, 4, 64);
      v.push_back(n);
    }
  {
    // A long non-causal row on the 192-row tiles: over 270000 keys a row sum accumulated in the tensor cores' fp32
    // (which truncates) lost 8.6e-4 of itself (perf-log v12, E07b, the causal counterpart, which runs the same
    // sums); folded per key block it must pass the LSE rule.
    Named e{"long_row_sum_270k_noncausal", dense(1, 1, 1, 384, 270000, 64, MaskType::kNone)};
    v.push_back(e);
  }
  // Dense non-causal problems run their tiles in L2-sized sections of heads (FwdTileScheduler::decode in
  // src/kernels/kernel/tile_scheduler.hpp): Llama-3-8B at 8k has two full sections of 16 query heads; 6 query heads
  // over 2 K/V heads with 20000 keys give sections of 4 and 2.
  {
    Named l{"llama3_8b_8192_noncausal", dense(1, 32, 8, 8192, 8192, 128, MaskType::kNone)};
    v.push_back(l);
    v.push_back({"l2_sections_partial", dense(1, 6, 2, 256, 20000, 128, MaskType::kNone)});
  }
  // Dense causal problems on a few persistent CTAs walk the paired order (units of query blocks
  // m_blocks − 1 − q and q, in L2 sections): 40 heads of 2048 keys at d 64 are two sections (32 and 8 heads)
  // of 11 query blocks (1408 rows in 128-row tiles; odd, so each head's middle block has a
  // unit of its own);
  // 6 query heads over 2 K/V heads with 20000 keys, causal q-end, sections of 4 and 2, 2 query blocks each; d 128 with
  // 1300 rows, one section of 11 blocks (128 rows), also in the sanitizer set. (The paired order needs at least as
  // many units as CTAs: 240, 6 and 48 here.)
  for (auto [name, c, sms] : {std::tuple{"causal_pairs_sections_sm6", dense(1, 40, 40, 1408, 2048, 64, MaskType::kCausal), 6},
                              std::tuple{"causal_pairs_qend_sm5",
                                         dense(1, 6, 2, 256, 20000, 128, MaskType::kCausal, CausalAlign::kQEnd), 5},
                              std::tuple{"causal_pairs_d128_sm5", dense(2, 4, 2, 1300, 1300, 128, MaskType::kCausal), 5}}) {
    Named n{name, c};
    n.c.scheduler = fmha::TileScheduler::kPersistent;
    n.c.sm_count = sms;
    v.push_back(n);
  }
  // Dense causal problems on the one-CTA-per-tile scheduler run in L2 sections too (v15): 6 query heads over 2 K/V
  // heads, causal q-end, 40000 keys at d 64 and 20000 at d 128 (3.4 MB of K and V per query head), so sections of 4
  // and 2 heads; every row of every head checked. d 128 is also in the sanitizer set.
  for (int d : {64, 128}) {
    Named n{"causal_individual_sections_d" + std::to_string(d),
            dense(1, 6, 2, 512, d == 64 ? 40000 : 20000, d, MaskType::kCausal, CausalAlign::kQEnd)};
    n.c.scheduler = fmha::TileScheduler::kIndividual;
    v.push_back(n);
  }
  // The default route of dense causal problems just past the short causal limit at d <= 64: 192-row tiles (with
  // the tensor-core row sums), persistent on every SM, so the paired order and the causal L2 sections: 40 heads of
  // kLongKeys keys, 7 query blocks of 192 rows (odd: a middle block per head), 160 units >= the SM count of an
  // H100/H200; both dtypes.
  for (DType t : {DType::kBF16, DType::kFP16}) {
    Named n{std::string("causal_pairs_192_") + (t == DType::kBF16 ? "bf16" : "fp16"),
            dense(1, 40, 40, 7 * 192, kLongKeys, 64, MaskType::kCausal)};
    n.c.dtype = t;
    v.push_back(n);
  }
  {
    Named l{"llama3_8b_varlen_mixed", varlen(32, 8, 128, {1000, 37, 4096, 2500, 1}, {1000, 37, 4096, 2500, 1},
                                             MaskType::kCausal)};
    v.push_back(l);
  }
  return v;
}


/// Extreme logits (the online softmax's exponent at the kept max is exactly 0 at any magnitude): every score is one
/// exact product, q row i = [a_i, 0, …] and key j = [b_j, 0, …] with a_i = ±2^e_i and b_j = 2^eb · (1 + m_j/128),
/// m_j = (37·j + 11) mod 128 (exact in bf16 and fp16; a few keys share the largest m, so the answer averages their
/// V), so scale·q·k reaches the magnitude the row's exponent picks while the logit gaps stay exact (no GEMM error
/// to hide behind). V is Gaussian rounded to multiples of 1/8 (exact in both types). `row_exp(i)` gives e_i; `equal_keys` makes every b_j =
/// 2^eb (all logits of a row equal: O = mean(V)).
std::function<void(const std::string&, std::vector<float>&)> extreme_fill(std::function<int(int)> row_exp, int eb,
                                                                          int heads_q, int heads_kv, int d,
                                                                          bool equal_keys = false) {
  return [=](const std::string& name, std::vector<float>& x) {
    std::mt19937 rng(name == "v" ? 77u : 78u);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (size_t i = 0; i < x.size(); ++i) {
      const int dim = int(i % size_t(d));
      if (name == "v") {
        // Multiples of 1/8 (exact in bf16 and fp16), never −0.0: with one key O = 0 + 1 · V reads +0 there.
        x[i] = std::round(normal(rng) * 8.f) / 8.f + 0.f;
      } else if (name == "q") {
        const int row = int(i / (size_t(heads_q) * d));
        x[i] = dim == 0 ? std::ldexp(row % 2 ? -1.f : 1.f, row_exp(row)) : 0.f;
      } else {
        const int key = int(i / (size_t(heads_kv) * d));
        const int m = equal_keys ? 0 : (37 * key + 11) % 128;
        x[i] = dim == 0 ? std::ldexp(1.f + float(m) / 128.f, eb) : 0.f;
      }
    }
  };
}

/// The extreme-logit cases: |scale·q·k| from about 1e2 to 1e12 (bf16), rows of every magnitude side by side in one
/// tile (a warp-uniform choice must not leak from one row to another), the 128- and 192-row kernels (fp32 and
/// tensor-core row sums), causal and not, one key per row, all logits of a row equal, and fp16 near its range.
std::vector<Named> extreme_logits() {
  std::vector<Named> v;
  // b ∈ [2^10, 2^11), scale 1/8 at d 64: scale·q·k ≈ 2^(e+10-3)·1.5, so e = round(log2(10^t · 8 / 1536)).
  auto exp_for = [](int t) { return int(std::lround(std::log2(std::pow(10.0, t) * 8.0 / 1536.0))); };
  for (int t : {2, 3, 4, 6, 8, 10, 12}) {
    Named n{"extreme_1e" + std::to_string(t), dense(1, 2, 2, 150, 1000, 64, MaskType::kNone)};
    const int e = exp_for(t);
    n.c.fill = extreme_fill([e](int) { return e; }, 10, 2, 2, 64);
    v.push_back(n);
  }
  auto mixed = [exp_for](int row) { return exp_for(2 + 2 * (row % 6)); };  // 1e2, 1e4, … 1e12, row after row
  auto by_warp = [exp_for](int row) { return exp_for((row / 16) % 2 ? 12 : 2); };  // 1e2 / 1e12, warp by warp
  {
    Named n{"extreme_mixed_rows_192", dense(1, 2, 2, 400, kNcLongKeys + 448, 64, MaskType::kNone)};
    n.c.fill = extreme_fill(mixed, 10, 2, 2, 64);
    v.push_back(n);
    Named c{"extreme_mixed_rows_causal_192", dense(1, 2, 2, 400, kLongKeys + 300, 64, MaskType::kCausal,
                                                   CausalAlign::kQEnd)};
    c.c.fill = extreme_fill(mixed, 10, 2, 2, 64);
    v.push_back(c);
    Named d{"extreme_mixed_rows_causal_d128_pingpong", dense(1, 2, 2, 400, 1000, 128, MaskType::kCausal)};
    d.c.fill = extreme_fill(mixed, 10, 2, 2, 128);
    d.c.pingpong = fmha::Toggle::kOn;
    v.push_back(d);
    // Whole warps of ordinary rows (1e2, the FFMA form) beside warps of 1e12 rows (the exact form) in one tile: a
    // warp's choice must not reach the next warp (wgmma accumulators: warp w of a warpgroup holds rows 16w … 16w+15).
    Named w{"extreme_mixed_warps_d64", dense(1, 2, 2, 256, 1000, 64, MaskType::kNone)};
    w.c.fill = extreme_fill(by_warp, 10, 2, 2, 64);
    v.push_back(w);
    Named w2{"extreme_mixed_warps_causal_192", dense(1, 2, 2, 400, kLongKeys + 300, 64, MaskType::kCausal,
                                                     CausalAlign::kQEnd)};
    w2.c.fill = extreme_fill(by_warp, 10, 2, 2, 64);
    v.push_back(w2);
    Named f{"extreme_mixed_rows_d128_persistent", dense(2, 2, 1, 300, 1200, 128, MaskType::kNone)};
    f.c.fill = extreme_fill(mixed, 10, 2, 1, 128);
    f.c.scheduler = fmha::TileScheduler::kPersistent;
    v.push_back(f);
  }
  {
    // The exact path's own addressing (exact_rows reads Q, K and V from global memory): varlen entries (one
    // without keys, one shorter than a tile), GQA 4/2, causal q-end, at 1e12 and 1e2 side by side (by warp); and
    // d 128 with the persistent scheduler.
    Named n{"extreme_varlen_gqa_causal_qend", varlen(4, 2, 64, {100, 37, 300}, {500, 0, 900}, MaskType::kCausal,
                                                        CausalAlign::kQEnd)};
    n.c.fill = extreme_fill(by_warp, 10, 4, 2, 64);
    v.push_back(n);
    Named p{"extreme_varlen_gqa_d128_persistent", varlen(4, 1, 128, {130, 64}, {200, 1000}, MaskType::kNone)};
    p.c.fill = extreme_fill([exp_for](int) { return exp_for(12); }, 10, 4, 1, 128);
    p.c.scheduler = fmha::TileScheduler::kPersistent;
    v.push_back(p);
  }
  {
    Named n{"extreme_one_key_1e12", dense(1, 2, 2, 64, 1, 64, MaskType::kNone)};
    n.c.fill = extreme_fill([exp_for](int) { return exp_for(12); }, 10, 2, 2, 64);
    v.push_back(n);
    Named e{"extreme_all_equal_1e12", dense(1, 2, 2, 64, 700, 64, MaskType::kNone)};
    e.c.fill = extreme_fill([exp_for](int) { return exp_for(12); }, 10, 2, 2, 64, true);
    v.push_back(e);
  }
  {
    // A rescale at |max · scale · log2 e| ≈ 5.1e7 (just under the exact form's 2^26, where the FFMA exponent's
    // argument at the max is off by up to 2): q = [16768, 1, 0 …], key 0 = [17024, 64, 0 …] with V = 0 and the 999
    // others [17024, 0 …] with V = 1 (exact in both types), so s = 285458432 (+ 64 for key 0; exact in fp32, and not
    // a power of two, so that max · scale_log2 rounds: by −1.66 here) and key 0, in the block walked last, raises
    // the max by 8 (11.5 in log2 units: past the lazy threshold). O = 999 e^-8 / (1 + 999 e^-8) ≈ 0.25 needs the
    // rescale factor to carry the same rounding of the base as the blocks' exponents (a rescale fused into
    // max_old · scale_log2 − base_new is off by 2^1.66).
    for (DType t : {DType::kBF16, DType::kFP16}) {
      Named n{std::string("extreme_rescale_2pow25_") + (t == DType::kBF16 ? "bf16" : "fp16"),
              dense(1, 2, 2, 64, 1000, 64, MaskType::kNone)};
      n.c.dtype = t;
      n.c.fill = [](const std::string& name, std::vector<float>& x) {
        for (size_t i = 0; i < x.size(); ++i) {
          const int dim = int(i % 64);
          const int row = int(i / (2 * 64));  // query row / key: 2 heads of 64
          if (name == "q") x[i] = dim == 0 ? 16768.f : dim == 1 ? 1.f : 0.f;
          else if (name == "k") x[i] = dim == 0 ? 17024.f : (dim == 1 && row == 0) ? 64.f : 0.f;
          else x[i] = row == 0 ? 0.f : 1.f;
        }
      };
      v.push_back(n);
    }
  }
  {
    // fp16 near its range: q = ±2^15, k ∈ [2^15, 2^16): scores up to 2^32 in fp32, scale·q·k up to about 5e8.
    for (auto m : {MaskType::kNone, MaskType::kCausal}) {
      Named n{std::string("extreme_fp16_range_") + (m == MaskType::kCausal ? "causal_192" : "none"),
              dense(1, 2, 2, 300, m == MaskType::kCausal ? kLongKeys + 100 : 900, 64, m)};
      n.c.dtype = DType::kFP16;
      n.c.fill = extreme_fill([](int) { return 15; }, 15, 2, 2, 64);
      v.push_back(n);
    }
  }
  return v;
}

class FwdCaseTest : public ::testing::TestWithParam<Named> {};

TEST_P(FwdCaseTest, MatchesReference) {
  FMHA_REQUIRE_GPU();
  auto r = run_fwd_case(GetParam().c);
  EXPECT_TRUE(r.ok()) << GetParam().name << ": " << r.summary();
}

std::vector<Named> with_both_dtypes(std::vector<Named> v) {
  std::vector<Named> out;
  for (auto& n : v) {
    for (auto t : {DType::kFP16, DType::kBF16}) {
      Named m = n;
      m.c.dtype = t;
      m.name += t == DType::kFP16 ? "_fp16" : "_bf16";
      out.push_back(m);
    }
  }
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Named>& i) { return i.param.name; }

INSTANTIATE_TEST_SUITE_P(Seed, FwdCaseTest, ::testing::ValuesIn(with_both_dtypes(seed_matrix())), param_name);
INSTANTIATE_TEST_SUITE_P(Edge, FwdCaseTest, ::testing::ValuesIn(edge_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Extreme, FwdCaseTest, ::testing::ValuesIn(extreme_logits()), param_name);

TEST(FwdGpu, ExtremeLogitsOneKeyGivesVExactly) {
  // One key per row at |scale·q·k| ≈ 1e12 (bf16; fp16 near its range): P = 1 exactly, so every row's O is the
  // key's V row itself, bit for bit (a NaN or a stray factor in the exponent at the max shows here first).
  FMHA_REQUIRE_GPU();
  for (DType t : {DType::kBF16, DType::kFP16}) {
    FwdCase c = dense(1, 2, 2, 64, 1, 64, MaskType::kNone);
    c.dtype = t;
    const int e = t == DType::kBF16 ? 32 : 15;
    c.fill = extreme_fill([e](int) { return e; }, t == DType::kBF16 ? 10 : 15, 2, 2, 64);
    auto r = run_fwd_case(c);
    ASSERT_TRUE(r.ok()) << r.summary();
    std::vector<float> v(size_t(2) * 64);  // the one key's V row, [head][dim], as extreme_fill makes it
    c.fill("v", v);
    for (int h = 0; h < 2; ++h)
      for (int row = 0; row < 64; ++row)
        for (int d = 0; d < 64; ++d) {
          const float want = v[size_t(h) * 64 + d];
          const uint16_t bits = t == DType::kBF16 ? fmha::ref::float_to_bf16_bits(want)
                                                  : fmha::ref::float_to_half_bits(want);
          ASSERT_EQ(r.o_bits[(size_t(row) * 2 + h) * 64 + d], bits)
              << fmha::to_string(t) << " row " << row << " head " << h << " dim " << d << ": O must be V";
        }
  }
}

TEST(FwdGpu, E01RowsWithoutKeysAreZeroAndMinusInf) {
  FMHA_REQUIRE_GPU();
  FwdCase c = dense(1, 8, 8, 8, 3, 128, MaskType::kCausal, CausalAlign::kQEnd);
  auto r = run_fwd_case(c);
  ASSERT_TRUE(r.ok()) << r.summary();
  // Rows 0..4 see no key: O is exactly zero (either sign) and LSE is −inf.
  for (int i = 0; i < 5; ++i)
    for (int h = 0; h < 8; ++h) {
      EXPECT_TRUE(std::isinf(r.lse_all[size_t(h) * 8 + i]) && r.lse_all[size_t(h) * 8 + i] < 0) << "row " << i;
      for (int d = 0; d < 128; ++d) EXPECT_EQ(r.o_bits[(size_t(i) * 8 + h) * 128 + d] & 0x7FFF, 0) << "row " << i;
    }
}

// E05: the harness's reference check covers "entry 0's output equals its single V row"; here, no NaN escapes from
// the NaN-filled K/V slots past each entry's length.
TEST(FwdGpu, E05NoNanFromMemoryPastValidKeys) {
  FMHA_REQUIRE_GPU();
  FwdCase c = varlen(1, 1, 64, {1, 1}, {1, 3}, MaskType::kNone);
  c.dtype = DType::kFP16, c.init = 'c', c.q_value = 0.5f, c.extra_rows = 3;
  auto r = run_fwd_case(c);
  ASSERT_TRUE(r.ok()) << r.summary();
  for (size_t i = 0; i < 2 * 64; ++i) EXPECT_FALSE((r.o_bits[i] & 0x7C00) == 0x7C00 && (r.o_bits[i] & 0x3FF)) << i;
}

TEST(FwdGpu, E08ZeroInputsGiveZeroOutputAndLogSk) {
  FMHA_REQUIRE_GPU();
  for (int s : {32768, 65536}) {
    FwdCase c = dense(1, 1, 1, s, s, 128, MaskType::kNone);
    c.init = 'z';
    auto r = run_fwd_case(c, /*check=*/false);
    ASSERT_TRUE(r.status.is_ok()) << r.summary();
    for (size_t i = 0; i < r.o_bits.size(); ++i) ASSERT_EQ(r.o_bits[i], 0) << "O element " << i;
    for (size_t i = 0; i < r.lse_all.size(); ++i) ASSERT_NEAR(r.lse_all[i], std::log(double(s)), 1e-4) << "LSE row " << i;
  }
}

TEST(FwdGpu, RepeatedRunsAreBitwiseEqual) {
  FMHA_REQUIRE_GPU();
  for (auto sched : {fmha::TileScheduler::kIndividual, fmha::TileScheduler::kPersistent})
    for (auto pp : {fmha::Toggle::kOff, fmha::Toggle::kOn}) {
      FwdCase c = varlen(8, 2, 128, {300, 1, 1024, 77}, {500, 9, 1024, 0}, MaskType::kCausal);
      c.scheduler = sched;
      c.pingpong = pp;
      auto first = run_fwd_case(c, false);
      ASSERT_TRUE(first.status.is_ok()) << first.summary();
      for (int rep = 0; rep < 10; ++rep) {
        auto again = run_fwd_case(c, false);
        ASSERT_TRUE(again.status.is_ok());
        ASSERT_EQ(again.o_bits, first.o_bits) << "run " << rep;
        ASSERT_EQ(0, std::memcmp(again.lse_all.data(), first.lse_all.data(), first.lse_all.size() * 4)) << "run " << rep;
      }
    }
}

// Every (scheduler, ping-pong) combination on mixed varlen batches and dense problems, at both tile heights of the
// head-dim ≤ 64 units (causal problems with at most kShortCausalMax keys and non-causal ones with at most
// kShortNonCausalMax run 128-row tiles there, longer ones 192).
TEST(FwdGpu, AllScheduleVariantsMatchReference) {
  FMHA_REQUIRE_GPU();
  for (auto sched : {fmha::TileScheduler::kIndividual, fmha::TileScheduler::kPersistent})
    for (auto pp : {fmha::Toggle::kOff, fmha::Toggle::kOn})
      for (FwdCase c : {varlen(8, 2, 128, {300, 1, 1024, 77}, {500, 9, 1024, 0}, MaskType::kCausal, CausalAlign::kQEnd),
                        dense(2, 6, 2, 640, 777, 64, MaskType::kNone),
                        // Non-causal past kShortNonCausalMax keys: 192-row tiles (the one above runs 128-row tiles).
                        dense(1, 4, 2, 500, kNcLongKeys, 64, MaskType::kNone),
                        varlen(6, 3, 32, {200, 0, 700, 64}, {kNcLongKeys, 5, 300, 1}, MaskType::kNone),
                        // Head-dim tile 32, non-causal within kShortNonCausalMax: 128-row tiles.
                        dense(2, 4, 4, 450, 390, 32, MaskType::kNone),
                        varlen(8, 2, 64, {300, 1, 1024, 77}, {500, 9, 1024, 0}, MaskType::kCausal, CausalAlign::kQEnd),
                        dense(2, 4, 4, 450, 390, 32, MaskType::kCausal),
                        // Causal at head-dim tiles ≤ 64 with more than kFwdShortCausalMaxKeys keys: 192-row tiles
                        // (the shorter ones above run 128-row tiles).
                        varlen(8, 2, 64, {1100, 1, 2048, 77}, {kLongKeys, 9, 1030, 0}, MaskType::kCausal),
                        dense(1, 4, 2, 1300, kLongKeys, 32, MaskType::kCausal, CausalAlign::kQEnd),
                        // Warpgroups whose rows see no key of the tile's walk (100 more queries than keys).
                        dense(1, 3, 3, 1300, 1200, 64, MaskType::kCausal, CausalAlign::kQEnd),
                        dense(1, 2, 2, 400, 300, 128, MaskType::kCausal, CausalAlign::kQEnd)}) {
        c.scheduler = sched;
        c.pingpong = pp;
        auto r = run_fwd_case(c);
        EXPECT_TRUE(r.ok()) << "scheduler " << int(sched) << " pingpong " << int(pp) << ": " << r.summary();
      }
}

TEST(FwdGpu, NonDefaultStream) {
  FMHA_REQUIRE_GPU();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  auto r = run_fwd_case(dense(2, 4, 4, 300, 600, 128, MaskType::kCausal), true, s);
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace
