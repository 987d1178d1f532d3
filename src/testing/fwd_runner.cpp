// See fwd_runner.h.
#include "testing/fwd_runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "api/host.h"
#include "kernels/fwd_tiles.h"
#include "reference/attention.h"
#include "reference/dtype.h"
#include "testing/device_buffer.h"
#include "testing/gpu_reference.h"
#include "testing/harness.h"

namespace fmha::testing {
namespace {

constexpr uint16_t kNaNBits = 0x7FFF;  // a NaN in both fp16 and bf16

uint16_t to_bits(DType t, float x) { return t == DType::kFP16 ? ref::float_to_half_bits(x) : ref::float_to_bf16_bits(x); }
float from_bits(DType t, uint16_t b) { return t == DType::kFP16 ? ref::half_bits_to_float(b) : ref::bf16_bits_to_float(b); }

#define FMHA_TRY_CUDA(call)                                                                              \
  do {                                                                                                   \
    cudaError_t e_ = (call);                                                                             \
    if (e_ != cudaSuccess) return Status(StatusCode::kCudaError, std::string(#call) + ": " + cudaGetErrorString(e_)); \
  } while (0)

/// A host tensor [rows][heads][d] with row stride heads·d + pad, stored as float, plus its device copy.
struct HostTensor {
  int rows = 0, heads = 0, d = 0, pad = 0;
  std::vector<float> data;
  int64_t row_stride() const { return int64_t(heads) * d + pad; }
  void init(int r, int h, int dd, int p) {
    rows = r, heads = h, d = dd, pad = p;
    data.assign(size_t(r) * row_stride(), std::numeric_limits<float>::quiet_NaN());
  }
  float& at(int64_t row, int h, int j) { return data[size_t(row * row_stride() + int64_t(h) * d + j)]; }
};

struct DeviceBuf {
  void* p = nullptr;
  DeviceBuf() = default;
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  ~DeviceBuf() { if (p) cudaFree(p); }
};

/// Times c.iterations launches of fmha::fwd (after c.warmup untimed ones), rotating through c.ring_sets copies of
/// Q, K, V and O (set 0 is the checked one; the others are device copies of it).
Status time_launches(const FwdCase& c, FwdParams p, std::vector<void*> set0, std::vector<size_t> bytes,
                     cudaStream_t stream, std::vector<double>& times) {
  const int sets = std::max(1, c.ring_sets);
  std::vector<DeviceBuf> extra(size_t(sets - 1) * 4);
  for (int s = 1; s < sets; ++s)
    for (int t = 0; t < 4; ++t) {
      DeviceBuf& b = extra[size_t(s - 1) * 4 + t];
      FMHA_TRY_CUDA(cudaMalloc(&b.p, std::max<size_t>(bytes[t], 1)));
      FMHA_TRY_CUDA(cudaMemcpyAsync(b.p, set0[t], bytes[t], cudaMemcpyDeviceToDevice, stream));
    }
  FMHA_TRY_CUDA(cudaStreamSynchronize(stream));
  auto select = [&](int it) {
    const int s = it % sets;
    auto ptr = [&](int t) { return s == 0 ? set0[t] : extra[size_t(s - 1) * 4 + t].p; };
    p.q = ptr(0), p.k = ptr(1), p.v = ptr(2), p.o = ptr(3);
  };
  for (int it = 0; it < c.warmup; ++it) {
    select(it);
    if (Status st = fwd(p, stream); !st) return st;
  }
  times.clear();
  return time_calls(c.iterations, [&](int it) { select(it); return fwd(p, stream); }, nullptr, stream, times);
}

}  // namespace

std::string FwdOutcome::summary() const {
  bool more = false;
  std::ostringstream s;
  s << outcome_summary_head(status, checked, o, lse, &more);
  if (!more) return s.str();
  if (!untouched) s << " | memory outside the valid rows of O or LSE (or a guard band) was written";
  if (!all_written) s << " | some valid elements of O or LSE were never written (still NaN)";
  if (!write_problem.empty()) s << " (" << write_problem << ")";
  return s.str();
}

FwdParams make_fwd_params(const FwdCase& c, const void* q, const void* k, const void* v, void* o, float* lse,
                          const int* cu_q, const int* cu_k) {
  const int B = c.batch, D = c.head_dim;
  const int sq_max = c.seqlens_q.empty() ? 0 : *std::max_element(c.seqlens_q.begin(), c.seqlens_q.end());
  const int sk_max = c.seqlens_k.empty() ? 0 : *std::max_element(c.seqlens_k.begin(), c.seqlens_k.end());
  int64_t total_q = c.extra_rows, total_k = c.extra_rows;
  for (int x : c.seqlens_q) total_q += x;
  for (int x : c.seqlens_k) total_k += x;
  const int64_t q_row = int64_t(c.heads_q) * D + c.row_pad, k_row = int64_t(c.heads_kv) * D + c.row_pad;
  FwdParams p;
  p.dtype = c.dtype;
  p.batch = B;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim = D;
  p.seqlen_q = sq_max;
  p.seqlen_k = sk_max;
  if (c.varlen) {
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    p.total_q = int(std::min<int64_t>(total_q, INT32_MAX));
    p.total_k = int(std::min<int64_t>(total_k, INT32_MAX));
  }
  p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse;
  p.q_row_stride = p.o_row_stride = q_row;
  p.k_row_stride = p.v_row_stride = k_row;
  p.q_head_stride = p.o_head_stride = p.k_head_stride = p.v_head_stride = D;
  p.q_batch_stride = p.o_batch_stride = c.varlen ? 0 : int64_t(sq_max) * q_row;
  p.k_batch_stride = p.v_batch_stride = c.varlen ? 0 : int64_t(sk_max) * k_row;
  p.mask = c.mask;
  p.causal_align = c.align;
  p.softmax_scale = c.scale;
  p.scheduler = c.scheduler;
  p.pingpong = c.pingpong;
  p.sm_count = c.sm_count;
  return p;
}

FwdOutcome run_fwd_case(const FwdCase& c, bool check, cudaStream_t stream) {
  FwdOutcome out;
  const int B = c.batch, H = c.heads_q, HK = c.heads_kv, D = c.head_dim;
  std::vector<int> cu_q = ref::cumulative(c.seqlens_q), cu_k = ref::cumulative(c.seqlens_k);
  const int sq_max = c.seqlens_q.empty() ? 0 : *std::max_element(c.seqlens_q.begin(), c.seqlens_q.end());
  const int sk_max = c.seqlens_k.empty() ? 0 : *std::max_element(c.seqlens_k.begin(), c.seqlens_k.end());
  const int rows_q = c.varlen ? cu_q[B] + c.extra_rows : B * sq_max;
  const int rows_k = c.varlen ? cu_k[B] + c.extra_rows : B * sk_max;

  // Host data: valid rows random (rounded to the dtype), everything else NaN.
  HostTensor q, k, v, o;
  q.init(rows_q, H, D, c.row_pad);
  k.init(rows_k, HK, D, c.row_pad);
  v.init(rows_k, HK, D, c.row_pad);
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto fill = [&](HostTensor& t, const std::vector<int>& lens, const std::vector<int>& cu, int dense_len, bool is_q,
                  const char* name) {
    std::vector<float> custom;
    if (c.fill) {
      int64_t n = 0;
      for (int b = 0; b < B; ++b) n += int64_t(lens[b]) * t.heads * D;
      custom.assign(size_t(n), 0.f);
      c.fill(name, custom);
    }
    size_t idx = 0;
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < lens[b]; ++i) {
        const int64_t row = c.varlen ? cu[b] + i : int64_t(b) * dense_len + i;
        for (int h = 0; h < t.heads; ++h)
          for (int j = 0; j < D; ++j) {
            float x = c.fill ? custom[idx++] : c.init == 'z' ? 0.f : (c.init == 'c' && is_q) ? c.q_value : normal(rng);
            t.at(row, h, j) = ref::round_to(c.dtype, x);
          }
      }
  };
  fill(q, c.seqlens_q, cu_q, sq_max, true, "q");
  fill(k, c.seqlens_k, cu_k, sk_max, false, "k");
  fill(v, c.seqlens_k, cu_k, sk_max, false, "v");

  auto upload = [&](const HostTensor& t, DeviceBuf& buf, bool poison) -> Status {
    std::vector<uint16_t> bits(t.data.size());
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = poison ? kNaNBits : to_bits(c.dtype, t.data[i]);
    FMHA_TRY_CUDA(cudaMalloc(&buf.p, std::max<size_t>(bits.size(), 1) * 2));
    FMHA_TRY_CUDA(cudaMemcpy(buf.p, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
    return Status::ok();
  };
  DeviceBuf dq, dk, dv, dcuq, dcuk;
  o.init(rows_q, H, D, c.row_pad);
  for (auto pr : {std::make_pair(&q, &dq), std::make_pair(&k, &dk), std::make_pair(&v, &dv)}) {
    if (Status s = upload(*pr.first, *pr.second, false); !s) return out.status = s, out;
  }
  // Outputs poisoned with NaN inside guard bands (testing/device_buffer.h).
  GuardedBuffer dO, dlse;
  if (Status s = dO.allocate(o.data.size(), 2); !s) return out.status = s, out;
  // LSE layout: dense [B][H][Sq]; varlen [H][total_q] with total_q = the rows of Q (trailing rows included).
  const size_t lse_n = size_t(H) * (c.varlen ? size_t(rows_q) : size_t(B) * sq_max);
  if (Status s = dlse.allocate(lse_n, 4); !s) return out.status = s, out;
  {
    cudaError_t e = cudaSuccess;
    if (c.varlen && e == cudaSuccess) e = cudaMalloc(&dcuq.p, cu_q.size() * 4);
    if (c.varlen && e == cudaSuccess) e = cudaMemcpy(dcuq.p, cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice);
    if (c.varlen && e == cudaSuccess) e = cudaMalloc(&dcuk.p, cu_k.size() * 4);
    if (c.varlen && e == cudaSuccess) e = cudaMemcpy(dcuk.p, cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return out.status = Status(StatusCode::kCudaError, std::string("harness setup: ") + cudaGetErrorString(e)), out;
  }

  FwdParams p = make_fwd_params(c, dq.p, dk.p, dv.p, dO.data(), static_cast<float*>(dlse.data()),
                                static_cast<const int*>(dcuq.p), static_cast<const int*>(dcuk.p));
  out.status = fwd(p, stream);
  if (!out.status) return out;
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
    return out.status = Status(StatusCode::kCudaError, std::string("kernel execution: ") + cudaGetErrorString(e)), out;

  out.o_bits.resize(o.data.size());
  out.lse_all.resize(lse_n);
  bool o_guards = true, lse_guards = true;
  if (Status s = dO.download(out.o_bits.data(), o_guards); !s) return out.status = s, out;
  if (Status s = dlse.download(out.lse_all.data(), lse_guards); !s) return out.status = s, out;
  if (c.iterations > 0) {
    if (Status st = time_launches(c, p, {dq.p, dk.p, dv.p, dO.data()}, {q.data.size() * 2, k.data.size() * 2,
                                  v.data.size() * 2, o.data.size() * 2}, stream, out.times_ms); !st)
      return out.status = st, out;
  }
  if (!check) return out;
  out.checked = true;

  // Which heads and rows to check.
  std::vector<int> heads;
  if (c.check_heads <= 0 || c.check_heads >= H) {
    for (int h = 0; h < H; ++h) heads.push_back(h);
  } else {
    for (int t = 0; t < c.check_heads; ++t) heads.push_back(int(int64_t(t) * (H - 1) / std::max(1, c.check_heads - 1)));
  }
  // Reference jobs, one per (entry, checked head), run on all host cores.
  struct Job {
    int b, h, r0, n;
    std::vector<float> oe, ok, le, lk;
  };
  std::vector<Job> jobs;
  std::vector<char> written(o.data.size(), 0);  // O elements the kernel may write
  for (int b = 0; b < B; ++b) {
    const int sq = c.seqlens_q[b];
    const int64_t q0 = c.varlen ? cu_q[b] : int64_t(b) * sq_max;
    for (int64_t i = 0; i < sq; ++i)
      for (int h = 0; h < H; ++h)
        std::fill_n(written.begin() + size_t((q0 + i) * o.row_stride() + int64_t(h) * D), D, char(1));
    const int r0 = (c.check_rows > 0 && c.check_rows < sq) ? sq - c.check_rows : 0;
    if (sq - r0 == 0) continue;
    for (int h : heads) jobs.push_back(Job{b, h, r0, sq - r0, {}, {}, {}, {}});
  }
  const double scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt(double(D));
  // The kernel that runs this problem sums the softmax rows on the tensor cores (of the rounded P) or in fp32: the
  // kernel model follows it (the tile height by the API's rule, tiles::fwd_rows_per_tile).
  const bool causal = c.mask == MaskType::kCausal;
  const bool row_sum_rounded_p = tiles::fwd_mma_row_sum(tiles::fwd_rows_per_tile(D, causal, sk_max), causal);
  auto run_job = [&](Job& jb) {
    const int b = jb.b, h = jb.h, r0 = jb.r0, n = jb.n;
    const int sq = c.seqlens_q[b], sk = c.seqlens_k[b];
    const int64_t q0 = c.varlen ? cu_q[b] : int64_t(b) * sq_max;
    const int64_t k0 = c.varlen ? cu_k[b] : int64_t(b) * sk_max;
    const int hk = h / (H / HK);
    // Sub-problem: rows [r0, sq) of head h. A causal mask becomes a q-end mask over keys [0, r0 + n + offset),
    // so that sub-row i' sees exactly the keys that row r0 + i' sees in the full problem.
    ref::AttnShape s;
    s.batch = 1, s.heads_q = 1, s.heads_kv = 1, s.head_dim_qk = D, s.head_dim_v = D;
    s.seqlens_q = {n};
    s.scale = scale;
    s.dtype = c.dtype;
    int key_end = sk;
    if (c.mask == MaskType::kCausal) {
      const int offset = c.align == CausalAlign::kQEnd ? sk - sq : 0;
      s.seqlens_k = {std::max(0, r0 + n + offset)};
      s.mask = MaskType::kCausal;
      s.align = CausalAlign::kQEnd;
      key_end = std::min(sk, s.seqlens_k[0]);
    } else {
      s.seqlens_k = {sk};
    }
    auto view = [&](HostTensor& t, int64_t row0, int head) {
      ref::ConstView vw;
      vw.data = t.data.data() + row0 * t.row_stride() + int64_t(head) * D;
      vw.stride_row = t.row_stride();
      vw.stride_head = D;
      return vw;
    };
    jb.oe.resize(size_t(n) * D), jb.ok.resize(size_t(n) * D), jb.le.resize(n), jb.lk.resize(n);
    ref::MutView voe{jb.oe.data(), 0, D, D, nullptr}, vok{jb.ok.data(), 0, D, D, nullptr};
    ref::MutView vle{jb.le.data(), 0, 1, 1, nullptr}, vlk{jb.lk.data(), 0, 1, 1, nullptr};
    s.rounding = ref::Rounding::kExact;
    ref::fwd(s, view(q, q0 + r0, h), view(k, k0, hk), view(v, k0, hk), voe, vle, 0, key_end);
    s.rounding = ref::Rounding::kKernel;
    s.row_sum_rounded_p = row_sum_rounded_p;
    ref::fwd(s, view(q, q0 + r0, h), view(k, k0, hk), view(v, k0, hk), vok, vlk, 0, key_end);
  };
  if (c.reference == RefImpl::kCpu) {
    std::atomic<size_t> next{0};
    const unsigned workers = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), unsigned(jobs.size())));
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < workers; ++w)
      pool.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < jobs.size();) run_job(jobs[i]);
      });
    for (auto& th : pool) th.join();
  } else if (!jobs.empty()) {
    // The GPU reference (testing/gpu_reference.h) over the whole problem, both models in one launch.
    GpuRefProblem g;
    g.dtype = c.dtype;
    g.heads_q = H, g.heads_kv = HK, g.head_dim_qk = D, g.head_dim_v = D;
    g.seqlens_q = c.seqlens_q, g.seqlens_k = c.seqlens_k;
    for (int b = 0; b < B; ++b) {
      g.row0_q.push_back(c.varlen ? cu_q[b] : int64_t(b) * sq_max);
      g.row0_k.push_back(c.varlen ? cu_k[b] : int64_t(b) * sk_max);
    }
    g.mask = c.mask, g.align = c.align, g.scale = scale, g.row_sum_rounded_p = row_sum_rounded_p;
    g.last_rows = c.check_rows;  // the rows the check reads (all when 0)
    const size_t n_o = size_t(rows_q) * H * D, n_l = size_t(rows_q) * H;
    DeviceBuf ro;
    if (Status st = detail::cuda_status(cudaMalloc(&ro.p, (2 * n_o + 2 * n_l) * 4 + 4), "harness: reference buffers");
        !st)
      return out.status = st, out;
    float* base = static_cast<float*>(ro.p);
    GpuRefOutputs ga{base, base + 2 * n_o, base + n_o, base + 2 * n_o + n_l};
    const GpuRefOperand gq{dq.p, q.row_stride(), D}, gk{dk.p, k.row_stride(), D}, gv{dv.p, v.row_stride(), D};
    if (Status st = gpu_reference_fwd(g, gq, gk, gv, ga, stream); !st) return out.status = st, out;
    std::vector<float> all((2 * n_o + 2 * n_l));
    if (Status st = detail::cuda_status(cudaMemcpy(all.data(), ro.p, all.size() * 4, cudaMemcpyDeviceToHost),
                                        "harness: download the reference");
        !st)
      return out.status = st, out;
    for (Job& jb : jobs) {
      const int64_t q0 = c.varlen ? cu_q[jb.b] : int64_t(jb.b) * sq_max;
      jb.oe.resize(size_t(jb.n) * D), jb.ok.resize(size_t(jb.n) * D), jb.le.resize(jb.n), jb.lk.resize(jb.n);
      for (int i = 0; i < jb.n; ++i) {
        const size_t row = size_t(q0 + jb.r0 + i) * H + jb.h;
        std::copy_n(all.begin() + row * D, D, jb.oe.begin() + size_t(i) * D);
        std::copy_n(all.begin() + n_o + row * D, D, jb.ok.begin() + size_t(i) * D);
        jb.le[i] = all[2 * n_o + row];
        jb.lk[i] = all[2 * n_o + n_l + row];
      }
    }
  }
  std::vector<float> got_o, ref_o_exact, ref_o_kernel, got_lse, ref_lse, ref_lse_kernel;
  for (const Job& jb : jobs) {
    const int64_t q0 = c.varlen ? cu_q[jb.b] : int64_t(jb.b) * sq_max;
    for (int i = 0; i < jb.n; ++i) {
      for (int j = 0; j < D; ++j) {
        got_o.push_back(from_bits(c.dtype, out.o_bits[size_t((q0 + jb.r0 + i) * o.row_stride() + int64_t(jb.h) * D + j)]));
        ref_o_exact.push_back(jb.oe[size_t(i) * D + j]);
        ref_o_kernel.push_back(jb.ok[size_t(i) * D + j]);
      }
      const size_t li = c.varlen ? size_t(jb.h) * rows_q + q0 + jb.r0 + i
                                 : (size_t(jb.b) * H + jb.h) * sq_max + jb.r0 + i;
      got_lse.push_back(out.lse_all[li]);
      ref_lse.push_back(jb.le[i]);
      ref_lse_kernel.push_back(jb.lk[i]);
    }
  }
  double mag = 0;
  for (float x : ref_o_exact) if (std::isfinite(x)) mag = std::max(mag, double(std::fabs(x)));
  out.o = ref::compare_scaled(got_o.data(), ref_o_kernel.data(), ref_o_exact.data(), int64_t(got_o.size()), 2.0,
                              ref::default_floor(c.dtype, mag));
  double lmag = 1;
  for (float x : ref_lse) if (std::isfinite(x)) lmag = std::max(lmag, double(std::fabs(x)));
  // LSE is fp32 in the kernel: a relative 2e-5 of its magnitude plus 1e-5 (exp2/log approximations, fp32 sums), plus
  // twice the kernel model's error, which is nonzero only where the row sums add the rounded P (docs/numerics.md).
  out.lse = ref::compare_scaled(got_lse.data(), ref_lse_kernel.data(), ref_lse.data(), int64_t(got_lse.size()), 2.0,
                                2e-5 * lmag + 1e-5);
  const ref::FixedThresholds th = ref::seed_thresholds(c.dtype, false);
  out.o_fixed = ref::compare_fixed(got_o.data(), ref_o_kernel.data(), int64_t(got_o.size()), th.max, th.mean);
  out.lse_fixed = ref::compare_fixed(got_lse.data(), ref_lse.data(), int64_t(got_lse.size()), th.max, th.mean);
  // Outside the valid rows/columns O and LSE keep their poison; inside, every element was written (no input here
  // is NaN, so a NaN output means an element the kernel skipped); the guard bands around both are intact.
  std::vector<char> lse_written(lse_n, 0);
  for (int h = 0; h < H; ++h) {
    if (c.varlen) {
      std::fill_n(lse_written.begin() + size_t(h) * rows_q, cu_q[B], char(1));
    } else {
      for (int b = 0; b < B; ++b) std::fill_n(lse_written.begin() + (size_t(b) * H + h) * sq_max, c.seqlens_q[b], char(1));
    }
  }
  const WriteCheck wo = check_writes("O", out.o_bits.data(), out.o_bits.size(), 2, written, o_guards);
  const WriteCheck wl = check_writes("LSE", out.lse_all.data(), lse_n, 4, lse_written, lse_guards);
  out.untouched = wo.untouched && wl.untouched && wo.guards_ok && wl.guards_ok;
  out.all_written = wo.all_written && wl.all_written;
  out.write_problem = !wo.first_problem.empty() ? wo.first_problem : wl.first_problem;
  return out;
}

}  // namespace fmha::testing
