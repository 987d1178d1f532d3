// fmha CLI core: device-side helpers for the tools (host code on the CUDA runtime API, compiled by g++).
//
// Error policy: nothing here exits or prints on its own. Failed CUDA calls throw CudaError (a std::runtime_error
// whose message names the call and the CUDA error); the tool's driver (driver.h) catches it, reports the run as
// failed and carries on. The one place that decides "no GPU → exit 77" is check_gpu_or_skip().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "fmha/status.h"

namespace fmha::cli {

/// A failed CUDA runtime call. what(): "<call>: <cudaGetErrorString> (<cudaGetErrorName>)".
class CudaError : public std::runtime_error {
 public:
  /// `message` is the full text (see cuda_error_message).
  CudaError(cudaError_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  /// The CUDA error code.
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

/// "<what>: <error string> (<error name>)", e.g. "cudaMalloc(4096 bytes): out of memory (cudaErrorMemoryAllocation)".
std::string cuda_error_message(cudaError_t err, const std::string& what);
/// Throws CudaError when err != cudaSuccess; `what` names the call (and its key arguments). Also clears the
/// runtime's last-error slot (cudaGetLastError) so that the reported error does not resurface in a later check.
void cuda_check(cudaError_t err, const std::string& what);
/// The same as a Status: ok, or kCudaError with cuda_error_message(err, what) (also clears the last error).
fmha::Status cuda_status(cudaError_t err, const std::string& what);

/// Checks a CUDA runtime call and throws CudaError naming the call's source text.
#define FMHA_CLI_CUDA_CHECK(call) ::fmha::cli::cuda_check((call), #call)

/// Properties of the device the tools run on (device 0 of the visible devices).
struct GpuInfo {
  int device = 0;
  std::string name;
  int major = 0, minor = 0;      ///< compute capability
  int sm_count = 0;              ///< multiprocessors
  size_t l2_bytes = 0;           ///< L2 cache size
  size_t global_bytes = 0;       ///< total global memory
  size_t smem_optin_bytes = 0;   ///< max dynamic shared memory per block (opt-in)
};

/// Queries device 0. Returns nullopt and sets *why (if non-null) when the runtime finds no device or fails.
std::optional<GpuInfo> query_gpu(std::string* why);

/// True when device 0 exists and is Hopper (compute capability 9.x). Otherwise false with *why (if non-null) set
/// to the reason: the CUDA error of cudaGetDeviceCount (no driver, ...), "no CUDA device", or
/// "device 0 (<name>) has compute capability 8.0; fmha needs 9.x (Hopper)".
bool gpu_available(std::string* why);

/// The tools' no-GPU policy, in one place: returns 0 when gpu_available(), otherwise prints
/// "no CUDA GPU: <reason>" to `err` and returns kExitSkipped (77, which the test harness counts as skipped).
/// Use: `if (int rc = check_gpu_or_skip(std::cerr)) return rc;`.
int check_gpu_or_skip(std::ostream& err);

/// Owning device allocation (cudaMalloc / cudaFree). Move-only. Size 0 holds no memory (get() == nullptr).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes`; throws CudaError ("cudaMalloc(<bytes> bytes): out of memory ...") on failure.
  explicit DeviceBuffer(size_t bytes);
  /// Frees the memory.
  ~DeviceBuffer();
  /// Takes over `other`'s memory; `other` becomes empty.
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  /// Frees this buffer's memory, then takes over `other`'s.
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  /// The device pointer (nullptr when empty).
  void* get() const { return ptr_; }
  /// The device pointer as T* (no conversion of the contents).
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  /// Size in bytes.
  size_t bytes() const { return bytes_; }

  /// Copies `bytes` from host `src` to offset `offset` (synchronous). Throws std::out_of_range past the end,
  /// CudaError on a CUDA failure.
  void upload(const void* src, size_t bytes, size_t offset = 0);
  /// Copies `bytes` at `offset` to host `dst` (synchronous). Same errors as upload.
  void download(void* dst, size_t bytes, size_t offset = 0) const;
  /// Sets every byte to `value` on `stream`.
  void fill_bytes(int value, cudaStream_t stream = nullptr);
  /// Fills with 0xFF bytes: NaN in fp32, fp16, bf16, e4m3 and e5m2 alike, so that an output element a kernel
  /// never writes shows up as a mismatch.
  void poison(cudaStream_t stream = nullptr) { fill_bytes(0xFF, stream); }
  /// Frees the memory (no-op when empty).
  void reset();

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// N independent sets of the same tensors (the seed's --tensor_ring_buffers): each timed iteration uses the next
/// set so that inputs are not served from L2. Set 0 is the one that gets verified.
class BufferRing {
 public:
  /// Allocates `sets` (≥ 1) sets, each holding one buffer per entry of `tensor_bytes`. Throws CudaError
  /// (allocation) or std::invalid_argument (sets < 1).
  BufferRing(int sets, const std::vector<size_t>& tensor_bytes);

  /// Number of buffer sets.
  int num_sets() const { return static_cast<int>(sets_.size()); }
  /// Tensors per set.
  int num_tensors() const { return static_cast<int>(tensor_bytes_.size()); }
  /// Bytes of one set (sum of the tensor sizes).
  size_t bytes_per_set() const;
  /// Index of the current set.
  int current() const { return current_; }
  /// Tensor `t` of the current set.
  DeviceBuffer& tensor(int t) { return sets_.at(static_cast<size_t>(current_)).at(static_cast<size_t>(t)); }
  /// Tensor `t` of set `s`.
  DeviceBuffer& tensor(int s, int t) { return sets_.at(static_cast<size_t>(s)).at(static_cast<size_t>(t)); }
  /// Moves to the next set, wrapping around.
  void advance() { current_ = (current_ + 1) % num_sets(); }
  /// Makes set (iteration % num_sets) current.
  void select_for_iteration(int iteration) { current_ = iteration % num_sets(); }
  /// Back to set 0.
  void reset() { current_ = 0; }
  /// Copies every tensor of set 0 into the other sets (device to device, on `stream`).
  void replicate_first_set(cudaStream_t stream = nullptr);

 private:
  std::vector<size_t> tensor_bytes_;
  std::vector<std::vector<DeviceBuffer>> sets_;
  int current_ = 0;
};

/// Number of ring sets needed so that `sets · bytes_per_set ≥ factor · l2_bytes` (benchmarks rotate inputs over at least 3× L2),
/// at least 1 and at most max_sets. Pure arithmetic; bytes_per_set 0 gives 1.
int ring_sets_to_cover(size_t bytes_per_set, size_t l2_bytes, int factor = 3, int max_sets = 64);

/// Median, mean and extremes of a set of times in milliseconds.
struct TimingStats {
  int count = 0;               ///< number of samples
  double median_ms = 0.0;      ///< NaN when count == 0
  double mean_ms = 0.0;        ///< NaN when count == 0
  double min_ms = 0.0;         ///< NaN when count == 0
  double max_ms = 0.0;         ///< NaN when count == 0
  std::vector<double> samples_ms;  ///< in recording order
};

/// Summarises samples (ms). Median of an even count is the mean of the two middle values.
TimingStats summarize_times(std::vector<double> samples_ms);

/// CUDA-event timer: each start()/stop() pair records one sample on `stream`. Events are created on demand and
/// reused after clear(). Keep one timer per kernel to get a per-kernel breakdown of a multi-kernel operation.
class EventTimer {
 public:
  /// A timer recording on `stream` (default stream when null). Creates no events yet.
  explicit EventTimer(cudaStream_t stream = nullptr) : stream_(stream) {}
  /// Destroys the events (errors ignored).
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  /// Records the start event of the next sample. Throws CudaError; std::logic_error when already started.
  void start();
  /// Records the stop event of the current sample. Throws CudaError; std::logic_error when not started.
  void stop();
  /// Waits for the last stop event and returns the samples' statistics. Throws CudaError.
  TimingStats stats();
  /// Forgets the samples (keeps the events for reuse).
  void clear();

 private:
  cudaEvent_t event(size_t i);
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;  ///< 2·i = start of sample i, 2·i + 1 = its stop
  size_t samples_ = 0;
  bool started_ = false;
};

/// Runs `launch(i)` for `warmup` untimed iterations (i = 0..warmup−1), then `iterations` timed ones
/// (i = 0..iterations−1), each timed by its own event pair on `stream`, and checks cudaGetLastError() before
/// (a pending error from an unchecked earlier call) and after each phase. `launch` enqueues work on `stream`; it may throw. Returns the timed samples' statistics (count 0 and
/// NaN times when iterations == 0). Throws CudaError on a CUDA failure.
TimingStats time_iterations(int warmup, int iterations, const std::function<void(int iteration)>& launch,
                            cudaStream_t stream = nullptr);

/// Evicts L2 between timed runs by writing a scratch buffer (for --clear-cache style timing).
class L2Flusher {
 public:
  /// `bytes` scratch size; 0 means twice the L2 of device 0. Throws CudaError.
  explicit L2Flusher(size_t bytes = 0);
  /// Writes the whole scratch buffer on `stream` (a different byte each call). Throws CudaError.
  void flush(cudaStream_t stream = nullptr);
  /// Scratch size in bytes.
  size_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceBuffer buffer_;
  int value_ = 0;
};

}  // namespace fmha::cli
