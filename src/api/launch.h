// Internal: signatures of the launch functions that the generated kernel units define.
//
// The API layer (src/api/*.cpp, compiled by g++) validates arguments and resolves defaults, then calls one of these
// through the registry; the kernel units (generated/<op>_<dtype>_d<hdim>.cu, compiled by nvcc) hold the device code.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "fmha/fwd.h"
#include "fmha/status.h"

namespace fmha::detail {

/// ok when `err` is cudaSuccess, else kCudaError "<what>: <CUDA message>"; an error also clears the runtime's
/// last-error slot, so that none is left behind for the caller's next CUDA call.
inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  cudaGetLastError();
  return Status(StatusCode::kCudaError, std::string(what) + ": " + cudaGetErrorString(err));
}

/// Forward launch: `p` is validated, p.softmax_scale > 0 and p.sm_count > 0 are resolved.
using fwd_launch_fn = Status(const FwdParams& p, cudaStream_t stream);

}  // namespace fmha::detail
