// Microbenchmark (sm_90a): how the SFU (MUFU.EX2) and the tensor cores (wgmma) share one SM, the two resources the
// forward kernel's mainloop alternates between (docs/perf-log.md, v14). Not part of the library or its tests.
//
// Build and run on the GPU machine (CUTLASS from scripts/setup.sh):
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -I.deps/cutlass/include \
//        -o build/sfu_tensor_overlap bench/micro/sfu_tensor_overlap.cu && build/sfu_tensor_overlap
//
// One CTA per SM; each warpgroup has one role, timed with clock64 over a fixed amount of work:
//   * "mixed" cases: warpgroups [0, tc) issue wgmma batches back to back (wait<1>: one batch in flight) from shared
//     memory (SS, m64nNk16, K = 64 per batch) or with A from registers (RS, as the kernel's P·V); warpgroups
//     [tc, tc + sfu) run 16 independent ex2.approx.ftz.f32 chains per thread until the tensor-core warpgroups are
//     done (or a fixed count without them), so both rates cover the same window. Reports tensor FLOP per clock per SM
//     (peak 4096 for bf16 dense) and warp-level MUFU instructions per clock per SM (peak 0.5: 16 lanes).
//   * "own" cases: each warpgroup issues one P·V-sized batch (m64n64, K = 128: 256 tensor cycles at peak), then 64
//     FFMA + MUFU.EX2 per thread (a softmax block's exponentials at head dim 64), then waits for the batch:
//     cycles per iteration and warpgroup, to compare with the exponentials alone and the GEMM alone.
// Every CUDA call is checked; results are printed as a table.
#include <climits>
#include <vector>
#include <cstdio>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/gemm/collective/builders/sm90_common.inl>

using namespace cute;
using Elt = cutlass::bfloat16_t;

#define CHECK(call)                                                                         \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s failed: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

struct Stamp {
  long long t0, t1, work;
};

/// wgmma of a 64 x N x K tile: SS (A and B in shared memory, K-major) or RS (A from registers, B MN-major as V).
template <int N, int K, bool RS>
struct Gemm {
  using Mma = std::conditional_t<
      RS, decltype(make_tiled_mma(GMMA::rs_op_selector<Elt, Elt, float, Shape<_64, Int<N>, Int<K>>, GMMA::Major::K, GMMA::Major::MN>())),
      decltype(make_tiled_mma(GMMA::ss_op_selector<Elt, Elt, float, Shape<_64, Int<N>, Int<K>>>()))>;
  using AtomA = decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Elt, _64, Int<K>>());
  using AtomB = decltype(cutlass::gemm::collective::detail::ss_smem_selector<RS ? GMMA::Major::MN : GMMA::Major::K, Elt, Int<N>, Int<K>>());
  using LayoutA = decltype(tile_to_shape(AtomA{}, Shape<_64, Int<K>>{}));
  using LayoutB = decltype(tile_to_shape(AtomB{}, Shape<Int<N>, Int<K>>{}));
};

template <int N, int K, bool RS>
__device__ void fill_smem(Elt* sa, Elt* sb) {
  for (int i = threadIdx.x; i < 64 * K; i += blockDim.x) sa[i] = Elt(0.001f * (i % 7));
  for (int i = threadIdx.x; i < N * K; i += blockDim.x) sb[i] = Elt(0.001f * (i % 5));
  cutlass::arch::fence_view_async_shared();
  __syncthreads();
}

/// "mixed": tensor-core warpgroups and SFU warpgroups side by side.
template <int N, bool RS>
__global__ void __launch_bounds__(512, 1) mixed(int n_tc, int n_sfu, int tc_iters, int sfu_iters, Stamp* out) {
  using G = Gemm<N, 64, RS>;
  __shared__ __align__(1024) Elt sa[64 * 64];
  __shared__ __align__(1024) Elt sb[N * 64];
  // Set by the tensor-core warpgroups when they finish: the SFU warpgroups of a mixed case run until then, so that
  // both rates are measured over the same window (with fixed counts on both sides, one side would run alone at the
  // end and its rate would include that tail).
  __shared__ int tc_running;
  if (threadIdx.x == 0) tc_running = n_tc;
  fill_smem<N, 64, RS>(sa, sb);  // ends with __syncthreads()
  const int wg = threadIdx.x / 128;
  Stamp r{0, 0, 0};
  if (wg < n_tc) {
    typename G::Mma mma;
    auto thr = mma.get_thread_slice(threadIdx.x % 128);
    Tensor sA = make_tensor(make_smem_ptr(sa), typename G::LayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(sb), typename G::LayoutB{});
    auto fA = thr.partition_fragment_A(sA);
    Tensor fB = thr.partition_fragment_B(sB);
    Tensor acc = partition_fragment_C(mma, Shape<_64, Int<N>>{});
    clear(acc);
    if constexpr (RS) for (int i = 0; i < size(fA); ++i) fA(i) = Elt(0.01f * (threadIdx.x % 3));
    r.t0 = clock64();
    for (int it = 0; it < tc_iters; ++it) {
      if constexpr (RS) warpgroup_fence_operand(fA);
      warpgroup_fence_operand(acc);
      warpgroup_arrive();
      for (int k = 0; k < size<2>(fA); ++k) cute::gemm(mma, fA(_, _, k), fB(_, _, k), acc);
      warpgroup_commit_batch();
      warpgroup_wait<1>();
      warpgroup_fence_operand(acc);
      if constexpr (RS) warpgroup_fence_operand(fA);
    }
    warpgroup_wait<0>();
    r.t1 = clock64();
    if (threadIdx.x % 128 == 0) atomicSub(&tc_running, 1);
    r.work = (long long)tc_iters * 64 * N * 64 * 2;  // FLOP of this warpgroup
    float s = 0.f;
    for (int i = 0; i < size(acc); ++i) s += acc(i);
    if (s == 12345.f) r.work += 1;  // keeps the accumulator live
  } else if (wg < n_tc + n_sfu) {
    float v[16];
    for (int i = 0; i < 16; ++i) v[i] = 0.005f * (i + 1);
    // Alone (no tensor-core warpgroup): sfu_iters iterations. Beside one: until the last tensor-core warpgroup is
    // done (checked every 64 iterations; the whole warpgroup leaves together, so each warp counts its own).
    int iters = 0;
    r.t0 = clock64();
    for (;;) {
#pragma unroll 4
      for (int j = 0; j < 64; ++j) {
#pragma unroll
        for (int i = 0; i < 16; ++i) asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(v[i]) : "f"(-v[i]));
      }
      iters += 64;
      if (n_tc == 0 ? iters >= sfu_iters : *static_cast<volatile int*>(&tc_running) == 0) break;
    }
    r.t1 = clock64();
    const int sfu_done = iters;
    float s = 0.f;
    for (int i = 0; i < 16; ++i) s += v[i];
    r.work = (long long)sfu_done * 16 * 4;  // warp-level MUFU instructions of this warpgroup (4 warps, if they agree)
    if (s == 12345.f) r.work += 1;
  }
  if (threadIdx.x % 128 == 0 && wg < n_tc + n_sfu) out[blockIdx.x * 4 + wg] = r;
}

/// "own": each warpgroup issues a P·V-sized batch, runs 64 exponentials per thread, then waits for the batch.
template <bool RS>
__global__ void __launch_bounds__(384, 1) own(int iters, int do_mma, int do_exp, Stamp* out) {
  using G = Gemm<64, 128, RS>;
  __shared__ __align__(1024) Elt sa[64 * 128];
  __shared__ __align__(1024) Elt sb[64 * 128];
  fill_smem<64, 128, RS>(sa, sb);
  typename G::Mma mma;
  auto thr = mma.get_thread_slice(threadIdx.x % 128);
  Tensor sA = make_tensor(make_smem_ptr(sa), typename G::LayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(sb), typename G::LayoutB{});
  auto fA = thr.partition_fragment_A(sA);
  Tensor fB = thr.partition_fragment_B(sB);
  Tensor acc = partition_fragment_C(mma, Shape<_64, _64>{});
  clear(acc);
  if constexpr (RS) for (int i = 0; i < size(fA); ++i) fA(i) = Elt(0.01f * (threadIdx.x % 3));
  float v[64];
  for (int i = 0; i < 64; ++i) v[i] = 0.0005f * (i + 1);
  Stamp r{0, 0, 0};
  r.t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    if (do_mma) {
      if constexpr (RS) warpgroup_fence_operand(fA);
      warpgroup_fence_operand(acc);
      warpgroup_arrive();
      for (int k = 0; k < size<2>(fA); ++k) cute::gemm(mma, fA(_, _, k), fB(_, _, k), acc);
      warpgroup_commit_batch();
    }
    if (do_exp) {
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        const float x = fmaf(v[i], 0.7f, -0.3f);
        asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(v[i]) : "f"(x));
      }
    }
    if (do_mma) {
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc);
      if constexpr (RS) warpgroup_fence_operand(fA);
    }
  }
  r.t1 = clock64();
  float s = 0.f;
  for (int i = 0; i < size(acc); ++i) s += acc(i);
  for (int i = 0; i < 64; ++i) s += v[i];
  r.work = iters;
  if (s == 12345.f) r.work += 1;
  if (threadIdx.x % 128 == 0) out[blockIdx.x * 4 + threadIdx.x / 128] = r;
}

int main() {
  // One CTA per SM: as many CTAs as SMs, each asking for more than half an SM's shared memory (unused) so that no
  // two share one.
  int kCtas = 0, device = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&kCtas, cudaDevAttrMultiProcessorCount, device));
  constexpr int kPadSmem = 120 * 1024;
  CHECK(cudaFuncSetAttribute(mixed<128, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPadSmem));
  CHECK(cudaFuncSetAttribute(mixed<64, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPadSmem));
  CHECK(cudaFuncSetAttribute(mixed<64, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPadSmem));
  CHECK(cudaFuncSetAttribute(own<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPadSmem));
  CHECK(cudaFuncSetAttribute(own<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPadSmem));
  Stamp* d = nullptr;
  CHECK(cudaMalloc(&d, size_t(kCtas) * 4 * sizeof(Stamp)));
  std::vector<Stamp> h(size_t(kCtas) * 4);
  auto fetch = [&]() -> int {
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h.data(), d, h.size() * sizeof(Stamp), cudaMemcpyDeviceToHost));
    return 0;
  };
  std::printf("%-30s %14s %16s\n", "mixed case", "TC FLOP/clk/SM", "MUFU warp/clk/SM");
  struct Mixed { const char* name; int n; bool rs; int tc, sfu; };
  const Mixed cases[] = {
      {"sfu x1", 128, false, 0, 1},        {"sfu x2", 128, false, 0, 2},          {"ss n128 x1", 128, false, 1, 0},
      {"ss n64 x1", 64, false, 1, 0},      {"rs n64 x1", 64, true, 1, 0},         {"rs n64 x2", 64, true, 2, 0},
      {"ss n128 x1 + sfu x1", 128, false, 1, 1}, {"ss n128 x1 + sfu x2", 128, false, 1, 2},
      {"ss n64 x1 + sfu x1", 64, false, 1, 1},   {"rs n64 x1 + sfu x1", 64, true, 1, 1},
      {"rs n64 x1 + sfu x2", 64, true, 1, 2},    {"rs n64 x2 + sfu x1", 64, true, 2, 1}};
  for (const Mixed& c : cases) {
    const int threads = 128 * (c.tc + c.sfu);
    for (int rep = 0; rep < 2; ++rep) {  // the first launch warms up
      CHECK(cudaMemset(d, 0, h.size() * sizeof(Stamp)));
      if (c.n == 128) mixed<128, false><<<kCtas, threads, kPadSmem>>>(c.tc, c.sfu, 20000, 20000, d);
      else if (c.rs) mixed<64, true><<<kCtas, threads, kPadSmem>>>(c.tc, c.sfu, 20000, 20000, d);
      else mixed<64, false><<<kCtas, threads, kPadSmem>>>(c.tc, c.sfu, 20000, 20000, d);
      if (fetch()) return 1;
    }
    double tc = 0, sfu = 0;
    for (int b = 0; b < kCtas; ++b) {
      long long t0 = LLONG_MAX, t1 = 0, w = 0, s0 = LLONG_MAX, s1 = 0, sw = 0;
      for (int g = 0; g < c.tc; ++g) { const Stamp& x = h[b * 4 + g]; t0 = std::min(t0, x.t0); t1 = std::max(t1, x.t1); w += x.work; }
      for (int g = c.tc; g < c.tc + c.sfu; ++g) { const Stamp& x = h[b * 4 + g]; s0 = std::min(s0, x.t0); s1 = std::max(s1, x.t1); sw += x.work; }
      if (c.tc) tc += double(w) / double(t1 - t0);
      if (c.sfu) sfu += double(sw) / double(s1 - s0);
    }
    std::printf("%-30s %14.0f %16.3f\n", c.name, tc / kCtas, sfu / kCtas);
  }
  std::printf("\n%-30s %14s\n", "own case (per warpgroup)", "cycles/iter");
  struct Own { const char* name; bool rs; int wgs, mma, exp; };
  const Own owns[] = {{"exps", false, 1, 0, 1},          {"rs gemm", true, 1, 1, 0},  {"rs gemm + exps", true, 1, 1, 1},
                      {"ss gemm", false, 1, 1, 0},       {"ss gemm + exps", false, 1, 1, 1},
                      {"exps, 2 warpgroups", false, 2, 0, 1}, {"rs gemm + exps, 2 warpgroups", true, 2, 1, 1},
                      {"ss gemm + exps, 2 warpgroups", false, 2, 1, 1}, {"rs gemm + exps, 3 warpgroups", true, 3, 1, 1}};
  for (const Own& c : owns) {
    for (int rep = 0; rep < 2; ++rep) {
      CHECK(cudaMemset(d, 0, h.size() * sizeof(Stamp)));
      if (c.rs) own<true><<<kCtas, 128 * c.wgs, kPadSmem>>>(4000, c.mma, c.exp, d);
      else own<false><<<kCtas, 128 * c.wgs, kPadSmem>>>(4000, c.mma, c.exp, d);
      if (fetch()) return 1;
    }
    double cyc = 0;
    for (int b = 0; b < kCtas; ++b)
      for (int g = 0; g < c.wgs; ++g) cyc += double(h[b * 4 + g].t1 - h[b * 4 + g].t0) / double(h[b * 4 + g].work);
    std::printf("%-30s %14.0f\n", c.name, cyc / (kCtas * c.wgs));
  }
  CHECK(cudaFree(d));
  return 0;
}
