// Pieces shared by the operations' test and benchmark harnesses (fwd_runner, decode_runner): event timing of a call
// and the first part of an outcome's one-line summary. Host code only.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "fmha/status.h"
#include "reference/compare.h"

namespace fmha::testing {

/// Times `iterations` calls of `call(i)` (i = 0 … iterations − 1) on `stream`, each between its own pair of CUDA
/// events and synchronised; `before` (optional) runs on the stream before each call, outside the timed interval
/// (e.g. an L2 flush). Appends one time per call, in milliseconds, to `times`. Returns the first failing status of
/// `call`, or kCudaError naming the event call that failed.
Status time_calls(int iterations, const std::function<Status(int)>& call,
                  const std::function<void(cudaStream_t)>& before, cudaStream_t stream, std::vector<double>& times);

/// The start of an outcome's summary: "status: <code>: <message>" when `status` failed, "ran (not checked)" when
/// nothing was checked, else "O: <o.message> | LSE: <lse.message>", to which the caller appends its own checks
/// (*more set true only in that last case).
std::string outcome_summary_head(const Status& status, bool checked, const ref::CompareResult& o,
                                 const ref::CompareResult& lse, bool* more);

}  // namespace fmha::testing
