// The TMA pipelines of the warp-specialised kernels (forward, decode, backward): warpgroup 0 produces (its thread 0
// issues every load), the consumer warpgroups after it consume.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/pipeline/pipeline.hpp>

namespace fmha::kernel {

/// Parameters of a cutlass::PipelineTmaAsync (Pipeline) whose stages complete after `bytes` transaction bytes,
/// produced by warpgroup 0 (thread 0 the leader that arms the barriers) and consumed by the `consumer_threads`
/// threads after it. Called by every thread of the CTA (threadIdx.x picks the role).
/// gather_lanes > 0: the stages are filled instead by that many lanes of warp 0 with cp.async, each arriving on the
/// stage's full barrier when its copies complete (cp.async.mbarrier.arrive.noinc): no leader, no transaction bytes,
/// and the full barriers count gather_lanes arrivals.
template <class Pipeline>
CUTLASS_DEVICE typename Pipeline::Params tma_pipeline_params(uint32_t bytes, int consumer_threads,
                                                             int gather_lanes = 0) {
  typename Pipeline::Params p;
  p.transaction_bytes = gather_lanes > 0 ? 0u : bytes;
  p.role = threadIdx.x < 128 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  p.is_leader = gather_lanes == 0 && threadIdx.x == 0;
  p.num_consumers = consumer_threads;
  if (gather_lanes > 0) p.num_producers = gather_lanes;
  return p;
}

/// Prefetches the TMA descriptors of a kernel's copies (cute TMA copy atoms) into the descriptor cache.
template <class... Tma>
CUTLASS_DEVICE void prefetch_tma_descriptors(Tma const&... tma) {
  (cute::prefetch_tma_descriptor(tma.get_tma_descriptor()), ...);
}

}  // namespace fmha::kernel
