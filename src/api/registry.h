// Internal: the typed table of kernel translation units this build holds (generated/registry.cpp, from
// src/instantiations/manifest.cmake by cmake/kernels.cmake).
#pragma once

#include <vector>

#include "api/launch.h"
#include "fmha/status.h"
#include "fmha/types.h"

namespace fmha::detail {

/// Operation families. Each has its own launch-function type (api/launch.h).
enum class Op {
  kFwd,     ///< forward attention: fwd_launch_fn
  kDecode,  ///< decode against a KV cache: decode_launch_fn
  kBwd,     ///< backward attention: bwd_launch_fn
};

/// "fwd", ...
const char* to_string(Op op);

/// What selects a kernel unit: the operation, the element types of the inputs and of the output, and the head dims
/// of Q/K and of V/O that the unit's tiles are built for (a problem runs on the unit of its head-dim tile).
struct KernelKey {
  Op op;
  DType in;
  DType out;
  int head_dim_qk;
  int head_dim_v;
  bool operator==(const KernelKey& o) const {
    return op == o.op && in == o.in && out == o.out && head_dim_qk == o.head_dim_qk && head_dim_v == o.head_dim_v;
  }
};

/// One manifest entry. `launch` points to the unit's launch function (its type depends on key.op), or is null when
/// the entry is in the manifest but not in this build's kernel set.
struct KernelEntry {
  KernelKey key;
  void* launch;
};

/// Every manifest entry, built or not, in manifest order.
const std::vector<KernelEntry>& kernel_registry();

/// The entry for `key`, or null when the manifest has none.
const KernelEntry* find_kernel(const KernelKey& key);

/// The built entry for `key` in *out; kNotBuilt "kernel <op> <dtype> d<head dim> is not in the manifest" or "… is
/// not in this build's kernel set '<set>'" otherwise (*out untouched).
Status find_built_kernel(const KernelKey& key, const KernelEntry** out);

/// Name of the kernel set this build compiled ("none", "ci" or "full").
const char* kernel_set();

}  // namespace fmha::detail
