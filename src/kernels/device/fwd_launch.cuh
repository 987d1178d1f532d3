// Host side of the forward kernel: builds TMA descriptors and kernel parameters from FwdParams and launches.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#ifdef FMHA_TIMELINE
#include <cstdio>
#include <cstdlib>
#include <vector>
#endif

#include "api/launch.h"
#include "kernels/kernel/fwd_kernel.cuh"

namespace fmha::device {

using namespace cute;

using detail::cuda_status;

// A/B hook: the L2 share (MiB) one tile-order section's K and V may take; 0 = one section (the order before v5).
#ifndef FMHA_TUNE_FWD_L2_SECTION_MIB
#define FMHA_TUNE_FWD_L2_SECTION_MIB 16
#endif

// Tuning hooks (on by default, v9 in docs/perf-log.md): 1 = dense causal problems on the persistent scheduler walk
// units of two query blocks whose causal lengths add up to about the same (kernel::decode_tile), and use L2 sections
// (fwd_l2_section_bh). Measured on the H200: +3–6 % at causal 512–1k in most runs, −1.5 to +4.5 % at d 128 causal
// 2k–4k, about −1 % at 8k–16k (code generation only: one CTA per tile there).
#ifndef FMHA_TUNE_FWD_PAIR_ORDER
#define FMHA_TUNE_FWD_PAIR_ORDER 1
#endif
#ifndef FMHA_TUNE_FWD_L2_SECTIONS_CAUSAL
#define FMHA_TUNE_FWD_L2_SECTIONS_CAUSAL 1
#endif
// Tuning hook (v15 in docs/perf-log.md): 1 = dense causal problems on the one-CTA-per-tile scheduler use L2
// sections too. With one section, the CTAs that run together hold the longest query blocks of every (batch, head)
// and read all their K and V: at d 128 causal 8k, 1.13 GB from DRAM against 0.20 GB compulsory (cuDNN reads 0.20),
// which at the H200's 700 W power cap costs clock (1575 against cuDNN's 1725 MHz, bench/power_probe.py). With
// sections: 0.20 GB, 1710 MHz, +4.0 to +7.6 % sustained at d 64 / d 128 causal 8k–16k (bf16, one 2 s window per
// problem; within noise in the benchmark's 20 ms loops). The hardware hands tiles to CTAs as others finish, so
// sections keep their balance (the static round robin of the persistent scheduler needed pairs).
#ifndef FMHA_TUNE_FWD_L2_SECTIONS_CAUSAL_INDIVIDUAL
#define FMHA_TUNE_FWD_L2_SECTIONS_CAUSAL_INDIVIDUAL 1
#endif

/// (batch, head) pairs per section of the tile order (kernel::decode_tile): as many query heads as share K and V
/// of at most FMHA_TUNE_FWD_L2_SECTION_MIB (a third of the H100/H200's 50 MB L2), at least one, at most all.
/// K and V bytes per query head = 2 · seqlen_k · head_dim · element size / (heads_q / heads_kv).
/// Causal problems kept one section until v9: their tiles differ in length, and with the longest-first order only one
/// section balances the persistent scheduler's static round robin (sections measured −5–8 % at causal 512–2k, ±3 %
/// above, v5). With FMHA_TUNE_FWD_L2_SECTIONS_CAUSAL, dense causal problems on the persistent scheduler get
/// sections, balanced by the paired order (FMHA_TUNE_FWD_PAIR_ORDER; both needed, see fwd_pair_order); with
/// FMHA_TUNE_FWD_L2_SECTIONS_CAUSAL_INDIVIDUAL, dense causal problems on the one-CTA-per-tile scheduler too.
/// Varlen problems keep one section too: their entries differ in length as well, and sections sized by the longest
/// entry were not measured.
inline int fwd_l2_section_bh(const FwdParams& a, size_t element_bytes, bool pair_order) {
  const int64_t bh_count = int64_t(a.batch) * a.heads_q;
  const bool causal_sections =
      (FMHA_TUNE_FWD_L2_SECTIONS_CAUSAL != 0 && pair_order) ||
      (FMHA_TUNE_FWD_L2_SECTIONS_CAUSAL_INDIVIDUAL != 0 && a.scheduler == TileScheduler::kIndividual);
  if (FMHA_TUNE_FWD_L2_SECTION_MIB <= 0 || (a.mask == MaskType::kCausal && !causal_sections) ||
      a.cu_seqlens_q != nullptr)
    return int(bh_count);
  const int group = a.heads_q / a.heads_kv;
  const double kv_bytes_per_head = 2.0 * std::max(a.seqlen_k, 1) * a.head_dim * double(element_bytes) / group;
  const double budget = double(FMHA_TUNE_FWD_L2_SECTION_MIB) * 1024 * 1024;
  const int64_t n = std::max<int64_t>(1, int64_t(budget / kv_bytes_per_head));
  return int(std::min(n, bh_count));
}

/// Whether a problem walks the paired tile order (kernel::decode_tile): dense causal problems on the persistent
/// scheduler (one CTA per tile leaves the balance to the hardware, and varlen entries differ in their block counts)
/// with at least as many units as CTAs (with fewer, pairing would run two tiles in series on one CTA while others
/// idle), while the paired slot count 2 · ceil(m_blocks / 2) · batch · heads stays within 2^30 (an int with room).
inline bool fwd_pair_order(const FwdParams& a, int m_blocks) {
  const int64_t units = (int64_t(m_blocks) + 1) / 2 * a.batch * a.heads_q;
  return FMHA_TUNE_FWD_PAIR_ORDER != 0 && a.mask == MaskType::kCausal && a.cu_seqlens_q == nullptr &&
         a.scheduler == TileScheduler::kPersistent && units >= a.sm_count && 2 * units <= (int64_t(1) << 30);
}

/// Sets the divisors of kernel::decode_tile from p.batch, p.heads_q, p.m_blocks, p.section_bh and p.pair_order:
/// units per section (section_bh · units per (batch, head): ⌊m_blocks / 2⌋ paired, m_blocks plain; at least 1, as a
/// paired problem with one query block per head has no full pair and never divides), (batch, head) pairs of a full
/// and of the last section, query heads. Every dividend is < num_tiles ≤ 2^30, inside FastDivmod's exact range.
template <class Params>
void fwd_tile_divisors(Params& p) {
  const int bh_count = p.batch * p.heads_q;
  const int per_bh = p.pair_order ? p.m_blocks / 2 : p.m_blocks;
  const int sections = (bh_count + p.section_bh - 1) / p.section_bh;
  p.div_section = cutlass::FastDivmod(std::max(1, p.section_bh * per_bh));
  p.div_bh_full = cutlass::FastDivmod(p.section_bh);
  p.div_bh_last = cutlass::FastDivmod(bh_count - (sections - 1) * p.section_bh);
  p.div_heads = cutlass::FastDivmod(p.heads_q);
}

template <class Config, bool Causal, bool PingPong>
Status fwd_run(const FwdParams& a, cudaStream_t stream) {
  using Element = typename Config::Element;
  using Params = kernel::FwdKernelParams<Config>;
  const bool varlen = a.cu_seqlens_q != nullptr;

  const int block_m = Config::kBlockM;
  const int m_blocks = (a.seqlen_q + block_m - 1) / block_m;
  const bool pair_order = fwd_pair_order(a, m_blocks);
  // ≤ 2^30, checked by fwd_validate (plain order) and fwd_pair_order (paired slots, one per tile and one per odd
  // middle block)
  const int num_tiles = (pair_order ? 2 * ((m_blocks + 1) / 2) : m_blocks) * a.batch * a.heads_q;
  if (num_tiles == 0) return Status::ok();  // no query rows: nothing to compute or write

  // (rows, head dim, heads, batch) views of the caller's tensors. Varlen tensors are one packed "batch".
  // TMA descriptors need every extent ≥ 1 and non-zero strides: a tensor with no rows (Sk = 0, or all varlen
  // entries empty) gets a one-row view that is never loaded, and modes of extent 1 get a harmless stride.
  auto gmem = [&](const void* ptr, int rows, int heads, int64_t rs, int64_t hs, int64_t bs) {
    const int batches = varlen ? 1 : a.batch;
    if (rows == 0) {  // never loaded (every tile sees no key): any valid layout will do
      rows = 1;
      hs = bs = rs;
    }
    if (heads == 1 && hs == 0) hs = rs * rows;
    if (batches == 1) bs = rs * rows;
    auto shape = typename Config::GmemShape{rows, a.head_dim, heads, batches};
    auto stride = typename Config::GmemStride{rs, _1{}, hs, bs};
    return make_tensor(make_gmem_ptr(static_cast<Element const*>(ptr)), make_layout(shape, stride));
  };
  const int rows_q = varlen ? a.total_q : a.seqlen_q;
  const int rows_k = varlen ? a.total_k : a.seqlen_k;
  auto mQ = gmem(a.q, rows_q, a.heads_q, a.q_row_stride, a.q_head_stride, a.q_batch_stride);
  auto mK = gmem(a.k, rows_k, a.heads_kv, a.k_row_stride, a.k_head_stride, a.k_batch_stride);
  auto mV = gmem(a.v, rows_k, a.heads_kv, a.v_row_stride, a.v_head_stride, a.v_batch_stride);

  Params p{};
  p.tma_q = make_tma_copy(SM90_TMA_LOAD{}, mQ, take<0, 2>(typename Config::SmemLayoutQ{}),
                          Shape<Int<Config::kBlockM>, Int<Config::kHeadDim>>{}, _1{});
  p.tma_k = make_tma_copy(SM90_TMA_LOAD{}, mK, take<0, 2>(typename Config::SmemLayoutK{}),
                          Shape<Int<Config::kBlockN>, Int<Config::kHeadDim>>{}, _1{});
  p.tma_v = make_tma_copy(SM90_TMA_LOAD{}, mV, take<0, 2>(typename Config::SmemLayoutK{}),
                          Shape<Int<Config::kBlockN>, Int<Config::kHeadDim>>{}, _1{});
  // O for the TMA store (kernels with Config::kTmaStoreO, dense problems; the varlen path stores rows itself),
  // strides as the loads' tensors.
  auto mO = make_tensor(make_gmem_ptr(static_cast<Element*>(a.o)),
                       gmem(a.o, rows_q, a.heads_q, a.o_row_stride, a.o_head_stride, a.o_batch_stride).layout());
  if constexpr (Config::kTmaStoreO)
    p.tma_o = make_tma_copy(SM90_TMA_STORE{}, mO, take<0, 2>(typename Config::SmemLayoutOSwizzled{}),
                            Shape<_64, Int<Config::kHeadDim>>{}, _1{});
  p.shape_q = mQ.shape();
  p.shape_o = mO.shape();
  p.shape_k = mK.shape();
  p.o = static_cast<Element*>(a.o);
  p.o_row_stride = a.o_row_stride;
  p.o_head_stride = a.o_head_stride;
  p.o_batch_stride = a.o_batch_stride;
  p.lse = a.lse;
  p.cu_q = a.cu_seqlens_q;
  p.cu_k = a.cu_seqlens_k;
  p.total_q = a.total_q;
  p.batch = a.batch;
  p.heads_q = a.heads_q;
  p.group = a.heads_q / a.heads_kv;
  p.head_dim = a.head_dim;
  p.seqlen_q = a.seqlen_q;
  p.seqlen_k = a.seqlen_k;
  p.m_blocks = m_blocks;
  p.num_tiles = num_tiles;
  p.section_bh = fwd_l2_section_bh(a, sizeof(Element), pair_order);
  p.pair_order = pair_order;
  fwd_tile_divisors(p);
  p.scale = a.softmax_scale;
  p.scale_log2 = a.softmax_scale * 1.4426950408889634f;
  p.causal_qend = a.causal_align == CausalAlign::kQEnd;

  auto kernel = kernel::fwd_kernel<Config, Causal, PingPong>;
  constexpr int smem = Config::kSmemBytes;
  Status s = cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                         "cudaFuncSetAttribute(fwd_kernel, max dynamic shared memory)");
  if (!s) return s;
  const bool persistent = a.scheduler == TileScheduler::kPersistent;
  const int grid = persistent ? std::min(p.num_tiles, a.sm_count) : p.num_tiles;
#ifdef FMHA_TIMELINE
  // Diagnostic builds only (compile definition FMHA_TIMELINE; scripts/timeline.py): when $FMHA_TIMELINE_FILE is set,
  // the first kernel::kTimelineCtas CTAs stamp their phases into a device buffer, written to that file (overwritten)
  // after the launch, which this then waits for. One launch at a time: concurrent launches would share the file.
  const char* tl_file = std::getenv("FMHA_TIMELINE_FILE");
  const size_t tl_bytes = size_t(kernel::kTimelineCtas) * 4 * kernel::kTimelineSlots * sizeof(unsigned long long);
  p.timeline = nullptr;
  if (tl_file) {
    s = cuda_status(cudaMalloc(&p.timeline, tl_bytes), "cudaMalloc(timeline)");
    if (!s) return s;
    s = cuda_status(cudaMemsetAsync(p.timeline, 0, tl_bytes, stream), "cudaMemsetAsync(timeline)");
    if (!s) {
      cudaFree(p.timeline);
      return s;
    }
  }
#endif
  kernel<<<grid, Config::kThreads, smem, stream>>>(p);
#ifdef FMHA_TIMELINE
  if (tl_file) {
    s = cuda_status(cudaGetLastError(), "launch fwd_kernel");
    if (s) s = cuda_status(cudaStreamSynchronize(stream), "timeline: cudaStreamSynchronize");
    std::vector<unsigned long long> h(tl_bytes / sizeof(unsigned long long));
    if (s) s = cuda_status(cudaMemcpy(h.data(), p.timeline, tl_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(timeline)");
    const Status freed = cuda_status(cudaFree(p.timeline), "cudaFree(timeline)");
    if (!s) return s;
    if (!freed) return freed;
    FILE* f = std::fopen(tl_file, "wb");
    const bool written = f && std::fwrite(h.data(), 1, tl_bytes, f) == tl_bytes;
    if (f) std::fclose(f);
    if (!written) return Status::invalid(std::string("FMHA_TIMELINE_FILE: cannot write '") + tl_file + "'");
  }
#endif
  return cuda_status(cudaGetLastError(), "launch fwd_kernel");
}

/// Launch function of one (dtype, head-dim tile) unit: picks the mask and warpgroup-schedule variant
/// (a.scheduler and a.pingpong are resolved by the API layer, never kAuto here).
template <class Element, int HeadDim>
Status fwd_launch(const FwdParams& a, cudaStream_t stream) {
  using Config = kernel::FwdConfig<Element, HeadDim>;
  const bool causal = a.mask == MaskType::kCausal;
  const bool pingpong = a.pingpong == Toggle::kOn;
  if constexpr (tiles::fwd_block_m(HeadDim) != 128) {
    if (tiles::fwd_block_m_for(HeadDim, causal, a.seqlen_k) == 128) {  // short rows: two warpgroups
      using Short = kernel::FwdConfig<Element, HeadDim, 128>;
      if constexpr (tiles::kFwdShortNonCausalMaxKeys > 0) {
        if (!causal) return pingpong ? fwd_run<Short, false, true>(a, stream) : fwd_run<Short, false, false>(a, stream);
      }
      return pingpong ? fwd_run<Short, true, true>(a, stream) : fwd_run<Short, true, false>(a, stream);
    }
  }
  if (causal) return pingpong ? fwd_run<Config, true, true>(a, stream) : fwd_run<Config, true, false>(a, stream);
  return pingpong ? fwd_run<Config, false, true>(a, stream) : fwd_run<Config, false, false>(a, stream);
}

}  // namespace fmha::device
