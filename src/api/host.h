// Internal: the host spine every operation's API goes through: argument errors in one format, the current device
// (attributes queried once per device and cached), device-pointer and workspace checks, CUDA return codes as
// Status. Host only (g++); no kernel code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "fmha/status.h"
#include "fmha/types.h"

namespace fmha::detail {

/// kInvalidArgument "<arg>: expected <expected>, got <actual>": the one format of every argument error.
Status invalid_arg(const std::string& arg, const std::string& expected, const std::string& actual);

/// kNotSupported "<arg>: expected <expected>, got <actual>": a valid request that no kernel of this build (or this
/// device) can run, in the same format.
Status unsupported_arg(const std::string& arg, const std::string& expected, const std::string& actual);

/// The shape checks every attention operation starts with, in this order: dtype fp16 or bf16 (else kNotSupported),
/// batch, heads_q, heads_kv ≥ 1, heads_kv divides heads_q, head_dim a positive multiple of 8 (kInvalidArgument), and
/// head_dim ≤ max_head_dim (kNotSupported: no kernel takes it).
Status check_attention_shape(DType dtype, int batch, int heads_q, int heads_kv, int head_dim, int max_head_dim);

/// The lengths and options the forward and the backward share, checked in this order: seqlen_q, seqlen_k in
/// [0, 2^31 − 1025]; cu_seqlens_k set exactly when cu_seqlens_q is (varlen), then total_q, total_k in the same range
/// and both arrays 4-byte aligned; mask and causal_align valid enum values; softmax_scale finite and ≥ 0; sm_count
/// ≥ 0. kInvalidArgument naming the first bad one.
Status check_lengths_and_options(int seqlen_q, int seqlen_k, const int* cu_seqlens_q, const int* cu_seqlens_k,
                                 int total_q, int total_k, MaskType mask, CausalAlign causal_align,
                                 float softmax_scale, int sm_count);

/// Largest stride TMA takes, in elements of 2 bytes (strides are < 2^40 bytes).
constexpr int64_t kMaxTmaStride = (int64_t(1) << 39) - 8;

/// Pointer and strides of one [rows][heads][head_dim] operand named `name` (errors name "<name>_row_stride" etc.;
/// the batch stride is ignored for varlen): non-null, 16-byte aligned, strides positive multiples of 8 elements
/// (16 bytes) below 2^39 elements; a head or batch stride may be 0 where that mode has a single entry or the tensor
/// has no rows.
Status check_bshd_tensor(const char* name, const void* ptr, int64_t row, int64_t head, int64_t batch, int heads,
                         int batches, int64_t rows, bool varlen);

/// One [rows][heads][head_dim] operand for check_bshd_tensors.
struct BshdOperand {
  const char* name;
  const void* ptr;
  int64_t row, head, batch;  ///< strides in elements
  int heads;
  int64_t rows;
};

/// check_bshd_tensor for each operand in turn (the first error wins); `batches` entries (1 for varlen).
Status check_bshd_tensors(std::initializer_list<BshdOperand> operands, int batches, bool varlen);

/// One mode of a tensor: extent and stride (elements), and the name its error shows.
struct TensorMode {
  const char* name;
  int64_t extent, stride;
};

/// A written tensor must not have two elements at one address: with its modes sorted by stride (modes of extent 1
/// do not matter), each stride must be at least the previous stride times the previous extent. kInvalidArgument
/// naming the offending mode, e.g. "o_head_stride: expected ≥ 1024 (O's o_row_stride × extent 8), …".
Status check_no_overlap(const char* tensor, std::vector<TensorMode> modes);

/// ok when `err` is cudaSuccess, else kCudaError "<what>: <CUDA message>"; an error also clears the runtime's
/// last-error slot, so that none is left behind for the caller's next CUDA call.
Status cuda_status(cudaError_t err, const char* what);

/// Attributes of one CUDA device that the launch code needs.
struct DeviceInfo {
  int device = -1;
  int cc_major = 0, cc_minor = 0;  ///< compute capability
  int sm_count = 0;                ///< multiprocessors
};

/// The current device (cudaGetDevice, on every call: the caller may switch devices) and its attributes, which are
/// queried once per device and process and then served from a cache (thread-safe). Errors: kNotSupported
/// "device: expected a CUDA GPU of compute capability 9.x … got none (cudaGetDevice: …)" when there is no device or
/// no driver for this CUDA runtime; kNotSupported "device: expected compute capability 9.x (sm_90a), got M.m" for
/// another architecture; kCudaError for any other failing call.
Status current_sm90_device(DeviceInfo* out);

/// How many times current_sm90_device has queried a device's attributes from the runtime in this process (once per
/// device when the cache works; for tests).
int device_attribute_queries();

/// kInvalidArgument naming the first pointer of `pointers` (name, pointer) that is not null and not device-accessible
/// (host memory that is neither registered nor mapped), as cudaPointerGetAttributes reports it; a kernel that
/// dereferenced such a pointer would fault and poison the CUDA context. One driver query per pointer.
Status check_device_pointers(std::initializer_list<std::pair<const char*, const void*>> pointers);

/// kInvalidArgument naming "workspace" unless `ws` holds at least `needed` bytes at a kWorkspaceAlignment-aligned
/// address (a workspace is not looked at when `needed` is 0).
Status check_workspace(const Workspace& ws, std::size_t needed);

/// The low bits of an address (under `mask`) in hex, "0x…", for alignment messages.
std::string low_hex(const void* p, unsigned mask);

}  // namespace fmha::detail
