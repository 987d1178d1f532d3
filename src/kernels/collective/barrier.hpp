// Synchronisation helpers of the attention kernels beside CUTLASS's NamedBarrier.
#pragma once

#include <cstdint>

#include <cutlass/arch/barrier.h>

namespace fmha::kernel {

/// cutlass::arch::NamedBarrier::sync(num_threads, id) (the same user barrier ids) that also returns whether `pred`
/// held in any of the participating threads (PTX bar.red.or): one barrier where a sync and a vote were two. With
/// kVote false it is NamedBarrier::sync and returns false.
template <bool kVote = true>
CUTLASS_DEVICE bool named_barrier_sync_or(uint32_t num_threads, uint32_t id, bool pred) {
  if constexpr (!kVote) {
    cutlass::arch::NamedBarrier::sync(num_threads, id);
    return false;
  }
  const uint32_t hw = id + cutlass::arch::NamedBarrier::ReservedNamedBarrierCount;
  uint32_t any;
  asm volatile(
      "{\n"
      "  .reg .pred p, q;\n"
      "  setp.ne.u32 p, %2, 0;\n"
      "  bar.red.or.pred q, %1, %3, p;\n"
      "  selp.u32 %0, 1, 0, q;\n"
      "}\n"
      : "=r"(any)
      : "r"(hw), "r"(uint32_t(pred)), "r"(num_threads));  // no memory clobber, as NamedBarrier::sync
  return any != 0;
}

}  // namespace fmha::kernel
