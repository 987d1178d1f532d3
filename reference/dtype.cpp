// fmha CPU reference: exact rounding and bit conversions (see dtype.h for the rules).
//
// One generic implementation serves all narrow formats. A format is (exponent bits, mantissa bits, bias, whether
// the all-ones exponent encodes inf/NaN IEEE-style). Rounding works on the magnitude in double, where every step is
// exact: the quantum at magnitude a is q = 2^(max(floor(log2 a), emin) − mbits), a/q is an exact double below 2^25,
// and it is rounded to an integer with ties to even by hand (independent of the FPU rounding mode).
#include "reference/dtype.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace fmha::ref {
namespace {

struct Format {
  int ebits;
  int mbits;
  int bias;
  bool ieee;  ///< true: exponent all-ones means inf (mantissa 0) or NaN. false (e4m3fn): only S.1111.111 is NaN.
  int emin() const { return 1 - bias; }
  uint32_t exp_mask() const { return (1u << ebits) - 1u; }
  uint32_t sign_bit() const { return 1u << (ebits + mbits); }
  double max_finite() const {
    // IEEE-like: largest exponent is all-ones − 1, mantissa all ones. e4m3fn: exponent all ones, mantissa 110.
    const int emax = ieee ? static_cast<int>(exp_mask()) - 1 - bias : static_cast<int>(exp_mask()) - bias;
    const double mant = ieee ? 2.0 - std::ldexp(1.0, -mbits) : 2.0 - std::ldexp(1.0, 1 - mbits);
    return std::ldexp(mant, emax);
  }
};

constexpr Format kHalf{5, 10, 15, true};
constexpr Format kBf16{8, 7, 127, true};
constexpr Format kE4M3{4, 3, 7, false};
constexpr Format kE5M2{5, 2, 15, true};
constexpr Format kFloat{8, 23, 127, true};

Format format_of(DType t) {
  switch (t) {
    case DType::kFP16: return kHalf;
    case DType::kBF16: return kBf16;
    case DType::kFP8E4M3: return kE4M3;
    case DType::kFP8E5M2: return kE5M2;
    case DType::kFP32: return kFloat;
  }
  throw std::invalid_argument("dtype: unknown DType value " + std::to_string(static_cast<int>(t)));
}

/// Rounds y ≥ 0 (an exact double below 2^53) to an integer, ties to even.
double rint_even(double y) {
  const double fl = std::floor(y);
  const double frac = y - fl;
  if (frac > 0.5) return fl + 1.0;
  if (frac < 0.5) return fl;
  return std::fmod(fl, 2.0) == 0.0 ? fl : fl + 1.0;
}

/// RNE of a finite magnitude a ≥ 0 to format f with an unbounded exponent range (overflow is the caller's).
double round_magnitude(const Format& f, double a) {
  if (a == 0.0) return 0.0;
  int e = 0;
  std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1): floor(log2 a) = e − 1
  const int exponent = std::max(e - 1, f.emin());
  const double quantum = std::ldexp(1.0, exponent - f.mbits);
  return rint_even(a / quantum) * quantum;
}

/// Rounded value of x in format f, as a double (±inf / NaN per the format's overflow rule).
double round_value(const Format& f, float x) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return f.ieee ? x : std::numeric_limits<double>::quiet_NaN();
  double r = round_magnitude(f, std::fabs(static_cast<double>(x)));
  if (r > f.max_finite()) {
    r = f.ieee ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  }
  return std::copysign(r, static_cast<double>(x));
}

/// Bits of a value r that is exactly representable in f (or ±inf for IEEE-like formats); r must not be NaN.
uint32_t encode_exact(const Format& f, double r) {
  const uint32_t sign = std::signbit(r) ? f.sign_bit() : 0u;
  const double a = std::fabs(r);
  if (std::isinf(a)) return sign | (f.exp_mask() << f.mbits);
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);
  const int exponent = e - 1;
  if (exponent < f.emin()) {  // subnormal: a = M · 2^(emin − mbits)
    return sign | static_cast<uint32_t>(std::ldexp(a, f.mbits - f.emin()));
  }
  const uint32_t mant = static_cast<uint32_t>(std::ldexp(std::ldexp(a, -exponent) - 1.0, f.mbits));
  return sign | (static_cast<uint32_t>(exponent + f.bias) << f.mbits) | mant;
}

double decode(const Format& f, uint32_t bits) {
  const bool neg = (bits & f.sign_bit()) != 0;
  const uint32_t E = (bits >> f.mbits) & f.exp_mask();
  const uint32_t M = bits & ((1u << f.mbits) - 1u);
  double v = 0.0;
  if (E == f.exp_mask() && (f.ieee || M == (1u << f.mbits) - 1u)) {
    v = (f.ieee && M == 0) ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (E == 0) {
    v = std::ldexp(static_cast<double>(M), f.emin() - f.mbits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(M), -f.mbits), static_cast<int>(E) - f.bias);
  }
  return neg ? -v : v;
}

uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

const Format& fp8_format(DType t, const char* fn) {
  if (t == DType::kFP8E4M3) return kE4M3;
  if (t == DType::kFP8E5M2) return kE5M2;
  throw std::invalid_argument(std::string(fn) + ": t: expected e4m3 or e5m2, got " + to_string(t));
}

}  // namespace

float round_to(DType t, float x) {
  if (t == DType::kFP32) return x;
  // Fast paths (the reference calls this for every element it reads): RNE on the float's bits, for the inputs
  // where that is exact: bf16 for finite x; fp16 for |x| in the fp16 normal range whose result stays finite.
  // Everything else (NaN, inf, fp16 subnormals and overflow, fp8) takes the general routine.
  if (t == DType::kBF16 && std::isfinite(x)) {
    uint32_t b = float_bits(x);
    b += 0x7FFFu + ((b >> 16) & 1u);
    b &= 0xFFFF0000u;
    float r;
    std::memcpy(&r, &b, sizeof r);
    return r;
  }
  if (t == DType::kFP16) {
    const float a = std::fabs(x);
    if (a >= 6.103515625e-05f && a <= 65504.f) {  // [2^-14, max finite]
      uint32_t b = float_bits(x);
      b += 0xFFFu + ((b >> 13) & 1u);
      b &= ~0x1FFFu;
      float r;
      std::memcpy(&r, &b, sizeof r);
      if (std::fabs(r) <= 65504.f) return r;
    }
  }
  return static_cast<float>(round_value(format_of(t), x));
}

void round_all(DType t, float* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) p[i] = round_to(t, p[i]);
}

uint16_t float_to_half_bits(float x) {
  if (std::isnan(x)) {
    const uint32_t u = float_bits(x);
    return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7E00u | ((u >> 13) & 0x03FFu));
  }
  return static_cast<uint16_t>(encode_exact(kHalf, round_value(kHalf, x)));
}

float half_bits_to_float(uint16_t bits) { return static_cast<float>(decode(kHalf, bits)); }

uint16_t float_to_bf16_bits(float x) {
  if (std::isnan(x)) return static_cast<uint16_t>((float_bits(x) >> 16) | 0x0040u);  // force quiet: never inf
  return static_cast<uint16_t>(encode_exact(kBf16, round_value(kBf16, x)));
}

float bf16_bits_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

uint8_t float_to_fp8_bits(DType t, float x) {
  const Format& f = fp8_format(t, "float_to_fp8_bits");
  const double r = round_value(f, x);
  if (std::isnan(r)) {
    const uint32_t sign = std::signbit(x) ? 0x80u : 0u;
    return static_cast<uint8_t>(sign | (f.ieee ? 0x7Eu : 0x7Fu));
  }
  return static_cast<uint8_t>(encode_exact(f, r));
}

float fp8_bits_to_float(DType t, uint8_t bits) {
  return static_cast<float>(decode(fp8_format(t, "fp8_bits_to_float"), bits));
}

double max_finite(DType t) {
  if (t == DType::kFP32) return FLT_MAX;
  return format_of(t).max_finite();
}

double ulp(DType t, double x) {
  if (!std::isfinite(x)) return std::numeric_limits<double>::infinity();
  const Format f = format_of(t);
  const double a = std::fabs(x);
  int exponent = f.emin();
  if (a > 0.0) {
    int e = 0;
    std::frexp(a, &e);
    exponent = std::max(e - 1, f.emin());
  }
  return std::ldexp(1.0, exponent - f.mbits);
}

}  // namespace fmha::ref
