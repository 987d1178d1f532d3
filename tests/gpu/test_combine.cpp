// The split-KV combine kernel (src/api/combine.h) against the CPU reference's combine_splits: split counts 1 … 133,
// empty splits (LSE −inf) whose partial O is NaN and must never be read, rows whose splits are all empty (O = 0,
// LSE = −inf), a NaN LSE (its row NaN), every output dtype, strided outputs with NaN-poisoned gaps.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/combine.h"
#include "gpu/gpu_env.h"
#include "reference/attention.h"
#include "reference/dtype.h"

namespace {

using fmha::DType;

void run_case(int splits, int batch, int tokens, int heads, int d, DType out, uint32_t seed) {
  const int rows = batch * tokens * heads;
  std::mt19937 g(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const float nan = std::numeric_limits<float>::quiet_NaN(), ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> o_parts(size_t(splits) * rows * d), lse_parts(size_t(splits) * rows);
  for (int s = 0; s < splits; ++s)
    for (int r = 0; r < rows; ++r) {
      const bool empty = (r % 7 == 3) || (g() % 4 == 0);  // rows ≡ 3 (mod 7): every split empty
      lse_parts[size_t(s) * rows + r] = empty ? ninf : 20.f * normal(g);
      for (int x = 0; x < d; ++x) o_parts[(size_t(s) * rows + r) * d + x] = empty ? nan : normal(g);
    }
  if (rows > 5) lse_parts[5] = nan;  // row 5: a NaN partial LSE
  // Reference.
  std::vector<float> ro(size_t(rows) * d), rl(rows);
  fmha::ref::combine_splits(splits, rows, d, o_parts.data(), lse_parts.data(), ro.data(), rl.data());
  // Device: O [batch][tokens][heads][d] with a gap of 8 elements after every head (poisoned, must stay so).
  const int64_t hs = d + 8, ts = heads * hs, bs = tokens * ts;
  const size_t esize = out == DType::kFP32 ? 4 : 2, o_elems = size_t(batch) * bs;
  std::vector<unsigned char> o_host(o_elems * esize, 0xFF);  // 0xFFFF / 0xFFFFFFFF: NaN in every type
  void *d_parts = nullptr, *d_lse_parts = nullptr, *d_o = nullptr, *d_lse = nullptr;
  ASSERT_EQ(cudaMalloc(&d_parts, o_parts.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_lse_parts, lse_parts.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_o, o_host.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_lse, size_t(rows) * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_parts, o_parts.data(), o_parts.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_lse_parts, lse_parts.data(), lse_parts.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_o, o_host.data(), o_host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_lse, 0xFF, size_t(rows) * 4), cudaSuccess);
  fmha::detail::CombineArgs a;
  a.splits = splits, a.rows = rows, a.tokens = tokens, a.heads = heads, a.head_dim = d;
  a.o_parts = static_cast<const float*>(d_parts), a.lse_parts = static_cast<const float*>(d_lse_parts);
  a.o = d_o, a.o_dtype = out, a.o_batch_stride = bs, a.o_token_stride = ts, a.o_head_stride = hs;
  a.lse = static_cast<float*>(d_lse);
  const fmha::Status st = fmha::detail::combine_partials(a, nullptr);
  if (st.code() == fmha::StatusCode::kNotBuilt) {
    for (void* p : {d_parts, d_lse_parts, d_o, d_lse}) cudaFree(p);
    GTEST_SKIP() << st.message();
  }
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> lse(rows);
  ASSERT_EQ(cudaMemcpy(o_host.data(), d_o, o_host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(lse.data(), d_lse, size_t(rows) * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* p : {d_parts, d_lse_parts, d_o, d_lse}) cudaFree(p);
  auto read = [&](size_t i) -> float {
    if (out == DType::kFP32) return reinterpret_cast<const float*>(o_host.data())[i];
    const uint16_t bits = reinterpret_cast<const uint16_t*>(o_host.data())[i];
    return out == DType::kFP16 ? fmha::ref::half_bits_to_float(bits) : fmha::ref::bf16_bits_to_float(bits);
  };
  const float tol = out == DType::kFP32 ? 2e-5f : out == DType::kBF16 ? 8e-3f : 1e-3f;  // + the output rounding
  for (int r = 0; r < rows; ++r) {
    const int h = r % heads, t = (r / heads) % tokens, b = r / (heads * tokens);
    const size_t base = size_t(b) * bs + size_t(t) * ts + size_t(h) * hs;
    const std::string where = "row " + std::to_string(r) + " (splits " + std::to_string(splits) + ")";
    if (std::isnan(rl[r])) {
      EXPECT_TRUE(std::isnan(lse[r])) << where;
    } else if (rl[r] == -INFINITY) {
      EXPECT_EQ(lse[r], -INFINITY) << where;
    } else {
      EXPECT_NEAR(lse[r], rl[r], 1e-5f * std::max(1.f, std::fabs(rl[r]))) << where;
    }
    for (int x = 0; x < d; ++x) {
      const float want = ro[size_t(r) * d + x], got = read(base + x);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << where << " col " << x;
      } else {
        EXPECT_NEAR(got, want, tol * std::max(1.f, std::fabs(want))) << where << " col " << x;
      }
    }
    for (int x = d; x < hs; ++x) EXPECT_TRUE(std::isnan(read(base + x))) << where << ": the gap after the head was written";
  }
}

TEST(Combine, MatchesReference) {
  FMHA_REQUIRE_GPU();
  uint32_t seed = 1;
  for (int splits : {1, 2, 3, 17, 133})
    for (DType out : {DType::kFP32, DType::kBF16, DType::kFP16}) {
      SCOPED_TRACE("splits " + std::to_string(splits) + " " + fmha::to_string(out));
      run_case(splits, 3, 4, 5, splits == 17 ? 256 : 128, out, seed++);
      run_case(splits, 1, 1, 7, 40, out, seed++);
    }
  // MLA decode's V head dim (the latent 512), which its split-KV will combine with this kernel.
  for (int splits : {2, 17}) {
    SCOPED_TRACE("MLA latent 512, splits " + std::to_string(splits));
    run_case(splits, 2, 1, 16, 512, DType::kBF16, seed++);
  }
}

}  // namespace
