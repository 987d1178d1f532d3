// Internal: signatures of the launch functions that the generated kernel units define.
//
// The API layer (src/api/*.cpp, compiled by g++) validates arguments and resolves defaults, then calls one of these
// through the registry (api/registry.h); the kernel units (generated/<op>_<dtype>_d<hdim>.cu, compiled by nvcc)
// hold the device code.
#pragma once

#include <cuda_runtime_api.h>

#include "api/host.h"
#include "fmha/fwd.h"
#include "fmha/status.h"

namespace fmha::detail {

/// Forward launch: `p` is validated, p.softmax_scale > 0 and p.sm_count > 0 are resolved.
using fwd_launch_fn = Status(const FwdParams& p, cudaStream_t stream);

}  // namespace fmha::detail
