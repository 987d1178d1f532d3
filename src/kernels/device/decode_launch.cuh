// Host side of the decode kernel: the append, the TMA descriptors of the caches, the kernel launch and, with
// several key splits, the split-KV combine (api/combine.h). Everything the launches read on the device (lengths,
// slots) stays there, so a captured graph replays with other values.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "api/combine.h"
#include "api/launch.h"
#include "kernels/kernel/decode_kernel.cuh"

namespace fmha::device {

using namespace cute;

using detail::cuda_status;

/// The plan's split-KV layout as the kernel reads it.
inline kernel::DecodePlanInfo decode_plan_info(const DecodePlan& plan) {
  kernel::DecodePlanInfo i;
  i.rows_per_head = plan.heads_q / plan.heads_kv * plan.new_tokens;
  i.m_blocks = plan.m_blocks;
  i.splits = plan.splits;
  i.keys_per_split = plan.keys_per_split;
  i.num_tiles = plan.num_tiles;
  return i;
}

template <class Config, bool Paged>
Status decode_run(const DecodeParams& a, const DecodePlan& plan, void* workspace, cudaStream_t stream) {
  using Element = typename Config::Element;
  using Params = kernel::DecodeKernelParams<Config, Paged>;
  const bool append = a.k_new != nullptr;
  const int rows_per_slot = Paged ? a.page_size : a.capacity;                   // rows of one slot or page
  const int seq_rows = Paged ? a.pages_per_seq * a.page_size : a.capacity;      // rows of one sequence
  const int table_rows = a.page_table_rows > 0 ? a.page_table_rows : a.batch;

  if (append) {
    kernel::DecodeAppendArgs<Element> ap{};
    ap.batch = a.batch, ap.new_tokens = a.new_tokens, ap.heads_kv = a.heads_kv, ap.head_dim = a.head_dim;
    ap.rows_per_slot = seq_rows, ap.slots = a.slots;
    ap.page_table = Paged ? a.page_table : nullptr, ap.page_table_stride = a.page_table_stride;
    ap.page_size = a.page_size, ap.pages_per_seq = a.pages_per_seq, ap.page_table_rows = table_rows;
    ap.seqlens_k = a.seqlens_k, ap.cache_batch_idx = a.cache_batch_idx;
    ap.k_new = static_cast<const Element*>(a.k_new), ap.v_new = static_cast<const Element*>(a.v_new);
    ap.k_new_batch_stride = a.k_new_batch_stride, ap.k_new_token_stride = a.k_new_token_stride;
    ap.k_new_head_stride = a.k_new_head_stride;
    ap.v_new_batch_stride = a.v_new_batch_stride, ap.v_new_token_stride = a.v_new_token_stride;
    ap.v_new_head_stride = a.v_new_head_stride;
    ap.k = static_cast<Element*>(a.k_cache), ap.v = static_cast<Element*>(a.v_cache);
    ap.k_slot_stride = a.k_slot_stride, ap.k_row_stride = a.k_row_stride, ap.k_head_stride = a.k_head_stride;
    ap.v_slot_stride = a.v_slot_stride, ap.v_row_stride = a.v_row_stride, ap.v_head_stride = a.v_head_stride;
    const int64_t chunks = int64_t(a.batch) * a.new_tokens * a.heads_kv * (a.head_dim / 8);
    const int threads = 256;
    const int blocks = int(std::min<int64_t>((chunks + threads - 1) / threads, 65535));
    kernel::decode_append_kernel<Element><<<blocks, threads, 0, stream>>>(ap);
    if (Status s = cuda_status(cudaGetLastError(), "launch decode_append_kernel"); !s) return s;
  }

  // (rows per slot, head dim, K/V heads, slots) views of the caches; modes of extent 1 get a harmless stride (TMA
  // needs non-zero strides).
  auto cache = [&](const void* ptr, int64_t rs, int64_t hs, int64_t ss) {
    if (a.heads_kv == 1 && hs == 0) hs = rs * rows_per_slot;
    if (a.slots == 1 && ss == 0) ss = rs * rows_per_slot;
    auto shape = typename Config::GmemShape{rows_per_slot, a.head_dim, a.heads_kv, a.slots};
    auto stride = typename Config::GmemStride{rs, _1{}, hs, ss};
    return make_tensor(make_gmem_ptr(static_cast<Element const*>(ptr)), make_layout(shape, stride));
  };
  auto mK = cache(a.k_cache, a.k_row_stride, a.k_head_stride, a.k_slot_stride);
  auto mV = cache(a.v_cache, a.v_row_stride, a.v_head_stride, a.v_slot_stride);

  Params p{};
  if constexpr (Paged) {  // boxes of kPageBoxRows keys (PagedKVSource; one-row boxes, unused, for gathers)
    p.tma_k = make_tma_copy(SM90_TMA_LOAD{}, mK, typename Config::SmemLayoutKBox{},
                            Shape<Int<Config::kTmaBoxRows>, Int<Config::kHeadDim>>{}, _1{});
    p.tma_v = make_tma_copy(SM90_TMA_LOAD{}, mV, typename Config::SmemLayoutKBox{},
                            Shape<Int<Config::kTmaBoxRows>, Int<Config::kHeadDim>>{}, _1{});
  } else {
    p.tma_k = make_tma_copy(SM90_TMA_LOAD{}, mK, take<0, 2>(typename Config::SmemLayoutK{}),
                            Shape<Int<Config::kBlockN>, Int<Config::kHeadDim>>{}, _1{});
    p.tma_v = make_tma_copy(SM90_TMA_LOAD{}, mV, take<0, 2>(typename Config::SmemLayoutK{}),
                            Shape<Int<Config::kBlockN>, Int<Config::kHeadDim>>{}, _1{});
  }
  p.shape_k = mK.shape();
  p.plan = decode_plan_info(plan);
  p.heads_q = a.heads_q, p.heads_kv = a.heads_kv, p.group = a.heads_q / a.heads_kv;
  p.new_tokens = a.new_tokens, p.head_dim = a.head_dim;
  p.max_keys = std::min(plan.max_seqlen_k, seq_rows);
  p.slots = a.slots;
  p.append = append;
  p.seqlens_k = a.seqlens_k, p.cache_batch_idx = a.cache_batch_idx;
  p.page_table = a.page_table, p.page_table_stride = a.page_table_stride;
  p.page_size = a.page_size, p.pages_per_seq = a.pages_per_seq, p.page_table_rows = table_rows;
  p.q = static_cast<const Element*>(a.q);
  p.q_batch_stride = a.q_batch_stride, p.q_token_stride = a.q_token_stride, p.q_head_stride = a.q_head_stride;
  p.o = static_cast<Element*>(a.o);
  p.o_batch_stride = a.o_batch_stride, p.o_token_stride = a.o_token_stride, p.o_head_stride = a.o_head_stride;
  p.lse = a.lse;
  p.rows_total = int64_t(a.batch) * a.new_tokens * a.heads_q;
  const std::size_t o_part_bytes = (std::size_t(plan.splits) * p.rows_total * a.head_dim * sizeof(float) + 255) / 256 * 256;
  p.o_part = plan.splits > 1 ? static_cast<float*>(workspace) : nullptr;
  p.lse_part = plan.splits > 1 ? reinterpret_cast<float*>(static_cast<char*>(workspace) + o_part_bytes) : nullptr;
  p.scale = a.softmax_scale;
  p.scale_log2 = a.softmax_scale * 1.4426950408889634f;
  p.k = static_cast<const Element*>(a.k_cache), p.v = static_cast<const Element*>(a.v_cache);
  p.k_slot_stride = a.k_slot_stride, p.k_row_stride = a.k_row_stride, p.k_head_stride = a.k_head_stride;
  p.v_slot_stride = a.v_slot_stride, p.v_row_stride = a.v_row_stride, p.v_head_stride = a.v_head_stride;
#ifdef FMHA_TIMELINE
  p.timeline = nullptr;
#endif

  auto kernel = kernel::decode_kernel<Config, Paged>;
  constexpr int smem = Config::kSmemBytes;
  if (Status s = cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                             "cudaFuncSetAttribute(decode_kernel, max dynamic shared memory)");
      !s)
    return s;
  // All of the SM's unified memory as shared memory, so that Config::kCtasPerSm CTAs fit side by side.
  if (Status s = cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                  int(cudaSharedmemCarveoutMaxShared)),
                             "cudaFuncSetAttribute(decode_kernel, shared memory carveout)");
      !s)
    return s;
  kernel<<<plan.grid, Config::kThreads, smem, stream>>>(p);
  if (Status s = cuda_status(cudaGetLastError(), "launch decode_kernel"); !s) return s;

  if (plan.splits > 1) {
    detail::CombineArgs c;
    c.splits = plan.splits;
    c.rows = int(p.rows_total);
    c.tokens = a.new_tokens;
    c.heads = a.heads_q;
    c.head_dim = a.head_dim;
    c.o_parts = p.o_part;
    c.lse_parts = p.lse_part;
    c.o = a.o;
    c.o_dtype = a.dtype;
    c.o_batch_stride = a.o_batch_stride, c.o_token_stride = a.o_token_stride, c.o_head_stride = a.o_head_stride;
    c.lse = a.lse;
    return detail::combine_partials(c, stream);
  }
  return Status::ok();
}

/// Launch function of one (dtype, head-dim tile) decode unit.
template <class Element, int HeadDim>
Status decode_launch(const DecodeParams& a, const DecodePlan& plan, void* workspace, cudaStream_t stream) {
  using Config = kernel::DecodeConfig<Element, HeadDim>;
  if (!a.page_table) return decode_run<Config, false>(a, plan, workspace, stream);
  // Pages of a multiple of 64 keys: boxes of 64 keys (16-key boxes cost the one producer thread a table read and
  // two TMA issues per 16 keys).
  if (a.page_size % 64 == 0)
    return decode_run<kernel::DecodeConfig<Element, HeadDim, 64>, true>(a, plan, workspace, stream);
  if (a.page_size % Config::kPageBoxRows == 0) return decode_run<Config, true>(a, plan, workspace, stream);
  // Pages that are not a whole number of 16-key boxes (any other size): gathered by the producer warp's lanes.
  return decode_run<kernel::DecodeConfig<Element, HeadDim, 0>, true>(a, plan, workspace, stream);
}

}  // namespace fmha::device
