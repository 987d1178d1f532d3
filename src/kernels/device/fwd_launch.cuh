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
#include "kernels/device/gmem_view.cuh"
#include "kernels/kernel/fwd_kernel.cuh"

namespace fmha::device {

using namespace cute;

using detail::cuda_status;

template <class Config, bool Causal, bool PingPong>
Status fwd_run(const FwdParams& a, cudaStream_t stream) {
  using Element = typename Config::Element;
  using Params = kernel::FwdKernelParams<Config>;
  const bool varlen = a.cu_seqlens_q != nullptr;

  const kernel::FwdTileOrder order = kernel::make_fwd_tile_order(a, Config::kBlockM, sizeof(Element));
  if (order.num_tiles == 0) return Status::ok();  // no query rows: nothing to compute or write

  // (rows, head dim, heads, batch) views of the caller's tensors (device/gmem_view.cuh).
  auto gmem = [&](const void* ptr, int rows, int heads, int64_t rs, int64_t hs, int64_t bs) {
    return bshd_gmem_view<Element, typename Config::GmemShape, typename Config::GmemStride>(
        ptr, rows, a.head_dim, heads, varlen ? 1 : a.batch, rs, hs, bs);
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
  p.order = order;
  p.scale = a.softmax_scale;
  p.scale_log2 = a.softmax_scale * 1.4426950408889634f;
  p.causal_qend = a.causal_align == CausalAlign::kQEnd;
  p.q = static_cast<Element const*>(a.q);
  p.k = static_cast<Element const*>(a.k);
  p.v = static_cast<Element const*>(a.v);
  p.q_row_stride = a.q_row_stride, p.q_head_stride = a.q_head_stride, p.q_batch_stride = a.q_batch_stride;
  p.k_row_stride = a.k_row_stride, p.k_head_stride = a.k_head_stride, p.k_batch_stride = a.k_batch_stride;
  p.v_row_stride = a.v_row_stride, p.v_head_stride = a.v_head_stride, p.v_batch_stride = a.v_batch_stride;

  auto kernel = kernel::fwd_kernel<Config, Causal, PingPong>;
  constexpr int smem = Config::kSmemBytes;
  Status s = cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                         "cudaFuncSetAttribute(fwd_kernel, max dynamic shared memory)");
  if (!s) return s;
  const int grid = kernel::fwd_grid(order, a);
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
      if (!causal) return pingpong ? fwd_run<Short, false, true>(a, stream) : fwd_run<Short, false, false>(a, stream);
      return pingpong ? fwd_run<Short, true, true>(a, stream) : fwd_run<Short, true, false>(a, stream);
    }
  }
  if (causal) return pingpong ? fwd_run<Config, true, true>(a, stream) : fwd_run<Config, true, false>(a, stream);
  return pingpong ? fwd_run<Config, false, true>(a, stream) : fwd_run<Config, false, false>(a, stream);
}

}  // namespace fmha::device
