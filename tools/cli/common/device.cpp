// fmha CLI core: device buffers, GPU detection, ring buffers and event timing (see device.h).
#include "common/device.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <ostream>

#include "common/report.h"

namespace fmha::cli {

std::string cuda_error_message(cudaError_t err, const std::string& what) {
  return what + ": " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")";
}

void cuda_check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return;
  // The error is being reported now: reset the runtime's last-error slot so that a later cudaGetLastError() check
  // (e.g. after the next launch) does not report it a second time under another name. Sticky errors (a faulted
  // context) stay and will fail the next call anyway.
  cudaGetLastError();
  throw CudaError(err, cuda_error_message(err, what));
}

fmha::Status cuda_status(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return fmha::Status::ok();
  cudaGetLastError();  // reported here; see cuda_check
  return fmha::Status(fmha::StatusCode::kCudaError, cuda_error_message(err, what));
}

// ---------------------------------------------------------------------------------------------------------------
// GPU detection
// ---------------------------------------------------------------------------------------------------------------

std::optional<GpuInfo> query_gpu(std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<GpuInfo> {
    if (why) *why = reason;
    return std::nullopt;
  };
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error so later calls do not see it
    return fail(cuda_error_message(err, "cudaGetDeviceCount"));
  }
  if (count == 0) return fail("no CUDA device");
  cudaDeviceProp prop{};
  err = cudaGetDeviceProperties(&prop, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fail(cuda_error_message(err, "cudaGetDeviceProperties(device 0)"));
  }
  GpuInfo info;
  info.device = 0;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info.global_bytes = prop.totalGlobalMem;
  info.smem_optin_bytes = prop.sharedMemPerBlockOptin;
  return info;
}

bool gpu_available(std::string* why) {
  const auto info = query_gpu(why);
  if (!info) return false;
  if (info->major != 9) {
    if (why) {
      *why = "device 0 (" + info->name + ") has compute capability " + std::to_string(info->major) + "." +
             std::to_string(info->minor) + "; fmha needs 9.x (Hopper)";
    }
    return false;
  }
  return true;
}

int check_gpu_or_skip(std::ostream& err) {
  std::string why;
  if (gpu_available(&why)) return 0;
  err << "no CUDA GPU: " << why << "\n";
  err.flush();
  return kExitSkipped;
}

// ---------------------------------------------------------------------------------------------------------------
// DeviceBuffer
// ---------------------------------------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(size_t bytes) {
  if (bytes == 0) return;
  cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  bytes_ = bytes;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
  other.ptr_ = nullptr;
  other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::reset() {
  // cudaFree's error is dropped on purpose: a destructor cannot report it, and a sticky error from an earlier
  // launch would also surface here; the failing call has already been reported where it happened.
  if (ptr_) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

namespace {
void check_range(size_t bytes, size_t offset, size_t size, const char* what) {
  if (offset > size || bytes > size - offset) {
    throw std::out_of_range(std::string(what) + ": " + std::to_string(bytes) + " bytes at offset " +
                            std::to_string(offset) + " exceed the buffer's " + std::to_string(size) + " bytes");
  }
}
}  // namespace

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  check_range(bytes, offset, bytes_, "DeviceBuffer::upload");
  if (bytes == 0) return;
  cuda_check(cudaMemcpy(static_cast<char*>(ptr_) + offset, src, bytes, cudaMemcpyHostToDevice),
             "cudaMemcpy(host to device, " + std::to_string(bytes) + " bytes)");
}

void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  check_range(bytes, offset, bytes_, "DeviceBuffer::download");
  if (bytes == 0) return;
  cuda_check(cudaMemcpy(dst, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost),
             "cudaMemcpy(device to host, " + std::to_string(bytes) + " bytes)");
}

void DeviceBuffer::fill_bytes(int value, cudaStream_t stream) {
  if (bytes_ == 0) return;
  cuda_check(cudaMemsetAsync(ptr_, value, bytes_, stream), "cudaMemsetAsync(" + std::to_string(bytes_) + " bytes)");
}

// ---------------------------------------------------------------------------------------------------------------
// BufferRing
// ---------------------------------------------------------------------------------------------------------------

BufferRing::BufferRing(int sets, const std::vector<size_t>& tensor_bytes) : tensor_bytes_(tensor_bytes) {
  if (sets < 1) throw std::invalid_argument("BufferRing: expected sets ≥ 1, got " + std::to_string(sets));
  sets_.resize(static_cast<size_t>(sets));
  for (auto& set : sets_) {
    for (size_t b : tensor_bytes_) set.emplace_back(b);
  }
}

size_t BufferRing::bytes_per_set() const {
  return std::accumulate(tensor_bytes_.begin(), tensor_bytes_.end(), size_t{0});
}

void BufferRing::replicate_first_set(cudaStream_t stream) {
  for (size_t s = 1; s < sets_.size(); ++s) {
    for (size_t t = 0; t < tensor_bytes_.size(); ++t) {
      if (tensor_bytes_[t] == 0) continue;
      cuda_check(cudaMemcpyAsync(sets_[s][t].get(), sets_[0][t].get(), tensor_bytes_[t], cudaMemcpyDeviceToDevice,
                                 stream),
                 "cudaMemcpyAsync(ring set 0 to set " + std::to_string(s) + ", tensor " + std::to_string(t) + ")");
    }
  }
}

int ring_sets_to_cover(size_t bytes_per_set, size_t l2_bytes, int factor, int max_sets) {
  if (bytes_per_set == 0) return 1;
  const double need = static_cast<double>(l2_bytes) * factor / static_cast<double>(bytes_per_set);
  const double sets = std::ceil(need);
  return static_cast<int>(std::clamp(sets, 1.0, static_cast<double>(std::max(1, max_sets))));
}

// ---------------------------------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------------------------------

TimingStats summarize_times(std::vector<double> samples) {
  TimingStats s;
  s.count = static_cast<int>(samples.size());
  s.samples_ms = samples;
  if (samples.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.median_ms = s.mean_ms = s.min_ms = s.max_ms = nan;
    return s;
  }
  s.mean_ms = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.median_ms = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  s.min_ms = samples.front();
  s.max_ms = samples.back();
  return s;
}

EventTimer::~EventTimer() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

cudaEvent_t EventTimer::event(size_t i) {
  while (events_.size() <= i) {
    cudaEvent_t e = nullptr;
    cuda_check(cudaEventCreate(&e), "cudaEventCreate");
    events_.push_back(e);
  }
  return events_[i];
}

void EventTimer::start() {
  if (started_) throw std::logic_error("EventTimer::start called twice without stop");
  cuda_check(cudaEventRecord(event(2 * samples_), stream_), "cudaEventRecord(timer start)");
  started_ = true;
}

void EventTimer::stop() {
  if (!started_) throw std::logic_error("EventTimer::stop called without start");
  cuda_check(cudaEventRecord(event(2 * samples_ + 1), stream_), "cudaEventRecord(timer stop)");
  started_ = false;
  ++samples_;
}

TimingStats EventTimer::stats() {
  std::vector<double> ms;
  if (samples_ > 0) {
    cuda_check(cudaEventSynchronize(events_[2 * samples_ - 1]), "cudaEventSynchronize(timer stop)");
    for (size_t i = 0; i < samples_; ++i) {
      float t = 0.0f;
      cuda_check(cudaEventElapsedTime(&t, events_[2 * i], events_[2 * i + 1]), "cudaEventElapsedTime");
      ms.push_back(t);
    }
  }
  return summarize_times(std::move(ms));
}

void EventTimer::clear() {
  samples_ = 0;
  started_ = false;
}

TimingStats time_iterations(int warmup, int iterations, const std::function<void(int)>& launch,
                            cudaStream_t stream) {
  cuda_check(cudaGetLastError(), "an unchecked CUDA call before timing");
  for (int i = 0; i < warmup; ++i) launch(i);
  cuda_check(cudaGetLastError(), "warmup launches");
  EventTimer timer(stream);
  for (int i = 0; i < iterations; ++i) {
    timer.start();
    launch(i);
    timer.stop();
  }
  cuda_check(cudaGetLastError(), "timed launches");
  TimingStats s = timer.stats();
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(after timed launches)");
  return s;
}

L2Flusher::L2Flusher(size_t bytes) {
  if (bytes == 0) {
    int dev = 0, l2 = 0;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    cuda_check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute(L2 size)");
    bytes = 2 * static_cast<size_t>(std::max(l2, 1 << 20));
  }
  buffer_ = DeviceBuffer(bytes);
}

void L2Flusher::flush(cudaStream_t stream) {
  value_ = (value_ + 1) & 0xFF;
  buffer_.fill_bytes(value_, stream);
}

}  // namespace fmha::cli
