// Internal: the table of kernel translation units this build holds (generated/registry.cpp).
#pragma once

#include <vector>

#include "api/launch.h"

namespace fmha::detail {

/// One manifest entry. `launch` points to the unit's launch function (type depends on `op`), or is null when the
/// entry is in the manifest but not in this build's kernel set.
struct KernelEntry {
  const char* op;     ///< "fwd", ...
  const char* dtype;  ///< "fp16", "bf16", ...
  int head_dim;       ///< head dim the unit's tiles are built for
  void* launch;
};

/// Every manifest entry, built or not.
const std::vector<KernelEntry>& kernel_registry();

/// Name of the kernel set this build compiled ("none", "ci" or "full").
const char* kernel_set();

}  // namespace fmha::detail
