// Backward attention kernels for sm_90a (the gradients of fwd_kernel.cuh's forward), in three launches:
//  1. bwd_prepass_kernel: per query row and head, D = Σ dO∘O (− dLSE with a gradient of LSE) and LSE · log2(e)
//     into the workspace (+inf for a row that saw no key, and for the padding rows of each entry's last row block,
//     so that P = 0 there), the fp32 dQ accumulator and the deterministic order counters zeroed;
//  2. bwd_kernel: one CTA per (key block of kBlockN keys, K/V head, entry). K and V of the block stay in shared
//     memory; the producer streams Q, dO (TMA) with LSE · log2 e and D (bulk copies) for every row block of every
//     query head of the K/V head's group that sees the key block (the mask's transposed walk). Two consumer
//     warpgroups own 64 keys each and compute, per row block of kBlockM rows:
//        Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ · scale · log2 e − LSE · log2 e), dPᵀ = V·dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − D),
//        dV += Pᵀ·dO, dK += dSᵀ·Q (A from registers), dQ = dS·K (dS through shared memory; the head dim split
//        over the two warpgroups), staged in shared memory in the order of the fragments (bwd_dq_index) and added
//        into the fp32 accumulator by one bulk reduction per warpgroup (collective/bulk_reduce.hpp; ordered per
//        row block by the counters when deterministic);
//     then dK · scale and dV (summed over the group's query heads in registers, so GQA needs no atomics) are stored;
//  3. bwd_convert_kernel: dQ = scale · accumulator in the input type, each fragment element back at its (row,
//     column).
//
// Technique: FlashAttention-2 (Dao, 2023, Algorithm 2: K-block-major backward, dQ accumulated in fp32) with
// FlashAttention-3's Hopper structure (Shah et al., 2024: warp-specialised TMA producer, wgmma with the score
// tile computed transposed so that Pᵀ and dSᵀ feed the dV and dK products from registers). Composed from this
// library's parts: the dense TMA sources (collective/kv_source.hpp; Q and dO stream as the forward's K and V do),
// the masks' transposed walk (fusion/mask.hpp), the warpgroup GEMM (collective/warpgroup_gemm.hpp).
//
// Warp roles (384 threads): warpgroup 0 the producer (thread 0 issues every load; 24 registers), warpgroups 1 and
// 2 the consumers (240 registers), keys [64·w, 64·w + 64) of the block for consumer w.
#pragma once

#include <cuda/atomic>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/collective/builders/sm90_common.inl>
#include <cutlass/pipeline/pipeline.hpp>

#include "api/bwd_workspace.h"
#include "kernels/collective/bulk_reduce.hpp"
#include "kernels/collective/fragment.hpp"
#include "kernels/collective/kv_source.hpp"
#include "kernels/collective/tma_pipeline.hpp"
#include "kernels/collective/warpgroup_gemm.hpp"
#include "kernels/fusion/mask.hpp"

namespace fmha::kernel {

using namespace cute;

/// The parts of the backward kernels' configurations (BwdConfig here, BwdDqConfig in bwd_dq_kernel.cuh) that do not
/// depend on the tile: the swizzled shared-memory atom of a K-major (rows, head dim) tile of Element, the global
/// tensors as TMA sees them ((rows, head dim, heads, batch), as the forward's), and the TMA load of one
/// (Rows, Dim) block into SmemLayout's first stage.
template <class Element, int Rows, int Dim>
using BwdSmemAtom =
    decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, Int<Rows>, Int<Dim>>());
template <class Element>
struct BwdGmem {
  using Shape = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
  using Stride = cute::Stride<int64_t, _1, int64_t, int64_t>;
  using Tensor = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), make_layout(Shape{}, Stride{})));
};
template <class Element, class SmemLayout, int Rows, int Dim>
using BwdTma = decltype(make_tma_copy(SM90_TMA_LOAD{}, typename BwdGmem<Element>::Tensor{}, take<0, 2>(SmemLayout{}),
                                      Shape<Int<Rows>, Int<Dim>>{}, _1{}));

/// Compile-time configuration of the backward main kernel: kBlockN keys per CTA (64 per consumer warpgroup),
/// kBlockM query rows per mainloop step, kStages stages of Q and dO; head dim HeadDim_ for Q and K, HeadDimV_ for V,
/// O and dO. With both at most 128, steps of 64 rows; above (the MLA prefill shape 192 / 128), steps of 32 rows, so
/// that dK (96 fp32 registers per thread) and dV (64) fit beside Sᵀ and dPᵀ (16 each) in one consumer: that
/// configuration runs the two-pass backward only (kOnePass false: its dQ product needs 64-row steps).
template <class Element_, int HeadDim_, int HeadDimV_ = HeadDim_>
struct BwdConfig {
  using Element = Element_;
  static constexpr int kHeadDim = HeadDim_;
  static constexpr int kHeadDimV = HeadDimV_;
  static constexpr int kBlockM = fmha::detail::bwd_step_rows(kHeadDim);
  static constexpr int kBlockN = 128;
  static constexpr int kStages = 2;
  static constexpr int kConsumerWGs = 2;
  static constexpr int kThreads = 128 * (kConsumerWGs + 1);
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  /// The one-pass backward (dQ = dS·K in this kernel, 64-row products) is built for this configuration.
  static constexpr bool kOnePass = kBlockM == 64;
  static_assert(kProducerRegs + kConsumerWGs * kConsumerRegs <= (kConsumerWGs + 1) * (65536 / kThreads / 8 * 8),
                "backward kernel: register budget over the launch-time pool");
  static_assert((kHeadDim % 64 == 0 && kHeadDim <= 128 && kHeadDimV == kHeadDim) ||
                    (kHeadDim == 192 && kHeadDimV == 128),
                "backward kernel: head-dim tiles 64 and 128, or 192 / 128");

  using BlkM = Int<kBlockM>;
  using BlkN = Int<kBlockN>;
  using HD = Int<kHeadDim>;
  using HDV = Int<kHeadDimV>;

  // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ: (keys, rows), the keys over the two warpgroups; the same accumulator layout.
  using MmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, BlkM, HD>>(),
                                       Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));
  using MmadP = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, BlkM, HDV>>(),
                                        Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));
  // dK += dSᵀ·Q and dV += Pᵀ·dO: (keys, head dim), A from registers, B (Q, dO) viewed head-dim-major.
  using MmaDK = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, HD, BlkM>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));
  using MmaDV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, HDV, BlkM>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));
  // dQ = dS·K (one pass): (rows, head dim), the head dim over the two warpgroups, K viewed head-dim-major.
  using MmaDQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kHeadDim / kConsumerWGs>, BlkN>, GMMA::Major::K,
                           GMMA::Major::MN>(),
      Layout<Shape<_1, Int<kConsumerWGs>, _1>>{}));

  template <int Rows, int Dim>
  using SmemAtom = BwdSmemAtom<Element, Rows, Dim>;
  using SmemAtomdS =
      decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, BlkM, BlkN>());
  // Q and dO: (rows, head dim, stage), and their (head dim, rows, stage) views for the dK and dV products.
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom<kBlockM, kHeadDim>{}, Shape<BlkM, HD, Int<kStages>>{}));
  using SmemLayoutdO = decltype(tile_to_shape(SmemAtom<kBlockM, kHeadDimV>{}, Shape<BlkM, HDV, Int<kStages>>{}));
  using SmemLayoutQt = decltype(composition(
      SmemLayoutQ{}, make_ordered_layout(Shape<HD, BlkM, Int<kStages>>{}, Step<_2, _1, _3>{})));
  using SmemLayoutdOt = decltype(composition(
      SmemLayoutdO{}, make_ordered_layout(Shape<HDV, BlkM, Int<kStages>>{}, Step<_2, _1, _3>{})));
  // K and V: (keys, head dim, one stage), and K's (head dim, keys) view for the dQ product.
  using SmemLayoutK = decltype(tile_to_shape(SmemAtom<kBlockN, kHeadDim>{}, Shape<BlkN, HD, _1>{}));
  using SmemLayoutV = decltype(tile_to_shape(SmemAtom<kBlockN, kHeadDimV>{}, Shape<BlkN, HDV, _1>{}));
  using SmemLayoutKt = decltype(composition(SmemLayoutK{},
                                            make_ordered_layout(Shape<HD, BlkN, _1>{}, Step<_2, _1, _3>{})));
  // dS of one row block, (rows, keys), two buffers (alternate row blocks), and its (keys, rows) view for the stores.
  using SmemLayoutdS = decltype(tile_to_shape(SmemAtomdS{}, Shape<BlkM, BlkN, _2>{}));
  using SmemLayoutdSt = decltype(composition(SmemLayoutdS{},
                                             make_ordered_layout(Shape<BlkN, BlkM, _2>{}, Step<_2, _1, _3>{})));
  // dSᵀ fragments (the Sᵀ accumulator's layout) into dS by transposing stmatrix: eight 16-bit values per thread and
  // instruction, as FlashAttention-3 writes its dS.
  using SmemCopyAtomdS = Copy_Atom<SM90_U16x8_STSM_T, Element>;

  using PipelineQ = cutlass::PipelineTmaAsync<kStages>;   // Q with LSE · log2 e; dO with D
  using PipelineKV = cutlass::PipelineTmaAsync<1>;        // K and V, once per CTA

  struct SharedStorage {
    cute::array_aligned<Element, cosize_v<SmemLayoutK>, 1024> k;
    cute::array_aligned<Element, cosize_v<SmemLayoutV>, 1024> v;
    cute::array_aligned<Element, cosize_v<SmemLayoutQ>, 1024> q;
    cute::array_aligned<Element, cosize_v<SmemLayoutdO>, 1024> d_o;
    // dS (one pass only: the A operand of dQ = dS·K).
    cute::array_aligned<Element, kOnePass ? cosize_v<SmemLayoutdS> : 8, 1024> ds;
    // This step's dQ share in the accumulator's order (bwd_dq_index), each warpgroup's half added into the
    // accumulator by one bulk reduction (one pass only).
    cute::array_aligned<float, kOnePass ? kBlockM * kHeadDim : 4, 128> dq;
    cute::array_aligned<float, kBlockM * kStages, 16> lse2;
    cute::array_aligned<float, kBlockM * kStages, 16> dsum;
    typename PipelineQ::SharedStorage pipe_q;
    typename PipelineQ::SharedStorage pipe_do;
    typename PipelineKV::SharedStorage pipe_kv;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "backward kernel: shared memory over the sm_90 limit of 227 KiB");

  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);    // one Q block
  static constexpr uint32_t kBytesdO = kBlockM * kHeadDimV * sizeof(Element);  // one dO block
  static constexpr uint32_t kBytesRowValues = kBlockM * sizeof(float);         // its LSE · log2 e or D
  static constexpr uint32_t kBytesKV = kBlockN * (kHeadDim + kHeadDimV) * sizeof(Element);  // K and V blocks

  // Global tensors as seen by TMA (BwdGmem) and the TMA loads of one block of each operand.
  using GmemShape = typename BwdGmem<Element>::Shape;
  using GmemStride = typename BwdGmem<Element>::Stride;
  using TmaQ = BwdTma<Element, SmemLayoutQ, kBlockM, kHeadDim>;
  using TmadO = BwdTma<Element, SmemLayoutdO, kBlockM, kHeadDimV>;
  using TmaK = BwdTma<Element, SmemLayoutK, kBlockN, kHeadDim>;
  using TmaV = BwdTma<Element, SmemLayoutV, kBlockN, kHeadDimV>;
};

/// Zeroes rows [first, first + count) of stage sa of `a` and of stage sb of `b` ((rows, head dim, stage) tensors in
/// shared memory), the kThreads consumer threads (index tid) striding over the elements: one walk over both where
/// their head dims agree.
template <int kThreads, class TA, class TB>
CUTLASS_DEVICE void zero_rows(TA& a, TB& b, int first, int count, int sa, int sb, int tid) {
  using E = typename TA::value_type;
  constexpr int kDa = decltype(size<1>(a))::value, kDb = decltype(size<1>(b))::value;
  if constexpr (kDa == kDb) {
    for (int idx = tid; idx < count * kDa; idx += kThreads) {
      a(first + idx / kDa, idx % kDa, sa) = E(0);
      b(first + idx / kDa, idx % kDa, sb) = E(0);
    }
  } else {
    for (int idx = tid; idx < count * kDa; idx += kThreads) a(first + idx / kDa, idx % kDa, sa) = E(0);
    for (int idx = tid; idx < count * kDb; idx += kThreads) b(first + idx / kDb, idx % kDb, sb) = E(0);
  }
}

/// Position in its row block's dQ chunk of element x (x = 0 … F − 1, F = 64 · head-dim tile / 256) of consumer
/// thread tid's dQ fragment (Config::MmaDQ): each warpgroup's half of the chunk, then groups of four elements with
/// the warpgroup's 128 threads side by side, so that a warp's 4-element vector atomic covers 512 contiguous bytes.
template <int F>
CUTLASS_HOST_DEVICE int bwd_dq_index(int tid, int x) {
  return (tid / 128) * (128 * F) + (x / 4) * (128 * 4) + (tid % 128) * 4 + x % 4;
}

/// The workspace of one backward call as the kernels see it (api/bwd_workspace.h lays it out): per query head h
/// and workspace row r (bwd_workspace_row0(b) + i for row i of entry b), D and LSE · log2 e at h · rows + r; the dQ
/// accumulator of the 64-row block starting at row r (a multiple of 64) is the chunk of 64 · dq_row floats at
/// (h · rows + r) · dq_row, in the order of the main kernel's dQ fragments (bwd_dq_index); the order counter of
/// row block m of entry b at h · rows / 64 + row0(b) / 64 + m (twice the number of key blocks that have added
/// their share: one count per consumer warpgroup's half).
struct BwdWorkspace {
  float* dsum;
  float* lse2;
  float* dq_acc;  ///< null: two-pass (no accumulator)
  int* order;     ///< null: not deterministic
  int64_t rows;   ///< rows per head (a multiple of 128)
  int dq_row;     ///< floats per row of the dQ accumulator: the head-dim tile
};

/// Arguments of the pre-pass and convert kernels (plain strided tensors, elements).
template <class Element>
struct BwdRowParams {
  int batch, heads_q, head_dim, seqlen_q;  ///< head_dim: of Q, dQ; seqlen_q: dense length, or varlen maximum
  const int* cu_q;                         ///< null: dense
  int total_q;
  int head_dim_v;  ///< of O, dO
  const Element* o;
  const Element* d_o;
  Element* dq;
  int64_t o_row_stride, o_head_stride, o_batch_stride;
  int64_t do_row_stride, do_head_stride, do_batch_stride;
  int64_t dq_row_stride, dq_head_stride, dq_batch_stride;
  const float* lse;  ///< the forward's: dense [batch][heads_q][seqlen_q], varlen [heads_q][total_q]
  const float* d_lse;  ///< optional gradient of LSE, lse's layout (D becomes Σ dO∘O − dLSE)
  float scale;
  BwdWorkspace ws;
};

/// The pre-pass: one warp per (workspace row of an entry's row blocks, query head); lanes hold 4 columns each
/// (head dims up to 128). Grid (ceil(ceil(seqlen_q / 64) · 64 / 8), min(heads_q, 65535), min(batch, 65535)), 256
/// threads; heads and entries past the grid's extents are looped over.
template <class Element>
__global__ void __launch_bounds__(256) bwd_prepass_kernel(BwdRowParams<Element> const p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i = blockIdx.x * 8 + warp;
  for (int h = blockIdx.y; h < p.heads_q; h += gridDim.y)
  for (int b = blockIdx.z; b < p.batch; b += gridDim.z) {
    const fmha::detail::BwdEntry e = fmha::detail::bwd_entry(p.cu_q, b, p.seqlen_q, p.total_q);
    const int q_off = e.off, sq = e.len;
    if (i >= (sq + 63) / 64 * 64) continue;
    const int64_t r =
        int64_t(h) * p.ws.rows + fmha::detail::bwd_workspace_row0(b, p.cu_q != nullptr, q_off, p.seqlen_q) + i;
    float dsum = 0.f, lse2 = INFINITY;
    if (i < sq) {
      const int64_t row = q_off + i, bb = p.cu_q ? 0 : b;
      const Element* o = p.o + bb * p.o_batch_stride + row * p.o_row_stride + h * p.o_head_stride;
      const Element* d_o = p.d_o + bb * p.do_batch_stride + row * p.do_row_stride + h * p.do_head_stride;
      CUTLASS_PRAGMA_UNROLL
      for (int c0 = 0; c0 < 128; c0 += 32 * 4) {
        const int c = c0 + lane * 4;
        CUTLASS_PRAGMA_UNROLL
        for (int x = 0; x < 4; ++x)
          if (c + x < p.head_dim_v) dsum = fmaf(float(o[c + x]), float(d_o[c + x]), dsum);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int off = 16; off > 0; off /= 2) dsum += __shfl_xor_sync(0xffffffffu, dsum, off);
      const int64_t at = p.cu_q ? int64_t(h) * p.total_q + row : (int64_t(b) * p.heads_q + h) * p.seqlen_q + i;
      const float lse = p.lse[at];
      // A gradient of LSE adds dLSE_i · P_ij to dS_ij: the same as D_i − dLSE_i in dS = P · (dP − D).
      if (p.d_lse) dsum -= p.d_lse[at];
      // A row that saw no key (LSE = −inf) gets +inf: exp2(s − inf) = 0, so it contributes nothing.
      lse2 = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
    }
    if (lane == 0) {
      p.ws.dsum[r] = dsum;
      p.ws.lse2[r] = lse2;
      if (p.ws.order && i % 64 == 0) p.ws.order[r / 64] = 0;
    }
    if (p.ws.dq_acc)
      for (int c = lane; c < p.ws.dq_row; c += 32) p.ws.dq_acc[r * p.ws.dq_row + c] = 0.f;  // row r's share of its chunk
  }
}

/// The convert kernel: dQ(b, i, h, ·) = scale · accumulator in the input type. One CTA of 256 threads per (64-row
/// block, query head, entry): thread tid reads the chunk's elements of consumer thread tid's dQ fragment
/// (bwd_dq_index; 16-byte loads, coalesced) and stores them at their (row, column) of the fragment (Config::MmaDQ),
/// two columns per 4-byte store. Grid (ceil(seqlen_q / 64), min(heads_q, 65535), min(batch, 65535)); heads and
/// entries past the grid's extents are looped over.
template <class Config>
__global__ void __launch_bounds__(256) bwd_convert_kernel(BwdRowParams<typename Config::Element> const p) {
  using Element = typename Config::Element;
  constexpr int kBlockM = Config::kBlockM, kHeadDim = Config::kHeadDim;
  typename Config::MmaDQ mma_dq;
  const int tid = threadIdx.x;
  Tensor tdQcdQ = mma_dq.get_thread_slice(tid).partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  constexpr int F = decltype(size(tdQcdQ))::value;
  const int m = blockIdx.x;
  for (int h = blockIdx.y; h < p.heads_q; h += gridDim.y)
  for (int b = blockIdx.z; b < p.batch; b += gridDim.z) {
    const fmha::detail::BwdEntry e = fmha::detail::bwd_entry(p.cu_q, b, p.seqlen_q, p.total_q);
    const int q_off = e.off, sq = e.len;
    const int i0 = m * kBlockM;
    if (i0 >= sq) continue;
    const int64_t r0 = fmha::detail::bwd_workspace_row0(b, p.cu_q != nullptr, q_off, p.seqlen_q);
    const float* chunk = p.ws.dq_acc + (int64_t(h) * p.ws.rows + r0 + i0) * kHeadDim;
    Element* dq = p.dq + (p.cu_q ? 0 : int64_t(b) * p.dq_batch_stride) + int64_t(q_off + i0) * p.dq_row_stride +
                  int64_t(h) * p.dq_head_stride;
    CUTLASS_PRAGMA_UNROLL
    for (int x = 0; x < F; x += 4) {
      const float4 a = *reinterpret_cast<const float4*>(chunk + bwd_dq_index<F>(tid, x));
      const float v[4] = {a.x, a.y, a.z, a.w};
      CUTLASS_PRAGMA_UNROLL
      for (int y = 0; y < 4; y += 2) {  // (x + y, x + y + 1): columns c, c + 1 of one row
        const int row = get<0>(tdQcdQ(x + y)), col = get<1>(tdQcdQ(x + y));
        if (i0 + row >= sq || col >= p.head_dim) continue;
        cute::array_aligned<Element, 2, 4> two;
        two[0] = Element(v[y] * p.scale), two[1] = Element(v[y + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(dq + int64_t(row) * p.dq_row_stride + col) =
            *reinterpret_cast<const uint32_t*>(two.data());
      }
    }
  }
}

/// The TMA loads of Q, dO, K, V and their global shapes, with which both backward kernels' parameters start
/// (device/bwd_launch.cuh, set_bwd_kernel_params, fills them).
template <class Config>
struct BwdTmaParams {
  typename Config::TmaQ tma_q;
  typename Config::TmadO tma_do;
  typename Config::TmaK tma_k;
  typename Config::TmaV tma_v;
  typename Config::GmemShape shape_q;   ///< of Q
  typename Config::GmemShape shape_do;  ///< of dO
  typename Config::GmemShape shape_k;   ///< of K
  typename Config::GmemShape shape_v;   ///< of V
};

/// Kernel parameters of the main backward kernel (a __grid_constant__; TMA descriptors inside).
template <class Config>
struct BwdKernelParams : BwdTmaParams<Config> {
  using Element = typename Config::Element;
  Element* dk;
  Element* dv;
  int64_t dk_row_stride, dk_head_stride, dk_batch_stride;
  int64_t dv_row_stride, dv_head_stride, dv_batch_stride;
  const int* cu_q;  ///< null: dense
  const int* cu_k;
  int total_q, total_k;  ///< varlen: rows of Q and of K (the clamp of bwd_entry)
  int heads_kv, group, head_dim, head_dim_v, seqlen_q, seqlen_k;
  int n_blocks;      ///< key blocks per entry (of the longest, varlen)
  float scale_log2;  ///< softmax scale · log2(e)
  float scale;       ///< softmax scale (dK = scale · Σ dSᵀ·Q)
  bool causal_qend;
  BwdWorkspace ws;
};

/// The main backward kernel: grid n_blocks · heads_kv · batch CTAs (key block fastest, so that with the ordered dQ
/// accumulation a key block's CTA only ever waits for CTAs of lower index). Causal picks the causal mask; kDq false
/// leaves dQ out (the two-pass backward's dK/dV kernel; bwd_dq_kernel.cuh computes dQ).
template <class Config, bool Causal, bool kDq = true>
__global__ void __launch_bounds__(Config::kThreads, 1) bwd_kernel(CUTE_GRID_CONSTANT BwdKernelParams<Config> const p) {
  using Element = typename Config::Element;
  using SharedStorage = typename Config::SharedStorage;
  using PipelineQ = typename Config::PipelineQ;
  using PipelineKV = typename Config::PipelineKV;
  constexpr int kBlockM = Config::kBlockM;
  constexpr int kBlockN = Config::kBlockN;
  constexpr int kHeadDim = Config::kHeadDim;
  constexpr int kHeadDimV = Config::kHeadDimV;
  static_assert(!kDq || Config::kOnePass, "bwd_kernel: this configuration has no one-pass (dQ) variant");
  using Mask = FwdMask<kBlockM, kBlockN, Causal>;  // the deterministic order relies on its prefix walk (below)

  extern __shared__ __align__(1024) char smem_raw[];
  SharedStorage& ss = *reinterpret_cast<SharedStorage*>(smem_raw);

  // The tile: key block n of K/V head hk of entry b.
  const int n_block = int(blockIdx.x % unsigned(p.n_blocks));
  const int hk = int(blockIdx.x / unsigned(p.n_blocks) % unsigned(p.heads_kv));
  const int b = int(blockIdx.x / unsigned(p.n_blocks) / unsigned(p.heads_kv));
  const bool varlen = p.cu_q != nullptr;
  const fmha::detail::BwdEntry eq = fmha::detail::bwd_entry(p.cu_q, b, p.seqlen_q, p.total_q);
  const fmha::detail::BwdEntry ek = fmha::detail::bwd_entry(p.cu_k, b, p.seqlen_k, p.total_k);
  const int q_off = eq.off, sq = eq.len, k_off = ek.off, sk = ek.len;
  const int n0 = n_block * kBlockN;
  if (n0 >= sk) return;  // no key of the entry in this block (varlen: a shorter entry)
  const Mask mask = Mask::make(sk, p.causal_qend, 0, sq);
  const int m_begin = mask.row_block_begin(n0), m_end = mask.row_block_end(n0);
  const int m_count = m_end - m_begin;
  const int steps = m_count * p.group;  // (query head, row block) pairs, head-major; < 2^31 (bwd_validate)
  const int64_t row0 = fmha::detail::bwd_workspace_row0(b, varlen, q_off, p.seqlen_q);
  const int bq = varlen ? 0 : b;

  const int warp_group = threadIdx.x / 128;
  const bool is_producer_thread = threadIdx.x == 0;
  if (is_producer_thread) prefetch_tma_descriptors(p.tma_q, p.tma_do, p.tma_k, p.tma_v);
  const auto pq = tma_pipeline_params<PipelineQ>(Config::kBytesQ + Config::kBytesRowValues, 128 * Config::kConsumerWGs);
  const auto pdo = tma_pipeline_params<PipelineQ>(Config::kBytesdO + Config::kBytesRowValues, 128 * Config::kConsumerWGs);
  const auto pkv = tma_pipeline_params<PipelineKV>(Config::kBytesKV, 128 * Config::kConsumerWGs);
  PipelineQ pipe_q(ss.pipe_q, pq, Shape<_1, _1, _1>{});
  PipelineQ pipe_do(ss.pipe_do, pdo, Shape<_1, _1, _1>{});
  PipelineKV pipe_kv(ss.pipe_kv, pkv, Shape<_1, _1, _1>{});
  __syncthreads();

  Tensor sQ = make_tensor(make_smem_ptr(ss.q.data()), typename Config::SmemLayoutQ{});
  Tensor sdO = make_tensor(make_smem_ptr(ss.d_o.data()), typename Config::SmemLayoutdO{});
  Tensor sQt = make_tensor(make_smem_ptr(ss.q.data()), typename Config::SmemLayoutQt{});
  Tensor sdOt = make_tensor(make_smem_ptr(ss.d_o.data()), typename Config::SmemLayoutdOt{});
  Tensor sK = make_tensor(make_smem_ptr(ss.k.data()), typename Config::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(ss.v.data()), typename Config::SmemLayoutV{});
  Tensor sKt = make_tensor(make_smem_ptr(ss.k.data()), typename Config::SmemLayoutKt{});
  Tensor sdS = make_tensor(make_smem_ptr(ss.ds.data()), typename Config::SmemLayoutdS{});
  Tensor sdSt = make_tensor(make_smem_ptr(ss.ds.data()), typename Config::SmemLayoutdSt{});

  if (warp_group == 0) {
    // ------------------------------------------------------------------------------------------------ producer
    cutlass::arch::warpgroup_reg_dealloc<Config::kProducerRegs>();
    if (!is_producer_thread || steps == 0) return;
    Tensor mK = p.tma_k.get_tma_tensor(p.shape_k);
    Tensor mV = p.tma_v.get_tma_tensor(p.shape_v);
    Tensor mQ = p.tma_q.get_tma_tensor(p.shape_q);
    Tensor mdO = p.tma_do.get_tma_tensor(p.shape_do);
    auto key_block = [&](auto& m, auto dim) {
      return local_tile(domain_offset(make_coord(k_off, _0{}), m(_, _, hk, bq)), Shape<Int<kBlockN>, decltype(dim)>{},
                        make_coord(n_block, _0{}));
    };
    const auto k_src = make_dense_q_source(p.tma_k, key_block(mK, Int<kHeadDim>{}), sK);
    const auto v_src = make_dense_q_source(p.tma_v, key_block(mV, Int<kHeadDimV>{}), sV);
    auto kv_state = cutlass::make_producer_start_state<PipelineKV>();
    pipe_kv.producer_acquire(kv_state);
    k_src.load_q(0, *pipe_kv.producer_get_barrier(kv_state));
    v_src.load_q(0, *pipe_kv.producer_get_barrier(kv_state));
    auto q_state = cutlass::make_producer_start_state<PipelineQ>();
    auto do_state = cutlass::make_producer_start_state<PipelineQ>();
    for (int g = 0; g < p.group; ++g) {
      const int h = hk * p.group + g;
      auto row_blocks = [&](auto& m, auto dim) {
        return local_tile(domain_offset(make_coord(q_off, _0{}), m(_, _, h, bq)), Shape<Int<kBlockM>, decltype(dim)>{},
                          make_coord(_, _0{}));
      };
      // Q and dO stream as two block sequences, like the forward's K and V.
      const auto rows = make_dense_kv_source(p.tma_q, p.tma_do, row_blocks(mQ, Int<kHeadDim>{}),
                                             row_blocks(mdO, Int<kHeadDimV>{}), sQ, sdO);
      const int64_t ws_row = int64_t(h) * p.ws.rows + row0;
      for (int m = m_begin; m < m_end; ++m) {
        pipe_q.producer_acquire(q_state);
        uint64_t* bar_q = pipe_q.producer_get_barrier(q_state);
        rows.load_k(m, q_state.index(), *bar_q);
        SM90_BULK_COPY_G2S::copy(p.ws.lse2 + ws_row + m * kBlockM, bar_q, ss.lse2.data() + q_state.index() * kBlockM,
                                 Config::kBytesRowValues);
        ++q_state;
        pipe_do.producer_acquire(do_state);
        uint64_t* bar_do = pipe_do.producer_get_barrier(do_state);
        rows.load_v(m, do_state.index(), *bar_do);
        SM90_BULK_COPY_G2S::copy(p.ws.dsum + ws_row + m * kBlockM, bar_do,
                                 ss.dsum.data() + do_state.index() * kBlockM, Config::kBytesRowValues);
        ++do_state;
      }
    }
    return;
  }

  // -------------------------------------------------------------------------------------------------- consumers
  cutlass::arch::warpgroup_reg_alloc<Config::kConsumerRegs>();
  const int tid = threadIdx.x - 128;  // 0 .. 255 over the two consumer warpgroups
  constexpr int kConsumerThreads = 128 * Config::kConsumerWGs;
  constexpr int kBarrierStep = 1;  // named barrier: both consumer warpgroups (dS written, rows zeroed)
  constexpr int kBarrierDq = 2;    // named barriers 2, 3: warpgroup w's half of ss.dq written
  const int wg = tid / 128;
  const bool wg_leader = tid % 128 == 0;  // issues the warpgroup's dQ reductions
  typename Config::MmaS mma_s;
  typename Config::MmadP mma_dp;
  typename Config::MmaDK mma_dk;
  typename Config::MmaDV mma_dv;
  typename Config::MmaDQ mma_dq;
  auto thr_s = mma_s.get_thread_slice(tid);
  auto thr_dp = mma_dp.get_thread_slice(tid);
  auto thr_dk = mma_dk.get_thread_slice(tid);
  auto thr_dv = mma_dv.get_thread_slice(tid);
  auto thr_dq = mma_dq.get_thread_slice(tid);

  Tensor tSrK = thr_s.partition_fragment_A(sK(_, _, 0));      // (MMA, M, K)
  Tensor tdPrV = thr_dp.partition_fragment_A(sV(_, _, 0));
  Tensor tSrQ = thr_s.partition_fragment_B(sQ);               // (MMA, N, K, stage)
  Tensor tdPrdO = thr_dp.partition_fragment_B(sdO);
  Tensor tdVrdO = thr_dv.partition_fragment_B(sdOt);          // (MMA, N, K, stage)
  Tensor tdKrQ = thr_dk.partition_fragment_B(sQt);
  // dQ = dS·K operands (one pass only: the 32-row steps of 192 / 128 have no 64-row dS).
  auto tdQrdS = [&] {  // (MMA, M, K, buffer)
    if constexpr (kDq) return thr_dq.partition_fragment_A(sdS); else return 0;
  }();
  auto tdQrK = [&] {  // (MMA, N, K)
    if constexpr (kDq) return thr_dq.partition_fragment_B(sKt(_, _, 0)); else return 0;
  }();
  auto smem_copy_ds = make_tiled_copy_C(typename Config::SmemCopyAtomdS{}, mma_s);
  auto thr_copy_ds = smem_copy_ds.get_thread_slice(tid);
  Tensor tdSsdS = thr_copy_ds.partition_D(as_position_independent_swizzle_tensor(sdSt));  // (CPY, M, N, buffer)

  Tensor tdVrdV = partition_fragment_C(mma_dv, Shape<Int<kBlockN>, Int<kHeadDimV>>{});
  Tensor tdKrdK = partition_fragment_C(mma_dk, Shape<Int<kBlockN>, Int<kHeadDim>>{});
  clear(tdVrdV);
  clear(tdKrdK);
  // Pᵀ and dSᵀ in the input type, as the register A operands of the dV and dK products (the A operand's layout
  // does not depend on the product's N).
  Tensor tdVrP = thr_dv.partition_fragment_A(
      make_tensor(make_smem_ptr(static_cast<Element*>(nullptr)), Layout<Shape<Int<kBlockN>, Int<kBlockM>>>{}));
  Tensor tdKrdS = make_fragment_like(tdVrP);
  // (key, row) of every score element of this thread.
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<Int<kBlockN>, Int<kBlockM>>{}));
  static_assert(decltype(size(tdVrP))::value == decltype(size(tScS))::value, "Pᵀ fragment must mirror Sᵀ");

  if (steps > 0) {
    auto kv_state = cutlass::PipelineState<1>();
    pipe_kv.consumer_wait(kv_state);
    // Varlen: keys past the entry's end hold the next entry's rows (or NaN); S and dP there are masked, but 0·NaN
    // in dQ = dS·K is NaN, so those rows of K (and V) are zeroed. Dense tensors end there: TMA filled zeros. (Without
    // the dQ product the zeroing is not needed, since a select sets P and dS there to 0 and no other key's dK or dV
    // reads those rows; it stays until a GPU run has checked the varlen cases without it.)
    if (varlen && n0 + kBlockN > sk) {
      const int valid = sk - n0;
      zero_rows<kConsumerThreads>(sK, sV, valid, kBlockN - valid, 0, 0, tid);
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrierStep);
    }
  }

  auto q_state = cutlass::PipelineState<Config::kStages>();
  auto do_state = cutlass::PipelineState<Config::kStages>();
  for (int step = 0; step < steps; ++step) {
    const int g = step / m_count, m = m_begin + step % m_count;
    const int h = hk * p.group + g;
    const int i0 = m * kBlockM;
    const int qs = q_state.index(), ds = do_state.index(), buf = step % 2;
    pipe_q.consumer_wait(q_state);
    pipe_do.consumer_wait(do_state);
    // Varlen: rows past the entry's end hold the next entry's (or NaN): zeroed, since P = 0 there but 0·NaN is
    // NaN in dV = Pᵀ·dO and dK = dSᵀ·Q.
    if (varlen && i0 + kBlockM > sq) {
      const int valid = sq - i0;
      zero_rows<kConsumerThreads>(sQ, sdO, valid, kBlockM - valid, qs, ds, tid);
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrierStep);
    }
    Tensor tSrS = partition_fragment_C(mma_s, Shape<Int<kBlockN>, Int<kBlockM>>{});
    Tensor tdPrdP = partition_fragment_C(mma_dp, Shape<Int<kBlockN>, Int<kBlockM>>{});
    wg_gemm<true, -1>(mma_s, tSrK, tSrQ(_, _, _, qs), tSrS);
    wg_gemm<true, -1>(mma_dp, tdPrV, tdPrdO(_, _, _, ds), tdPrdP);
    warpgroup_wait<1>();
    Tensor S = make_tensor(tSrS.data(), acc_rowcol(tSrS.layout()));     // (keys, rows) of this thread
    Tensor Sc = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
    const float* lse2 = ss.lse2.data() + qs * kBlockM;
    const float* dsum = ss.dsum.data() + ds * kBlockM;
    // Pᵀ, masked only in the blocks that need it: two copies of the loop, so that the others carry no predicated
    // mask code.
    auto scores_to_p = [&](auto masked) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < size<0>(S); ++r)
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < size<1>(S); ++c) {
          const int row = get<1>(Sc(r, c));
          float pv = exp2f(S(r, c) * p.scale_log2 - lse2[row]);
          if constexpr (decltype(masked)::value) {
            const int i = i0 + row, j = n0 + get<0>(Sc(r, c));
            if (!(i < sq && mask.visible(i, j))) pv = 0.f;
          }
          S(r, c) = pv;
        }
    };
    if (mask.needs_mask_block(i0, n0))
      scores_to_p(cute::true_type{});
    else
      scores_to_p(cute::false_type{});
    warpgroup_wait<0>();
    Tensor dP = make_tensor(tdPrdP.data(), acc_rowcol(tdPrdP.layout()));
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < size<0>(S); ++r)
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(S); ++c) {
        const int row = get<1>(Sc(r, c));
        // Where P = 0 (masked, or underflow) dS is exactly 0, whatever dP holds.
        dP(r, c) = S(r, c) == 0.f ? 0.f : S(r, c) * (dP(r, c) - dsum[row]);
      }
    CUTLASS_PRAGMA_UNROLL
    for (int x = 0; x < size(tSrS); ++x) {
      tdVrP(x) = static_cast<Element>(tSrS(x));
      tdKrdS(x) = static_cast<Element>(tdPrdP(x));
    }
    if constexpr (kDq) {  // dSᵀ into shared memory as dS (rows, keys), the A operand of dQ = dS·K
      // tdKrdS holds the values in the Sᵀ accumulator's order (the loop above): viewed in that layout for the copy.
      cute::copy(smem_copy_ds, thr_copy_ds.retile_S(make_tensor(tdKrdS.data(), tSrS.layout())),
                 tdSsdS(_, _, _, buf));
      cutlass::arch::fence_view_async_shared();
    }
    wg_gemm<false, -1, true>(mma_dv, tdVrP, tdVrdO(_, _, _, ds), tdVrdV);
    wg_gemm<false, -1, true>(mma_dk, tdKrdS, tdKrQ(_, _, _, qs), tdKrdK);
    if constexpr (!kDq) {
      warpgroup_wait<0>();
      warpgroup_fence_operand(tdVrdV);
      warpgroup_fence_operand(tdKrdK);
      pipe_q.consumer_release(q_state);
      pipe_do.consumer_release(do_state);
      ++q_state;
      ++do_state;
    } else {
      // The previous step's dQ reduction has read ss.dq before anyone passes this barrier (and writes it again).
      if (wg_leader) bulk_wait_read<0>();
      cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrierStep);  // both warpgroups' halves of dS written
      Tensor tdQrdQ = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
      wg_gemm<true, 1>(mma_dq, tdQrdS(_, _, _, buf), tdQrK, tdQrdQ);
      // dV and dK (the last readers of this stage's dO and Q) are done: the producer may refill the stage while
      // the dQ product runs.
      pipe_q.consumer_release(q_state);
      pipe_do.consumer_release(do_state);
      ++q_state;
      ++do_state;
      warpgroup_wait<0>();
      warpgroup_fence_operand(tdQrdQ);

      // dQ += this key block's share: staged in ss.dq in the accumulator's order (bwd_dq_index: a warp's four-element
      // stores cover 512 contiguous bytes), then each warpgroup's half (contiguous) added into the fp32 accumulator
      // by one bulk reduction that its leader issues, off the other threads' path. Padding rows and columns past
      // head_dim add exact zeros (dS is 0 there, K's padding is 0), so the whole chunk is added.
      constexpr int F = decltype(size(tdQrdQ))::value;
      static_assert(F % 4 == 0 && 2 * 128 * F == kBlockM * kHeadDim, "dQ chunk: 64 rows of the head-dim tile");
      CUTLASS_PRAGMA_UNROLL
      for (int x = 0; x < F; x += 4) {
        *reinterpret_cast<float4*>(ss.dq.data() + bwd_dq_index<F>(tid, x)) =
            make_float4(tdQrdQ(x), tdQrdQ(x + 1), tdQrdQ(x + 2), tdQrdQ(x + 3));
      }
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(128, kBarrierDq + wg);  // the warpgroup's half of ss.dq written
      if (wg_leader) {
        const int64_t half = int64_t(wg) * 128 * F;
        float* chunk = p.ws.dq_acc + (int64_t(h) * p.ws.rows + row0 + i0) * kHeadDim + half;
        int* order = p.ws.order ? p.ws.order + (int64_t(h) * p.ws.rows + row0) / kBlockM + m : nullptr;
        if (order) {
          // Deterministic: key blocks add in order n = 0, 1, …; the counter counts warpgroup halves added (2 per
          // key block; the halves are disjoint, so the two of one block need no order between them). The key blocks
          // that see a row block are a prefix 0 … n of the entry's blocks with both masks here (a mask whose blocks
          // start later, e.g. a sliding window, must count from its first block instead), and a CTA waits only for
          // CTAs of lower index, which the hardware starts first (as FlashAttention-2/3 assume). Inputs outside the
          // varlen contract (entries overlapping in cu_seqlens) could still share a counter: after about a second
          // the wait gives up, so that such input cannot hang (its dQ is then not bitwise repeatable).
          for (int spins = 0; spins < (1 << 24); ++spins) {
            if (cuda::atomic_ref<int, cuda::thread_scope_device>(*order).load(cuda::memory_order_acquire) ==
                2 * n_block)
              break;
            __nanosleep(64);
          }
          bulk_fence_global();
        }
        bulk_reduce_add_f32(chunk, ss.dq.data() + half, uint32_t(128 * F * sizeof(float)));
        bulk_commit();
        if (order) {
          bulk_wait_complete<0>();
          cuda::atomic_ref<int, cuda::thread_scope_device>(*order).fetch_add(1, cuda::memory_order_release);
        }
      }
      __syncwarp();  // the leader's warp whole again before the next step's barriers
    }
  }
  // Shared memory stays until the last reduction has read it.
  if (wg_leader) bulk_wait_read<0>();

  // ------------------------------------------------------------------------------------------------ epilogue
  // dK = scale · Σ dSᵀ·Q and dV, keys of the entry and columns of the head dim only (zero for a block no row sees).
  Tensor tdKcdK = thr_dk.partition_C(make_identity_tensor(Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  const int64_t kb = varlen ? 0 : b;
  Element* dk = p.dk + kb * p.dk_batch_stride + int64_t(k_off + n0) * p.dk_row_stride + int64_t(hk) * p.dk_head_stride;
  Element* dv = p.dv + kb * p.dv_batch_stride + int64_t(k_off + n0) * p.dv_row_stride + int64_t(hk) * p.dv_head_stride;
  if constexpr (kHeadDim == kHeadDimV) {  // one walk over both fragments (the same layout)
    CUTLASS_PRAGMA_UNROLL
    for (int x = 0; x < size(tdKrdK); x += 2) {  // (x, x + 1): columns c, c + 1 of one key
      const int j = get<0>(tdKcdK(x)), col = get<1>(tdKcdK(x));
      if (n0 + j >= sk || col >= p.head_dim) continue;
      cute::array_aligned<Element, 2, 4> k2, v2;
      k2[0] = Element(tdKrdK(x) * p.scale), k2[1] = Element(tdKrdK(x + 1) * p.scale);
      v2[0] = Element(tdVrdV(x)), v2[1] = Element(tdVrdV(x + 1));
      *reinterpret_cast<uint32_t*>(dk + int64_t(j) * p.dk_row_stride + col) = *reinterpret_cast<uint32_t*>(k2.data());
      *reinterpret_cast<uint32_t*>(dv + int64_t(j) * p.dv_row_stride + col) = *reinterpret_cast<uint32_t*>(v2.data());
    }
  } else {
    // (x, x + 1) of a fragment: columns c, c + 1 of one key, times `mul`, into dst (row stride rs), col < cols.
    auto store = [&](auto const& acc, auto const& coord, Element* dst, int64_t rs, int cols, float mul) {
      CUTLASS_PRAGMA_UNROLL
      for (int x = 0; x < size(acc); x += 2) {
        const int j = get<0>(coord(x)), col = get<1>(coord(x));
        if (n0 + j >= sk || col >= cols) continue;
        cute::array_aligned<Element, 2, 4> two;
        two[0] = Element(acc(x) * mul), two[1] = Element(acc(x + 1) * mul);
        *reinterpret_cast<uint32_t*>(dst + int64_t(j) * rs + col) = *reinterpret_cast<uint32_t*>(two.data());
      }
    };
    store(tdKrdK, tdKcdK, dk, p.dk_row_stride, p.head_dim, p.scale);
    store(tdVrdV, thr_dv.partition_C(make_identity_tensor(Shape<Int<kBlockN>, Int<kHeadDimV>>{})), dv,
          p.dv_row_stride, p.head_dim_v, 1.f);
  }
}

}  // namespace fmha::kernel
