// Internal: the backward's workspace layout, shared by the API layer (bwd_workspace_size) and the kernel unit's
// launch (kernels/device/bwd_launch.cuh). Header-only so that both g++ and nvcc see one definition.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fmha/bwd.h"

namespace fmha::detail {

/// Byte offsets of the parts of the backward workspace for `p`, each on kWorkspaceAlignment (256 bytes):
///   dsum, lse2: float [heads_q][rows] (D = Σ dO∘O; LSE · log2 e);
///   dq_acc: float [heads_q][rows][dq_row] (one pass only; dq_row = the kernel's head-dim tile, 64 or 128, else
///           head_dim rounded up to 8), each 64-row block one chunk of 64 · dq_row floats in the order of the
///           main kernel's dQ fragments (kernel::bwd_dq_index);
///   order: int [heads_q][rows / 64] (one pass, deterministic only: the per-row-block order counters).
/// rows: dense batch · ceil(seqlen_q / 64) · 64, varlen total_q + 64 · batch, each rounded up to 128, so that every
/// entry's rows start on a 64-row boundary with room for its last block (bwd_workspace_row0 below).
struct BwdWorkspaceLayout {
  int64_t rows = 0;
  int dq_row = 0;
  std::size_t dsum = 0, lse2 = 0, dq_acc = 0, order = 0;
  std::size_t bytes = 0;  ///< total
  bool has_dq_acc = false, has_order = false;
};

#if defined(__CUDACC__)
#define FMHA_BWD_HD __host__ __device__
#else
#define FMHA_BWD_HD
#endif

/// The rows [off, off + len) of entry b in a packed (varlen: cu non-null) tensor of `total` rows, or of every dense
/// entry (off 0, len max_len). Varlen lengths outside the contract (negative, longer than max_len, past the tensor's
/// rows) are clamped, so that they give unspecified gradients for that entry but never a read or write outside the
/// tensors or the workspace, nor a row block that the pre-pass did not initialise. Host and device (the kernels
/// call it; tests/cpu/test_api_bwd.cpp checks the layout with it).
struct BwdEntry {
  int off, len;
};
inline FMHA_BWD_HD BwdEntry bwd_entry(const int* cu, int b, int max_len, int total) {
  if (!cu) return {0, max_len};
  const int off = cu[b] < 0 ? 0 : cu[b] > total ? total : cu[b];
  const int len = cu[b + 1] - off, cap = max_len < total - off ? max_len : total - off;
  return {off, len < 0 ? 0 : len > cap ? cap : len};
}

/// Rows of the workspace's per-row arrays (D, LSE · log2 e, the dQ accumulator) before entry b, whose first row in
/// Q is `off` (bwd_entry): entries start on 64-row boundaries, within the layout's rows: dense
/// b · ceil(seqlen_q / 64) · 64, varlen round_up(off, 64) + 64 · b (since round_up(a, 64) + round_up(s, 64)
/// ≤ round_up(a + s, 64) + 64, entries never overlap and the last ends by round_up(total_q, 64) + 64 · batch).
inline FMHA_BWD_HD int64_t bwd_workspace_row0(int b, bool varlen, int off, int seqlen_q) {
  if (varlen) return int64_t((off + 63) / 64 * 64) + 64 * int64_t(b);
  return int64_t(b) * ((seqlen_q + 63) / 64 * 64);
}

#undef FMHA_BWD_HD

/// Query rows per step of the main backward kernel (kernel::BwdConfig::kBlockM): 64, or 32 above head dim 128 (the
/// 192 / 128 shape, whose dK and dV registers leave room only for 32-row Sᵀ and dPᵀ).
constexpr int bwd_step_rows(int head_dim) { return head_dim <= 128 ? 64 : 32; }

/// Row blocks of the two-pass dQ kernel's grid: batch × heads_q × ceil(seqlen_q / 128) (bounded by 2^30).
inline int64_t bwd_two_pass_row_blocks(const BwdParams& p) {
  return int64_t(p.batch) * p.heads_q * ((int64_t(p.seqlen_q) + 127) / 128);
}

/// fmha::bwd_resolve_algorithm (fmha/bwd.h): kAuto resolved from the shape and options alone.
inline BwdAlgorithm bwd_algorithm(const BwdParams& p) {
  if (p.algorithm != BwdAlgorithm::kAuto) return p.algorithm;
  // Above head dim 128 (the MLA prefill shape 192 / 128) only the two passes are built: the main kernel steps 32
  // rows there, and its dQ product needs 64.
  if (p.head_dim > 128) return BwdAlgorithm::kTwoPass;
  // Past the two-pass dQ kernel's grid bound (bwd_validate) only the one pass takes the problem.
  if (bwd_two_pass_row_blocks(p) > (int64_t(1) << 30)) return BwdAlgorithm::kOnePass;
  // H200, bf16, d 64 and 128, 1k … 16k keys (session 23, docs/bwd.md "Performance"): two passes are 1–39 % faster
  // than one on every row, causal or not (1.15–1.39× causal at d 64, 1.15–1.23× at d 128, since the mask code runs
  // only in the blocks that need it), and 1.35–2.4× faster than the ordered (deterministic) one pass.
  return BwdAlgorithm::kTwoPass;
}

inline BwdWorkspaceLayout bwd_workspace_layout(const BwdParams& p) {
  constexpr int64_t kRowBlock = 64;
  auto align = [](std::size_t x) { return (x + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment; };
  BwdWorkspaceLayout l;
  const int64_t b = p.batch > 0 ? p.batch : 0;
  if (p.cu_seqlens_q) {
    l.rows = (int64_t(p.total_q > 0 ? p.total_q : 0) + kRowBlock * b + 2 * kRowBlock - 1) / (2 * kRowBlock) *
             (2 * kRowBlock);
  } else {
    const int64_t sq = p.seqlen_q > 0 ? p.seqlen_q : 0;
    l.rows = (b * ((sq + kRowBlock - 1) / kRowBlock) * kRowBlock + 2 * kRowBlock - 1) / (2 * kRowBlock) *
             (2 * kRowBlock);
  }
  const std::size_t heads = std::size_t(p.heads_q > 0 ? p.heads_q : 0), rows = std::size_t(l.rows);
  l.dq_row = p.head_dim <= 0 ? 0 : p.head_dim <= 64 ? 64 : p.head_dim <= 128 ? 128 : (p.head_dim + 7) / 8 * 8;
  l.dsum = 0;
  l.lse2 = align(4 * heads * rows);
  l.bytes = l.lse2 + align(4 * heads * rows);
  l.has_dq_acc = bwd_algorithm(p) == BwdAlgorithm::kOnePass;
  if (l.has_dq_acc) {
    l.dq_acc = l.bytes;
    l.bytes += align(4 * heads * rows * std::size_t(l.dq_row));
    l.has_order = p.deterministic;
    if (l.has_order) {
      l.order = l.bytes;
      l.bytes += align(4 * heads * (rows / 64));
    }
  }
  return l;
}

}  // namespace fmha::detail
