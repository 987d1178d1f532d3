// fmha CPU reference: strided host views over float data.
//
// Plain C++ (no CUDA). The reference stores every tensor as float (or double) on the host; values that a kernel
// would hold in fp16/bf16/fp8 are kept already rounded to that type (see dtype.h). Addressing follows the
// library's device layouts so that the same strides can be handed to the kernels and to the reference:
//
//   element (b, i, h, d) of a [token][head][dim] tensor lives at
//     data[b * stride_batch + (row_offset(b) + i) * stride_row + h * stride_head + d]
//   with row_offset(b) = cu_seqlens ? cu_seqlens[b] : 0.
//
// Dense BSHD: stride_batch = S*H*D, stride_row = H*D, stride_head = D, cu_seqlens = null.
// Varlen (packed [total][H][D]): stride_batch = 0, cu_seqlens = cumulative lengths (B+1 entries, cu[0] = 0).
// BHSD (the seed's backward layout): stride_batch = H*S*D, stride_head = S*D, stride_row = D.
#pragma once

#include <cstdint>
#include <vector>

namespace fmha::ref {

/// Strided view of a [batch][token][head][dim] tensor (see file comment). All strides are in elements.
template <typename T>
struct View {
  T* data = nullptr;
  int64_t stride_batch = 0;
  int64_t stride_row = 0;
  int64_t stride_head = 0;
  const int* cu_seqlens = nullptr;  ///< optional [B+1] row offsets (varlen); null for dense

  T& at(int b, int i, int h, int d) const {
    const int64_t row = (cu_seqlens ? cu_seqlens[b] : 0) + static_cast<int64_t>(i);
    return data[b * stride_batch + row * stride_row + h * stride_head + d];
  }
};

using ConstView = View<const float>;
using MutView = View<float>;

/// Dense BSHD view: tensor [B][S][H][D].
template <typename T>
View<T> bshd(T* data, int S, int H, int D) {
  View<T> v;
  v.data = data;
  v.stride_row = static_cast<int64_t>(H) * D;
  v.stride_head = D;
  v.stride_batch = static_cast<int64_t>(S) * H * D;
  return v;
}

/// Packed varlen view: tensor [total][H][D] with cumulative lengths cu[B+1].
template <typename T>
View<T> packed(T* data, int H, int D, const int* cu) {
  View<T> v;
  v.data = data;
  v.stride_row = static_cast<int64_t>(H) * D;
  v.stride_head = D;
  v.stride_batch = 0;
  v.cu_seqlens = cu;
  return v;
}

/// Cumulative lengths [0, l0, l0+l1, ...] of a list of lengths.
inline std::vector<int> cumulative(const std::vector<int>& lengths) {
  std::vector<int> cu(lengths.size() + 1, 0);
  for (size_t b = 0; b < lengths.size(); ++b) cu[b + 1] = cu[b] + lengths[b];
  return cu;
}

}  // namespace fmha::ref
