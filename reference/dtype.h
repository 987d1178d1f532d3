// fmha CPU reference: exact rounding and bit conversions for the element types of include/fmha/types.h.
//
// Plain C++ (no CUDA headers). Every conversion rounds to nearest, ties to even (RNE), the default rounding of the
// CUDA conversion intrinsics, and handles subnormals exactly. The tools use these functions to fill device buffers,
// so a value converted here and one converted on the device agree bit for bit.
//
// Formats (exponent bits / mantissa bits / bias, largest finite value):
//   fp16  IEEE binary16      5 / 10 / 15   65504          subnormals down to 2^-24,  has ±inf
//   bf16  bfloat16           8 /  7 / 127  ≈ 3.3895e38    subnormals down to 2^-133, has ±inf
//   e4m3  OCP fp8 e4m3fn     4 /  3 / 7    448            subnormals down to 2^-9,   NO inf; NaN = S.1111.111
//   e5m2  OCP fp8 e5m2       5 /  2 / 15   57344          subnormals down to 2^-16,  has ±inf
//   fp32  IEEE binary32      identity
//
// Overflow: a value whose RNE result (computed as if the exponent range were unbounded) exceeds the largest finite
// value becomes ±inf for fp16, bf16 and e5m2 (IEEE behaviour: e.g. fp16 65519.99 → 65504, 65520 → inf).
// e4m3fn has no inf: we follow the OCP spec's NON-saturating conversion (and PyTorch's float8_e4m3fn cast, and
// __nv_cvt_float_to_fp8 with __NV_NOSAT): such values, and ±inf, become NaN. So 464 (the tie between 448 and the
// non-existent 480) rounds to 448, anything above 464 gives NaN.
// NaN in gives NaN out for every type (sign kept; fp16/bf16 keep the leading payload bits and set the quiet bit).
// Zero and values that round to zero keep their sign.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fmha/types.h"

namespace fmha::ref {

/// Rounds x to the nearest value representable in type t (RNE, subnormals included) and returns it as a float.
/// fp32 is the identity. Overflow/NaN rules as in the file comment. Never throws.
float round_to(DType t, float x);

/// round_to(t, ·) applied in place to p[0 .. n). p may be null when n == 0.
void round_all(DType t, float* p, std::size_t n);

/// float → IEEE binary16 bits (RNE; overflow → ±inf 0x7C00/0xFC00; NaN → quiet NaN keeping sign and top payload).
uint16_t float_to_half_bits(float x);
/// IEEE binary16 bits → float (exact; subnormals, ±inf and NaN decoded).
float half_bits_to_float(uint16_t bits);

/// float → bfloat16 bits (RNE; overflow → ±inf; NaN stays NaN even when its payload sits only in the low 16 bits).
uint16_t float_to_bf16_bits(float x);
/// bfloat16 bits → float (exact: the bits are the top half of the float).
float bf16_bits_to_float(uint16_t bits);

/// float → fp8 bits for t = kFP8E4M3 or kFP8E5M2 (RNE; e4m3: out of range or ±inf → NaN 0x7F/0xFF;
/// e5m2: overflow → ±inf 0x7C/0xFC, NaN → 0x7E/0xFE).
/// Throws std::invalid_argument when t is not an fp8 type.
uint8_t float_to_fp8_bits(DType t, float x);
/// fp8 bits → float (exact). Throws std::invalid_argument when t is not an fp8 type.
float fp8_bits_to_float(DType t, uint8_t bits);

/// Largest finite value of type t (65504, ≈3.3895e38, 448, 57344, FLT_MAX).
double max_finite(DType t);

/// Unit in the last place of type t at magnitude |x|: 2^(max(floor(log2|x|), emin) − mantissa_bits), where emin is
/// the smallest normal exponent (fp16 −14, bf16 −126, e4m3 −6, e5m2 −14, fp32 −126). For x = 0 (or a subnormal
/// magnitude) this is the spacing of the subnormals. For non-finite x the result is +inf.
double ulp(DType t, double x);

}  // namespace fmha::ref
