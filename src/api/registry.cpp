// Lookup in the kernel registry (api/registry.h); the table itself is generated (generated/registry.cpp).
#include "api/registry.h"

namespace fmha::detail {

const char* to_string(Op op) {
  switch (op) {
    case Op::kFwd: return "fwd";
    case Op::kDecode: return "decode";
  }
  return "unknown";
}

const KernelEntry* find_kernel(const KernelKey& key) {
  for (const KernelEntry& e : kernel_registry())
    if (e.key == key) return &e;
  return nullptr;
}

}  // namespace fmha::detail
