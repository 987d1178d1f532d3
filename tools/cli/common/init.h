// fmha CLI core: the seed's tensor init styles (docs/seed.md §2.0), filling host float buffers deterministically.
//
// Random styles use a counter-based generator (splitmix64 of seed and element index, then Box-Muller), so the
// value of element i depends only on (seed, i): the same on every platform and standard library, and the same
// whether a buffer is filled whole or in pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/options.h"

namespace fmha::cli {

/// Parameters of init_buffer. The defaults are the seed's non-MLA ones; mla() returns the MLA ones.
struct InitParams {
  double mean = 0.0;        ///< 'r': Gaussian mean (MLA: −1)
  double stddev = 1.0;      ///< 'r': Gaussian standard deviation
  uint64_t seed = 2023;     ///< 'r' and 'l': generator seed; use a different seed per tensor
  int d_chunk = 128;        ///< 'd': value = (index within chunk) % d_modulo
  int d_modulo = 4;
  int s_chunk = 128;        ///< 's': value = (chunk index) % s_modulo
  int s_modulo = 4;
  double large_mean = -1.0;     ///< 'l': Gaussian mean
  double large_stddev = 100.0;  ///< 'l': Gaussian standard deviation

  /// The MLA variant: 'r' has mean −1, 's' uses % 9 per 64-element chunk.
  static InitParams mla();
};

/// Fills data[0, n) according to the init style `code`:
///   'r' Gaussian(mean, stddev); '1' ones; '0' zeros; 'd' (i % d_chunk) % d_modulo;
///   's' (i / s_chunk) % s_modulo; 'l' Gaussian(large_mean, large_stddev); 'n' leaves the buffer as is.
/// Returns "" on success, or `init style: expected one of r|1|0|d|s|l|n, got "x"` for an unknown code (the
/// buffer is then untouched). Deterministic for a given (code, params).
std::string init_buffer(float* data, size_t n, char code, const InitParams& params = {});

/// True when `code` is one of the styles init_buffer knows.
bool is_init_style(char code);

/// The init style for one tensor: --init-style-<tensor> when given, else --init-style, else 'r'.
/// `tensor` is the suffix ("q", "k", "cache-k", ...); options that the table does not declare are skipped.
char init_style_for(const ParsedOptions& options, const std::string& tensor);

/// splitmix64 finaliser: a well-mixed 64-bit hash of x.
uint64_t mix64(uint64_t x);

/// Standard normal sample number `index` of stream `seed` (counter-based: no state, any order).
double normal_at(uint64_t seed, uint64_t index);

}  // namespace fmha::cli
