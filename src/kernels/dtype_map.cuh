// Maps the public DType enum to CUTLASS element types.
#pragma once

#include <cutlass/numeric_types.h>

#include "fmha/types.h"

namespace fmha::kernel {

template <DType T> struct ElementOf;
template <> struct ElementOf<DType::kFP16> { using type = cutlass::half_t; };
template <> struct ElementOf<DType::kBF16> { using type = cutlass::bfloat16_t; };
template <> struct ElementOf<DType::kFP8E4M3> { using type = cutlass::float_e4m3_t; };
template <> struct ElementOf<DType::kFP8E5M2> { using type = cutlass::float_e5m2_t; };

template <DType T>
using element_t = typename ElementOf<T>::type;

}  // namespace fmha::kernel
