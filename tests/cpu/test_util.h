// Small helpers shared by the CPU reference tests.
#pragma once

#include <cstddef>
#include <limits>
#include <random>
#include <vector>

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

}  // namespace fmha::testutil
