// The dQ kernel of the two-pass backward (sm_90a): after the pre-pass (D, LSE · log2 e) and the dK/dV kernel
// (bwd_kernel.cuh's main kernel without its dQ part), one CTA per (block of kBlockM query rows, query head, entry)
// computes that block's dQ with no accumulator in global memory and no convert kernel:
//    for every key block the rows see (the mask's forward walk, as the forward kernel's):
//      S = Q·Kᵀ, P = exp2(S · scale · log2 e − LSE · log2 e), dP = dO·Vᵀ, dS = P ∘ (dP − D), dQ += dS·K (dS from
//      registers);
//    then dQ · scale is stored in the input type. Bitwise repeatable by construction (each dQ element is summed by
//    one thread in key order), so the deterministic option costs nothing here.
//
// Technique: the dQ half of FlashAttention-2's backward split by query block (Dao, 2023, §3.2; CUTLASS example 77's
// fmha_2bwd runs this split on Blackwell). Composed from this library's parts like the forward: Q and dO load once
// as the forward's Q does (collective/kv_source.hpp, make_dense_q_source), K and V stream through the forward's dense
// source, the forward's mask walk (fusion/mask.hpp), the warpgroup GEMM (collective/warpgroup_gemm.hpp), and the
// forward's two tiled MMAs (Q·Kᵀ from shared memory; dS·K with dS from registers, as P·V).
//
// Warp roles (384 threads): warpgroup 0 the producer (thread 0 issues every load), warpgroups 1 and 2 the consumers,
// rows [64·w, 64·w + 64) of the block for consumer w.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/collective/builders/sm90_common.inl>
#include <cutlass/pipeline/pipeline.hpp>

#include "api/bwd_workspace.h"
#include "kernels/collective/fragment.hpp"
#include "kernels/collective/kv_source.hpp"
#include "kernels/collective/tma_pipeline.hpp"
#include "kernels/collective/warpgroup_gemm.hpp"
#include "kernels/fusion/mask.hpp"
#include "kernels/kernel/bwd_kernel.cuh"

namespace fmha::kernel {

using namespace cute;

/// Compile-time configuration of the two-pass dQ kernel: kBlockM query rows per CTA (64 per consumer warpgroup),
/// kBlockN keys per mainloop step, kStages stages of K and V; head dim HeadDim_ for Q and K, HeadDimV_ for V and dO.
template <class Element_, int HeadDim_, int HeadDimV_ = HeadDim_>
struct BwdDqConfig {
  using Element = Element_;
  static constexpr int kHeadDim = HeadDim_;
  static constexpr int kHeadDimV = HeadDimV_;
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = kHeadDim <= 64 ? 128 : 64;
  static constexpr int kStages = 2;
  static constexpr int kConsumerWGs = 2;
  static constexpr int kThreads = 128 * (kConsumerWGs + 1);
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static_assert(kProducerRegs + kConsumerWGs * kConsumerRegs <= (kConsumerWGs + 1) * (65536 / kThreads / 8 * 8),
                "backward dQ kernel: register budget over the launch-time pool");
  static_assert((kHeadDim % 64 == 0 && kHeadDim <= 128 && kHeadDimV == kHeadDim) ||
                    (kHeadDim == 192 && kHeadDimV == 128),
                "backward dQ kernel: head-dim tiles 64 and 128, or 192 / 128");

  using BlkM = Int<kBlockM>;
  using BlkN = Int<kBlockN>;
  using HD = Int<kHeadDim>;
  using HDV = Int<kHeadDimV>;

  // S = Q·Kᵀ and dP = dO·Vᵀ: (rows, keys), the rows over the two warpgroups (the forward's Q·Kᵀ); the same
  // accumulator layout.
  using MmaS = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, BlkN, HD>>(),
                                       Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));
  using MmadP = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, BlkN, HDV>>(),
                                        Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));
  // dQ += dS·K: (rows, head dim), dS from registers, K viewed head-dim-major (the forward's P·V).
  using MmaDQ = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, HD, BlkN>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));

  template <int Rows, int Dim>
  using SmemAtom = BwdSmemAtom<Element, Rows, Dim>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom<kBlockM, kHeadDim>{}, Shape<BlkM, HD, _1>{}));  // one stage
  using SmemLayoutdO = decltype(tile_to_shape(SmemAtom<kBlockM, kHeadDimV>{}, Shape<BlkM, HDV, _1>{}));
  using SmemLayoutK = decltype(tile_to_shape(SmemAtom<kBlockN, kHeadDim>{}, Shape<BlkN, HD, Int<kStages>>{}));
  using SmemLayoutV = decltype(tile_to_shape(SmemAtom<kBlockN, kHeadDimV>{}, Shape<BlkN, HDV, Int<kStages>>{}));
  using SmemLayoutKt = decltype(composition(
      SmemLayoutK{}, make_ordered_layout(Shape<HD, BlkN, Int<kStages>>{}, Step<_2, _1, _3>{})));

  using PipelineRows = cutlass::PipelineTmaAsync<1>;     // Q, dO, LSE · log2 e, D: once per CTA
  using PipelineKV = cutlass::PipelineTmaAsync<kStages>;  // K and V of one key block per stage

  struct SharedStorage {
    cute::array_aligned<Element, cosize_v<SmemLayoutQ>, 1024> q;
    cute::array_aligned<Element, cosize_v<SmemLayoutdO>, 1024> d_o;
    cute::array_aligned<Element, cosize_v<SmemLayoutK>, 1024> k;
    cute::array_aligned<Element, cosize_v<SmemLayoutV>, 1024> v;
    cute::array_aligned<float, kBlockM, 16> lse2;
    cute::array_aligned<float, kBlockM, 16> dsum;
    typename PipelineRows::SharedStorage pipe_rows;
    typename PipelineKV::SharedStorage pipe_kv;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "backward dQ kernel: shared memory over the sm_90 limit of 227 KiB");

  // Global tensors as seen by TMA (BwdGmem) and the TMA loads of one block of each operand.
  using GmemShape = typename BwdGmem<Element>::Shape;
  using GmemStride = typename BwdGmem<Element>::Stride;
  using TmaQ = BwdTma<Element, SmemLayoutQ, kBlockM, kHeadDim>;
  using TmadO = BwdTma<Element, SmemLayoutdO, kBlockM, kHeadDimV>;
  using TmaK = BwdTma<Element, SmemLayoutK, kBlockN, kHeadDim>;
  using TmaV = BwdTma<Element, SmemLayoutV, kBlockN, kHeadDimV>;
};

/// Kernel parameters of the dQ kernel (a __grid_constant__; TMA descriptors inside).
template <class Config>
struct BwdDqKernelParams : BwdTmaParams<Config> {
  using Element = typename Config::Element;
  Element* dq;
  int64_t dq_row_stride, dq_head_stride, dq_batch_stride;
  const int* cu_q;  ///< null: dense
  const int* cu_k;
  int total_q, total_k;
  int heads_q, group, head_dim, head_dim_v, seqlen_q, seqlen_k;
  int m_blocks;  ///< ceil(seqlen_q / kBlockM): row blocks per (query head, entry)
  float scale, scale_log2;
  bool causal_qend;
  BwdWorkspace ws;  ///< D and LSE · log2 e (no accumulator)
};

/// The dQ kernel: grid m_blocks · heads_q · batch CTAs (row block fastest). Causal picks the causal mask.
template <class Config, bool Causal>
__global__ void __launch_bounds__(Config::kThreads, 1)
    bwd_dq_kernel(CUTE_GRID_CONSTANT BwdDqKernelParams<Config> const p) {
  using Element = typename Config::Element;
  using SharedStorage = typename Config::SharedStorage;
  using PipelineRows = typename Config::PipelineRows;
  using PipelineKV = typename Config::PipelineKV;
  constexpr int kBlockM = Config::kBlockM;
  constexpr int kBlockN = Config::kBlockN;
  constexpr int kHeadDim = Config::kHeadDim;
  constexpr int kHeadDimV = Config::kHeadDimV;
  using Mask = FwdMask<kBlockM, kBlockN, Causal>;

  extern __shared__ __align__(1024) char smem_raw[];
  SharedStorage& ss = *reinterpret_cast<SharedStorage*>(smem_raw);

  // The tile: row block m of query head h of entry b.
  const int m_block = int(blockIdx.x % unsigned(p.m_blocks));
  const int h = int(blockIdx.x / unsigned(p.m_blocks) % unsigned(p.heads_q));
  const int b = int(blockIdx.x / unsigned(p.m_blocks) / unsigned(p.heads_q));
  const int hk = h / p.group;
  const bool varlen = p.cu_q != nullptr;
  const fmha::detail::BwdEntry eq = fmha::detail::bwd_entry(p.cu_q, b, p.seqlen_q, p.total_q);
  const fmha::detail::BwdEntry ek = fmha::detail::bwd_entry(p.cu_k, b, p.seqlen_k, p.total_k);
  const int q_off = eq.off, sq = eq.len, k_off = ek.off, sk = ek.len;
  const int i0 = m_block * kBlockM;
  if (i0 >= sq) return;  // no row of the entry in this block (varlen: a shorter entry)
  const Mask mask = Mask::make(sk, p.causal_qend, i0, sq);
  const int n_blocks = mask.n_blocks();
  const int64_t ws_row = int64_t(h) * p.ws.rows + fmha::detail::bwd_workspace_row0(b, varlen, q_off, p.seqlen_q) + i0;
  const int bq = varlen ? 0 : b;
  // D and LSE · log2 e per 64-row half: the workspace holds an entry's rows up to its last 64-row block, so the
  // second half is read only where it has a row of the entry (else its rows are padding, never stored).
  const int halves = i0 + 64 < sq ? 2 : 1;

  const int warp_group = threadIdx.x / 128;
  const bool is_producer_thread = threadIdx.x == 0;
  if (is_producer_thread) prefetch_tma_descriptors(p.tma_q, p.tma_do, p.tma_k, p.tma_v);
  const auto prow = tma_pipeline_params<PipelineRows>(
      uint32_t(kBlockM * (kHeadDim + kHeadDimV) * sizeof(Element)) + 2 * halves * 64 * sizeof(float),
      128 * Config::kConsumerWGs);
  const auto pkv = tma_pipeline_params<PipelineKV>(uint32_t(kBlockN * (kHeadDim + kHeadDimV) * sizeof(Element)),
                                                   128 * Config::kConsumerWGs);
  PipelineRows pipe_rows(ss.pipe_rows, prow, Shape<_1, _1, _1>{});
  PipelineKV pipe_kv(ss.pipe_kv, pkv, Shape<_1, _1, _1>{});
  __syncthreads();

  Tensor sQ = make_tensor(make_smem_ptr(ss.q.data()), typename Config::SmemLayoutQ{});
  Tensor sdO = make_tensor(make_smem_ptr(ss.d_o.data()), typename Config::SmemLayoutdO{});
  Tensor sK = make_tensor(make_smem_ptr(ss.k.data()), typename Config::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(ss.v.data()), typename Config::SmemLayoutV{});
  Tensor sKt = make_tensor(make_smem_ptr(ss.k.data()), typename Config::SmemLayoutKt{});

  if (warp_group == 0) {
    // ------------------------------------------------------------------------------------------------ producer
    cutlass::arch::warpgroup_reg_dealloc<Config::kProducerRegs>();
    if (!is_producer_thread || n_blocks == 0) return;
    Tensor mQ = p.tma_q.get_tma_tensor(p.shape_q);
    Tensor mdO = p.tma_do.get_tma_tensor(p.shape_do);
    Tensor mK = p.tma_k.get_tma_tensor(p.shape_k);
    Tensor mV = p.tma_v.get_tma_tensor(p.shape_v);
    auto row_block = [&](auto& m, auto dim) {
      return local_tile(domain_offset(make_coord(q_off, _0{}), m(_, _, h, bq)), Shape<Int<kBlockM>, decltype(dim)>{},
                        make_coord(m_block, _0{}));
    };
    auto key_blocks = [&](auto& m, auto dim) {
      return local_tile(domain_offset(make_coord(k_off, _0{}), m(_, _, hk, bq)), Shape<Int<kBlockN>, decltype(dim)>{},
                        make_coord(_, _0{}));
    };
    const auto q_src = make_dense_q_source(p.tma_q, row_block(mQ, Int<kHeadDim>{}), sQ);
    const auto do_src = make_dense_q_source(p.tma_do, row_block(mdO, Int<kHeadDimV>{}), sdO);
    auto rows_state = cutlass::make_producer_start_state<PipelineRows>();
    pipe_rows.producer_acquire(rows_state);
    uint64_t* bar_rows = pipe_rows.producer_get_barrier(rows_state);
    q_src.load_q(0, *bar_rows);
    do_src.load_q(0, *bar_rows);
    for (int half = 0; half < halves; ++half) {
      SM90_BULK_COPY_G2S::copy(p.ws.lse2 + ws_row + 64 * half, bar_rows, ss.lse2.data() + 64 * half, 64 * sizeof(float));
      SM90_BULK_COPY_G2S::copy(p.ws.dsum + ws_row + 64 * half, bar_rows, ss.dsum.data() + 64 * half, 64 * sizeof(float));
    }
    const auto kv = make_dense_kv_source(p.tma_k, p.tma_v, key_blocks(mK, Int<kHeadDim>{}),
                                         key_blocks(mV, Int<kHeadDimV>{}), sK, sV);
    auto kv_state = cutlass::make_producer_start_state<PipelineKV>();
    for (int n = 0; n < n_blocks; ++n) {
      pipe_kv.producer_acquire(kv_state);
      uint64_t* bar = pipe_kv.producer_get_barrier(kv_state);
      kv.load_k(n, kv_state.index(), *bar);
      kv.load_v(n, kv_state.index(), *bar);
      ++kv_state;
    }
    return;
  }

  // -------------------------------------------------------------------------------------------------- consumers
  cutlass::arch::warpgroup_reg_alloc<Config::kConsumerRegs>();
  const int tid = threadIdx.x - 128;  // 0 .. 255 over the two consumer warpgroups
  constexpr int kConsumerThreads = 128 * Config::kConsumerWGs;
  constexpr int kBarrierKeys = 1;  // named barrier: both consumer warpgroups (K's rows past the entry zeroed)
  typename Config::MmaS mma_s;
  typename Config::MmadP mma_dp;
  typename Config::MmaDQ mma_dq;
  auto thr_s = mma_s.get_thread_slice(tid);
  auto thr_dp = mma_dp.get_thread_slice(tid);
  auto thr_dq = mma_dq.get_thread_slice(tid);

  Tensor tSrQ = thr_s.partition_fragment_A(sQ(_, _, 0));  // (MMA, M, K)
  Tensor tdPrdO = thr_dp.partition_fragment_A(sdO(_, _, 0));
  Tensor tSrK = thr_s.partition_fragment_B(sK);           // (MMA, N, K, stage)
  Tensor tdPrV = thr_dp.partition_fragment_B(sV);
  Tensor tdQrK = thr_dq.partition_fragment_B(sKt);        // (MMA, N, K, stage)
  Tensor tdQrdQ = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
  clear(tdQrdQ);
  // dS in the input type, as the register A operand of dQ += dS·K.
  Tensor tdQrdS = thr_dq.partition_fragment_A(
      make_tensor(make_smem_ptr(static_cast<Element*>(nullptr)), Layout<Shape<Int<kBlockM>, Int<kBlockN>>>{}));
  // (row, key) of every score element of this thread.
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  static_assert(decltype(size(tdQrdS))::value == decltype(size(tScS))::value, "dS fragment must mirror S");

  if (n_blocks > 0) {
    auto rows_state = cutlass::PipelineState<1>();
    pipe_rows.consumer_wait(rows_state);
  }
  auto kv_state = cutlass::PipelineState<Config::kStages>();
  for (int n = 0; n < n_blocks; ++n) {
    const int n0 = n * kBlockN, st = kv_state.index();
    pipe_kv.consumer_wait(kv_state);
    // Varlen: keys past the entry's end hold the next entry's rows (or NaN); S and dP there are masked, but 0·NaN
    // in dQ = dS·K is NaN, so those rows of K are zeroed. Dense tensors end there: TMA filled zeros.
    if (varlen && n0 + kBlockN > sk) {
      const int valid = sk - n0;
      for (int idx = tid; idx < (kBlockN - valid) * kHeadDim; idx += kConsumerThreads)
        sK(valid + idx / kHeadDim, idx % kHeadDim, st) = Element(0);
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrierKeys);
    }
    Tensor tSrS = partition_fragment_C(mma_s, Shape<Int<kBlockM>, Int<kBlockN>>{});
    Tensor tdPrdP = partition_fragment_C(mma_dp, Shape<Int<kBlockM>, Int<kBlockN>>{});
    wg_gemm<true, -1>(mma_s, tSrQ, tSrK(_, _, _, st), tSrS);
    wg_gemm<true, -1>(mma_dp, tdPrdO, tdPrV(_, _, _, st), tdPrdP);
    warpgroup_wait<1>();
    Tensor S = make_tensor(tSrS.data(), acc_rowcol(tSrS.layout()));  // (rows, keys) of this thread
    Tensor Sc = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
    // P, masked only in the key blocks that need it (two copies of the loop, as the main kernel's).
    auto scores_to_p = [&](auto masked) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < size<0>(S); ++r) {
        const int row = get<0>(Sc(r, 0));
        const float lse2 = ss.lse2[row];
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < size<1>(S); ++c) {
          float pv = exp2f(S(r, c) * p.scale_log2 - lse2);
          if constexpr (decltype(masked)::value) {
            if (!mask.visible(i0 + row, n0 + get<1>(Sc(r, c)))) pv = 0.f;
          }
          S(r, c) = pv;
        }
      }
    };
    if (mask.needs_mask(n))
      scores_to_p(cute::true_type{});
    else
      scores_to_p(cute::false_type{});
    warpgroup_wait<0>();
    Tensor dP = make_tensor(tdPrdP.data(), acc_rowcol(tdPrdP.layout()));
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < size<0>(S); ++r) {
      const float dsum = ss.dsum[get<0>(Sc(r, 0))];
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(S); ++c)  // where P = 0 (masked, or underflow) dS is exactly 0, whatever dP holds
        dP(r, c) = S(r, c) == 0.f ? 0.f : S(r, c) * (dP(r, c) - dsum);
    }
    CUTLASS_PRAGMA_UNROLL
    for (int x = 0; x < size(tdPrdP); ++x) tdQrdS(x) = static_cast<Element>(tdPrdP(x));
    wg_gemm<false, 0, true>(mma_dq, tdQrdS, tdQrK(_, _, _, st), tdQrdQ);
    pipe_kv.consumer_release(kv_state);
    ++kv_state;
  }

  // ------------------------------------------------------------------------------------------------ epilogue
  // dQ = scale · Σ dS·K for the entry's rows and the head dim's columns (zero for a row that sees no key).
  Tensor tdQcdQ = thr_dq.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  Element* dq = p.dq + (varlen ? 0 : int64_t(b) * p.dq_batch_stride) + int64_t(q_off + i0) * p.dq_row_stride +
                int64_t(h) * p.dq_head_stride;
  CUTLASS_PRAGMA_UNROLL
  for (int x = 0; x < size(tdQrdQ); x += 2) {  // (x, x + 1): columns c, c + 1 of one row
    const int row = get<0>(tdQcdQ(x)), col = get<1>(tdQcdQ(x));
    if (i0 + row >= sq || col >= p.head_dim) continue;
    cute::array_aligned<Element, 2, 4> two;
    two[0] = Element(tdQrdQ(x) * p.scale), two[1] = Element(tdQrdQ(x + 1) * p.scale);
    *reinterpret_cast<uint32_t*>(dq + int64_t(row) * p.dq_row_stride + col) = *reinterpret_cast<uint32_t*>(two.data());
  }
}

}  // namespace fmha::kernel
