// The split-KV combine kernel (src/api/combine.h): one warp per row; the lanes first reduce the splits' LSE (max,
// then the sum of exp), then each lane accumulates its columns of O over the splits with non-zero weight.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "api/combine.h"
#include "api/host.h"

namespace fmha::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxDim = kCombineMaxHeadDim;  // MLA decode's latent 512 (V = the latent rows)
constexpr int kPerLane = kMaxDim / 32;

template <class T>
__device__ void store(void* base, int64_t i, float x) {
  if constexpr (std::is_same_v<T, float>) static_cast<float*>(base)[i] = x;
  else if constexpr (std::is_same_v<T, __half>) static_cast<__half*>(base)[i] = __float2half_rn(x);
  else static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(x);
}

template <class T>
__global__ void __launch_bounds__(kWarps * 32) combine_kernel(CombineArgs a) {
  const int lane = threadIdx.x % 32;
  const int r = blockIdx.x * kWarps + threadIdx.x / 32;
  if (r >= a.rows) return;
  // The largest LSE of the row (NaN wins: it poisons the row as in the reference).
  float m = -INFINITY;
  bool any_nan = false;
  for (int s = lane; s < a.splits; s += 32) {
    const float l = a.lse_parts[int64_t(s) * a.rows + r];
    any_nan |= l != l;
    m = fmaxf(m, l);
  }
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
  any_nan = __any_sync(0xffffffff, any_nan);
  const int h = r % a.heads, t = (r / a.heads) % a.tokens, b = r / (a.heads * a.tokens);
  const int64_t out = int64_t(b) * a.o_batch_stride + int64_t(t) * a.o_token_stride + int64_t(h) * a.o_head_stride;
  if (any_nan || m == -INFINITY) {  // NaN propagates; a row no split saw a key for: O = 0, LSE = −inf
    const float fill = any_nan ? NAN : 0.f;
    for (int d = lane; d < a.head_dim; d += 32) store<T>(a.o, out + d, fill);
    if (a.lse && lane == 0) a.lse[r] = any_nan ? NAN : -INFINITY;
    return;
  }
  float sum = 0.f;
  for (int s = lane; s < a.splits; s += 32) sum += expf(a.lse_parts[int64_t(s) * a.rows + r] - m);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffff, sum, o);
  const float lse = m + logf(sum);
  float acc[kPerLane];
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) acc[k] = 0.f;
  for (int s = 0; s < a.splits; ++s) {
    const float l = a.lse_parts[int64_t(s) * a.rows + r];
    if (l == -INFINITY) continue;  // an empty split: its O is never read
    const float w = expf(l - lse);
    const float* src = a.o_parts + (int64_t(s) * a.rows + r) * a.head_dim;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < a.head_dim) acc[k] = fmaf(w, src[d], acc[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < a.head_dim) store<T>(a.o, out + d, acc[k]);
  }
  if (a.lse && lane == 0) a.lse[r] = lse;
}

}  // namespace

Status combine_partials(const CombineArgs& a, cudaStream_t stream) {
  if (Status s = check_combine_args(a); !s) return s;
  if (a.rows == 0) return Status::ok();
  const dim3 grid(unsigned((a.rows + kWarps - 1) / kWarps)), block(kWarps * 32);
  switch (a.o_dtype) {
    case DType::kFP32: combine_kernel<float><<<grid, block, 0, stream>>>(a); break;
    case DType::kFP16: combine_kernel<__half><<<grid, block, 0, stream>>>(a); break;
    case DType::kBF16: combine_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(a); break;
    default: return invalid_arg("o_dtype", "fp16, bf16 or fp32", to_string(a.o_dtype));
  }
  return cuda_status(cudaGetLastError(), "combine_partials: launch");
}

}  // namespace fmha::detail
