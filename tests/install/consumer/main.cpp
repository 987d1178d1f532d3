// Consumer of an installed fmha through the C++ API: the headers compile (they include cuda_runtime_api.h, so the
// target must carry the CUDA include path), the library links, version and validation answer without a GPU.
#include <cstdio>
#include <cstring>
#include <string>

#include "fmha/fwd.h"
#include "fmha/version.h"

int main() {
  const std::string expected = std::to_string(FMHA_VERSION_MAJOR) + "." + std::to_string(FMHA_VERSION_MINOR) + "." +
                               std::to_string(FMHA_VERSION_PATCH);
  if (expected != fmha::version() || fmha::version_number() != FMHA_VERSION) {
    std::fprintf(stderr, "consumer: version: expected %s (%d), got %s (%d)\n", expected.c_str(), FMHA_VERSION,
                 fmha::version(), fmha::version_number());
    return 1;
  }
  alignas(16) static char buf[64];
  fmha::FwdParams p;
  p.batch = 1, p.heads_q = p.heads_kv = 1, p.head_dim = 64, p.seqlen_q = p.seqlen_k = 128;
  p.q = p.k = p.v = buf;
  p.o = buf;
  fmha::set_contiguous_strides(p);
  if (fmha::Status s = fmha::fwd_validate(p); !s) {
    std::fprintf(stderr, "consumer: fwd_validate of a valid problem: %s\n", s.message().c_str());
    return 1;
  }
  p.head_dim = 12;
  const fmha::Status s = fmha::fwd_validate(p);
  if (s.code() != fmha::StatusCode::kInvalidArgument || s.message().find("head_dim") == std::string::npos) {
    std::fprintf(stderr, "consumer: fwd_validate(head_dim=12): expected an invalid-argument error naming head_dim, "
                 "got '%s'\n", s.message().c_str());
    return 1;
  }
  std::printf("consumer_cpp: fmha %s, %zu forward kernel variants listed\n", fmha::version(),
              fmha::fwd_kernel_variants().size());
  return 0;
}
