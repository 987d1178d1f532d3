// Reader of real-input attention fixtures (host only, no CUDA): per-layer Q, K, V and the model's own attention
// output, captured from a real model by scripts/make_minilm_fixture.py (tests/data/minilm_l6_attention.bin:
// all-MiniLM-L6-v2, 6 layers, 12 heads of dim 32, 5 English sentences of distinct lengths).
//
// File format (little-endian; the script documents it too):
//   char[8] "FMHAFIX1"; uint32 layers, heads, head_dim, sentences; uint32 tokens[sentences];
//   then for each layer l, for each of Q, K, V, O: float32 [total_tokens][heads * head_dim];
//   nothing after. total_tokens = Σ tokens.
//
// Layout of every tensor held here: packed varlen, [total_tokens][heads][head_dim] row-major: sentence b occupies
// rows cu[b] .. cu[b+1]−1 with cu = fmha::ref::cumulative(tokens) (so cu_seqlens for the kernel and the
// reference), and head h of a row occupies elements h·head_dim .. h·head_dim + head_dim − 1. Element (b, i, h, d)
// is at [(cu[b] + i) · heads · head_dim + h · head_dim + d], which is the order of fmha::ref::packed views and of
// FwdCase::fill in src/testing/fwd_runner.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fmha::testing {

/// One real-input fixture: self-attention (no mask, heads_q == heads_kv, head_dim_qk == head_dim_v) of every layer
/// of a model over a batch of sentences, each run on its own (no padding).
struct AttentionFixture {
  int layers = 0;
  int heads = 0;
  int head_dim = 0;
  std::vector<int> tokens;  ///< [sentences] token count of each sentence (special tokens included)
  /// [layers] each [total_tokens · heads · head_dim] float (see the file comment for the layout).
  std::vector<std::vector<float>> q, k, v;
  /// [layers] the model's own attention output (per-head softmax(scale · Q Kᵀ) · V, concatenated over heads, before
  /// the attention output projection), same layout.
  std::vector<std::vector<float>> o;
  double scale = 0.0;  ///< softmax scale the model uses: 1/sqrt(head_dim)

  int sentences() const { return static_cast<int>(tokens.size()); }
  int total_tokens() const;                 ///< Σ tokens
  std::vector<int> cu_seqlens() const;      ///< [sentences + 1] cumulative token counts, cu[0] = 0
  int64_t elements_per_tensor() const;      ///< total_tokens · heads · head_dim
};

namespace minilm {
/// Bounds on the relative Frobenius error ‖fmha O − model O‖₂ / ‖model O‖₂ over one layer (all sentences, heads and
/// dims) of tests/data/minilm_l6_attention.bin, used by tests/gpu/test_real_input.cpp. The kernel sees Q, K, V
/// rounded to the dtype, rounds P to the dtype before P·V and returns O in the dtype; the CPU reference with
/// Rounding::kKernel, its output rounded to the dtype, measures (worst layer) 4.2e-4 for fp16 and 3.4e-3 for bf16
/// against the model's fp32 output. The bounds are about 3.6x that (tests/cpu/test_real_input_reference.cpp checks
/// the margin stays ≥ 3x, and that a 5% softmax-scale error lands above both bounds).
constexpr double kRelFrobBoundFP16 = 1.5e-3;
constexpr double kRelFrobBoundBF16 = 1.2e-2;
}  // namespace minilm

/// Exact file size in bytes of a fixture with these dimensions (header + payload).
int64_t attention_fixture_bytes(int layers, int heads, int head_dim, const std::vector<int>& tokens);

/// Reads a fixture file. Throws std::runtime_error naming the path and the problem when the file is missing or
/// unreadable, the magic is wrong, a dimension is zero or implausibly large, the size does not match the header
/// exactly (truncated file or trailing bytes), or a value is not finite.
AttentionFixture load_attention_fixture(const std::string& path);

/// The MiniLM-L6 fixture, `<data_dir>/minilm_l6_attention.bin`, loaded once per process and kept (the first
/// data_dir given wins). Throws as load_attention_fixture does.
const AttentionFixture& minilm_l6_fixture(const std::string& data_dir);

}  // namespace fmha::testing
