// The (rows, head dim, heads, batch) view of a caller's BSHD (or packed varlen) tensor that the kernels' TMA
// descriptors are made from, shared by the forward's and the backward's launches.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

namespace fmha::device {

/// A (rows, head_dim, heads, batches) CuTe tensor over `ptr` with strides (rs, 1, hs, bs) in elements, for
/// make_tma_copy. Varlen tensors are one packed "batch" (batches = 1). TMA descriptors need every extent ≥ 1 and
/// non-zero strides: a tensor with no rows gets a one-row view that is never loaded, and modes of extent 1 get a
/// harmless stride.
template <class Element, class Shape, class Stride>
auto bshd_gmem_view(const void* ptr, int rows, int head_dim, int heads, int batches, int64_t rs, int64_t hs,
                    int64_t bs) {
  using namespace cute;
  if (rows == 0) {  // never loaded (no tile reads it): any valid layout will do
    rows = 1;
    hs = bs = rs;
  }
  if (heads == 1 && hs == 0) hs = rs * rows;
  if (batches == 1) bs = rs * rows;
  return make_tensor(make_gmem_ptr(static_cast<Element const*>(ptr)),
                     make_layout(Shape{rows, head_dim, heads, batches}, Stride{rs, _1{}, hs, bs}));
}

}  // namespace fmha::device
