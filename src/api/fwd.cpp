// Forward attention API: argument validation, defaults, kernel selection and dispatch (host only, g++).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "api/registry.h"
#include "kernels/fwd_tiles.h"
#include "fmha/fwd.h"

namespace fmha {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

Status bad(const std::string& arg, const std::string& expected, const std::string& actual) {
  return Status::invalid(arg + ": expected " + expected + ", got " + actual);
}

int fwd_tile(int head_dim) { return tiles::fwd_head_dim_tile(head_dim); }

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

Status check_tensor(const char* name, const void* ptr, int64_t row, int64_t head, int64_t batch, bool varlen) {
  const std::string n(name);
  if (ptr == nullptr) return bad(n, "a device pointer", "null");
  if (!aligned16(ptr)) return bad(n, "a 16-byte aligned address", "an address ending in 0x" + [&] {
                                      char buf[8];
                                      std::snprintf(buf, sizeof buf, "%x", unsigned(reinterpret_cast<uintptr_t>(ptr) & 15u));
                                      return std::string(buf);
                                    }());
  if (row <= 0 || row % 8 != 0) return bad(n + "_row_stride", "a positive multiple of 8 elements", str(row));
  if (head < 0 || head % 8 != 0) return bad(n + "_head_stride", "a non-negative multiple of 8 elements", str(head));
  if (!varlen && (batch < 0 || batch % 8 != 0))
    return bad(n + "_batch_stride", "a non-negative multiple of 8 elements", str(batch));
  return Status::ok();
}

}  // namespace

void set_contiguous_strides(FwdParams& p) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t d = p.head_dim;
  p.q_head_stride = p.o_head_stride = d;
  p.k_head_stride = p.v_head_stride = d;
  p.q_row_stride = p.o_row_stride = int64_t(p.heads_q) * d;
  p.k_row_stride = p.v_row_stride = int64_t(p.heads_kv) * d;
  p.q_batch_stride = p.o_batch_stride = varlen ? 0 : int64_t(p.seqlen_q) * p.heads_q * d;
  p.k_batch_stride = p.v_batch_stride = varlen ? 0 : int64_t(p.seqlen_k) * p.heads_kv * d;
}

Status fwd_validate(const FwdParams& p) {
  if (p.dtype != DType::kFP16 && p.dtype != DType::kBF16)
    return Status::unsupported(std::string("dtype: expected fp16 or bf16, got ") + to_string(p.dtype));
  if (p.batch < 1) return bad("batch", "≥ 1", str(p.batch));
  if (p.heads_q < 1) return bad("heads_q", "≥ 1", str(p.heads_q));
  if (p.heads_kv < 1) return bad("heads_kv", "≥ 1", str(p.heads_kv));
  if (p.heads_q % p.heads_kv != 0)
    return bad("heads_q % heads_kv", "0", str(p.heads_q % p.heads_kv) + " (heads_q=" + str(p.heads_q) +
                                              ", heads_kv=" + str(p.heads_kv) + ")");
  if (p.head_dim < 8 || p.head_dim % 8 != 0)
    return bad("head_dim", "a positive multiple of 8", str(p.head_dim));
  if (p.head_dim > tiles::kFwdMaxHeadDim)
    return Status::unsupported("head_dim: expected ≤ " + str(tiles::kFwdMaxHeadDim) + ", got " + str(p.head_dim));
  if (p.seqlen_q < 0) return bad("seqlen_q", "≥ 0", str(p.seqlen_q));
  if (p.seqlen_k < 0) return bad("seqlen_k", "≥ 0", str(p.seqlen_k));
  constexpr int kMaxLen = std::numeric_limits<int32_t>::max() - 1024;  // TMA coordinates and tile indices are int32
  if (p.seqlen_q > kMaxLen) return bad("seqlen_q", "≤ " + str(kMaxLen), str(p.seqlen_q));
  if (p.seqlen_k > kMaxLen) return bad("seqlen_k", "≤ " + str(kMaxLen), str(p.seqlen_k));
  const bool varlen = p.cu_seqlens_q != nullptr;
  if (varlen != (p.cu_seqlens_k != nullptr))
    return bad("cu_seqlens_k", varlen ? "a device pointer (cu_seqlens_q is set)" : "null (cu_seqlens_q is null)",
               varlen ? "null" : "a pointer");
  if (varlen) {
    if (p.total_q < 0) return bad("total_q", "≥ 0", str(p.total_q));
    if (p.total_k < 0) return bad("total_k", "≥ 0", str(p.total_k));
  }
  if (int(p.mask) < 0 || int(p.mask) > int(MaskType::kCausal)) return bad("mask", "none, residual or causal", str(int(p.mask)));
  if (int(p.causal_align) < 0 || int(p.causal_align) > int(CausalAlign::kQEnd))
    return bad("causal_align", "qbegin or qend", str(int(p.causal_align)));
  if (!(p.softmax_scale >= 0.f) || !std::isfinite(p.softmax_scale))
    return bad("softmax_scale", "a finite value ≥ 0 (0 = 1/sqrt(head_dim))", std::to_string(p.softmax_scale));
  if (p.sm_count < 0) return bad("sm_count", "≥ 0 (0 = all SMs)", str(p.sm_count));
  if (int(p.scheduler) < 0 || int(p.scheduler) > int(TileScheduler::kPersistent))
    return bad("scheduler", "auto, individual or persistent", str(int(p.scheduler)));
  if (int(p.pingpong) < 0 || int(p.pingpong) > int(Toggle::kOn)) return bad("pingpong", "auto, off or on", str(int(p.pingpong)));
  const int block_m = tiles::fwd_block_m(fwd_tile(p.head_dim));
  const int64_t m_blocks = (int64_t(p.seqlen_q) + block_m - 1) / block_m;
  const int64_t work_tiles = m_blocks * p.batch * p.heads_q;
  if (work_tiles > std::numeric_limits<int32_t>::max())
    return bad("batch × heads_q × ceil(seqlen_q / " + str(block_m) + ")", "≤ 2^31 − 1 work tiles", str(work_tiles));
  if (Status s = check_tensor("q", p.q, p.q_row_stride, p.q_head_stride, p.q_batch_stride, varlen); !s) return s;
  if (Status s = check_tensor("k", p.k, p.k_row_stride, p.k_head_stride, p.k_batch_stride, varlen); !s) return s;
  if (Status s = check_tensor("v", p.v, p.v_row_stride, p.v_head_stride, p.v_batch_stride, varlen); !s) return s;
  if (Status s = check_tensor("o", p.o, p.o_row_stride, p.o_head_stride, p.o_batch_stride, varlen); !s) return s;
  // O is written: rows and heads must not overlap (a necessary condition; the caller owns the rest of the layout).
  if (p.o_row_stride < p.head_dim) return bad("o_row_stride", "≥ head_dim (" + str(p.head_dim) + ")", str(p.o_row_stride));
  if (p.heads_q > 1 && p.o_head_stride < p.head_dim)
    return bad("o_head_stride", "≥ head_dim (" + str(p.head_dim) + ") when heads_q > 1", str(p.o_head_stride));
  if (p.lse != nullptr && (reinterpret_cast<uintptr_t>(p.lse) & 3u) != 0)
    return bad("lse", "a 4-byte aligned address or null", "a misaligned address");
  return Status::ok();
}

FwdParams fwd_resolve_schedule(const FwdParams& in) {
  FwdParams p = in;
  // Measured on the H200 (docs/perf-log.md, v2, every variant timed in one process): the persistent scheduler
  // wins when every row is short (its producer hides the next tile's first loads behind the current tile), one
  // CTA per tile wins on long rows; ping-pong pays at head dim 128 (long GEMMs to overlap) and costs ~5% at 64.
  if (p.scheduler == TileScheduler::kAuto)
    p.scheduler = p.seqlen_k <= 2048 ? TileScheduler::kPersistent : TileScheduler::kIndividual;
  if (p.pingpong == Toggle::kAuto) p.pingpong = fwd_tile(p.head_dim) > 64 ? Toggle::kOn : Toggle::kOff;
  return p;
}

std::string fwd_kernel_name(const FwdParams& in) {
  if (!fwd_validate(in)) return "";
  const FwdParams p = fwd_resolve_schedule(in);
  std::string mask = p.mask == MaskType::kCausal
                         ? std::string("causal-") + to_string(p.causal_align)
                         : std::string(p.cu_seqlens_q ? "residual" : to_string(p.mask));
  const int t = fwd_tile(p.head_dim);
  return std::string("fwd ") + to_string(p.dtype) + " d" + std::to_string(t) + " tma ws " +
         std::to_string(tiles::fwd_block_m(t)) + "x" + std::to_string(tiles::fwd_block_n(t)) + " " +
         mask + (p.scheduler == TileScheduler::kPersistent ? " persistent" : " individual") +
         (p.pingpong == Toggle::kOn ? " pingpong" : "");
}

std::vector<std::string> fwd_kernel_variants() {
  std::vector<std::string> out;
  for (const auto& e : detail::kernel_registry()) {
    if (std::strcmp(e.op, "fwd") != 0) continue;
    out.push_back(std::string("fwd ") + e.dtype + " d" + str(e.head_dim) + " tma ws " +
                  str(tiles::fwd_block_m(e.head_dim)) + "x" + str(tiles::fwd_block_n(e.head_dim)) +
                  (e.launch ? " (built)" : " (not built)"));
  }
  return out;
}

Status fwd(const FwdParams& params, cudaStream_t stream) {
  if (Status s = fwd_validate(params); !s) return s;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
    return Status(StatusCode::kCudaError, std::string("cudaGetDevice: ") + cudaGetErrorString(e));
  int major = 0, sms = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (major != 9) return Status::unsupported("device: expected compute capability 9.x (sm_90a), got " + str(major) + ".x");

  const int tile = fwd_tile(params.head_dim);
  const char* dtype = to_string(params.dtype);
  for (const auto& e : detail::kernel_registry()) {
    if (std::strcmp(e.op, "fwd") != 0 || std::strcmp(e.dtype, dtype) != 0 || e.head_dim != tile) continue;
    if (e.launch == nullptr)
      return Status(StatusCode::kNotBuilt, std::string("kernel fwd ") + dtype + " d" + str(tile) +
                                               " is not in this build's kernel set '" + detail::kernel_set() + "'");
    FwdParams p = fwd_resolve_schedule(params);
    if (p.softmax_scale == 0.f) p.softmax_scale = 1.f / std::sqrt(float(p.head_dim));
    if (p.sm_count == 0 || p.sm_count > sms) p.sm_count = sms;
    return reinterpret_cast<detail::fwd_launch_fn*>(e.launch)(p, stream);
  }
  return Status(StatusCode::kNotBuilt, std::string("kernel fwd ") + dtype + " d" + str(tile) + " is not in the manifest");
}

}  // namespace fmha
