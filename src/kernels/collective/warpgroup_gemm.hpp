// One warpgroup GEMM issued over every k-block of its operands: the wgmma batch of the forward, decode and
// backward mainloops.
#pragma once

#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

namespace fmha::kernel {

using namespace cute;

/// Issues one warpgroup MMA over all k-blocks; Wait ≥ 0 waits until at most Wait MMA batches remain in flight.
/// ARegs: A comes from registers (the P·V product), not from shared memory.
template <bool ZeroInit, int Wait, bool ARegs = false, class Mma, class TA, class TB, class TC>
CUTLASS_DEVICE void wg_gemm(Mma& mma, TA const& tA, TB const& tB, TC& tC) {
  constexpr bool kARegs = ARegs;
  if constexpr (kARegs) warpgroup_fence_operand(const_cast<TA&>(tA));
  warpgroup_fence_operand(tC);
  warpgroup_arrive();
  if constexpr (ZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < size<2>(tA); ++k) {
    cute::gemm(mma, tA(_, _, k), tB(_, _, k), tC);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  if constexpr (Wait >= 0) warpgroup_wait<Wait>();
  warpgroup_fence_operand(tC);
  if constexpr (kARegs) warpgroup_fence_operand(const_cast<TA&>(tA));
}

}  // namespace fmha::kernel
