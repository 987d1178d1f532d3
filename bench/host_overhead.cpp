// Host time of one forward call through the C entry point fmha_fwd_contiguous of one or more libfmha_c.so builds
// (an A/B of the host path: validation, device query, pointer checks, kernel selection and the launch), on a
// problem so small (1 × 1 head × 128 × 128, d 64) that the GPU keeps up with the launches.
//
//   build/bin/fmha_host_overhead LIB [LIB ...]      (GPU machine)
//
// Prints, per library, the mean µs per call over 20 rounds of 1000 calls (the stream drained between rounds) in
// ABBA… order, and the median round. Exit 1 when a library cannot be loaded or a call fails. Every build is timed
// through the same positional entry point; in builds with the struct API that entry point is a shim that fills a
// fmha_fwd_params first (the 2026-12-01 A/B measured no difference beyond the A/A spread, docs/perf-log.md).
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "fmha/c_api.h"

using FwdContiguous = decltype(&fmha_fwd_contiguous);  // the positional entry point that every build has

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LIB [LIB ...]\n", argv[0]);
    return 2;
  }
  std::vector<FwdContiguous> fns;
  for (int i = 1; i < argc; ++i) {
    void* h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    auto fn = h ? reinterpret_cast<FwdContiguous>(dlsym(h, "fmha_fwd_contiguous")) : nullptr;
    if (!fn) {
      std::fprintf(stderr, "host_overhead: %s: %s\n", argv[i], dlerror());
      return 1;
    }
    fns.push_back(fn);
  }
  void* buf = nullptr;
  if (cudaMalloc(&buf, 4 << 20) != cudaSuccess) {
    std::fprintf(stderr, "host_overhead: cudaMalloc failed\n");
    return 1;
  }
  float* lse = nullptr;
  cudaStream_t stream;
  if (cudaMalloc(reinterpret_cast<void**>(&lse), 1 << 16) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "host_overhead: cudaMalloc / cudaStreamCreate failed\n");
    return 1;
  }
  char* b = static_cast<char*>(buf);
  char err[256];
  auto call = [&](FwdContiguous f) {
    return f(1, 1, 1, 1, 64, 128, 128, nullptr, nullptr, 0, 0, b, b + (1 << 20), b + (2 << 20), b + (3 << 20), lse,
             0, 0, 0.f, 0, 0, stream, err, sizeof err);
  };
  for (auto f : fns)
    for (int i = 0; i < 200; ++i)
      if (call(f) != 0) {
        std::fprintf(stderr, "host_overhead: call failed: %s\n", err);
        return 1;
      }
  cudaStreamSynchronize(stream);
  const int rounds = 20, calls = 1000;
  std::vector<std::vector<double>> us(fns.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t j = 0; j < fns.size(); ++j) {
      const size_t k = (r % 2 == 0) ? j : fns.size() - 1 - j;  // ABBA
      int failed = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) failed |= call(fns[k]);
      us[k].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                      calls);
      cudaStreamSynchronize(stream);
      if (failed != 0) {
        std::fprintf(stderr, "host_overhead: %s: a timed call failed: %s\n", argv[k + 1], err);
        return 1;
      }
    }
  }
  for (size_t k = 0; k < fns.size(); ++k) {
    std::vector<double> v = us[k];
    std::sort(v.begin(), v.end());
    double mean = 0;
    for (double x : v) mean += x / v.size();
    std::printf("%-50s  mean %.2f µs/call  median %.2f  min %.2f\n", argv[k + 1], mean, v[v.size() / 2], v[0]);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
