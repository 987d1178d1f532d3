// The host spine of every operation (api/host.h).
#include "api/host.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <vector>

namespace fmha::detail {

Status invalid_arg(const std::string& arg, const std::string& expected, const std::string& actual) {
  return Status::invalid(arg + ": expected " + expected + ", got " + actual);
}

Status unsupported_arg(const std::string& arg, const std::string& expected, const std::string& actual) {
  return Status::unsupported(arg + ": expected " + expected + ", got " + actual);
}

Status check_attention_shape(DType dtype, int batch, int heads_q, int heads_kv, int head_dim, int max_head_dim) {
  auto str = [](int v) { return std::to_string(v); };
  if (dtype != DType::kFP16 && dtype != DType::kBF16) return unsupported_arg("dtype", "fp16 or bf16", to_string(dtype));
  if (batch < 1) return invalid_arg("batch", "≥ 1", str(batch));
  if (heads_q < 1) return invalid_arg("heads_q", "≥ 1", str(heads_q));
  if (heads_kv < 1) return invalid_arg("heads_kv", "≥ 1", str(heads_kv));
  if (heads_q % heads_kv != 0)
    return invalid_arg("heads_q % heads_kv", "0",
                       str(heads_q % heads_kv) + " (heads_q=" + str(heads_q) + ", heads_kv=" + str(heads_kv) + ")");
  if (head_dim < 8 || head_dim % 8 != 0) return invalid_arg("head_dim", "a positive multiple of 8", str(head_dim));
  if (head_dim > max_head_dim) return unsupported_arg("head_dim", "≤ " + str(max_head_dim), str(head_dim));
  return Status::ok();
}

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  cudaGetLastError();
  return Status(StatusCode::kCudaError, std::string(what) + ": " + cudaGetErrorString(err));
}

namespace {

/// Attributes of every device queried so far, indexed by device number (device = -1: not yet queried).
struct DeviceCache {
  std::mutex mutex;
  std::vector<DeviceInfo> devices;
  int queries = 0;  // under mutex
};

DeviceCache& device_cache() {
  static DeviceCache cache;
  return cache;
}

Status query_device(int device, DeviceInfo* out) {
  DeviceInfo d;
  d.device = device;
  if (Status s = cuda_status(cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, device),
                             "cudaDeviceGetAttribute(compute capability major)");
      !s)
    return s;
  if (Status s = cuda_status(cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, device),
                             "cudaDeviceGetAttribute(compute capability minor)");
      !s)
    return s;
  if (Status s = cuda_status(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, device),
                             "cudaDeviceGetAttribute(multiprocessor count)");
      !s)
    return s;
  *out = d;
  return Status::ok();
}

/// cudaGetDevice's answers that mean "no usable GPU here" rather than a failing call: no device, no driver or one
/// too old for this runtime, only the stub libcuda (a container without the driver), devices busy or unavailable,
/// a driver/runtime mismatch, or an initialisation failure.
bool no_usable_gpu(cudaError_t e) {
  switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status current_sm90_device(DeviceInfo* out) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); no_usable_gpu(e)) {
    cudaGetLastError();
    return Status::unsupported(std::string("device: expected a CUDA GPU of compute capability 9.x (sm_90a) and a "
                                           "driver for CUDA 13, got none (cudaGetDevice: ") +
                               cudaGetErrorString(e) + ")");
  } else if (Status s = cuda_status(e, "cudaGetDevice"); !s) {
    return s;
  }
  DeviceCache& cache = device_cache();
  DeviceInfo d;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (device >= 0 && size_t(device) < cache.devices.size() && cache.devices[size_t(device)].device == device) {
      d = cache.devices[size_t(device)];
    } else {
      ++cache.queries;
      if (Status s = query_device(device, &d); !s) return s;
      if (size_t(device) >= cache.devices.size()) cache.devices.resize(size_t(device) + 1);
      cache.devices[size_t(device)] = d;
    }
  }
  if (d.cc_major != 9)
    return Status::unsupported("device: expected compute capability 9.x (sm_90a), got " + std::to_string(d.cc_major) +
                               "." + std::to_string(d.cc_minor));
  *out = d;
  return Status::ok();
}

int device_attribute_queries() {
  DeviceCache& cache = device_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.queries;
}

Status check_device_pointers(std::initializer_list<std::pair<const char*, const void*>> pointers) {
  for (const auto& [name, ptr] : pointers) {
    if (ptr == nullptr) continue;
    cudaPointerAttributes attr{};
    if (Status s = cuda_status(cudaPointerGetAttributes(&attr, ptr), "cudaPointerGetAttributes"); !s) return s;
    if (attr.type == cudaMemoryTypeUnregistered || attr.devicePointer == nullptr)
      return invalid_arg(name, "device-accessible memory", "a host pointer");
  }
  return Status::ok();
}

std::string low_hex(const void* p, unsigned mask) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", unsigned(reinterpret_cast<uintptr_t>(p) & mask));
  return buf;
}

Status check_workspace(const Workspace& ws, std::size_t needed) {
  if (needed == 0) return Status::ok();
  if (ws.ptr == nullptr || ws.bytes < needed)
    return invalid_arg("workspace", "at least " + std::to_string(needed) + " bytes of device memory",
                       ws.ptr == nullptr ? std::string("none") : std::to_string(ws.bytes) + " bytes");
  if ((reinterpret_cast<uintptr_t>(ws.ptr) & (kWorkspaceAlignment - 1)) != 0)
    return invalid_arg("workspace", "a " + std::to_string(kWorkspaceAlignment) + "-byte aligned address",
                       "an address ending in " + low_hex(ws.ptr, unsigned(kWorkspaceAlignment - 1)));
  return Status::ok();
}

Status check_lengths_and_options(int seqlen_q, int seqlen_k, const int* cu_seqlens_q, const int* cu_seqlens_k,
                                 int total_q, int total_k, MaskType mask, CausalAlign causal_align,
                                 float softmax_scale, int sm_count) {
  const auto str = [](int64_t v) { return std::to_string(v); };
  constexpr int kMaxLen = std::numeric_limits<int32_t>::max() - 1024;  // TMA coordinates and tile indices are int32
  if (seqlen_q < 0) return invalid_arg("seqlen_q", "≥ 0", str(seqlen_q));
  if (seqlen_k < 0) return invalid_arg("seqlen_k", "≥ 0", str(seqlen_k));
  if (seqlen_q > kMaxLen) return invalid_arg("seqlen_q", "≤ " + str(kMaxLen), str(seqlen_q));
  if (seqlen_k > kMaxLen) return invalid_arg("seqlen_k", "≤ " + str(kMaxLen), str(seqlen_k));
  const bool varlen = cu_seqlens_q != nullptr;
  if (varlen != (cu_seqlens_k != nullptr))
    return invalid_arg("cu_seqlens_k", varlen ? "a device pointer (cu_seqlens_q is set)" : "null (cu_seqlens_q is null)",
                       varlen ? "null" : "a pointer");
  if (varlen) {
    if (total_q < 0 || total_q > kMaxLen) return invalid_arg("total_q", "in [0, " + str(kMaxLen) + "]", str(total_q));
    if (total_k < 0 || total_k > kMaxLen) return invalid_arg("total_k", "in [0, " + str(kMaxLen) + "]", str(total_k));
    if ((reinterpret_cast<uintptr_t>(cu_seqlens_q) & 3u) || (reinterpret_cast<uintptr_t>(cu_seqlens_k) & 3u))
      return invalid_arg("cu_seqlens_q / cu_seqlens_k", "4-byte aligned device int arrays", "a misaligned address");
  }
  if (int(mask) < 0 || int(mask) > int(MaskType::kCausal))
    return invalid_arg("mask", "none, residual or causal", str(int(mask)));
  if (int(causal_align) < 0 || int(causal_align) > int(CausalAlign::kQEnd))
    return invalid_arg("causal_align", "qbegin or qend", str(int(causal_align)));
  if (!(softmax_scale >= 0.f) || !std::isfinite(softmax_scale))
    return invalid_arg("softmax_scale", "a finite value ≥ 0 (0 = 1/sqrt(head_dim))", std::to_string(softmax_scale));
  if (sm_count < 0) return invalid_arg("sm_count", "≥ 0 (0 = all SMs)", str(sm_count));
  return Status::ok();
}

Status check_bshd_tensor(const char* name, const void* ptr, int64_t row, int64_t head, int64_t batch, int heads,
                         int batches, int64_t rows, bool varlen) {
  const std::string n(name);
  const auto str = [](int64_t v) { return std::to_string(v); };
  if (ptr == nullptr) return invalid_arg(n, "a device pointer", "null");
  if ((reinterpret_cast<uintptr_t>(ptr) & 15u) != 0)
    return invalid_arg(n, "a 16-byte aligned address", "an address ending in " + low_hex(ptr, 15u));
  if (row <= 0 || row % 8 != 0 || row > kMaxTmaStride)
    return invalid_arg(n + "_row_stride", "a positive multiple of 8 elements below 2^39", str(row));
  const int64_t head_min = heads > 1 && rows > 0 ? 8 : 0;
  if (head < head_min || head % 8 != 0 || head > kMaxTmaStride)
    return invalid_arg(n + "_head_stride",
                       std::string(head_min > 0 ? "a positive" : "a non-negative") + " multiple of 8 elements below 2^39",
                       str(head));
  const int64_t batch_min = batches > 1 && rows > 0 ? 8 : 0;
  if (!varlen && (batch < batch_min || batch % 8 != 0 || batch > kMaxTmaStride))
    return invalid_arg(n + "_batch_stride",
                       std::string(batch_min > 0 ? "a positive" : "a non-negative") + " multiple of 8 elements below 2^39",
                       str(batch));
  return Status::ok();
}

Status check_bshd_tensors(std::initializer_list<BshdOperand> operands, int batches, bool varlen) {
  for (const BshdOperand& t : operands)
    if (Status s = check_bshd_tensor(t.name, t.ptr, t.row, t.head, t.batch, t.heads, batches, t.rows, varlen); !s)
      return s;
  return Status::ok();
}

Status check_no_overlap(const char* tensor, std::vector<TensorMode> modes) {
  std::vector<TensorMode> used;
  for (const TensorMode& m : modes)
    if (m.extent > 1) used.push_back(m);
  std::sort(used.begin(), used.end(), [](const TensorMode& a, const TensorMode& b) { return a.stride < b.stride; });
  for (size_t i = 1; i < used.size(); ++i) {
    const int64_t need = used[i - 1].stride * used[i - 1].extent;
    if (used[i].stride < need)
      return invalid_arg(used[i].name,
                         "≥ " + std::to_string(need) + " (" + tensor + "'s " + used[i - 1].name + " × extent " +
                             std::to_string(used[i - 1].extent) + "), so that no two elements of " + tensor + " overlap",
                         std::to_string(used[i].stride));
  }
  return Status::ok();
}

}  // namespace fmha::detail
