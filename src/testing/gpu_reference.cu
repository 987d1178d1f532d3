// See gpu_reference.h. One CTA of kThreads threads per (query row, query head, entry); two passes over the row's
// keys in blocks of kThreads, one key per thread: the max of the scaled scores, then the scores again, the P of each
// key (both models) into shared memory, and the P·V sums, one output dimension per thread.
#include "testing/gpu_reference.h"
#include "testing/gpu_reference_device.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "api/host.h"

namespace fmha::testing {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxDim = 256;
constexpr int kDimsPerThread = kMaxDim / kThreads;
constexpr int kDimChunk = 32;

struct Args {
  const void* q;
  const void* k;
  const void* v;
  int64_t q_row, q_head, k_row, k_head, v_row, v_head;
  const int* seqlens_q;  // [batch]
  const int* seqlens_k;
  const int64_t* row0_q;
  const int64_t* row0_k;
  int heads_q, group, d_qk, d_v;
  int last_rows;      // > 0: rows [sq - last_rows, sq) only (grid.x = last_rows)
  int head0, entry0;  // this launch's first query head and entry (grids are at most 65535 high and deep)
  bool causal, q_end, bf16, sum_rounded_p;
  double scale;
  GpuRefOutputs out;
};

using refdev::load;
using refdev::round_elem;

/// Block-wide reduction of one double per thread (max or sum); every thread gets the result.
template <bool kMax>
__device__ double block_reduce(double x, double* scratch) {
  for (int o = 16; o > 0; o /= 2) {
    const double y = __shfl_xor_sync(0xffffffff, x, o);
    x = kMax ? fmax(x, y) : x + y;
  }
  const int warp = threadIdx.x / 32;
  __syncthreads();  // scratch may still be read by the previous reduction
  if (threadIdx.x % 32 == 0) scratch[warp] = x;
  __syncthreads();
  x = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) x = kMax ? fmax(x, scratch[w]) : x + scratch[w];
  return x;
}

__global__ void __launch_bounds__(kThreads) fwd_reference_kernel(Args a) {
  const int h = a.head0 + blockIdx.y, b = a.entry0 + blockIdx.z;
  const int sq = a.seqlens_q[b], sk = a.seqlens_k[b];
  const int i = blockIdx.x + (a.last_rows > 0 && sq > a.last_rows ? sq - a.last_rows : 0);
  if (i >= sq) return;
  const int hk = h / a.group;
  int hi = sk;  // keys [0, hi) are visible
  if (a.causal) {
    const int64_t last = int64_t(i) + 1 + (a.q_end ? int64_t(sk) - sq : 0);
    hi = int(last < 0 ? 0 : (last < sk ? last : sk));
  }
  __shared__ double q[kMaxDim];
  __shared__ double p_exact[kThreads], p_kernel[kThreads];
  __shared__ double scratch[kThreads / 32];
  __shared__ float k_tile[kThreads][kDimChunk + 1];  // +1: consecutive keys fall in different banks
  const int64_t qrow = a.row0_q[b] + i;
  for (int d = threadIdx.x; d < a.d_qk; d += kThreads) q[d] = load(a.q, qrow * a.q_row + h * a.q_head + d, a.bf16);
  // The scaled score of key j0 + threadIdx.x (−inf past hi): the block's keys pass through shared memory kDimChunk
  // dimensions at a time, read row by row (coalesced), so that each thread then sums its own key's products.
  auto block_scores = [&](int j0) {
    double s = 0.0;
    const int n = hi - j0 < kThreads ? hi - j0 : kThreads;
    for (int d0 = 0; d0 < a.d_qk; d0 += kDimChunk) {
      const int w = a.d_qk - d0 < kDimChunk ? a.d_qk - d0 : kDimChunk;
      __syncthreads();  // the previous chunk is no longer read (and q is complete)
      for (int e = threadIdx.x; e < n * w; e += kThreads) {
        const int jj = e / w, d = e % w;
        k_tile[jj][d] = float(load(a.k, (a.row0_k[b] + j0 + jj) * a.k_row + hk * a.k_head + d0 + d, a.bf16));
      }
      __syncthreads();
      if (int(threadIdx.x) < n)
        for (int d = 0; d < w; ++d) s += q[d0 + d] * double(k_tile[threadIdx.x][d]);
    }
    return int(threadIdx.x) < n ? a.scale * s : -INFINITY;
  };
  double m = -INFINITY;
  for (int j0 = 0; j0 < hi; j0 += kThreads) m = fmax(m, block_scores(j0));
  m = block_reduce<true>(m, scratch);

  double sum_exact = 0.0, sum_kernel = 0.0;
  double acc_exact[kDimsPerThread] = {}, acc_kernel[kDimsPerThread] = {};
  for (int j0 = 0; j0 < hi; j0 += kThreads) {
    const int j = j0 + threadIdx.x;
    const double t = block_scores(j0);  // ends with a barrier after which the previous block's P is not read
    if (j < hi) {
      const double p = exp(t - m);
      const double pk = round_elem(p, a.bf16);
      p_exact[threadIdx.x] = p;
      p_kernel[threadIdx.x] = pk;
      sum_exact += p;
      sum_kernel += a.sum_rounded_p ? pk : p;
    }
    __syncthreads();
    const int n = hi - j0 < kThreads ? hi - j0 : kThreads;
    for (int t2 = 0; t2 < kDimsPerThread; ++t2) {
      const int d = threadIdx.x + t2 * kThreads;
      if (d >= a.d_v) break;
      for (int jj = 0; jj < n; ++jj) {
        const double x = load(a.v, (a.row0_k[b] + j0 + jj) * a.v_row + hk * a.v_head + d, a.bf16);
        acc_exact[t2] += p_exact[jj] * x;
        acc_kernel[t2] += p_kernel[jj] * x;
      }
    }
  }
  sum_exact = block_reduce<false>(sum_exact, scratch);
  sum_kernel = block_reduce<false>(sum_kernel, scratch);
  const int64_t row = qrow * a.heads_q + h;
  for (int t = 0; t < kDimsPerThread; ++t) {
    const int d = threadIdx.x + t * kThreads;
    if (d >= a.d_v) break;
    if (a.out.o_exact) a.out.o_exact[row * a.d_v + d] = hi > 0 ? float(acc_exact[t] / sum_exact) : 0.f;
    if (a.out.o_kernel) a.out.o_kernel[row * a.d_v + d] = hi > 0 ? float(acc_kernel[t] / sum_kernel) : 0.f;
  }
  if (threadIdx.x == 0) {
    if (a.out.lse_exact) a.out.lse_exact[row] = hi > 0 ? float(m + log(sum_exact)) : -INFINITY;
    if (a.out.lse_kernel) a.out.lse_kernel[row] = hi > 0 ? float(m + log(sum_kernel)) : -INFINITY;
  }
}

}  // namespace

Status gpu_ref_validate(const GpuRefProblem& p, int max_head_dim) {
  using detail::invalid_arg;
  const auto str = [](auto x) { return std::to_string(x); };
  if (p.dtype != DType::kFP16 && p.dtype != DType::kBF16)
    return invalid_arg("dtype", "fp16 or bf16", to_string(p.dtype));
  if (p.head_dim_qk < 1 || p.head_dim_qk > max_head_dim)
    return invalid_arg("head_dim_qk", "1 … " + str(max_head_dim), str(p.head_dim_qk));
  if (p.head_dim_v < 1 || p.head_dim_v > max_head_dim)
    return invalid_arg("head_dim_v", "1 … " + str(max_head_dim), str(p.head_dim_v));
  if (p.heads_q < 1 || p.heads_kv < 1 || p.heads_q % p.heads_kv != 0)
    return invalid_arg("heads_q % heads_kv", "0 with both ≥ 1", str(p.heads_q) + " % " + str(p.heads_kv));
  const size_t batch = p.seqlens_q.size();
  if (p.seqlens_k.size() != batch || p.row0_q.size() != batch || p.row0_k.size() != batch)
    return invalid_arg("seqlens_k, row0_q, row0_k sizes", str(batch) + " (the size of seqlens_q)",
                       str(p.seqlens_k.size()) + ", " + str(p.row0_q.size()) + ", " + str(p.row0_k.size()));
  if (!std::isfinite(p.scale)) return invalid_arg("scale", "a finite value (0 = default)", str(p.scale));
  for (size_t b = 0; b < batch; ++b)
    if (p.seqlens_q[b] < 0 || p.seqlens_k[b] < 0)
      return invalid_arg("seqlens[" + str(b) + "]", ">= 0", str(p.seqlens_q[b]) + ", " + str(p.seqlens_k[b]));
  return Status::ok();
}

Status gpu_reference_fwd(const GpuRefProblem& p, GpuRefOperand q, GpuRefOperand k, GpuRefOperand v,
                         const GpuRefOutputs& out, cudaStream_t stream) {
  if (Status s = gpu_ref_validate(p, kMaxDim); !s) return s;
  const size_t batch = p.seqlens_q.size();
  int max_sq = 0;
  for (size_t b = 0; b < batch; ++b) max_sq = p.seqlens_q[b] > max_sq ? p.seqlens_q[b] : max_sq;
  if (batch == 0 || max_sq == 0) return Status::ok();

  // The per-entry arrays travel in one device buffer, freed once the kernel has run (stream-ordered).
  const size_t n = batch;
  std::vector<unsigned char> host(n * (2 * sizeof(int) + 2 * sizeof(int64_t)));
  unsigned char* h = host.data();
  std::memcpy(h, p.row0_q.data(), n * 8);
  std::memcpy(h + n * 8, p.row0_k.data(), n * 8);
  std::memcpy(h + n * 16, p.seqlens_q.data(), n * 4);
  std::memcpy(h + n * 20, p.seqlens_k.data(), n * 4);
  void* dev = nullptr;
  if (Status s = detail::cuda_status(cudaMallocAsync(&dev, host.size(), stream), "gpu_reference_fwd: cudaMallocAsync");
      !s)
    return s;
  Status st = detail::cuda_status(cudaMemcpyAsync(dev, host.data(), host.size(), cudaMemcpyHostToDevice, stream),
                                  "gpu_reference_fwd: cudaMemcpyAsync");
  if (st) {
    auto* d = static_cast<unsigned char*>(dev);
    Args a{q.data, k.data, v.data, q.row_stride, q.head_stride, k.row_stride, k.head_stride, v.row_stride,
           v.head_stride, reinterpret_cast<const int*>(d + n * 16), reinterpret_cast<const int*>(d + n * 20),
           reinterpret_cast<const int64_t*>(d), reinterpret_cast<const int64_t*>(d + n * 8), p.heads_q,
           p.heads_q / p.heads_kv, p.head_dim_qk, p.head_dim_v, p.last_rows, 0, 0, p.mask == MaskType::kCausal,
           p.align == CausalAlign::kQEnd, p.dtype == DType::kBF16, p.row_sum_rounded_p,
           p.scale != 0.0 ? p.scale : 1.0 / std::sqrt(double(p.head_dim_qk)), out};
    constexpr int kGridMax = 65535;
    for (int b0 = 0; b0 < int(batch) && st; b0 += kGridMax)
      for (int h0 = 0; h0 < p.heads_q && st; h0 += kGridMax) {
        a.entry0 = b0, a.head0 = h0;
        const dim3 grid(unsigned(p.last_rows > 0 ? std::min(p.last_rows, max_sq) : max_sq), unsigned(std::min(kGridMax, p.heads_q - h0)),
                        unsigned(std::min<int64_t>(kGridMax, int64_t(batch) - b0)));
        fwd_reference_kernel<<<grid, kThreads, 0, stream>>>(a);
        st = detail::cuda_status(cudaGetLastError(), "gpu_reference_fwd: launch");
      }
  }
  Status fr = detail::cuda_status(cudaFreeAsync(dev, stream), "gpu_reference_fwd: cudaFreeAsync");
  // The host copy must outlive the asynchronous upload.
  if (Status s = detail::cuda_status(cudaStreamSynchronize(stream), "gpu_reference_fwd: run"); st && !s) st = s;
  return st ? fr : st;
}

}  // namespace fmha::testing
