// See gpu_reference.h (gpu_reference_bwd). One warp per query row and head for D = Σ dO∘O and dQ, then one warp per
// key row and K/V head for dK and dV (over the rows of every query head of its group that see the key); each lane
// holds head-dim columns lane, lane + 32, …; dot products are warp reductions; fp64 throughout.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "api/host.h"
#include "testing/gpu_reference.h"
#include "testing/gpu_reference_device.cuh"

namespace fmha::testing {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxDim = 256;
constexpr int kPerLane = kMaxDim / 32;

struct BwdArgs {
  const void *q, *k, *v, *o, *d_o;
  int64_t q_row, q_head, k_row, k_head, v_row, v_head, o_row, o_head, do_row, do_head;
  const float* lse;  // [(row0_q[b] + i) · heads_q + h]
  double* dsum;      // the same layout: D = Σ dO∘O of each row
  const int* seqlens_q;
  const int* seqlens_k;
  const int64_t* row0_q;
  const int64_t* row0_k;
  int heads_q, heads_kv, group, d_qk, d_v, max_sq, max_sk;
  bool causal, q_end, bf16;
  double scale;
  GpuRefBwdOutputs out;
};

using refdev::load;
using refdev::round_elem;

__device__ double warp_sum(double x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffff, x, o);
  return x;
}

/// Keys [0, hi) that row i of an entry with lengths (sq, sk) sees.
__device__ int visible_end(const BwdArgs& a, int i, int sq, int sk) {
  if (!a.causal) return sk;
  const int64_t last = int64_t(i) + 1 + (a.q_end ? int64_t(sk) - sq : 0);
  return int(last < 0 ? 0 : (last < sk ? last : sk));
}

/// Row i's columns of one operand (lane-strided) into x, zeros past `dim`.
__device__ void load_row(const void* base, int64_t off, int dim, bool bf16, double (&x)[kPerLane]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + 32 * t;
    x[t] = d < dim ? load(base, off + d, bf16) : 0.0;
  }
}

__device__ double dot(const double (&x)[kPerLane], const double (&y)[kPerLane]) {
  double s = 0.0;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) s += x[t] * y[t];
  return warp_sum(s);
}

/// D and dQ of query row i of head h of entry b (one warp).
__global__ void __launch_bounds__(kWarps * 32) bwd_reference_dq_kernel(BwdArgs a) {
  const int b = blockIdx.z, h = blockIdx.y, i = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sq = a.seqlens_q[b], sk = a.seqlens_k[b];
  if (i >= sq) return;
  const int hk = h / a.group;
  const int64_t qrow = a.row0_q[b] + i, row = qrow * a.heads_q + h;
  const double lse = double(a.lse[row]);
  double q[kPerLane], o[kPerLane], d_o[kPerLane], kj[kPerLane], vj[kPerLane];
  load_row(a.q, qrow * a.q_row + h * a.q_head, a.d_qk, a.bf16, q);
  load_row(a.o, qrow * a.o_row + h * a.o_head, a.d_v, a.bf16, o);
  load_row(a.d_o, qrow * a.do_row + h * a.do_head, a.d_v, a.bf16, d_o);
  const double dsum = dot(d_o, o);
  if (lane == 0) a.dsum[row] = dsum;
  double dq_e[kPerLane] = {}, dq_k[kPerLane] = {};
  const int hi = lse == -INFINITY ? 0 : visible_end(a, i, sq, sk);  // a row that saw no key contributes nothing
  for (int j = 0; j < hi; ++j) {
    const int64_t krow = a.row0_k[b] + j;
    load_row(a.k, krow * a.k_row + hk * a.k_head, a.d_qk, a.bf16, kj);
    load_row(a.v, krow * a.v_row + hk * a.v_head, a.d_v, a.bf16, vj);
    const double p = exp(a.scale * dot(q, kj) - lse);
    const double ds = p * (dot(d_o, vj) - dsum);
    const double ds2 = round_elem(ds, a.bf16);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) dq_e[t] += ds * kj[t], dq_k[t] += ds2 * kj[t];
  }
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d >= a.d_qk) break;
    if (a.out.dq_exact) a.out.dq_exact[row * a.d_qk + d] = float(a.scale * dq_e[t]);
    if (a.out.dq_kernel) a.out.dq_kernel[row * a.d_qk + d] = float(a.scale * dq_k[t]);
  }
}

/// dK and dV of key row j of K/V head hk of entry b (one warp), summed over the group's query heads.
__global__ void __launch_bounds__(kWarps * 32) bwd_reference_dkdv_kernel(BwdArgs a) {
  const int b = blockIdx.z, hk = blockIdx.y, j = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sq = a.seqlens_q[b], sk = a.seqlens_k[b];
  if (j >= sk) return;
  const int64_t krow = a.row0_k[b] + j;
  double kj[kPerLane], vj[kPerLane], q[kPerLane], d_o[kPerLane];
  load_row(a.k, krow * a.k_row + hk * a.k_head, a.d_qk, a.bf16, kj);
  load_row(a.v, krow * a.v_row + hk * a.v_head, a.d_v, a.bf16, vj);
  double dk_e[kPerLane] = {}, dk_k[kPerLane] = {}, dv_e[kPerLane] = {}, dv_k[kPerLane] = {};
  for (int h = hk * a.group; h < (hk + 1) * a.group; ++h)
    for (int i = 0; i < sq; ++i) {
      const int64_t qrow = a.row0_q[b] + i, row = qrow * a.heads_q + h;
      const double lse = double(a.lse[row]);
      if (lse == -INFINITY || j >= visible_end(a, i, sq, sk)) continue;
      load_row(a.q, qrow * a.q_row + h * a.q_head, a.d_qk, a.bf16, q);
      load_row(a.d_o, qrow * a.do_row + h * a.do_head, a.d_v, a.bf16, d_o);
      const double p = exp(a.scale * dot(q, kj) - lse);
      const double ds = p * (dot(d_o, vj) - a.dsum[row]);
      const double p2 = round_elem(p, a.bf16), ds2 = round_elem(ds, a.bf16);
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        dk_e[t] += ds * q[t], dk_k[t] += ds2 * q[t];
        dv_e[t] += p * d_o[t], dv_k[t] += p2 * d_o[t];
      }
    }
  const int64_t row = krow * a.heads_kv + hk;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < a.d_qk) {
      if (a.out.dk_exact) a.out.dk_exact[row * a.d_qk + d] = float(a.scale * dk_e[t]);
      if (a.out.dk_kernel) a.out.dk_kernel[row * a.d_qk + d] = float(a.scale * dk_k[t]);
    }
    if (d < a.d_v) {
      if (a.out.dv_exact) a.out.dv_exact[row * a.d_v + d] = float(dv_e[t]);
      if (a.out.dv_kernel) a.out.dv_kernel[row * a.d_v + d] = float(dv_k[t]);
    }
  }
}

}  // namespace

Status gpu_reference_bwd(const GpuRefProblem& p, GpuRefOperand q, GpuRefOperand k, GpuRefOperand v, GpuRefOperand o,
                         GpuRefOperand d_o, const float* lse, const GpuRefBwdOutputs& out, cudaStream_t stream) {
  using detail::invalid_arg;
  const auto str = [](auto x) { return std::to_string(x); };
  if (Status s = gpu_ref_validate(p, kMaxDim); !s) return s;
  if (p.heads_q > 65535) return invalid_arg("heads_q", "≤ 65535", str(p.heads_q));
  const size_t batch = p.seqlens_q.size();
  if (batch > 65535) return invalid_arg("batch", "≤ 65535", str(batch));
  if (p.last_rows != 0) return invalid_arg("last_rows", "0 (the backward computes every row)", str(p.last_rows));
  if (!lse) return invalid_arg("lse", "a device pointer", "null");
  int max_sq = 0, max_sk = 0;
  int64_t rows_q = 0;  // Q rows addressed: the D buffer's extent
  for (size_t b = 0; b < batch; ++b) {
    max_sq = std::max(max_sq, p.seqlens_q[b]);
    max_sk = std::max(max_sk, p.seqlens_k[b]);
    rows_q = std::max(rows_q, p.row0_q[b] + p.seqlens_q[b]);
  }
  if (batch == 0 || (max_sq == 0 && max_sk == 0)) return Status::ok();

  // Per-entry arrays and the D buffer in one device allocation, freed once the kernels have run (stream-ordered).
  const size_t n = batch;
  std::vector<unsigned char> host(n * 24);
  std::memcpy(host.data(), p.row0_q.data(), n * 8);
  std::memcpy(host.data() + n * 8, p.row0_k.data(), n * 8);
  std::memcpy(host.data() + n * 16, p.seqlens_q.data(), n * 4);
  std::memcpy(host.data() + n * 20, p.seqlens_k.data(), n * 4);
  const size_t dsum_off = (host.size() + 255) / 256 * 256;
  void* dev = nullptr;
  if (Status s = detail::cuda_status(cudaMallocAsync(&dev, dsum_off + size_t(rows_q) * p.heads_q * 8 + 8, stream),
                                     "gpu_reference_bwd: cudaMallocAsync");
      !s)
    return s;
  Status st = detail::cuda_status(cudaMemcpyAsync(dev, host.data(), host.size(), cudaMemcpyHostToDevice, stream),
                                  "gpu_reference_bwd: cudaMemcpyAsync");
  if (st) {
    auto* d = static_cast<unsigned char*>(dev);
    BwdArgs a{};
    a.q = q.data, a.k = k.data, a.v = v.data, a.o = o.data, a.d_o = d_o.data;
    a.q_row = q.row_stride, a.q_head = q.head_stride, a.k_row = k.row_stride, a.k_head = k.head_stride;
    a.v_row = v.row_stride, a.v_head = v.head_stride, a.o_row = o.row_stride, a.o_head = o.head_stride;
    a.do_row = d_o.row_stride, a.do_head = d_o.head_stride;
    a.lse = lse;
    a.dsum = reinterpret_cast<double*>(d + dsum_off);
    a.row0_q = reinterpret_cast<const int64_t*>(d), a.row0_k = reinterpret_cast<const int64_t*>(d + n * 8);
    a.seqlens_q = reinterpret_cast<const int*>(d + n * 16), a.seqlens_k = reinterpret_cast<const int*>(d + n * 20);
    a.heads_q = p.heads_q, a.heads_kv = p.heads_kv, a.group = p.heads_q / p.heads_kv;
    a.d_qk = p.head_dim_qk, a.d_v = p.head_dim_v, a.max_sq = max_sq, a.max_sk = max_sk;
    a.causal = p.mask == MaskType::kCausal, a.q_end = p.align == CausalAlign::kQEnd, a.bf16 = p.dtype == DType::kBF16;
    a.scale = p.scale != 0.0 ? p.scale : 1.0 / std::sqrt(double(p.head_dim_qk));
    a.out = out;
    if (max_sq > 0) {  // D first: the dK/dV kernel reads it
      bwd_reference_dq_kernel<<<dim3(unsigned((max_sq + kWarps - 1) / kWarps), unsigned(p.heads_q), unsigned(batch)),
                                kWarps * 32, 0, stream>>>(a);
      st = detail::cuda_status(cudaGetLastError(), "gpu_reference_bwd: launch (dQ)");
    }
    if (st && max_sk > 0) {
      bwd_reference_dkdv_kernel<<<dim3(unsigned((max_sk + kWarps - 1) / kWarps), unsigned(p.heads_kv),
                                       unsigned(batch)),
                                  kWarps * 32, 0, stream>>>(a);
      st = detail::cuda_status(cudaGetLastError(), "gpu_reference_bwd: launch (dK, dV)");
    }
  }
  Status fr = detail::cuda_status(cudaFreeAsync(dev, stream), "gpu_reference_bwd: cudaFreeAsync");
  if (Status s = detail::cuda_status(cudaStreamSynchronize(stream), "gpu_reference_bwd: run"); st && !s) st = s;
  return st ? fr : st;
}

}  // namespace fmha::testing
