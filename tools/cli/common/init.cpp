// fmha CLI core: init styles (see init.h).
#include "common/init.h"

#include <cmath>

namespace fmha::cli {

InitParams InitParams::mla() {
  InitParams p;
  p.mean = -1.0;
  p.s_chunk = 64;
  p.s_modulo = 9;
  return p;
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double normal_at(uint64_t seed, uint64_t index) {
  // Two independent uniforms from two hashes of (seed, index); u1 in (0, 1] so that log(u1) is finite.
  const uint64_t base = mix64(seed ^ 0x243f6a8885a308d3ull) + 2 * index;
  const double u1 = (static_cast<double>(mix64(base) >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(mix64(base + 1) >> 11) * 0x1.0p-53;
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

bool is_init_style(char code) {
  switch (code) {
    case 'r': case '1': case '0': case 'd': case 's': case 'l': case 'n': return true;
    default: return false;
  }
}

std::string init_buffer(float* data, size_t n, char code, const InitParams& p) {
  switch (code) {
    case 'r':
      for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(p.mean + p.stddev * normal_at(p.seed, i));
      return "";
    case 'l':
      for (size_t i = 0; i < n; ++i) {
        data[i] = static_cast<float>(p.large_mean + p.large_stddev * normal_at(p.seed, i));
      }
      return "";
    case '1':
      for (size_t i = 0; i < n; ++i) data[i] = 1.0f;
      return "";
    case '0':
      for (size_t i = 0; i < n; ++i) data[i] = 0.0f;
      return "";
    case 'd': {
      const size_t chunk = static_cast<size_t>(p.d_chunk > 0 ? p.d_chunk : 1);
      const size_t mod = static_cast<size_t>(p.d_modulo > 0 ? p.d_modulo : 1);
      for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>((i % chunk) % mod);
      return "";
    }
    case 's': {
      const size_t chunk = static_cast<size_t>(p.s_chunk > 0 ? p.s_chunk : 1);
      const size_t mod = static_cast<size_t>(p.s_modulo > 0 ? p.s_modulo : 1);
      for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>((i / chunk) % mod);
      return "";
    }
    case 'n':
      return "";
    default:
      return std::string("init style: expected one of r|1|0|d|s|l|n, got \"") + code + "\"";
  }
}

char init_style_for(const ParsedOptions& o, const std::string& tensor) {
  const std::string specific = "init-style-" + tensor;
  if (o.declared(specific)) {
    if (const auto c = o.find_char(specific)) return *c;
  }
  if (o.declared("init-style")) {
    if (const auto c = o.find_char("init-style")) return *c;
  }
  return 'r';
}

}  // namespace fmha::cli
