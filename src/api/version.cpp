// fmha::version() and fmha::version_number() (include/fmha/version.h).
#include "fmha/version.h"

#define FMHA_STR2(x) #x
#define FMHA_STR(x) FMHA_STR2(x)

namespace fmha {

const char* version() {
  return FMHA_STR(FMHA_VERSION_MAJOR) "." FMHA_STR(FMHA_VERSION_MINOR) "." FMHA_STR(FMHA_VERSION_PATCH);
}

int version_number() { return FMHA_VERSION; }

}  // namespace fmha
