// Small helpers shared by the CPU reference tests.
#pragma once

#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace fmha::testutil {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// n values drawn uniformly from [-1, 1) with generator g.
inline std::vector<float> random_vec(size_t n, std::mt19937& g) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

}  // namespace fmha::testutil
