// Internal: the conversion of the C entry point's parameter struct (include/fmha/c_api.h) to the C++ one, exposed
// so that a CPU test can check every field's way through it.
#pragma once

#include "fmha/c_api.h"
#include "fmha/fwd.h"

namespace fmha::detail {

/// fmha_fwd_params → FwdParams: checks the pointer, struct_size, version, reserved and the enum codes (the rest is
/// fwd_validate's); kInvalidArgument naming the field otherwise. `out` is written only on success.
Status fwd_params_from_c(const fmha_fwd_params* c, FwdParams* out);

}  // namespace fmha::detail
