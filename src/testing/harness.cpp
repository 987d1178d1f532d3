// See harness.h.
#include "testing/harness.h"

#include <sstream>

namespace fmha::testing {

Status time_calls(int iterations, const std::function<Status(int)>& call,
                  const std::function<void(cudaStream_t)>& before, cudaStream_t stream, std::vector<double>& times) {
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t e = cudaEventCreate(&start);
  if (e == cudaSuccess) e = cudaEventCreate(&stop);
  Status st;
  if (e != cudaSuccess) st = Status(StatusCode::kCudaError, std::string("cudaEventCreate: ") + cudaGetErrorString(e));
  for (int it = 0; it < iterations && st.is_ok(); ++it) {
    if (before) before(stream);
    e = cudaEventRecord(start, stream);
    if (e == cudaSuccess) st = call(it);
    if (e == cudaSuccess) e = cudaEventRecord(stop, stream);
    if (e == cudaSuccess) e = cudaEventSynchronize(stop);
    float ms = 0.f;
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
    if (e != cudaSuccess && st.is_ok())
      st = Status(StatusCode::kCudaError, std::string("timed call: ") + cudaGetErrorString(e));
    times.push_back(ms);
  }
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  return st;
}

std::string outcome_summary_head(const Status& status, bool checked, const ref::CompareResult& o,
                                 const ref::CompareResult& lse, bool* more) {
  *more = false;
  std::ostringstream s;
  if (!status.is_ok()) {
    s << "status: " << to_string(status.code()) << ": " << status.message();
  } else if (!checked) {
    s << "ran (not checked)";
  } else {
    s << "O: " << o.message << " | LSE: " << lse.message;
    *more = true;
  }
  return s.str();
}

}  // namespace fmha::testing
