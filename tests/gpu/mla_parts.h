// MLA decode's shapes on the shared decode parts (tests/gpu/mla_parts.cu): host entry of the test kernel.
#pragma once

#include <cuda_runtime_api.h>

namespace fmha::testing {

/// Loads key block 0 (64 keys from key k_begin) of a paged bf16 cache of 576-element rows (MLA's [latent 512 | rope
/// 64], one K/V head) with the decode family's paged producer (PagedKVSource, TMA boxes of 16 keys) into a swizzled
/// shared-memory stage, and writes the stage to `out` ([64][576] bf16, device) in (key, column) order.
/// cache: [num_pages][page_size][576] bf16 (device, page_size a multiple of 16); table_row: device int
/// [pages_per_seq], the sequence's pages. Synchronises; returns the first CUDA error.
cudaError_t mla_paged_block_load(const void* cache, int num_pages, int page_size, const int* table_row,
                                 int pages_per_seq, int k_begin, void* out);

}  // namespace fmha::testing
