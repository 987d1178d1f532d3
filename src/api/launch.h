// Internal: signatures of the launch functions that the generated kernel units define.
//
// The API layer (src/api/*.cpp, compiled by g++) validates arguments and resolves defaults, then calls one of these
// through the registry (api/registry.h); the kernel units (generated/<op>_<dtype>_d<hdim>.cu, compiled by nvcc)
// hold the device code.
#pragma once

#include <cuda_runtime_api.h>

#include "api/host.h"
#include "fmha/bwd.h"
#include "fmha/decode.h"
#include "fmha/fwd.h"
#include "fmha/status.h"

namespace fmha::detail {

/// Forward launch: `p` is validated, p.softmax_scale > 0 and p.sm_count > 0 are resolved.
using fwd_launch_fn = Status(const FwdParams& p, cudaStream_t stream);

/// Decode launch: `p` is validated against `plan` (decode_plan made it), p.softmax_scale > 0 is resolved, and
/// `workspace` holds plan.workspace_bytes.
using decode_launch_fn = Status(const DecodeParams& p, const DecodePlan& plan, void* workspace, cudaStream_t stream);

/// Backward launch: `p` is validated (one pass), p.softmax_scale > 0, p.head_dim_v > 0 and p.sm_count > 0 are
/// resolved, and `workspace` holds bwd_workspace_size(p) bytes (api/bwd_workspace.h lays it out).
using bwd_launch_fn = Status(const BwdParams& p, void* workspace, cudaStream_t stream);

}  // namespace fmha::detail
