// Tests of reference/dtype.h: exact RNE rounding and bit conversions for fp16, bf16, fp8 e4m3fn / e5m2.
//
// Besides literal bit patterns, every narrow format is checked exhaustively against an independent table built in
// this file from the format's definition (value of each bit pattern), including every rounding midpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "reference/dtype.h"

namespace {

using fmha::DType;
using namespace fmha::ref;

float bits_to_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// Format description written independently of dtype.cpp.
struct Fmt {
  DType type;
  int ebits, mbits, bias;
  bool e4m3fn;  // only S.1111.111 is NaN; no inf
};
const Fmt kFormats[] = {{DType::kFP16, 5, 10, 15, false},
                        {DType::kBF16, 8, 7, 127, false},
                        {DType::kFP8E4M3, 4, 3, 7, true},
                        {DType::kFP8E5M2, 5, 2, 15, false}};

/// Non-negative finite values of the format, indexed by their bit pattern (0 .. count−1), ascending.
std::vector<double> positive_table(const Fmt& f) {
  std::vector<double> v;
  const int emax_field = (1 << f.ebits) - 1;
  for (int e = 0; e <= emax_field; ++e) {
    for (int m = 0; m < (1 << f.mbits); ++m) {
      if (!f.e4m3fn && e == emax_field) return v;                      // inf / NaN
      if (f.e4m3fn && e == emax_field && m == (1 << f.mbits) - 1) return v;  // NaN
      const double frac = double(m) / double(1 << f.mbits);
      v.push_back(e == 0 ? frac * std::pow(2.0, 1 - f.bias) : (1.0 + frac) * std::pow(2.0, e - f.bias));
    }
  }
  return v;
}

uint32_t to_bits(DType t, float x) {
  switch (t) {
    case DType::kFP16: return float_to_half_bits(x);
    case DType::kBF16: return float_to_bf16_bits(x);
    default: return float_to_fp8_bits(t, x);
  }
}
float from_bits(DType t, uint32_t b) {
  switch (t) {
    case DType::kFP16: return half_bits_to_float(uint16_t(b));
    case DType::kBF16: return bf16_bits_to_float(uint16_t(b));
    default: return fp8_bits_to_float(t, uint8_t(b));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Literal bit patterns
// ---------------------------------------------------------------------------------------------------------------

TEST(DType, HalfKnownPatterns) {
  const struct { float v; uint16_t bits; } cases[] = {
      {1.0f, 0x3C00}, {-2.0f, 0xC000}, {65504.0f, 0x7BFF}, {std::ldexp(1.0f, -24), 0x0001},
      {std::ldexp(1.0f, -14), 0x0400}, {1023 * std::ldexp(1.0f, -24), 0x03FF}, {1.0f + std::ldexp(1.0f, -10), 0x3C01},
      {0.5f, 0x3800}, {0.0f, 0x0000}, {-0.0f, 0x8000}, {std::numeric_limits<float>::infinity(), 0x7C00},
      {-std::numeric_limits<float>::infinity(), 0xFC00}};
  for (const auto& c : cases) {
    EXPECT_EQ(float_to_half_bits(c.v), c.bits) << c.v;
    EXPECT_EQ(half_bits_to_float(c.bits), c.v) << std::hex << c.bits;
    EXPECT_EQ(std::signbit(half_bits_to_float(c.bits)), std::signbit(c.v));
  }
}

TEST(DType, HalfTiesToEvenAndOverflow) {
  const float one = 1.0f, u = std::ldexp(1.0f, -10);  // ulp at 1
  EXPECT_EQ(round_to(DType::kFP16, one + u / 2), one);                 // tie → even (1.0)
  EXPECT_EQ(round_to(DType::kFP16, one + 3 * u / 2), one + 2 * u);     // tie → even (mantissa 2)
  EXPECT_EQ(round_to(DType::kFP16, std::nextafter(one + u / 2, 2.0f)), one + u);
  EXPECT_EQ(round_to(DType::kFP16, 65519.99f), 65504.0f);
  EXPECT_TRUE(std::isinf(round_to(DType::kFP16, 65520.0f)));           // tie between 65504 and 2^16 → inf
  EXPECT_EQ(float_to_half_bits(-65520.0f), 0xFC00);
  const float sub = std::ldexp(1.0f, -24);
  EXPECT_EQ(round_to(DType::kFP16, sub / 2), 0.0f);                    // tie between 0 and 2^-24 → 0
  EXPECT_TRUE(std::signbit(round_to(DType::kFP16, -sub / 2)));         // −0 keeps its sign
  EXPECT_EQ(round_to(DType::kFP16, 3 * sub / 2), 2 * sub);             // tie → even
  EXPECT_EQ(round_to(DType::kFP16, std::nextafter(sub / 2, 1.0f)), sub);
}

TEST(DType, HalfNaN) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const uint16_t b = float_to_half_bits(qnan);
  EXPECT_EQ(b & 0x7C00, 0x7C00);
  EXPECT_NE(b & 0x03FF, 0);
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7E00)));
  EXPECT_TRUE(std::isnan(half_bits_to_float(0xFC01)));
  EXPECT_TRUE(std::isnan(round_to(DType::kFP16, qnan)));
  // A NaN whose payload sits only in the low float bits must still be a NaN after conversion.
  const float low_payload = bits_to_float(0x7F800001u);
  ASSERT_TRUE(std::isnan(low_payload));
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(low_payload))));
}

TEST(DType, Bf16KnownPatternsTiesAndNaN) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(bf16_bits_to_float(0x3F80), 1.0f);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xC000);
  const float u = std::ldexp(1.0f, -7);
  EXPECT_EQ(round_to(DType::kBF16, 1.0f + u / 2), 1.0f);                     // tie → even
  EXPECT_EQ(round_to(DType::kBF16, 1.0f + 3 * u / 2), 1.0f + 2 * u);         // tie → even
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * u / 2), 0x3F82);
  EXPECT_EQ(round_to(DType::kBF16, std::nextafter(1.0f + u / 2, 2.0f)), 1.0f + u);
  // Largest finite bf16 is 0x7F7F; FLT_MAX lies above the overflow threshold and becomes inf.
  EXPECT_EQ(bf16_bits_to_float(0x7F7F), (2.0f - u) * std::ldexp(1.0f, 127));
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::max()), 0xFF80);
  // NaN preserved, also when the payload is only in the low 16 bits (plain truncation would give inf).
  const float low_payload = bits_to_float(0x7F800001u);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(low_payload))));
  EXPECT_TRUE(std::isnan(round_to(DType::kBF16, low_payload)));
  EXPECT_TRUE(std::isnan(round_to(DType::kBF16, -std::numeric_limits<float>::quiet_NaN())));
  // Smallest subnormal 2^-133.
  EXPECT_EQ(float_to_bf16_bits(std::ldexp(1.0f, -133)), 0x0001);
  EXPECT_EQ(round_to(DType::kBF16, std::ldexp(1.0f, -134)), 0.0f);  // tie → even (0)
}

TEST(DType, E4M3KnownPatternsAndNonSaturatingOverflow) {
  const DType t = DType::kFP8E4M3;
  EXPECT_EQ(float_to_fp8_bits(t, 448.0f), 0x7E);
  EXPECT_EQ(fp8_bits_to_float(t, 0x7E), 448.0f);
  EXPECT_EQ(float_to_fp8_bits(t, -448.0f), 0xFE);
  EXPECT_EQ(float_to_fp8_bits(t, 1.0f), 0x38);
  EXPECT_EQ(float_to_fp8_bits(t, std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(float_to_fp8_bits(t, std::ldexp(1.0f, -6)), 0x08);  // smallest normal
  EXPECT_EQ(round_to(t, std::ldexp(1.0f, -10)), 0.0f);            // tie → even (0)
  EXPECT_EQ(round_to(t, 464.0f), 448.0f);                         // tie between 448 and (absent) 480 → 448
  EXPECT_TRUE(std::isnan(round_to(t, 465.0f)));                   // non-saturating: out of range → NaN
  EXPECT_EQ(float_to_fp8_bits(t, 1000.0f), 0x7F);
  EXPECT_EQ(float_to_fp8_bits(t, -1000.0f), 0xFF);
  EXPECT_EQ(float_to_fp8_bits(t, std::numeric_limits<float>::infinity()), 0x7F);  // no inf in e4m3fn
  EXPECT_TRUE(std::isnan(round_to(t, -std::numeric_limits<float>::infinity())));
  EXPECT_EQ(float_to_fp8_bits(t, std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_TRUE(std::isnan(fp8_bits_to_float(t, 0x7F)));
  EXPECT_TRUE(std::isnan(fp8_bits_to_float(t, 0xFF)));
  EXPECT_EQ(fp8_bits_to_float(t, 0x78), 256.0f);  // exponent field 15 is a normal exponent in e4m3fn
}

TEST(DType, E5M2KnownPatternsAndOverflow) {
  const DType t = DType::kFP8E5M2;
  EXPECT_EQ(float_to_fp8_bits(t, 57344.0f), 0x7B);
  EXPECT_EQ(fp8_bits_to_float(t, 0x7B), 57344.0f);
  EXPECT_EQ(float_to_fp8_bits(t, 1.0f), 0x3C);
  EXPECT_EQ(float_to_fp8_bits(t, std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(float_to_fp8_bits(t, std::numeric_limits<float>::infinity()), 0x7C);
  EXPECT_EQ(float_to_fp8_bits(t, -std::numeric_limits<float>::infinity()), 0xFC);
  EXPECT_EQ(float_to_fp8_bits(t, 61439.0f), 0x7B);  // below the overflow threshold
  EXPECT_EQ(float_to_fp8_bits(t, 61440.0f), 0x7C);  // 57344 + half ulp: tie → even → inf
  EXPECT_EQ(round_to(t, 1.0f + 0.125f), 1.0f);       // tie between 1 and 1.25 → even (1)
  EXPECT_EQ(round_to(t, 1.0f + 0.375f), 1.5f);       // tie between 1.25 and 1.5 → even (1.5)
  const uint8_t nb = float_to_fp8_bits(t, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nb & 0x7C, 0x7C);
  EXPECT_NE(nb & 0x03, 0);
  EXPECT_TRUE(std::isnan(fp8_bits_to_float(t, 0x7D)));
  EXPECT_TRUE(std::isinf(fp8_bits_to_float(t, 0xFC)));
}

TEST(DType, Fp32IsIdentityAndFp8RejectsOtherTypes) {
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1e30f, 1e30f);
  for (int i = 0; i < 1000; ++i) {
    const float x = u(g);
    EXPECT_EQ(round_to(DType::kFP32, x), x);
  }
  EXPECT_TRUE(std::isnan(round_to(DType::kFP32, std::numeric_limits<float>::quiet_NaN())));
  EXPECT_THROW(float_to_fp8_bits(DType::kFP16, 1.0f), std::invalid_argument);
  EXPECT_THROW(fp8_bits_to_float(DType::kBF16, 0x38), std::invalid_argument);
}

TEST(DType, RoundAllMatchesRoundTo) {
  std::mt19937 g(11);
  std::normal_distribution<float> n(0.0f, 100.0f);
  for (DType t : {DType::kFP16, DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2}) {
    std::vector<float> v(257), w;
    for (float& x : v) x = n(g);
    w = v;
    round_all(t, w.data(), w.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const float r = round_to(t, v[i]);
      EXPECT_TRUE(w[i] == r || (std::isnan(w[i]) && std::isnan(r)));
    }
  }
  round_all(DType::kFP16, nullptr, 0);
}

TEST(DType, MaxFiniteAndUlp) {
  EXPECT_EQ(max_finite(DType::kFP16), 65504.0);
  EXPECT_EQ(max_finite(DType::kFP8E4M3), 448.0);
  EXPECT_EQ(max_finite(DType::kFP8E5M2), 57344.0);
  EXPECT_EQ(max_finite(DType::kBF16), (2.0 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 127));
  EXPECT_EQ(max_finite(DType::kFP32), double(std::numeric_limits<float>::max()));
  EXPECT_EQ(ulp(DType::kFP16, 1.0), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp(DType::kFP16, 1.999), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp(DType::kFP16, -1000.0), std::ldexp(1.0, -1));
  EXPECT_EQ(ulp(DType::kFP16, 0.0), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp(DType::kBF16, 1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp(DType::kFP8E4M3, 448.0), 32.0);
  EXPECT_EQ(ulp(DType::kFP32, 1.0), std::ldexp(1.0, -23));
  EXPECT_TRUE(std::isinf(ulp(DType::kFP16, std::numeric_limits<double>::infinity())));
}

// ---------------------------------------------------------------------------------------------------------------
// Exhaustive checks against the independent table
// ---------------------------------------------------------------------------------------------------------------

TEST(DType, EveryFiniteBitPatternRoundTrips) {
  for (const Fmt& f : kFormats) {
    const std::vector<double> table = positive_table(f);
    const uint32_t sign = 1u << (f.ebits + f.mbits);
    for (uint32_t bits = 0; bits < table.size(); ++bits) {
      const float v = static_cast<float>(table[bits]);
      ASSERT_EQ(double(v), table[bits]);
      EXPECT_EQ(from_bits(f.type, bits), v) << fmha::to_string(f.type) << " bits " << bits;
      EXPECT_EQ(from_bits(f.type, bits | sign), -v) << fmha::to_string(f.type) << " bits " << bits;
      EXPECT_EQ(to_bits(f.type, v), bits) << fmha::to_string(f.type) << " value " << v;
      EXPECT_EQ(to_bits(f.type, -v), bits | sign) << fmha::to_string(f.type) << " value " << -v;
      EXPECT_EQ(round_to(f.type, v), v);
    }
    // Every remaining pattern (exponent all ones) decodes to inf or NaN and re-encodes to the same class.
    for (uint32_t bits = static_cast<uint32_t>(table.size()); bits < sign; ++bits) {
      const float x = from_bits(f.type, bits);
      EXPECT_FALSE(std::isfinite(x)) << fmha::to_string(f.type) << " bits " << bits;
      if (std::isinf(x)) {
        EXPECT_EQ(to_bits(f.type, x), bits);
      } else {
        EXPECT_TRUE(std::isnan(from_bits(f.type, to_bits(f.type, x))));
      }
    }
  }
}

TEST(DType, EveryMidpointRoundsToEvenAndNeighboursToNearest) {
  for (const Fmt& f : kFormats) {
    std::vector<double> table = positive_table(f);
    // The value one step above the largest finite one, as if the exponent were unbounded; rounding to it means
    // overflow: inf for IEEE-like formats, NaN for e4m3fn.
    const double top_ulp = table.back() - table[table.size() - 2];
    table.push_back(table.back() + top_ulp);
    auto expect_rounds_to = [&](float x, size_t idx) {
      const float r = round_to(f.type, x);
      if (idx + 1 == table.size()) {
        if (f.e4m3fn) {
          EXPECT_TRUE(std::isnan(r)) << fmha::to_string(f.type) << " x=" << x;
        } else {
          EXPECT_TRUE(std::isinf(r) && (r > 0) == (x > 0)) << fmha::to_string(f.type) << " x=" << x;
        }
      } else {
        EXPECT_EQ(r, x > 0 ? float(table[idx]) : -float(table[idx])) << fmha::to_string(f.type) << " x=" << x;
      }
    };
    for (size_t i = 0; i + 1 < table.size(); ++i) {
      const double mid = 0.5 * (table[i] + table[i + 1]);
      const float fm = static_cast<float>(mid);
      ASSERT_EQ(double(fm), mid);  // midpoints are exact floats for all these formats
      const size_t even = (i % 2 == 0) ? i : i + 1;  // bit pattern = index: the even pattern wins a tie
      for (float s : {1.0f, -1.0f}) {
        expect_rounds_to(s * fm, even);
        expect_rounds_to(s * std::nextafter(fm, 0.0f), i);
        expect_rounds_to(s * std::nextafter(fm, std::numeric_limits<float>::infinity()), i + 1);
      }
    }
  }
}

}  // namespace
