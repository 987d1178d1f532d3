// Bulk reduction from shared into global memory (sm_90): one thread hands a contiguous block of fp32 values to
// the TMA unit, which adds it element by element into global memory in the L2 (PTX
// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32). The backward adds each step's dQ share this way,
// staged in shared memory in the accumulator's own order, so that the consumer warps issue no atomics.
#pragma once

#include <cstdint>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/cutlass.h>

namespace fmha::kernel {

/// Starts gmem[i] += smem[i] for the `bytes / 4` floats at smem (shared memory of this CTA) into gmem (global),
/// as part of the calling thread's current bulk group (bulk_commit closes it). Both addresses 16-byte aligned,
/// bytes a positive multiple of 16. The additions are atomic per element but in no set order against other adds.
CUTLASS_DEVICE void bulk_reduce_add_f32(float* gmem, float const* smem, uint32_t bytes) {
#if defined(CUTE_ARCH_TMA_SM90_ENABLED)
  const uint32_t smem_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
               :
               : "l"(gmem), "r"(smem_addr), "r"(bytes)
               : "memory");
#else
  CUTE_INVALID_CONTROL_PATH("bulk_reduce_add_f32 needs sm_90 (TMA).");
#endif
}

/// Closes the calling thread's current bulk group (the reductions started since the last commit).
CUTLASS_DEVICE void bulk_commit() { cute::tma_store_arrive(); }

/// Waits until at most N of the calling thread's committed bulk groups still read their shared-memory source:
/// after it, that shared memory may be overwritten.
template <int N>
CUTLASS_DEVICE void bulk_wait_read() {
  cute::tma_store_wait<N>();
}

/// Waits until at most N of the calling thread's committed bulk groups are incomplete (their writes to global
/// memory performed), then orders them before the thread's later generic-proxy accesses (fence.proxy.async), so
/// that a release by this thread publishes them.
template <int N>
CUTLASS_DEVICE void bulk_wait_complete() {
#if defined(CUTE_ARCH_TMA_SM90_ENABLED)
  asm volatile("cp.async.bulk.wait_group %0;\n" : : "n"(N) : "memory");
  asm volatile("fence.proxy.async.global;\n" : : : "memory");
#else
  CUTE_INVALID_CONTROL_PATH("bulk_wait_complete needs sm_90 (TMA).");
#endif
}

/// Orders the calling thread's earlier generic-proxy accesses of global memory (an acquire, say) before its later
/// bulk operations.
CUTLASS_DEVICE void bulk_fence_global() {
#if defined(CUTE_ARCH_TMA_SM90_ENABLED)
  asm volatile("fence.proxy.async.global;\n" : : : "memory");
#endif
}

}  // namespace fmha::kernel
