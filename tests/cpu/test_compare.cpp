// Tests of the comparison policy (reference/compare.h): each rule must fail when it should and pass when it should.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/compare.h"

namespace {

using namespace fmha;
using namespace fmha::ref;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// ---------------------------------------------------------------------------------------------------------------
// compare_scaled
// ---------------------------------------------------------------------------------------------------------------

struct Scaled {
  std::vector<float> exact = {0.5f, -0.25f, 1.0f, 0.0f, kNaN, kInf, -kInf, 2.0f, 0.125f, -1.0f};
  std::vector<float> kernel = exact;
  std::vector<float> out = exact;
  Scaled() { kernel[2] = 1.0f + 1e-3f; }  // kernel-model error E = 1e-3 (at index 2)
  CompareResult run(double k = 2.0, double floor_abs = 0.0) const {
    return compare_scaled(out.data(), kernel.data(), exact.data(), int64_t(out.size()), k, floor_abs);
  }
};

TEST(CompareScaled, PassesOnExactMatchIncludingMatchingNonFinite) {
  Scaled c;
  const CompareResult r = c.run();
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.max_abs, 0.0);
  EXPECT_EQ(r.nonfinite_mismatches, 0);
  EXPECT_EQ(r.n, 10);
  EXPECT_TRUE(contains(r.message, "PASS")) << r.message;
}

TEST(CompareScaled, FailsOnNaNWhereReferenceIsFinite) {
  Scaled c;
  c.out[7] = kNaN;
  const CompareResult r = c.run(1e30, 1e30);  // no error bound can excuse a NaN
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.nonfinite_mismatches, 1);
  EXPECT_EQ(r.worst_index, 7);
  EXPECT_TRUE(contains(r.message, "index 7")) << r.message;
}

TEST(CompareScaled, FailsOnFiniteWhereReferenceIsNaNOrInf) {
  for (int idx : {4, 5, 6}) {
    Scaled c;
    c.out[idx] = 0.0f;
    const CompareResult r = c.run(1e30, 1e30);
    EXPECT_FALSE(r.ok) << "index " << idx;
    EXPECT_EQ(r.worst_index, idx);
  }
}

TEST(CompareScaled, FailsOnMinusInfVersusZeroAndOnSignOfInf) {
  Scaled c;
  c.out[3] = -kInf;  // reference 0
  CompareResult r = c.run(1e30, 1e30);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(contains(r.message, "index 3")) << r.message;
  Scaled d;
  d.out[5] = -kInf;  // reference +inf
  r = d.run(1e30, 1e30);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst_index, 5);
}

TEST(CompareScaled, ErrorBoundIsKTimesKernelErrorPlusFloor) {
  Scaled c;
  c.out[8] = 0.125f + 1.9e-3f;  // within 2 · 1e-3
  CompareResult r = c.run(2.0, 0.0);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.worst_index, 8);
  c.out[8] = 0.125f + 2.1e-3f;  // above 2 · 1e-3
  r = c.run(2.0, 0.0);
  EXPECT_FALSE(r.ok) << r.message;
  EXPECT_EQ(r.worst_index, 8);
  EXPECT_TRUE(contains(r.message, "worst index 8")) << r.message;
  EXPECT_NEAR(r.max_abs, 2.1e-3, 1e-7);
  EXPECT_NEAR(r.max_rel, 2.1e-3 / 0.125, 1e-5);
  r = c.run(3.0, 0.0);  // k = 3 (backward) admits it
  EXPECT_TRUE(r.ok) << r.message;
  r = c.run(2.0, 2e-4);  // or a floor of 2e-4
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(CompareScaled, FloorAloneWhenKernelModelIsExact) {
  Scaled c;
  c.kernel = c.exact;
  c.out[0] = 0.5f + 1e-6f;
  EXPECT_FALSE(c.run(2.0, 0.0).ok);
  EXPECT_TRUE(c.run(2.0, 1e-5).ok);
  // A non-finite kernel-model value does not widen the bound.
  c.kernel[1] = kInf;
  EXPECT_FALSE(c.run(2.0, 0.0).ok);
}

TEST(CompareScaled, MeanAndArgumentChecks) {
  const float out[] = {1.0f, 2.0f, 3.5f, 4.0f}, ref[] = {1.0f, 2.0f, 3.0f, 4.0f};
  const CompareResult r = compare_scaled(out, ref, ref, 4, 2.0, 1.0);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_DOUBLE_EQ(r.mean_abs, 0.5 / 4);
  EXPECT_TRUE(compare_scaled(nullptr, nullptr, nullptr, 0, 2.0, 0.0).ok);
  EXPECT_THROW(compare_scaled(out, ref, ref, -1, 2.0, 0.0), std::invalid_argument);
  EXPECT_THROW(compare_scaled(out, ref, ref, 4, -1.0, 0.0), std::invalid_argument);
  EXPECT_THROW(compare_scaled(out, ref, ref, 4, 2.0, std::nan("")), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------------------
// compare_fixed (the seed's rule)
// ---------------------------------------------------------------------------------------------------------------

TEST(CompareFixed, MatchingInfinitiesAreSkippedNaNFails) {
  const float ref[] = {kInf, -kInf, 1.0f, 0.0f};
  float out[] = {kInf, -kInf, 1.0f, 0.0f};
  EXPECT_TRUE(compare_fixed(out, ref, 4, 1e-2, 1e-3).ok);
  out[3] = kNaN;
  CompareResult r = compare_fixed(out, ref, 4, 1e30, 1e30);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst_index, 3);
  EXPECT_TRUE(contains(r.message, "index 3")) << r.message;
  out[3] = 0.0f;
  out[1] = 0.0f;  // −inf reference vs 0
  r = compare_fixed(out, ref, 4, 1e30, 1e30);
  EXPECT_FALSE(r.ok) << r.message;
  EXPECT_EQ(r.worst_index, 1);
  out[1] = kInf;  // −inf reference vs +inf
  EXPECT_FALSE(compare_fixed(out, ref, 4, 1e30, 1e30).ok);
}

TEST(CompareFixed, StrictMaxAndMeanOverAllElements) {
  std::vector<float> ref(10, 1.0f), out = ref;
  out[6] = 1.0f + 0.0078125f;  // diff 2^-7, exact in float
  CompareResult r = compare_fixed(out.data(), ref.data(), 10, 1e-2, 1e-3);
  EXPECT_TRUE(r.ok) << r.message;  // mean = 2^-7 / 10 = 7.8e-4 < 1e-3
  EXPECT_DOUBLE_EQ(r.mean_abs, 0.0078125 / 10);
  EXPECT_EQ(r.worst_index, 6);
  EXPECT_TRUE(contains(r.message, "worst index 6")) << r.message;
  r = compare_fixed(out.data(), ref.data(), 10, 0.0078125, 1.0);  // max must be strictly below the threshold
  EXPECT_FALSE(r.ok);
  r = compare_fixed(out.data(), ref.data(), 5 + 2, 1e-2, 1e-3);  // mean over 7 elements: 1.1e-3 ≥ 1e-3
  EXPECT_FALSE(r.ok) << r.message;
  EXPECT_TRUE(compare_fixed(nullptr, nullptr, 0, 1e-2, 1e-3).ok);
  EXPECT_THROW(compare_fixed(out.data(), ref.data(), -2, 1e-2, 1e-3), std::invalid_argument);
}

TEST(CompareFixed, SeedThresholds) {
  for (DType t : {DType::kFP16, DType::kBF16}) {
    for (bool bwd : {false, true}) {
      const FixedThresholds th = seed_thresholds(t, bwd);
      EXPECT_EQ(th.max, 1e-2);
      EXPECT_EQ(th.mean, 1e-3);
    }
  }
  for (DType t : {DType::kFP8E4M3, DType::kFP8E5M2}) {
    EXPECT_EQ(seed_thresholds(t, false).max, 1e-1);
    EXPECT_EQ(seed_thresholds(t, false).mean, 1e-1);
    EXPECT_EQ(seed_thresholds(t, true).max, 1.0);
    EXPECT_EQ(seed_thresholds(t, true).mean, 1e-1);
  }
  EXPECT_EQ(seed_thresholds(DType::kFP32, false).max, 1e-2);
}

TEST(CompareScaled, DefaultFloorIsTwoUlpsOfTheOutputType) {
  EXPECT_EQ(default_floor(DType::kFP16, 1.0), 2 * std::ldexp(1.0, -10));
  EXPECT_EQ(default_floor(DType::kFP16, 1.5), 2 * std::ldexp(1.0, -10));
  EXPECT_EQ(default_floor(DType::kFP16, 1000.0), 2 * std::ldexp(1.0, 9 - 10));
  EXPECT_EQ(default_floor(DType::kBF16, 1.0), 2 * std::ldexp(1.0, -7));
  EXPECT_EQ(default_floor(DType::kFP32, 1.0), 2 * std::ldexp(1.0, -23));
  EXPECT_EQ(default_floor(DType::kFP16, 0.0), 2 * std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isinf(default_floor(DType::kFP16, kInf)));
}

}  // namespace
