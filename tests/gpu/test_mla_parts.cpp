// MLA decode's shapes on the shared decode parts (tests/gpu/mla_parts.cu): the paged producer at 576-element rows
// loads a 64-key block that straddles shuffled pages bit for bit, including the clamp of page-table entries past the
// sequence's pages (never a read outside the pool). The combine at 512 columns: test_combine.cpp.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gpu/gpu_env.h"
#include "gpu/mla_parts.h"

namespace {

TEST(MlaParts, PagedProducerLoads576WideRows) {
  FMHA_REQUIRE_GPU();
  constexpr int kRow = 576, kBlock = 64;
  for (const int page_size : {16, 32, 128}) {
    SCOPED_TRACE("page_size " + std::to_string(page_size));
    const int pages_per_seq = 256 / page_size, num_pages = pages_per_seq + 3;
    std::vector<int> table(pages_per_seq);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(page_size));
    table[pages_per_seq - 1] = num_pages + 7;  // out of range: clamped to the pool's last page
    std::vector<uint16_t> cache(size_t(num_pages) * page_size * kRow);
    for (size_t i = 0; i < cache.size(); ++i) cache[i] = uint16_t((i * 2654435761u) >> 16) & 0x3FFF;  // finite bf16
    void *d_cache = nullptr, *d_table = nullptr, *d_out = nullptr;
    ASSERT_EQ(cudaMalloc(&d_cache, cache.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_table, table.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, size_t(kBlock) * kRow * 2), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_cache, cache.data(), cache.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(d_out, 0xFF, size_t(kBlock) * kRow * 2), cudaSuccess);
    for (const int k_begin : {0, 192}) {  // 192: the block's last keys are in the clamped entry's page
      ASSERT_EQ(fmha::testing::mla_paged_block_load(d_cache, num_pages, page_size,
                                                    static_cast<const int*>(d_table), pages_per_seq, k_begin, d_out),
                cudaSuccess);
      std::vector<uint16_t> got(size_t(kBlock) * kRow);
      ASSERT_EQ(cudaMemcpy(got.data(), d_out, got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      size_t bad = 0;
      for (int j = 0; j < kBlock; ++j) {
        const int key = k_begin + j;
        const int page = std::min(std::max(table[key / page_size], 0), num_pages - 1);
        for (int x = 0; x < kRow; ++x)
          bad += got[size_t(j) * kRow + x] != cache[(size_t(page) * page_size + key % page_size) * kRow + x];
      }
      EXPECT_EQ(bad, 0u) << "k_begin " << k_begin << ": elements of the loaded block that differ from the cache";
    }
    cudaFree(d_cache);
    cudaFree(d_table);
    cudaFree(d_out);
  }
}

}  // namespace
