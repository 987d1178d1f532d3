// Device helpers of the GPU references (gpu_reference.cu, gpu_reference_bwd.cu): operand reads as stored and the
// kernel model's rounding. Device code only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace fmha::testing::refdev {

/// Element i of a bf16 (bf16 true) or fp16 tensor, as a double.
__device__ inline double load(const void* base, int64_t i, bool bf16) {
  if (bf16) return double(__bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]));
  return double(__half2float(static_cast<const __half*>(base)[i]));
}

/// x as the kernel model feeds it to a second product (P to P·V or dV, dS to dQ and dK): fp32, then rounded to the
/// element type (round to nearest even).
__device__ inline double round_elem(double x, bool bf16) {
  const float f = float(x);
  return bf16 ? double(__bfloat162float(__float2bfloat16_rn(f))) : double(__half2float(__float2half_rn(f)));
}

}  // namespace fmha::testing::refdev
