// Shared helpers of the GPU suite: skip cleanly where no Hopper GPU is present.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

namespace fmha::testing {

/// Empty when a compute-capability-9.x device is present, else the reason it is not.
inline std::string gpu_missing_reason() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(e);
  if (n == 0) return "no CUDA device";
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major != 9) return "device 0 has compute capability " + std::to_string(major) + ".x, fmha needs 9.x (sm_90a)";
  return "";
}

}  // namespace fmha::testing

#define FMHA_REQUIRE_GPU()                                                   \
  do {                                                                       \
    const std::string why_ = ::fmha::testing::gpu_missing_reason();          \
    if (!why_.empty()) GTEST_SKIP() << "skipped: " << why_;                  \
  } while (0)
