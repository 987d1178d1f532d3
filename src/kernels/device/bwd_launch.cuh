// Host side of the backward: the workspace's parts, the TMA descriptors, and the launches on one stream: one pass
// (pre-pass, main kernel, convert; kernels/kernel/bwd_kernel.cuh) or two (pre-pass, the main kernel without dQ, the
// dQ kernel; kernels/kernel/bwd_dq_kernel.cuh).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "api/bwd_workspace.h"
#include "api/launch.h"
#include "kernels/device/gmem_view.cuh"
#include "kernels/kernel/bwd_dq_kernel.cuh"
#include "kernels/kernel/bwd_kernel.cuh"

namespace fmha::device {

using namespace cute;

using detail::cuda_status;

/// The parts a backward kernel's parameters `p` share (BwdKernelParams, BwdDqKernelParams): the TMA loads of Q and dO
/// in blocks of Config::kBlockM rows and of K and V in blocks of Config::kBlockN keys over the views mQ, mdO, mK, mV
/// (Q and K of head dim Config::kHeadDim, dO and V of Config::kHeadDimV), their shapes, the varlen offsets, heads,
/// lengths, head dims, scale, mask alignment and workspace.
template <class Config, class Params, class View>
void set_bwd_kernel_params(Params& p, const BwdParams& a, const kernel::BwdWorkspace& w, const View& mQ, const View& mdO,
                           const View& mK, const View& mV) {
  using M = Int<Config::kBlockM>;
  using N = Int<Config::kBlockN>;
  using D = Int<Config::kHeadDim>;
  using DV = Int<Config::kHeadDimV>;
  p.tma_q = make_tma_copy(SM90_TMA_LOAD{}, mQ, take<0, 2>(typename Config::SmemLayoutQ{}), Shape<M, D>{}, _1{});
  p.tma_do = make_tma_copy(SM90_TMA_LOAD{}, mdO, take<0, 2>(typename Config::SmemLayoutdO{}), Shape<M, DV>{}, _1{});
  p.tma_k = make_tma_copy(SM90_TMA_LOAD{}, mK, take<0, 2>(typename Config::SmemLayoutK{}), Shape<N, D>{}, _1{});
  p.tma_v = make_tma_copy(SM90_TMA_LOAD{}, mV, take<0, 2>(typename Config::SmemLayoutV{}), Shape<N, DV>{}, _1{});
  p.shape_q = mQ.shape();
  p.shape_do = mdO.shape();
  p.shape_k = mK.shape();
  p.shape_v = mV.shape();
  p.cu_q = a.cu_seqlens_q, p.cu_k = a.cu_seqlens_k, p.total_q = a.total_q, p.total_k = a.total_k;
  p.group = a.heads_q / a.heads_kv, p.head_dim = a.head_dim;
  p.head_dim_v = a.head_dim_v;  // set by fmha::bwd (0 there means head_dim)
  p.seqlen_q = a.seqlen_q, p.seqlen_k = a.seqlen_k;
  p.scale = a.softmax_scale;
  p.scale_log2 = a.softmax_scale * 1.4426950408889634f;
  p.causal_qend = a.causal_align == CausalAlign::kQEnd;
  p.ws = w;
}

/// Sets the dynamic shared memory of `kernel` to `smem` bytes and launches it on `tiles` CTAs of `threads`.
template <class Kernel, class Params>
Status launch_bwd_kernel(Kernel kernel, const Params& p, int64_t tiles, int threads, int smem, cudaStream_t stream,
                         const char* name) {
  const std::string attribute = std::string("cudaFuncSetAttribute(") + name + ", max dynamic shared memory)";
  if (Status s = cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                             attribute.c_str());
      !s)
    return s;
  kernel<<<unsigned(tiles), threads, smem, stream>>>(p);
  return cuda_status(cudaGetLastError(), (std::string("launch ") + name).c_str());
}

template <class Config, bool Causal>
Status bwd_run(const BwdParams& a, void* workspace, cudaStream_t stream) {
  using Element = typename Config::Element;
  const bool varlen = a.cu_seqlens_q != nullptr;
  const bool two_pass = a.algorithm == BwdAlgorithm::kTwoPass;
  const detail::BwdWorkspaceLayout layout = detail::bwd_workspace_layout(a);
  char* ws = static_cast<char*>(workspace);
  kernel::BwdWorkspace w{};
  w.dsum = reinterpret_cast<float*>(ws + layout.dsum);
  w.lse2 = reinterpret_cast<float*>(ws + layout.lse2);
  w.dq_acc = layout.has_dq_acc ? reinterpret_cast<float*>(ws + layout.dq_acc) : nullptr;
  w.order = layout.has_order ? reinterpret_cast<int*>(ws + layout.order) : nullptr;
  w.rows = layout.rows;
  w.dq_row = layout.dq_row;

  kernel::BwdRowParams<Element> rp{};
  const int head_dim_v = a.head_dim_v;  // set by fmha::bwd (0 there means head_dim)
  rp.batch = a.batch, rp.heads_q = a.heads_q, rp.head_dim = a.head_dim, rp.head_dim_v = head_dim_v;
  rp.seqlen_q = a.seqlen_q;
  rp.cu_q = a.cu_seqlens_q, rp.total_q = a.total_q;
  rp.o = static_cast<const Element*>(a.o), rp.d_o = static_cast<const Element*>(a.d_o);
  rp.dq = static_cast<Element*>(a.dq);
  rp.o_row_stride = a.o_row_stride, rp.o_head_stride = a.o_head_stride, rp.o_batch_stride = a.o_batch_stride;
  rp.do_row_stride = a.do_row_stride, rp.do_head_stride = a.do_head_stride, rp.do_batch_stride = a.do_batch_stride;
  rp.dq_row_stride = a.dq_row_stride, rp.dq_head_stride = a.dq_head_stride, rp.dq_batch_stride = a.dq_batch_stride;
  rp.lse = a.lse;
  rp.d_lse = a.d_lse;
  rp.scale = a.softmax_scale;
  rp.ws = w;
  const unsigned batch_grid = unsigned(std::min(a.batch, 65535)), heads_grid = unsigned(std::min(a.heads_q, 65535));
  const int rows_q = varlen ? a.total_q : a.seqlen_q;
  const int rows_k = varlen ? a.total_k : a.seqlen_k;
  // (rows, head dim, heads, batch) views of the caller's tensors, as the forward's (device/gmem_view.cuh).
  // Q, K (and dQ, dK) have head_dim columns, V, O, dO (and dV) head_dim_v.
  auto gmem = [&](const void* ptr, int rows, int dim, int heads, int64_t rs, int64_t hs, int64_t bs) {
    return bshd_gmem_view<Element, typename Config::GmemShape, typename Config::GmemStride>(
        ptr, rows, dim, heads, varlen ? 1 : a.batch, rs, hs, bs);
  };
  const int d = a.head_dim, dv = head_dim_v;

  if (a.seqlen_q > 0) {
    const dim3 grid(unsigned((a.seqlen_q + 63) / 64 * 64 / 8), heads_grid, batch_grid);
    kernel::bwd_prepass_kernel<Element><<<grid, 256, 0, stream>>>(rp);
    if (Status s = cuda_status(cudaGetLastError(), "launch bwd_prepass_kernel"); !s) return s;
  }

  // The main kernel: every key block of every entry (dK and dV of keys no row sees, e.g. all of them when there are
  // no query rows, are written as zeros).
  const int n_blocks = (a.seqlen_k + Config::kBlockN - 1) / Config::kBlockN;
  const int64_t tiles = int64_t(n_blocks) * a.heads_kv * a.batch;
  if (tiles > 0 && rows_k > 0) {
    auto mQ = gmem(a.q, rows_q, d, a.heads_q, a.q_row_stride, a.q_head_stride, a.q_batch_stride);
    auto mdO = gmem(a.d_o, rows_q, dv, a.heads_q, a.do_row_stride, a.do_head_stride, a.do_batch_stride);
    auto mK = gmem(a.k, rows_k, d, a.heads_kv, a.k_row_stride, a.k_head_stride, a.k_batch_stride);
    auto mV = gmem(a.v, rows_k, dv, a.heads_kv, a.v_row_stride, a.v_head_stride, a.v_batch_stride);
    kernel::BwdKernelParams<Config> p{};
    set_bwd_kernel_params<Config>(p, a, w, mQ, mdO, mK, mV);
    p.dk = static_cast<Element*>(a.dk), p.dv = static_cast<Element*>(a.dv);
    p.dk_row_stride = a.dk_row_stride, p.dk_head_stride = a.dk_head_stride, p.dk_batch_stride = a.dk_batch_stride;
    p.dv_row_stride = a.dv_row_stride, p.dv_head_stride = a.dv_head_stride, p.dv_batch_stride = a.dv_batch_stride;
    p.heads_kv = a.heads_kv;
    p.n_blocks = n_blocks;
    auto kernel = kernel::bwd_kernel<Config, Causal, false>;
    if constexpr (Config::kOnePass) {
      if (!two_pass) kernel = kernel::bwd_kernel<Config, Causal, true>;
    } else if (!two_pass) {  // bwd_validate rejects it first
      return Status::unsupported("algorithm: one pass is not built for head dims " + std::to_string(d) + " / " +
                                 std::to_string(dv) + " (expected two_pass)");
    }
    if (Status s = launch_bwd_kernel(kernel, p, tiles, Config::kThreads, Config::kSmemBytes, stream, "bwd_kernel"); !s)
      return s;
  }

  if (two_pass) {  // the dQ kernel: every row block of every query head and entry
    using DqConfig = kernel::BwdDqConfig<Element, Config::kHeadDim, Config::kHeadDimV>;
    const int m_blocks = (a.seqlen_q + DqConfig::kBlockM - 1) / DqConfig::kBlockM;
    const int64_t q_tiles = int64_t(m_blocks) * a.heads_q * a.batch;
    if (q_tiles == 0 || rows_q == 0) return Status::ok();
    auto mQ = gmem(a.q, rows_q, d, a.heads_q, a.q_row_stride, a.q_head_stride, a.q_batch_stride);
    auto mdO = gmem(a.d_o, rows_q, dv, a.heads_q, a.do_row_stride, a.do_head_stride, a.do_batch_stride);
    // Without any key (rows_k = 0) no CTA loads K or V, but the parameters still hold descriptors: Q's and dO's
    // stand in.
    auto mK = rows_k > 0 ? gmem(a.k, rows_k, d, a.heads_kv, a.k_row_stride, a.k_head_stride, a.k_batch_stride) : mQ;
    auto mV = rows_k > 0 ? gmem(a.v, rows_k, dv, a.heads_kv, a.v_row_stride, a.v_head_stride, a.v_batch_stride) : mdO;
    kernel::BwdDqKernelParams<DqConfig> p{};
    set_bwd_kernel_params<DqConfig>(p, a, w, mQ, mdO, mK, mV);
    p.dq = static_cast<Element*>(a.dq);
    p.dq_row_stride = a.dq_row_stride, p.dq_head_stride = a.dq_head_stride, p.dq_batch_stride = a.dq_batch_stride;
    p.heads_q = a.heads_q;
    p.m_blocks = m_blocks;
    return launch_bwd_kernel(kernel::bwd_dq_kernel<DqConfig, Causal>, p, q_tiles, DqConfig::kThreads,
                             DqConfig::kSmemBytes, stream, "bwd_dq_kernel");
  }

  if constexpr (Config::kOnePass) {
    if (a.seqlen_q > 0) {
      const dim3 grid(unsigned((a.seqlen_q + Config::kBlockM - 1) / Config::kBlockM), heads_grid, batch_grid);
      kernel::bwd_convert_kernel<Config><<<grid, 256, 0, stream>>>(rp);
      if (Status s = cuda_status(cudaGetLastError(), "launch bwd_convert_kernel"); !s) return s;
    }
  }
  return Status::ok();
}

/// Launch function of one (dtype, head dim of Q and K, head dim of V) backward unit: picks the mask variant.
template <class Element, int HeadDim, int HeadDimV = HeadDim>
Status bwd_launch(const BwdParams& a, void* workspace, cudaStream_t stream) {
  using Config = kernel::BwdConfig<Element, HeadDim, HeadDimV>;
  if (a.mask == MaskType::kCausal) return bwd_run<Config, true>(a, workspace, stream);
  return bwd_run<Config, false>(a, workspace, stream);
}

}  // namespace fmha::device
