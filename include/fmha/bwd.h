// fmha: backward attention on Hopper (the gradients of fmha::fwd): the interface, its validation, its workspace and
// the call (docs/bwd.md: kernels, numerics, performance). Everything but bwd() itself needs no GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "fmha/status.h"
#include "fmha/types.h"

namespace fmha {

/// How the backward computes dQ: one pass (one kernel per K block computes dK, dV and accumulates dQ in an fp32
/// workspace, then a convert kernel writes dQ; FlashAttention-2 Algorithm 2) or two passes (one kernel per K block
/// for dK and dV, then one per block of 128 query rows for dQ, which recomputes S and dP; no fp32 accumulator, no
/// convert, bitwise repeatable without `deterministic`; CUTLASS example 77's fmha_2bwd). Two passes do the S and dP
/// products twice (7 instead of 5 GEMMs per tile pair) but need no atomics and less workspace. kAuto (the default)
/// lets the library pick per call from the shape and the options alone (bwd_resolve_algorithm: the same choice for
/// the workspace size and the call).
enum class BwdAlgorithm { kOnePass, kTwoPass, kAuto };

/// Arguments of a backward attention call: given the forward's inputs Q, K, V, its output O and LSE, and the
/// gradient dO of O, the gradients dQ, dK, dV of the forward with the same mask, causal alignment and scale:
///   P_ij = exp(scale · q_i·k_j − LSE_i) over the keys row i sees; D_i = Σ_d dO_id O_id; dS_ij = P_ij (dO_i·v_j − D_i);
///   dQ_i = scale · Σ_j dS_ij k_j;  dK_j = scale · Σ_i dS_ij q_i;  dV_j = Σ_i P_ij dO_i.
/// With d_lse (the gradient of the returned LSE, for a loss that uses it) dS_ij = P_ij (dO_i·v_j − D_i + dLSE_i).
/// A row that saw no key (LSE = −inf) contributes nothing and gets dQ = 0; a key no row sees gets dK = dV = 0.
/// GQA / MQA: dK and dV of K/V head hk sum over its heads_q / heads_kv query heads.
///
/// Layouts (strides in elements, 64-bit; the head-dim mode contiguous), as FwdParams (fmha/fwd.h): dense BSHD
/// (cu_seqlens_q null) or varlen packed [total][heads][·] with cu_seqlens_q / cu_seqlens_k (device int[batch + 1]).
///  * q, k, v, o and their gradients: q, dq [·][heads_q][head_dim]; k, dk [·][heads_kv][head_dim]; v, dv
///    [·][heads_kv][head_dim_v]; o, d_o [·][heads_q][head_dim_v]; each with its own row, head and batch strides.
///  * lse (required, fp32, the forward's natural-log LSE): dense [batch][heads_q][seqlen_q], varlen
///    [heads_q][total_q], contiguous, as fwd writes it.
/// Alignment: every tensor pointer 16-byte aligned, strides positive multiples of 8 elements below 2^39 (a head or
/// batch stride may be 0 where that mode has one entry); lse and cu_seqlens 4-byte aligned. dQ, dK and dV must not
/// overlap themselves (checked) nor each other or the inputs (the caller's responsibility).
/// Dtypes: fp16 or bf16 for every tensor but lse; gradients in the input type; fp32 accumulation.
/// Head dims (head_dim / head_dim_v): 64 and 128 with head_dim_v = head_dim (any multiple of 8 up to 128 through
/// predication); 192 / 128 (MLA prefill: the two-pass algorithm only, kOnePass there is kNotSupported naming
/// "algorithm"); others are kNotSupported.
struct BwdParams {
  DType dtype = DType::kBF16;
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;  ///< head dim of Q and K
  int head_dim_v = 0;  ///< head dim of V and O; 0 = head_dim
  int seqlen_q = 0;    ///< dense: query length of every entry; varlen: max over entries
  int seqlen_k = 0;    ///< dense: key length of every entry; varlen: max over entries
  const int* cu_seqlens_q = nullptr;  ///< device int[batch + 1] or null (dense)
  const int* cu_seqlens_k = nullptr;
  int total_q = 0;  ///< varlen: rows of Q, O, dO, dQ (≥ cu_seqlens_q[batch])
  int total_k = 0;  ///< varlen: rows of K, V, dK, dV

  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const void* d_o = nullptr;
  const float* lse = nullptr;
  const float* d_lse = nullptr;  ///< optional: the gradient of LSE, fp32 in lse's layout; null = none (0)
  /// The gradients, outputs: bwd overwrites every element of their valid rows and columns (it stores, never adds
  /// into what they held, so they need no zeroing and may hold NaN before the call); rows and columns outside the
  /// entries and the head dims (stride padding) are not written.
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  int64_t q_row_stride = 0, q_head_stride = 0, q_batch_stride = 0;
  int64_t k_row_stride = 0, k_head_stride = 0, k_batch_stride = 0;
  int64_t v_row_stride = 0, v_head_stride = 0, v_batch_stride = 0;
  int64_t o_row_stride = 0, o_head_stride = 0, o_batch_stride = 0;
  int64_t do_row_stride = 0, do_head_stride = 0, do_batch_stride = 0;
  int64_t dq_row_stride = 0, dq_head_stride = 0, dq_batch_stride = 0;
  int64_t dk_row_stride = 0, dk_head_stride = 0, dk_batch_stride = 0;
  int64_t dv_row_stride = 0, dv_head_stride = 0, dv_batch_stride = 0;

  MaskType mask = MaskType::kNone;
  /// The forward's causal alignment (used with mask = kCausal). The default here is kQBegin (top-left), as in
  /// FwdParams; the Python API (fmha.attention, whose autograd calls the backward) defaults to "q_end" (kQEnd).
  CausalAlign causal_align = CausalAlign::kQBegin;
  float softmax_scale = 0.f;  ///< the forward's; 0 means 1/sqrt(head_dim)
  BwdAlgorithm algorithm = BwdAlgorithm::kAuto;
  /// Bitwise repeatable dQ, dK, dV (GQA and varlen included): the one-pass dQ accumulation is ordered (each K
  /// block adds its share after the previous one), at some cost in speed. The two-pass algorithm (kAuto's choice)
  /// is repeatable either way (the flag changes nothing there).
  bool deterministic = false;
  int sm_count = 0;  ///< reserved (the backward runs one CTA per key block on every SM); 0 or any value ≥ 0
};

/// Fills every stride of `p` for contiguous tensors (dense BSHD, or packed when cu_seqlens_q is set; the gradients
/// laid out like their inputs) from heads_q, heads_kv, head_dim, head_dim_v, seqlen_q, seqlen_k and cu_seqlens_q.
void set_bwd_contiguous_strides(BwdParams& p);

/// Checks `p` without launching anything: kInvalidArgument naming the first bad argument with the expected versus
/// actual value, kNotSupported for a valid request no kernel takes (dtype, head dims).
Status bwd_validate(const BwdParams& p);

/// The algorithm bwd runs for `p`: p.algorithm unless it is kAuto, which picks from the shape and the options
/// (no device, no pointers; docs/bwd.md gives the rule and the H200 measurements behind it): two passes (faster
/// than one on every measured row, causal or not, repeatable by construction, and the only kernels at head dims
/// 192 / 128), except where the two-pass dQ grid would exceed its bound (batch × heads_q × ceil(seqlen_q / 128)
/// > 2^30): one pass there. Other values are returned as they are (bwd_validate names a bad one).
BwdAlgorithm bwd_resolve_algorithm(const BwdParams& p);

/// Bytes of workspace bwd needs for `p`, at most a few hundred bytes over
///   dense: rows = batch · ceil(seqlen_q / 64) · 64; varlen: rows = total_q + 64 · batch; each rounded up to 128;
///   4 · heads_q · rows (D = Σ dO∘O) + 4 · heads_q · rows (LSE in log2 units)
///   + one pass (bwd_resolve_algorithm): 4 · heads_q · rows · t (the fp32 dQ accumulator; t = 64 for head dims up to 64, 128 up to 128,
///     else round_up(head_dim, 8))
///   + deterministic one pass: 4 · heads_q · rows / 64 (the order counters of the kernel's 64-row blocks).
/// Each part starts on kWorkspaceAlignment (256 bytes). bwd initialises what it reads there on every call and keeps
/// nothing between calls. Needs no GPU; never fails (for invalid params, what valid ones of that shape need).
std::size_t bwd_workspace_size(const BwdParams& p);

/// Runs the backward on `stream` (three kernels either way; nothing is synchronised). Errors: those of bwd_validate;
/// kInvalidArgument "workspace" when `workspace` is smaller than bwd_workspace_size(p) or misaligned; kNotBuilt for
/// a unit outside this build's kernel set; kNotSupported without an sm_90 device; kInvalidArgument naming a pointer that is not
/// device-accessible; kCudaError for a failed launch. Varlen lengths are read on the device and trusted as the
/// forward trusts them (non-decreasing cu_seqlens from 0, each length ≤ seqlen_q / seqlen_k, cu[batch] ≤
/// total_q / total_k); lengths outside that contract give unspecified gradients for their entries, never an access
/// outside the tensors or a hang.
Status bwd(const BwdParams& p, Workspace workspace, cudaStream_t stream = nullptr);

}  // namespace fmha
