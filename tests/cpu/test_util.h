// Small helpers shared by the CPU reference tests.
#pragma once

#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "api/registry.h"
#include "fmha/fwd.h"

namespace fmha::testutil {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// n values drawn uniformly from [-1, 1) with generator g.
inline std::vector<float> random_vec(size_t n, std::mt19937& g) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

/// A valid dense forward problem for the API tests: bf16, `batch` entries of seqlen queries and keys, heads_q /
/// heads_kv heads of head_dim, every tensor at `buf` (host memory, at least 16-byte aligned: validation never reads
/// it), contiguous strides.
inline FwdParams dense_fwd_params(void* buf, int batch, int heads_q, int heads_kv, int head_dim, int seqlen) {
  FwdParams p;
  p.dtype = DType::kBF16;
  p.batch = batch, p.heads_q = heads_q, p.heads_kv = heads_kv, p.head_dim = head_dim;
  p.seqlen_q = p.seqlen_k = seqlen;
  p.q = p.k = p.v = buf;
  p.o = buf;
  set_contiguous_strides(p);
  return p;
}

/// The status of a valid call on host buffers (fwd, bwd, …), whatever the machine: kNotBuilt without kernels;
/// without a GPU (or driver) kNotSupported naming the device and the failed CUDA call; on a GPU of another
/// architecture kNotSupported naming its compute capability; on a Hopper GPU the first host pointer (`first_pointer`)
/// refused before any launch.
inline void expect_host_buffers_refused(const Status& s, const std::string& first_pointer = "q") {
  if (std::string(detail::kernel_set()) == "none") {  // no kernels built: refused before any device query
    EXPECT_EQ(s.code(), StatusCode::kNotBuilt) << s.message();
    return;
  }
  int devices = 0, major = 0, device = 0;
  const bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  if (gpu && cudaGetDevice(&device) == cudaSuccess)
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaGetLastError();
  if (gpu && major == 9) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
    EXPECT_EQ(s.message(), first_pointer + ": expected device-accessible memory, got a host pointer");
  } else if (gpu) {  // a GPU of another architecture
    EXPECT_EQ(s.code(), StatusCode::kNotSupported) << s.message();
    EXPECT_EQ(s.message().rfind("device: expected compute capability 9.x (sm_90a), got ", 0), 0u) << s.message();
  } else {
    EXPECT_EQ(s.code(), StatusCode::kNotSupported) << s.message();
    EXPECT_EQ(s.message().rfind("device: expected a CUDA GPU of compute capability 9.x", 0), 0u) << s.message();
    EXPECT_NE(s.message().find("cudaGetDevice: "), std::string::npos) << s.message();
  }
}

}  // namespace fmha::testutil
