// fmha: forward (context / prefill) attention on Hopper.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "fmha/status.h"
#include "fmha/types.h"

namespace fmha {

/// How work tiles are mapped to CTAs.
enum class TileScheduler {
  kAuto,        ///< the library chooses (docs/perf-log.md has the measurements behind the choice)
  kIndividual,  ///< one CTA per (query block, head, batch entry) tile
  kPersistent,  ///< one CTA per SM loops over tiles, longest first; the producer loads the next tile early
};

/// A tri-state switch for tuning knobs: let the library choose, or force off / on.
enum class Toggle { kAuto, kOff, kOn };

/// Arguments of a forward attention call: O = softmax(scale · mask(Q·Kᵀ)) · V, plus LSE.
///
/// Layouts (all strides in elements, 64-bit; the head-dim mode is contiguous, stride 1):
///  * dense (cu_seqlens_q == nullptr): Q, O are [batch][seqlen_q][heads_q][·], K, V are [batch][seqlen_k][heads_kv][·]
///    (BSHD) with caller strides: element (b, i, h, d) of Q is q[b·q_batch_stride + i·q_row_stride + h·q_head_stride + d].
///  * varlen (cu_seqlens_q and cu_seqlens_k non-null, device int[batch+1], cu[0] = 0, non-decreasing): Q, O are packed
///    [total_q][heads_q][·] and K, V [total_k][heads_kv][·]; entry b owns rows [cu[b], cu[b+1]). Batch strides are
///    ignored. seqlen_q / seqlen_k must be the largest per-entry lengths (upper bounds are fine: they size the grid,
///    and at head dims ≤ 64 seqlen_k also picks the tile height: 128 rows up to 2048 keys causal and up to 1024
///    non-causal, 192 above, so a loose bound past those gives correct but slower tiles on short entries; the
///    192-row tiles sum the softmax rows from P rounded to the element type, see LSE below).
///    No padding is needed before the first entry or after the last; rows outside an entry are never used in its
///    results and never written, even when they hold NaN.
///  * LSE (optional, fp32, natural log of Σ exp(scale·s)): dense [batch][heads_q][seqlen_q]; varlen [heads_q][total_q].
///    It has no stride fields: it must be contiguous in that layout (element (b, h, i) at (b·heads_q + h)·seqlen_q
///    + i dense; varlen, packed row r at h·total_q + r), as bwd reads it. A query row that sees no key gets O = 0
///    and LSE = −inf. Accuracy: fp32 sums of the exponentials, except in the kernels with 192-row tiles (head dims ≤ 64; seqlen_k
///    > 1024 non-causal, > 2048 causal), which sum P as rounded to fp16 / bf16 for P·V: LSE then moves by that
///    rounding, and O is normalised by the sum of the same rounded weights that multiply V (docs/numerics.md, "Row
///    sums of the rounded P").
///  * GQA/MQA: query head h uses K/V head h / (heads_q / heads_kv).
/// Alignment: q, k, v, o 16-byte aligned; every row, head and batch stride a positive multiple of 8 elements
/// (16 bytes) below 2^39 elements (a head or batch stride may be 0 where that mode has one entry); lse and
/// cu_seqlens 4-byte aligned. All pointers device-accessible. O must not overlap itself (checked) nor Q, K, V
/// (the caller's responsibility).
/// Caller contract that cannot be checked without reading device memory: in varlen mode cu[batch] ≤ total_q /
/// total_k and every entry's length ≤ seqlen_q / seqlen_k; otherwise rows past the grid are not computed and rows
/// past total_q may be written (undefined behaviour).
/// Errors raised while the kernel runs (after fwd returned) surface on `stream`, as for any CUDA launch.
/// Dtypes: fp16 or bf16 for Q, K, V and O (O in the input type); fp32 accumulation.
/// Head dim: any multiple of 8 up to 128; 32, 64 and 128 have their own tiles, others run on the next larger one.
/// The head dim of V and O (head_dim_v) and the output dtype (out_dtype) are part of the interface for the
/// families that need them (MLA prefill d_qk 192 / d_v 128, fp8 inputs with a 16-bit output); until a kernel
/// exists for other values, only head_dim_v = head_dim and out_dtype = dtype are accepted (others: kNotSupported).
struct FwdParams {
  DType dtype = DType::kBF16;                ///< element type of Q, K and V
  std::optional<DType> out_dtype;            ///< element type of O; empty = dtype
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;  ///< head dim of Q and K
  int head_dim_v = 0;  ///< head dim of V and O; 0 = head_dim
  int seqlen_q = 0;   ///< dense: query length of every entry; varlen: max over entries
  int seqlen_k = 0;   ///< dense: key length of every entry; varlen: max over entries
  const int* cu_seqlens_q = nullptr;  ///< device int[batch+1] or null (dense)
  const int* cu_seqlens_k = nullptr;  ///< device int[batch+1] or null (dense)
  int total_q = 0;    ///< varlen: rows of Q and O (≥ cu_seqlens_q[batch]); used for the LSE layout and bounds
  int total_k = 0;    ///< varlen: rows of K and V (≥ cu_seqlens_k[batch])

  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  ///< optional

  int64_t q_row_stride = 0, q_head_stride = 0, q_batch_stride = 0;
  int64_t k_row_stride = 0, k_head_stride = 0, k_batch_stride = 0;
  int64_t v_row_stride = 0, v_head_stride = 0, v_batch_stride = 0;
  int64_t o_row_stride = 0, o_head_stride = 0, o_batch_stride = 0;

  MaskType mask = MaskType::kNone;
  /// Alignment of the causal diagonal (used with mask = kCausal). The default here is kQBegin (top-left), as in
  /// fmha_fwd_params_init and the tools' --causal-type; the Python API (fmha.attention) defaults to "q_end"
  /// (kQEnd, bottom-right). The two agree when seqlen_q = seqlen_k.
  CausalAlign causal_align = CausalAlign::kQBegin;
  float softmax_scale = 0.f;  ///< 0 means 1/sqrt(head_dim)

  TileScheduler scheduler = TileScheduler::kAuto;
  int sm_count = 0;           ///< SMs used by the persistent scheduler; 0 or more than the device has = all
  /// Inter-warpgroup ping-pong (the consumer warpgroups take turns issuing their GEMMs so that one's softmax
  /// overlaps the others' tensor-core work; FlashAttention-3 §3.1). kAuto lets the library choose per problem.
  Toggle pingpong = Toggle::kAuto;
};

/// Fills the strides of `p` for contiguous dense BSHD tensors (or packed varlen tensors when cu_seqlens_q is set),
/// from heads_q, heads_kv, head_dim, head_dim_v (V and O; 0 = head_dim), seqlen_q, seqlen_k and cu_seqlens_q: set
/// those first. Strides already set are overwritten.
void set_contiguous_strides(FwdParams& p);

/// Checks `p` without launching anything. Returns kInvalidArgument naming the first bad argument with the expected
/// versus actual value, or kNotSupported for a valid request no kernel takes (dtype, head dim above 128, a head dim
/// of V other than head_dim, an output dtype other than dtype).
Status fwd_validate(const FwdParams& p);

/// Bytes of workspace that fwd needs for `p` (Workspace in fmha/types.h): 0 for every forward problem today, so the
/// caller may pass no workspace. Needs no GPU; never fails (for invalid params it returns what valid ones of the
/// same shape would need).
std::size_t fwd_workspace_size(const FwdParams& p);

/// Runs forward attention on `stream` (asynchronous). Errors: those of fwd_validate; kInvalidArgument naming
/// "workspace" when `workspace` is smaller than fwd_workspace_size(p) or misaligned; kNotBuilt when the kernel for
/// (dtype, head dim tile) is not in this build's kernel set; kNotSupported when the current device is not sm_90,
/// and also when there is no GPU at all (no device, or no driver new enough for CUDA 13): the message then starts
/// "device: expected a CUDA GPU of compute capability 9.x …" and quotes cudaGetDevice's error; kInvalidArgument
/// when a pointer is not device-accessible (a host pointer); kCudaError with the failing call when another CUDA
/// call or the launch fails. Everything else in this header needs no GPU.
Status fwd(const FwdParams& p, Workspace workspace, cudaStream_t stream = nullptr);

/// fwd without a workspace, for the problems whose fwd_workspace_size is 0 (every forward problem today).
Status fwd(const FwdParams& p, cudaStream_t stream = nullptr);

/// The forward kernel variants of the manifest, one line each: "<name> (built)" or "<name> (not built)", where
/// name is "fwd <dtype> d<head-dim tile>[ dv<head dim of V>][ out <output dtype>] tma ws <rows>x<keys>" (the dv and
/// out parts only where they differ from the head dim and dtype; query rows × keys per block: 192x128 for head-dim
/// tiles 32 and 64, 128x128 for 128). Each unit holds the mask × warpgroup-schedule variants, and at tiles 32 and
/// 64 also 128x128 kernels for causal problems with at most 2048 keys and non-causal ones with at most 1024
/// (fwd_kernel_name shows which one runs); it runs under either tile scheduler. Needs no GPU.
std::vector<std::string> fwd_kernel_variants();

/// The schedule fwd would use for `p`: p with scheduler and pingpong resolved (never kAuto), sm_count unchanged.
FwdParams fwd_resolve_schedule(const FwdParams& p);

/// Display name of the kernel that fwd would run for `p` (e.g. "fwd bf16 d128 tma ws 128x128 causal-qend
/// persistent pingpong"), or an empty string when fwd_validate fails.
std::string fwd_kernel_name(const FwdParams& p);

}  // namespace fmha
