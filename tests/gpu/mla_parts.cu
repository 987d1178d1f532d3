// MLA decode's shapes on the shared decode parts, ahead of the MLA family: the paged K/V producer
// (kernels/collective/paged_kv_source.hpp, PagedKVSource) instantiated for cache rows of 576 (K = [latent 512 | rope 64],
// the row MLA decode reads once for K and, its first 512 columns, for V) loads one 64-key block of a shuffled page
// pool into a swizzled shared-memory stage through TMA; the kernel writes the stage back in (key, column) order so the
// test can compare it with the cache. The split-KV combine at 512 columns is tested in test_combine.cpp.
#include "gpu/mla_parts.h"

#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/gemm/collective/builders/sm90_common.inl>

#include "kernels/collective/paged_kv_source.hpp"

namespace fmha::testing {
namespace {

using namespace cute;
using Element = cutlass::bfloat16_t;
constexpr int kBlockN = 64, kRow = 576, kBoxRows = 16, kAtomCols = 64;
using SmemAtom = decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, Int<kBlockN>,
                                                                                Int<kRow>>());
using SmemLayout = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kRow>>{}));
using SmemLayoutBox =
    decltype(composition(SmemLayout{}, Layout<Shape<Int<kBoxRows>, Int<kRow>>, Stride<_1, Int<kBlockN>>>{}));
using GmemShape = Shape<int32_t, int32_t, int32_t, int32_t>;  // (page rows, row, heads, pages)
using GmemStride = Stride<int64_t, _1, int64_t, int64_t>;
using GmemTensor =
    decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), make_layout(GmemShape{}, GmemStride{})));
using Tma = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutBox{}, Shape<Int<kBoxRows>, Int<kRow>>{},
                                   _1{}));
constexpr uint32_t kStageBytes = kBlockN * kRow * sizeof(Element);

struct Params {
  Tma tma;
  GmemShape shape;
  const int* table_row;
  int pages_per_seq, page_size, num_pages, k_begin;
  Element* out;  // [kBlockN][kRow]
};

__global__ void paged_block_kernel(CUTE_GRID_CONSTANT Params const p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  Element* stage = reinterpret_cast<Element*>(smem_raw);
  __shared__ uint64_t barrier;
  if (threadIdx.x == 0) {
    cutlass::arch::ClusterTransactionBarrier::init(&barrier, 1);
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  Tensor mK = p.tma.get_tma_tensor(p.shape);
  using Source = fmha::kernel::PagedKVSource<kBlockN, kBoxRows, kRow, kAtomCols, SmemLayoutBox, Element, Tma, Tma,
                                             decltype(mK), decltype(mK)>;
  const Source src{p.tma, p.tma, mK, mK, stage, stage, p.table_row, p.pages_per_seq, p.page_size, p.num_pages,
                   p.k_begin, 0};
  if (threadIdx.x == 0) {
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&barrier, kStageBytes);
    src.load_k(0, 0, barrier);
  }
  cutlass::arch::ClusterTransactionBarrier::wait(&barrier, 0);
  Tensor s = make_tensor(make_smem_ptr(stage), SmemLayout{});
  for (int i = threadIdx.x; i < kBlockN * kRow; i += blockDim.x) p.out[i] = s(i / kRow, i % kRow);
}

}  // namespace

cudaError_t mla_paged_block_load(const void* cache, int num_pages, int page_size, const int* table_row,
                                 int pages_per_seq, int k_begin, void* out) {
  Params p{};
  auto m = make_tensor(make_gmem_ptr(static_cast<Element const*>(cache)),
                       make_layout(GmemShape{page_size, kRow, 1, num_pages},
                                   GmemStride{int64_t(kRow), _1{}, int64_t(kRow) * page_size,
                                              int64_t(kRow) * page_size}));
  p.tma = make_tma_copy(SM90_TMA_LOAD{}, m, SmemLayoutBox{}, Shape<Int<kBoxRows>, Int<kRow>>{}, _1{});
  p.shape = m.shape();
  p.table_row = table_row;
  p.pages_per_seq = pages_per_seq, p.page_size = page_size, p.num_pages = num_pages, p.k_begin = k_begin;
  p.out = static_cast<Element*>(out);
  cudaError_t e = cudaFuncSetAttribute(paged_block_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kStageBytes));
  if (e != cudaSuccess) return e;
  paged_block_kernel<<<1, 128, kStageBytes>>>(p);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return cudaDeviceSynchronize();
}

}  // namespace fmha::testing
