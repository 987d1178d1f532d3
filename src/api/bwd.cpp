// Backward attention API: argument validation, the workspace size and the dispatch to the kernel units. Host only.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "api/bwd_workspace.h"
#include "api/host.h"
#include "api/registry.h"
#include "fmha/bwd.h"

namespace fmha {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

Status bad(const std::string& arg, const std::string& expected, const std::string& actual) {
  return detail::invalid_arg(arg, expected, actual);
}

constexpr int kRowBlock = 128;  // keys per block of the main kernel (the key-block bound below)

int head_dim_v_of(const BwdParams& p) { return p.head_dim_v != 0 ? p.head_dim_v : p.head_dim; }

}  // namespace

void set_bwd_contiguous_strides(BwdParams& p) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t d = p.head_dim, dv = head_dim_v_of(p);
  const int64_t sq = varlen ? 0 : p.seqlen_q, sk = varlen ? 0 : p.seqlen_k;
  p.q_row_stride = p.dq_row_stride = int64_t(p.heads_q) * d;
  p.q_head_stride = p.dq_head_stride = d;
  p.q_batch_stride = p.dq_batch_stride = sq * p.heads_q * d;
  p.o_row_stride = p.do_row_stride = int64_t(p.heads_q) * dv;
  p.o_head_stride = p.do_head_stride = dv;
  p.o_batch_stride = p.do_batch_stride = sq * p.heads_q * dv;
  p.k_row_stride = p.dk_row_stride = int64_t(p.heads_kv) * d;
  p.k_head_stride = p.dk_head_stride = d;
  p.k_batch_stride = p.dk_batch_stride = sk * p.heads_kv * d;
  p.v_row_stride = p.dv_row_stride = int64_t(p.heads_kv) * dv;
  p.v_head_stride = p.dv_head_stride = dv;
  p.v_batch_stride = p.dv_batch_stride = sk * p.heads_kv * dv;
}

Status bwd_validate(const BwdParams& p) {
  // Head dims: up to 128 with V's equal to Q's, or the MLA prefill pair 192 / 128.
  const bool mla = p.head_dim == 192 && head_dim_v_of(p) == 128;
  if (Status s = detail::check_attention_shape(p.dtype, p.batch, p.heads_q, p.heads_kv, p.head_dim, mla ? 192 : 128);
      !s)
    return s;
  if (p.head_dim_v < 0 || p.head_dim_v % 8 != 0)
    return bad("head_dim_v", "0 (= head_dim) or a positive multiple of 8", str(p.head_dim_v));
  if (!mla && head_dim_v_of(p) != p.head_dim)
    return detail::unsupported_arg("head_dim_v",
                                   "0 or head_dim (" + str(p.head_dim) + "), or 128 with head_dim 192 (MLA prefill)",
                                   str(p.head_dim_v));
  if (Status s = detail::check_lengths_and_options(p.seqlen_q, p.seqlen_k, p.cu_seqlens_q, p.cu_seqlens_k, p.total_q,
                                                   p.total_k, p.mask, p.causal_align, p.softmax_scale, p.sm_count);
      !s)
    return s;
  const bool varlen = p.cu_seqlens_q != nullptr;
  if (int(p.algorithm) < 0 || int(p.algorithm) > int(BwdAlgorithm::kAuto))
    return bad("algorithm", "kOnePass (0), kTwoPass (1) or kAuto (2)", str(int(p.algorithm)));
  // Head dim 192 / 128 has the two-pass kernels only (the main kernel steps 32 rows there; its dQ product needs 64).
  if (mla && detail::bwd_algorithm(p) == BwdAlgorithm::kOnePass)
    return detail::unsupported_arg("algorithm", "kTwoPass or kAuto at head dims 192 / 128 (no one-pass kernel)",
                                   "kOnePass");
  // The kernels step 32-bit indices: each key block's CTA walks heads_q / heads_kv × ceil(seqlen_q / m) row blocks
  // of m rows (64; 32 at head dim 192), and the grid holds every key block of 128 keys: at most 2^30 of each.
  const int step_rows = detail::bwd_step_rows(p.head_dim);
  const int64_t q_steps = int64_t(p.heads_q / p.heads_kv) * ((int64_t(p.seqlen_q) + step_rows - 1) / step_rows);
  if (q_steps > (int64_t(1) << 30))
    return bad("heads_q / heads_kv × ceil(seqlen_q / " + str(step_rows) + ")", "≤ 2^30 row blocks per key block",
               str(q_steps));
  const int64_t k_tiles = int64_t(p.batch) * p.heads_kv * ((int64_t(p.seqlen_k) + kRowBlock - 1) / kRowBlock);
  if (k_tiles > (int64_t(1) << 30))
    return bad("batch × heads_kv × ceil(seqlen_k / " + str(kRowBlock) + ")", "≤ 2^30 key blocks", str(k_tiles));
  // The two-pass dQ kernel's grid holds every block of 128 query rows of every query head and entry.
  const int64_t q_tiles = detail::bwd_two_pass_row_blocks(p);
  if (detail::bwd_algorithm(p) == BwdAlgorithm::kTwoPass && q_tiles > (int64_t(1) << 30))
    return bad("batch × heads_q × ceil(seqlen_q / 128)", "≤ 2^30 row blocks (two-pass)", str(q_tiles));

  const int batches = varlen ? 1 : p.batch;
  const int64_t rows_q = varlen ? p.total_q : p.seqlen_q, rows_k = varlen ? p.total_k : p.seqlen_k;
  if (Status s = detail::check_bshd_tensors(
          {{"q", p.q, p.q_row_stride, p.q_head_stride, p.q_batch_stride, p.heads_q, rows_q},
           {"k", p.k, p.k_row_stride, p.k_head_stride, p.k_batch_stride, p.heads_kv, rows_k},
           {"v", p.v, p.v_row_stride, p.v_head_stride, p.v_batch_stride, p.heads_kv, rows_k},
           {"o", p.o, p.o_row_stride, p.o_head_stride, p.o_batch_stride, p.heads_q, rows_q},
           {"do", p.d_o, p.do_row_stride, p.do_head_stride, p.do_batch_stride, p.heads_q, rows_q},
           {"dq", p.dq, p.dq_row_stride, p.dq_head_stride, p.dq_batch_stride, p.heads_q, rows_q},
           {"dk", p.dk, p.dk_row_stride, p.dk_head_stride, p.dk_batch_stride, p.heads_kv, rows_k},
           {"dv", p.dv, p.dv_row_stride, p.dv_head_stride, p.dv_batch_stride, p.heads_kv, rows_k}},
          batches, varlen);
      !s)
    return s;
  // The gradients are written: none of them may have two elements at one address.
  struct Written {
    const char* tensor;
    const char *row_name, *head_name, *batch_name;
    int64_t rows, row, heads, head, batch;
    const char* dim_name;
    int64_t dim;
  };
  const int64_t dv = head_dim_v_of(p);
  const Written written[] = {
      {"dQ", "dq_row_stride", "dq_head_stride", "dq_batch_stride", rows_q, p.dq_row_stride, p.heads_q,
       p.dq_head_stride, p.dq_batch_stride, "head_dim", p.head_dim},
      {"dK", "dk_row_stride", "dk_head_stride", "dk_batch_stride", rows_k, p.dk_row_stride, p.heads_kv,
       p.dk_head_stride, p.dk_batch_stride, "head_dim", p.head_dim},
      {"dV", "dv_row_stride", "dv_head_stride", "dv_batch_stride", rows_k, p.dv_row_stride, p.heads_kv,
       p.dv_head_stride, p.dv_batch_stride, "head_dim_v", dv}};
  for (const Written& w : written) {
    if (w.rows == 0) continue;
    std::vector<detail::TensorMode> modes = {{w.dim_name, w.dim, 1}, {w.row_name, w.rows, w.row}, {w.head_name, w.heads, w.head}};
    if (!varlen) modes.push_back({w.batch_name, p.batch, w.batch});
    if (Status s = detail::check_no_overlap(w.tensor, modes); !s) return s;
  }
  if (p.lse == nullptr) return bad("lse", "the forward's LSE (a device pointer)", "null");
  if ((reinterpret_cast<uintptr_t>(p.lse) & 3u) != 0)
    return bad("lse", "a 4-byte aligned address", "an address ending in " + detail::low_hex(p.lse, 3u));
  if ((reinterpret_cast<uintptr_t>(p.d_lse) & 3u) != 0)
    return bad("d_lse", "null or a 4-byte aligned address", "an address ending in " + detail::low_hex(p.d_lse, 3u));
  return Status::ok();
}

BwdAlgorithm bwd_resolve_algorithm(const BwdParams& p) { return detail::bwd_algorithm(p); }

std::size_t bwd_workspace_size(const BwdParams& p) { return detail::bwd_workspace_layout(p).bytes; }

/// The head-dim tile of the unit that runs `p` (validated): 64 or 128; MLA's 192 / 128 has its own key.
detail::KernelKey bwd_key(const BwdParams& p) {
  const int dv = head_dim_v_of(p);
  if (p.head_dim > 128) return {detail::Op::kBwd, p.dtype, p.dtype, p.head_dim, dv};
  const int tile = p.head_dim <= 64 ? 64 : 128;
  return {detail::Op::kBwd, p.dtype, p.dtype, tile, tile};
}

Status bwd(const BwdParams& params, Workspace workspace, cudaStream_t stream) {
  if (Status s = bwd_validate(params); !s) return s;
  if (Status s = detail::check_workspace(workspace, bwd_workspace_size(params)); !s) return s;
  const detail::KernelEntry* e = nullptr;
  if (Status s = detail::find_built_kernel(bwd_key(params), &e); !s) return s;
  detail::DeviceInfo dev;
  if (Status s = detail::current_sm90_device(&dev); !s) return s;
  if (Status s = detail::check_device_pointers({{"q", params.q}, {"k", params.k}, {"v", params.v}, {"o", params.o},
                                                {"do", params.d_o}, {"lse", params.lse}, {"d_lse", params.d_lse},
                                                {"dq", params.dq},
                                                {"dk", params.dk}, {"dv", params.dv},
                                                {"cu_seqlens_q", params.cu_seqlens_q},
                                                {"cu_seqlens_k", params.cu_seqlens_k},
                                                {"workspace", workspace.bytes ? workspace.ptr : nullptr}});
      !s)
    return s;
  BwdParams p = params;
  if (p.softmax_scale == 0.f) p.softmax_scale = 1.f / std::sqrt(float(p.head_dim));
  if (p.head_dim_v == 0) p.head_dim_v = p.head_dim;
  p.algorithm = detail::bwd_algorithm(params);  // the workspace was sized for this choice
  if (p.sm_count <= 0 || p.sm_count > dev.sm_count) p.sm_count = dev.sm_count;
  return reinterpret_cast<detail::bwd_launch_fn*>(e->launch)(p, workspace.ptr, stream);
}

}  // namespace fmha
