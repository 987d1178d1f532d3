// Forward attention API: argument validation, defaults, kernel selection and dispatch (host only, g++).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "api/host.h"
#include "api/registry.h"
#include "fmha/fwd.h"
#include "kernels/fwd_tiles.h"

namespace fmha {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

Status bad(const std::string& arg, const std::string& expected, const std::string& actual) {
  return detail::invalid_arg(arg, expected, actual);
}

int fwd_tile(int head_dim) { return tiles::fwd_head_dim_tile(head_dim); }

/// Query rows per CTA tile of the kernel that runs `p` (the launch code picks its Config by the same rule).
int fwd_rows_per_tile(const FwdParams& p) {
  return tiles::fwd_rows_per_tile(p.head_dim, p.mask == MaskType::kCausal, p.seqlen_k);
}

using detail::low_hex;

/// The registry key of the unit that runs `p` (validated): its dtypes and head-dim tile.
detail::KernelKey fwd_key(const FwdParams& p) {
  const int tile = fwd_tile(p.head_dim);
  return {detail::Op::kFwd, p.dtype, p.out_dtype.value_or(p.dtype), tile, tile};
}

/// O is written, so no two of its elements may share an address (detail::check_no_overlap over its modes).
Status check_output_layout(const FwdParams& p, bool varlen) {
  if ((varlen ? p.total_q : p.seqlen_q) == 0) return Status::ok();  // no rows: nothing is written
  std::vector<detail::TensorMode> modes = {
      p.head_dim_v != 0 ? detail::TensorMode{"head_dim_v", p.head_dim_v, 1} : detail::TensorMode{"head_dim", p.head_dim, 1},
      {"o_row_stride", varlen ? p.total_q : p.seqlen_q, p.o_row_stride},
      {"o_head_stride", p.heads_q, p.o_head_stride}};
  if (!varlen) modes.push_back({"o_batch_stride", p.batch, p.o_batch_stride});
  return detail::check_no_overlap("O", modes);
}

}  // namespace

void set_contiguous_strides(FwdParams& p) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t d = p.head_dim, dv = p.head_dim_v != 0 ? p.head_dim_v : p.head_dim;
  p.q_head_stride = p.k_head_stride = d;
  p.v_head_stride = p.o_head_stride = dv;
  p.q_row_stride = int64_t(p.heads_q) * d;
  p.o_row_stride = int64_t(p.heads_q) * dv;
  p.k_row_stride = int64_t(p.heads_kv) * d;
  p.v_row_stride = int64_t(p.heads_kv) * dv;
  p.q_batch_stride = varlen ? 0 : int64_t(p.seqlen_q) * p.heads_q * d;
  p.o_batch_stride = varlen ? 0 : int64_t(p.seqlen_q) * p.heads_q * dv;
  p.k_batch_stride = varlen ? 0 : int64_t(p.seqlen_k) * p.heads_kv * d;
  p.v_batch_stride = varlen ? 0 : int64_t(p.seqlen_k) * p.heads_kv * dv;
}

Status fwd_validate(const FwdParams& p) {
  if (Status s = detail::check_attention_shape(p.dtype, p.batch, p.heads_q, p.heads_kv, p.head_dim,
                                               tiles::kFwdMaxHeadDim);
      !s)
    return s;
  if (p.head_dim_v != 0 && p.head_dim_v != p.head_dim)
    return detail::unsupported_arg("head_dim_v",
                                   "0 or head_dim (" + str(p.head_dim) +
                                       "; no forward kernel has another head dim for V yet)",
                                   str(p.head_dim_v));
  if (p.out_dtype && *p.out_dtype != p.dtype)
    return detail::unsupported_arg("out_dtype",
                                   std::string("the input dtype (") + to_string(p.dtype) +
                                       "; no forward kernel writes another type yet)",
                                   to_string(*p.out_dtype));
  if (Status s = detail::check_lengths_and_options(p.seqlen_q, p.seqlen_k, p.cu_seqlens_q, p.cu_seqlens_k, p.total_q,
                                                   p.total_k, p.mask, p.causal_align, p.softmax_scale, p.sm_count);
      !s)
    return s;
  const bool varlen = p.cu_seqlens_q != nullptr;
  if (int(p.scheduler) < 0 || int(p.scheduler) > int(TileScheduler::kPersistent))
    return bad("scheduler", "auto, individual or persistent", str(int(p.scheduler)));
  if (int(p.pingpong) < 0 || int(p.pingpong) > int(Toggle::kOn)) return bad("pingpong", "auto, off or on", str(int(p.pingpong)));
  const int block_m = fwd_rows_per_tile(p);
  const int64_t m_blocks = (int64_t(p.seqlen_q) + block_m - 1) / block_m;
  const int64_t work_tiles = m_blocks * p.batch * p.heads_q;
  if (work_tiles > (int64_t(1) << 30))  // the kernels step a 32-bit tile index by up to the grid size
    return bad("batch × heads_q × ceil(seqlen_q / " + str(block_m) + ")", "≤ 2^30 work tiles", str(work_tiles));
  const int batches = varlen ? 1 : p.batch;
  const int64_t rows_q = varlen ? p.total_q : p.seqlen_q, rows_k = varlen ? p.total_k : p.seqlen_k;
  if (Status s = detail::check_bshd_tensors(
          {{"q", p.q, p.q_row_stride, p.q_head_stride, p.q_batch_stride, p.heads_q, rows_q},
           {"k", p.k, p.k_row_stride, p.k_head_stride, p.k_batch_stride, p.heads_kv, rows_k},
           {"v", p.v, p.v_row_stride, p.v_head_stride, p.v_batch_stride, p.heads_kv, rows_k},
           {"o", p.o, p.o_row_stride, p.o_head_stride, p.o_batch_stride, p.heads_q, rows_q}},
          batches, varlen);
      !s)
    return s;
  if (Status s = check_output_layout(p, varlen); !s) return s;
  if (p.lse != nullptr && (reinterpret_cast<uintptr_t>(p.lse) & 3u) != 0)
    return bad("lse", "a 4-byte aligned address or null", "an address ending in " + low_hex(p.lse, 3u));
  return Status::ok();
}

FwdParams fwd_resolve_schedule(const FwdParams& in) {
  FwdParams p = in;
  // Measured on the H200, every variant timed in one process (docs/perf-log.md, v2 and v5). Since the tile order
  // keeps the CTAs that run together on the K/V of a few heads (v5, dense non-causal problems), the persistent
  // scheduler with each consumer warpgroup free-running (no ping-pong) is the fastest dense non-causal schedule at
  // every length and both head dims (d 128: +3-4 % over ping-pong from 1k, +2-9 % over one CTA per tile). Causal
  // and varlen problems keep v2's choice: persistent when every row is short (its producer hides the next tile's
  // first loads), one CTA per tile on long rows (the hardware balances the unequal causal tiles better than the
  // static round robin), and ping-pong at head dim 128 causal (+2-8 % there; at d <= 64 it costs 2-10 %, v2/v5).
  // "Short" is up to 4096 keys for dense causal problems (persistent was 0.3-2.6 % faster at 4k in each of three
  // runs at both head dims, v7; one CTA per tile wins from 8k) and up to 2048 for varlen (a mixed batch of entries
  // up to 4096 keys ran 2 % slower persistent at d 128 causal, v5).
  const bool causal = p.mask == MaskType::kCausal;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const bool dense_noncausal = !causal && !varlen;
  const int persistent_max_keys = varlen ? 2048 : 4096;
  if (p.scheduler == TileScheduler::kAuto)
    p.scheduler = dense_noncausal || p.seqlen_k <= persistent_max_keys ? TileScheduler::kPersistent
                                                                       : TileScheduler::kIndividual;
  if (p.pingpong == Toggle::kAuto) p.pingpong = causal && fwd_tile(p.head_dim) > 64 ? Toggle::kOn : Toggle::kOff;
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
         std::to_string(fwd_rows_per_tile(p)) + "x" +
         std::to_string(tiles::fwd_block_n(t)) + " " +
         mask + (p.scheduler == TileScheduler::kPersistent ? " persistent" : " individual") +
         (p.pingpong == Toggle::kOn ? " pingpong" : "");
}

std::vector<std::string> fwd_kernel_variants() {
  std::vector<std::string> out;
  for (const auto& e : detail::kernel_registry()) {
    if (e.key.op != detail::Op::kFwd) continue;
    const int d = e.key.head_dim_qk;
    out.push_back(std::string("fwd ") + to_string(e.key.in) + " d" + str(d) +
                  (e.key.head_dim_v != d ? " dv" + str(e.key.head_dim_v) : std::string()) +
                  (e.key.out != e.key.in ? std::string(" out ") + to_string(e.key.out) : std::string()) + " tma ws " +
                  str(tiles::fwd_block_m(d)) + "x" + str(tiles::fwd_block_n(d)) +
                  (e.launch ? " (built)" : " (not built)"));
  }
  return out;
}

std::size_t fwd_workspace_size(const FwdParams&) { return 0; }

Status fwd(const FwdParams& params, cudaStream_t stream) { return fwd(params, Workspace{}, stream); }

Status fwd(const FwdParams& params, Workspace workspace, cudaStream_t stream) {
  // Checks that need no GPU first (arguments, workspace, the kernel in this build), then the device and pointers.
  if (Status s = fwd_validate(params); !s) return s;
  if (Status s = detail::check_workspace(workspace, fwd_workspace_size(params)); !s) return s;
  const detail::KernelEntry* e = nullptr;
  if (Status s = detail::find_built_kernel(fwd_key(params), &e); !s) return s;
  detail::DeviceInfo dev;
  if (Status s = detail::current_sm90_device(&dev); !s) return s;
  if (Status s = detail::check_device_pointers({{"q", params.q}, {"k", params.k}, {"v", params.v}, {"o", params.o},
                                                {"lse", params.lse}, {"cu_seqlens_q", params.cu_seqlens_q},
                                                {"cu_seqlens_k", params.cu_seqlens_k}});
      !s)
    return s;

  FwdParams p = fwd_resolve_schedule(params);
  if (p.softmax_scale == 0.f) p.softmax_scale = 1.f / std::sqrt(float(p.head_dim));
  if (p.sm_count == 0 || p.sm_count > dev.sm_count) p.sm_count = dev.sm_count;
  return reinterpret_cast<detail::fwd_launch_fn*>(e->launch)(p, stream);
}

}  // namespace fmha
