// fmha: version of the library. The CMake project reads its version from the three macros below, so this header is
// the one place a release changes.
#pragma once

#define FMHA_VERSION_MAJOR 0
#define FMHA_VERSION_MINOR 1
#define FMHA_VERSION_PATCH 0

/// The version as one integer, major·10000 + minor·100 + patch (0.1.0 → 100), for `#if FMHA_VERSION >= …`.
#define FMHA_VERSION (FMHA_VERSION_MAJOR * 10000 + FMHA_VERSION_MINOR * 100 + FMHA_VERSION_PATCH)

namespace fmha {

/// Version of the fmha library that was linked, "MAJOR.MINOR.PATCH" (e.g. "0.1.0"): a static string, never null.
/// It can differ from the FMHA_VERSION_* macros above when a program is compiled against the headers of one release
/// and linked with the library of another; compare the two to detect that. Needs no GPU; never fails.
const char* version();

/// The linked library's version as FMHA_VERSION computes it (major·10000 + minor·100 + patch).
int version_number();

}  // namespace fmha
