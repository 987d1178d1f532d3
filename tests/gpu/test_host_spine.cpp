// GPU tests of the host spine (src/api/host.h) and of the host time one fmha::fwd call costs outside the kernel:
// validation, the cached device query, the device-pointer checks, the registry lookup and the launch itself.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "api/host.h"
#include "fmha/c_api.h"
#include "fmha/fwd.h"
#include "gpu_env.h"

namespace {

struct DeviceBuffers {
  void* q = nullptr;
  float* lse = nullptr;
  ~DeviceBuffers() {
    cudaFree(q);
    cudaFree(lse);
  }
};

/// Mean µs per call of `fn` over `n` calls (after 50 untimed), the stream drained every 256 calls so
/// that the launch queue never blocks the host.
template <class Fn>
double host_us_per_call(Fn fn, int n, cudaStream_t stream) {
  for (int i = 0; i < 50; ++i) fn();
  cudaStreamSynchronize(stream);
  double total = 0;
  for (int done = 0; done < n;) {
    const int chunk = std::min(256, n - done);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < chunk; ++i) fn();
    total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    cudaStreamSynchronize(stream);
    done += chunk;
  }
  return total / n;
}

TEST(FwdGpuHost, DeviceInfoIsCachedAndRight) {
  FMHA_REQUIRE_GPU();
  fmha::detail::DeviceInfo a;
  ASSERT_TRUE(fmha::detail::current_sm90_device(&a).is_ok());
  const int queries = fmha::detail::device_attribute_queries();
  EXPECT_GE(queries, 1);
  // Many threads at once: every answer right, and no new query of the device already seen.
  std::vector<std::thread> threads;
  std::vector<int> sm_counts(16, -1);
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 1000; ++k) {
        fmha::detail::DeviceInfo d;
        if (!fmha::detail::current_sm90_device(&d).is_ok()) return;
        sm_counts[size_t(i)] = d.sm_count;
      }
    });
  for (auto& t : threads) t.join();
  int sms = 0, dev = -1;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  EXPECT_EQ(a.device, dev);
  EXPECT_EQ(a.cc_major, 9);
  EXPECT_EQ(a.sm_count, sms);
  for (int n : sm_counts) EXPECT_EQ(n, sms);
  EXPECT_EQ(fmha::detail::device_attribute_queries(), queries) << "the device was queried again: no cache";
}

TEST(FwdGpuHost, PointerAndWorkspaceChecksOnDeviceMemory) {
  FMHA_REQUIRE_GPU();
  DeviceBuffers buf;
  ASSERT_EQ(cudaMalloc(&buf.q, 1 << 20), cudaSuccess);
  static char host[64];
  EXPECT_TRUE(fmha::detail::check_device_pointers({{"q", buf.q}, {"lse", nullptr}}).is_ok());
  const fmha::Status s = fmha::detail::check_device_pointers({{"q", buf.q}, {"k", host}});
  EXPECT_EQ(s.message(), "k: expected device-accessible memory, got a host pointer");
  EXPECT_TRUE(fmha::detail::check_workspace({buf.q, 1 << 20}, 4096).is_ok());  // cudaMalloc: 256-byte aligned
}

TEST(FwdGpuHost, HostTimePerCall) {
  // A problem so small that the GPU keeps up with the launches: what is timed is the host path of one call.
  FMHA_REQUIRE_GPU();
  DeviceBuffers buf;
  ASSERT_EQ(cudaMalloc(&buf.q, 4 << 20), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf.lse), 1 << 16), cudaSuccess);
  fmha::FwdParams p;
  p.batch = 1, p.heads_q = p.heads_kv = 1, p.head_dim = 64, p.seqlen_q = p.seqlen_k = 128;
  char* base = static_cast<char*>(buf.q);
  p.q = base, p.k = base + (1 << 20), p.v = base + (2 << 20), p.o = base + (3 << 20), p.lse = buf.lse;
  fmha::set_contiguous_strides(p);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_TRUE(fmha::fwd(p, stream).is_ok());
  const int n = 4000;
  fmha::Status last;
  const double validate = host_us_per_call([&] { last = fmha::fwd_validate(p); }, n, stream);
  EXPECT_TRUE(last.is_ok()) << "fwd_validate: " << last.message();
  const double device = host_us_per_call([&] {
    fmha::detail::DeviceInfo d;
    last = fmha::detail::current_sm90_device(&d);
  }, n, stream);
  EXPECT_TRUE(last.is_ok()) << "current_sm90_device: " << last.message();
  const double pointers = host_us_per_call([&] {
    last = fmha::detail::check_device_pointers({{"q", p.q}, {"k", p.k}, {"v", p.v}, {"o", p.o}, {"lse", p.lse}});
  }, n, stream);
  EXPECT_TRUE(last.is_ok()) << "check_device_pointers: " << last.message();
  const double call = host_us_per_call([&] { last = fmha::fwd(p, stream); }, n, stream);
  fmha_fwd_params c;
  fmha_fwd_params_init(&c);
  c.batch = 1, c.heads_q = c.heads_kv = 1, c.head_dim = 64, c.seqlen_q = c.seqlen_k = 128;
  c.q = p.q, c.k = p.k, c.v = p.v, c.o = p.o, c.lse = p.lse;
  fmha_fwd_params_set_contiguous_strides(&c);
  int rc = 0;
  const double c_call = host_us_per_call([&] { rc = fmha_fwd(&c, nullptr, 0, stream, nullptr, 0); }, n, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(last.is_ok()) << "fwd: " << last.message();
  EXPECT_EQ(rc, 0);
  std::printf("[host time] per call, µs: fwd_validate %.2f, device query (cached) %.2f, 5 pointer checks %.2f, "
              "fmha::fwd (all of it, launch included) %.2f, fmha_fwd (C) %.2f\n",
              validate, device, pointers, call, c_call);
  RecordProperty("fwd_us", std::to_string(call));
  EXPECT_LT(call, 200.0) << "fmha::fwd's host path is far slower than expected";
  cudaStreamDestroy(stream);
}

}  // namespace
