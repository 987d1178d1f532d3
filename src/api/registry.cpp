// Lookup in the kernel registry (api/registry.h); the table itself is generated (generated/registry.cpp).
#include "api/registry.h"

#include <string>

namespace fmha::detail {

const char* to_string(Op op) {
  switch (op) {
    case Op::kFwd: return "fwd";
    case Op::kDecode: return "decode";
    case Op::kBwd: return "bwd";
  }
  return "unknown";
}

const KernelEntry* find_kernel(const KernelKey& key) {
  for (const KernelEntry& e : kernel_registry())
    if (e.key == key) return &e;
  return nullptr;
}

Status find_built_kernel(const KernelKey& key, const KernelEntry** out) {
  const KernelEntry* e = find_kernel(key);
  if (e != nullptr && e->launch != nullptr) {
    *out = e;
    return Status::ok();
  }
  const std::string name = std::string("kernel ") + to_string(key.op) + " " + to_string(key.in) + " d" +
                           std::to_string(key.head_dim_qk);
  return Status(StatusCode::kNotBuilt, e == nullptr ? name + " is not in the manifest"
                                                    : name + " is not in this build's kernel set '" +
                                                          kernel_set() + "'");
}

}  // namespace fmha::detail
