// See bwd_runner.h.
#include "testing/bwd_runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "api/host.h"
#include "fmha/fwd.h"
#include "reference/attention.h"
#include "reference/dtype.h"
#include "testing/device_buffer.h"
#include "testing/fwd_runner.h"
#include "testing/gpu_reference.h"
#include "testing/harness.h"

namespace fmha::testing {
namespace {

using detail::cuda_status;

/// A device allocation freed on scope exit.
struct DeviceAlloc {
  void* p = nullptr;
  DeviceAlloc() = default;
  DeviceAlloc(const DeviceAlloc&) = delete;
  DeviceAlloc& operator=(const DeviceAlloc&) = delete;
  ~DeviceAlloc() {
    if (p) cudaFree(p);
  }
  Status upload(const void* host, size_t bytes, const char* what) {
    if (Status s = cuda_status(cudaMalloc(&p, std::max<size_t>(bytes, 4)), what); !s) return s;
    return cuda_status(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice), what);
  }
};

/// The rows × heads × d operand of the problem as the kernels read it: row stride heads · d + pad, element bits.
struct Operand {
  int rows = 0, heads = 0, d = 0, pad = 0;
  std::vector<uint16_t> bits;  ///< NaN outside the valid rows and columns
  int64_t row_stride() const { return int64_t(heads) * d + pad; }
  size_t index(int64_t row, int h, int j) const { return size_t(row * row_stride() + int64_t(h) * d + j); }
};

}  // namespace

std::string BwdOutcome::summary() const {
  std::ostringstream s;
  if (!status) return "status: " + std::string(to_string(status.code())) + ": " + status.message();
  if (!checked) {
    s << "ran (not checked)";
  } else {
    s << "dQ: " << dq.message << " | dK: " << dk.message << " | dV: " << dv.message;
    if (!untouched) s << " | memory outside the valid rows of dQ, dK or dV (or a guard band) was written";
    if (!all_written) s << " | some valid gradient elements were never written (still NaN)";
    if (!write_problem.empty()) s << " (" << write_problem << ")";
  }
  if (repeat_mismatches) s << " | " << repeat_mismatches << " repeated calls differ from the first";
  return s.str();
}

BwdOutcome run_bwd_case(const BwdCase& c, bool check, cudaStream_t stream) {
  BwdOutcome out;
  const int B = c.batch, H = c.heads_q, HK = c.heads_kv, D = c.head_dim;
  const int DV = c.head_dim_v != 0 ? c.head_dim_v : D;
  const std::vector<int> cu_q = ref::cumulative(c.seqlens_q), cu_k = ref::cumulative(c.seqlens_k);
  const int sq_max = c.seqlens_q.empty() ? 0 : *std::max_element(c.seqlens_q.begin(), c.seqlens_q.end());
  const int sk_max = c.seqlens_k.empty() ? 0 : *std::max_element(c.seqlens_k.begin(), c.seqlens_k.end());
  const int rows_q = c.varlen ? cu_q[B] + c.extra_rows : B * sq_max;
  const int rows_k = c.varlen ? cu_k[B] + c.extra_rows : B * sk_max;
  auto row_of = [&](bool is_q, int b, int i) -> int64_t {
    return c.varlen ? (is_q ? cu_q[b] : cu_k[b]) + i : int64_t(b) * (is_q ? sq_max : sk_max) + i;
  };

  // Inputs: valid elements Gaussian(0, input_scale) rounded to the dtype, everything else NaN.
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<float> normal(0.f, c.input_scale);
  auto make = [&](bool is_q, int heads, int dim, const char* name) {
    Operand t;
    t.rows = is_q ? rows_q : rows_k, t.heads = heads, t.d = dim, t.pad = c.row_pad;
    t.bits.assign(size_t(t.rows) * size_t(t.row_stride()), GuardedBuffer::kPoison16);
    if (!name) return t;  // an output: all poison
    std::vector<float> custom;
    if (c.fill) {
      int64_t n = 0;
      for (int b = 0; b < B; ++b) n += int64_t(is_q ? c.seqlens_q[b] : c.seqlens_k[b]) * heads * dim;
      custom.assign(size_t(n), 0.f);
      c.fill(name, custom);
    }
    size_t idx = 0;
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < (is_q ? c.seqlens_q[b] : c.seqlens_k[b]); ++i)
        for (int h = 0; h < heads; ++h)
          for (int j = 0; j < dim; ++j) {
            const float x = c.fill ? custom[idx++] : normal(rng);
            t.bits[t.index(row_of(is_q, b, i), h, j)] = c.dtype == DType::kFP16 ? ref::float_to_half_bits(x)
                                                                                 : ref::float_to_bf16_bits(x);
          }
    return t;
  };
  const Operand q = make(true, H, D, "q"), k = make(false, HK, D, "k"), v = make(false, HK, DV, "v"),
                d_o = make(true, H, DV, "do");
  DeviceAlloc dq_in, dk_in, dv_in, ddo_in, dcuq, dcuk;
  for (auto [t, buf, name] : {std::make_tuple(&q, &dq_in, "harness: upload q"), std::make_tuple(&k, &dk_in, "harness: upload k"),
                              std::make_tuple(&v, &dv_in, "harness: upload v"),
                              std::make_tuple(&d_o, &ddo_in, "harness: upload do")})
    if (Status s = buf->upload(t->bits.data(), t->bits.size() * 2, name); !s) return out.status = s, out;
  if (c.varlen) {
    if (Status s = dcuq.upload(cu_q.data(), cu_q.size() * 4, "harness: upload cu_seqlens_q"); !s) return out.status = s, out;
    if (Status s = dcuk.upload(cu_k.data(), cu_k.size() * 4, "harness: upload cu_seqlens_k"); !s) return out.status = s, out;
  }

  // The GPU references' view of the problem (fmha's tensors as they are stored).
  auto ref_problem = [&] {
    GpuRefProblem g;
    g.dtype = c.dtype, g.heads_q = H, g.heads_kv = HK, g.head_dim_qk = D, g.head_dim_v = DV;
    g.seqlens_q = c.seqlens_q, g.seqlens_k = c.seqlens_k;
    for (int b = 0; b < B; ++b) g.row0_q.push_back(row_of(true, b, 0)), g.row0_k.push_back(row_of(false, b, 0));
    g.mask = c.mask, g.align = c.align;
    g.scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt(double(D));
    return g;
  };

  // The forward, for O and LSE (the backward takes the forward's own; for head dims with no forward kernel, e.g.
  // 192 / 128, the GPU reference's exact O rounded to the dtype and its LSE).
  FwdCase fc;
  fc.dtype = c.dtype, fc.batch = B, fc.heads_q = H, fc.heads_kv = HK, fc.head_dim = D;
  fc.seqlens_q = c.seqlens_q, fc.seqlens_k = c.seqlens_k, fc.varlen = c.varlen, fc.mask = c.mask;
  fc.align = c.align, fc.scale = c.scale, fc.row_pad = c.row_pad, fc.extra_rows = c.extra_rows;
  GuardedBuffer o, lse;
  const Operand o_shape = make(true, H, DV, nullptr);
  if (Status s = o.allocate(o_shape.bits.size(), 2); !s) return out.status = s, out;
  const size_t lse_n = size_t(H) * (c.varlen ? size_t(rows_q) : size_t(B) * sq_max);
  if (Status s = lse.allocate(lse_n, 4); !s) return out.status = s, out;
  const int* cuq = static_cast<const int*>(dcuq.p);
  const int* cuk = static_cast<const int*>(dcuk.p);
  const FwdParams fp = make_fwd_params(fc, dq_in.p, dk_in.p, dv_in.p, o.data(), static_cast<float*>(lse.data()), cuq, cuk);
  if (c.skip_forward) {
    check = false;
    if (Status s = cuda_status(cudaMemset(o.data(), 0, o.bytes()), "harness: zero O"); !s) return out.status = s, out;
    if (Status s = cuda_status(cudaMemset(lse.data(), 0, lse.bytes()), "harness: zero LSE"); !s)
      return out.status = s, out;
  } else if (DV != D) {
    // The exact model's O (fp32, (row · H + h) · DV + d) and LSE ((row · H + h)) from the GPU reference.
    const GpuRefProblem g = ref_problem();
    const size_t no = size_t(rows_q) * H * DV, nl = size_t(rows_q) * H;
    DeviceAlloc ref_out;
    if (Status s = cuda_status(cudaMalloc(&ref_out.p, (no + nl) * 4 + 4), "harness: reference forward buffers"); !s)
      return out.status = s, out;
    GpuRefOutputs ro;
    ro.o_exact = static_cast<float*>(ref_out.p), ro.lse_exact = ro.o_exact + no;
    const GpuRefOperand gq{dq_in.p, q.row_stride(), D}, gk{dk_in.p, k.row_stride(), D};
    const GpuRefOperand gv{dv_in.p, v.row_stride(), DV};
    if (Status s = gpu_reference_fwd(g, gq, gk, gv, ro, stream); !s) return out.status = s, out;
    std::vector<float> ref_host(no + nl);
    if (Status s = cuda_status(cudaMemcpy(ref_host.data(), ref_out.p, ref_host.size() * 4, cudaMemcpyDeviceToHost),
                               "harness: download the reference forward");
        !s)
      return out.status = s, out;
    std::vector<uint16_t> o_bits = o_shape.bits;  // poison outside the valid rows and columns
    std::vector<float> lse_host(lse_n, 0.f);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < c.seqlens_q[b]; ++i)
        for (int h = 0; h < H; ++h) {
          const int64_t row = row_of(true, b, i);
          for (int j = 0; j < DV; ++j) {
            const float x = ref_host[(size_t(row) * H + h) * DV + j];
            o_bits[o_shape.index(row, h, j)] =
                c.dtype == DType::kFP16 ? ref::float_to_half_bits(x) : ref::float_to_bf16_bits(x);
          }
          lse_host[c.varlen ? size_t(h) * rows_q + cu_q[b] + i : (size_t(b) * H + h) * sq_max + i] =
              ref_host[no + size_t(row) * H + h];
        }
    if (Status s = cuda_status(cudaMemcpy(o.data(), o_bits.data(), o.bytes(), cudaMemcpyHostToDevice),
                               "harness: upload the reference O");
        !s)
      return out.status = s, out;
    if (Status s = cuda_status(cudaMemcpy(lse.data(), lse_host.data(), lse.bytes(), cudaMemcpyHostToDevice),
                               "harness: upload the reference LSE");
        !s)
      return out.status = s, out;
  } else if (Status s = fwd(fp, stream); !s) {
    return out.status = s, out;
  }

  // The backward on poisoned gradients and workspace.
  BwdParams p;
  p.dtype = c.dtype, p.batch = B, p.heads_q = H, p.heads_kv = HK, p.head_dim = D, p.head_dim_v = DV;
  p.seqlen_q = fp.seqlen_q, p.seqlen_k = fp.seqlen_k;
  p.cu_seqlens_q = fp.cu_seqlens_q, p.cu_seqlens_k = fp.cu_seqlens_k, p.total_q = fp.total_q, p.total_k = fp.total_k;
  GuardedBuffer dq, dk, dv, ws;
  if (Status s = dq.allocate(q.bits.size(), 2); !s) return out.status = s, out;
  if (Status s = dk.allocate(k.bits.size(), 2); !s) return out.status = s, out;
  if (Status s = dv.allocate(v.bits.size(), 2); !s) return out.status = s, out;
  p.q = dq_in.p, p.k = dk_in.p, p.v = dv_in.p, p.o = o.data(), p.d_o = ddo_in.p, p.lse = static_cast<float*>(lse.data());
  p.dq = dq.data(), p.dk = dk.data(), p.dv = dv.data();
  p.q_row_stride = p.dq_row_stride = q.row_stride();
  p.o_row_stride = p.do_row_stride = d_o.row_stride();
  p.k_row_stride = p.dk_row_stride = k.row_stride();
  p.v_row_stride = p.dv_row_stride = v.row_stride();
  p.q_head_stride = p.dq_head_stride = p.k_head_stride = p.dk_head_stride = D;
  p.o_head_stride = p.do_head_stride = p.v_head_stride = p.dv_head_stride = DV;
  p.q_batch_stride = p.dq_batch_stride = c.varlen ? 0 : int64_t(sq_max) * q.row_stride();
  p.o_batch_stride = p.do_batch_stride = c.varlen ? 0 : int64_t(sq_max) * d_o.row_stride();
  p.k_batch_stride = p.dk_batch_stride = c.varlen ? 0 : int64_t(sk_max) * k.row_stride();
  p.v_batch_stride = p.dv_batch_stride = c.varlen ? 0 : int64_t(sk_max) * v.row_stride();
  p.mask = c.mask, p.causal_align = c.align, p.softmax_scale = c.scale, p.deterministic = c.deterministic;
  p.algorithm = c.algorithm;
  const size_t ws_bytes = bwd_workspace_size(p);
  if (Status s = ws.allocate((ws_bytes + 3) / 4, 4); !s) return out.status = s, out;
  const Workspace w{ws.data(), ws.bytes()};

  auto run_and_download = [&](std::vector<uint16_t>& gq, std::vector<uint16_t>& gk, std::vector<uint16_t>& gv,
                              bool guards[3]) -> Status {
    if (Status s = bwd(p, w, stream); !s) return s;
    if (Status s = cuda_status(cudaStreamSynchronize(stream), "kernel execution"); !s) return s;
    gq.resize(dq.count()), gk.resize(dk.count()), gv.resize(dv.count());
    if (Status s = dq.download(gq.data(), guards[0]); !s) return s;
    if (Status s = dk.download(gk.data(), guards[1]); !s) return s;
    return dv.download(gv.data(), guards[2]);
  };
  std::vector<uint16_t> got_q, got_k, got_v;
  bool guards[3] = {true, true, true};
  if (Status s = run_and_download(got_q, got_k, got_v, guards); !s) return out.status = s, out;

  // Repeated calls: gradients and workspace poisoned again before each (the library initialises what it reads).
  const std::vector<uint16_t> poison16(std::max({dq.count(), dk.count(), dv.count()}), GuardedBuffer::kPoison16);
  const std::vector<uint32_t> poison32(ws.count(), 0x7FFF7FFFu);
  for (int r = 0; r < c.repeats; ++r) {
    for (GuardedBuffer* g : {&dq, &dk, &dv})
      if (Status s = cuda_status(cudaMemcpy(g->data(), poison16.data(), g->bytes(), cudaMemcpyHostToDevice),
                                 "harness: re-poison a gradient");
          !s)
        return out.status = s, out;
    if (Status s = cuda_status(cudaMemcpy(ws.data(), poison32.data(), ws.bytes(), cudaMemcpyHostToDevice),
                               "harness: re-poison the workspace");
        !s)
      return out.status = s, out;
    std::vector<uint16_t> rq, rk, rv;
    bool rg[3] = {true, true, true};
    if (Status s = run_and_download(rq, rk, rv, rg); !s) return out.status = s, out;
    if (rq != got_q || rk != got_k || rv != got_v) ++out.repeat_mismatches;
  }
  // Only a deterministic or two-pass backward promises the same bits.
  if (!c.deterministic && c.algorithm != BwdAlgorithm::kTwoPass) out.repeat_mismatches = 0;
  if (c.iterations > 0) {
    if (Status s = time_calls(c.iterations, [&](int) { return bwd(p, w, stream); }, nullptr, stream, out.times_ms); !s)
      return out.status = s, out;
  }
  if (!check) return out;
  out.checked = true;

  // The GPU reference with fmha's O and LSE (its LSE layout: (row of Q) · heads_q + h).
  std::vector<float> lse_host(lse_n);
  bool lse_guards = true;
  if (Status s = lse.download(lse_host.data(), lse_guards); !s) return out.status = s, out;
  std::vector<float> lse_ref(size_t(std::max(rows_q, 1)) * H, std::numeric_limits<float>::quiet_NaN());
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < c.seqlens_q[b]; ++i)
      for (int h = 0; h < H; ++h)
        lse_ref[size_t(row_of(true, b, i)) * H + h] =
            lse_host[c.varlen ? size_t(h) * rows_q + cu_q[b] + i : (size_t(b) * H + h) * sq_max + i];
  DeviceAlloc dlse_ref;
  if (Status s = dlse_ref.upload(lse_ref.data(), lse_ref.size() * 4, "harness: upload the reference LSE"); !s)
    return out.status = s, out;
  const GpuRefProblem g = ref_problem();
  const size_t nq = size_t(rows_q) * H * D, nk = size_t(rows_k) * HK * D, nv = size_t(rows_k) * HK * DV;
  const size_t n_all = 2 * (nq + nk + nv);
  DeviceAlloc refs;
  if (Status s = cuda_status(cudaMalloc(&refs.p, n_all * 4 + 4), "harness: reference buffers"); !s)
    return out.status = s, out;
  float* r0 = static_cast<float*>(refs.p);
  float* r1 = r0 + nq + nk + nv;  // the kernel model's three
  const GpuRefBwdOutputs ro{r0, r0 + nq, r0 + nq + nk, r1, r1 + nq, r1 + nq + nk};
  const GpuRefOperand gq{dq_in.p, q.row_stride(), D}, gk{dk_in.p, k.row_stride(), D}, gv{dv_in.p, v.row_stride(), DV};
  const GpuRefOperand go{o.data(), d_o.row_stride(), DV}, gdo{ddo_in.p, d_o.row_stride(), DV};
  if (Status s = gpu_reference_bwd(g, gq, gk, gv, go, gdo, static_cast<float*>(dlse_ref.p), ro, stream); !s)
    return out.status = s, out;
  std::vector<float> all(n_all);
  if (Status s = cuda_status(cudaMemcpy(all.data(), refs.p, all.size() * 4, cudaMemcpyDeviceToHost),
                             "harness: download the reference");
      !s)
    return out.status = s, out;

  // The largest exact gradient element over the valid rows of the three tensors (the floor's magnitude below).
  auto host = [&](const float* device_ptr) { return all.data() + (device_ptr - r0); };
  double grad_mag = 0;
  auto valid_max = [&](const Operand& t, bool is_q, const float* exact) {
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < (is_q ? c.seqlens_q[b] : c.seqlens_k[b]); ++i)
        for (int h = 0; h < t.heads; ++h)
          for (int j = 0; j < t.d; ++j) {
            const float x = exact[(size_t(row_of(is_q, b, i)) * t.heads + h) * t.d + j];
            if (std::isfinite(x)) grad_mag = std::max(grad_mag, double(std::fabs(x)));
          }
  };
  valid_max(q, true, host(ro.dq_exact));
  valid_max(k, false, host(ro.dk_exact));
  valid_max(v, false, host(ro.dv_exact));
  // Every valid element of each gradient against both reference models; the write checks over the whole buffers.
  auto check_grad = [&](const Operand& t, bool is_q, const std::vector<uint16_t>& got, const float* exact,
                        const float* kernel, const char* name, bool guards_ok, ref::CompareResult& res) {
    std::vector<float> vg, ve, vk;
    std::vector<char> must(got.size(), 0);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < (is_q ? c.seqlens_q[b] : c.seqlens_k[b]); ++i)
        for (int h = 0; h < t.heads; ++h)
          for (int j = 0; j < t.d; ++j) {
            const int64_t row = row_of(is_q, b, i);
            const size_t at = t.index(row, h, j), ref_at = (size_t(row) * t.heads + h) * t.d + j;
            must[at] = 1;
            vg.push_back(c.dtype == DType::kFP16 ? ref::half_bits_to_float(got[at]) : ref::bf16_bits_to_float(got[at]));
            ve.push_back(exact[ref_at]);
            vk.push_back(kernel[ref_at]);
          }
    double mag = 0;
    for (float x : ve)
      if (std::isfinite(x)) mag = std::max(mag, double(std::fabs(x)));
    // dS = P · (dP − D) cancels: dP (tensor cores) and D (the pre-pass) are fp32 sums in different orders, so a
    // gradient that is 0 in exact arithmetic (e.g. one key per row: dP = D) comes out at their fp32 rounding, which
    // neither reference models. The floor's magnitude is therefore at least 2^-10 of the largest gradient.
    mag = std::max(mag, grad_mag / 1024.0);
    res = ref::compare_scaled(vg.data(), vk.data(), ve.data(), int64_t(vg.size()), 3.0, ref::default_floor(c.dtype, mag));
    const WriteCheck wc = check_writes(name, got.data(), got.size(), 2, must, guards_ok);
    out.untouched = out.untouched && wc.untouched && wc.guards_ok;
    out.all_written = out.all_written && wc.all_written;
    if (out.write_problem.empty()) out.write_problem = wc.first_problem;
  };
  check_grad(q, true, got_q, host(ro.dq_exact), host(ro.dq_kernel), "dQ", guards[0], out.dq);
  check_grad(k, false, got_k, host(ro.dk_exact), host(ro.dk_kernel), "dK", guards[1], out.dk);
  check_grad(v, false, got_v, host(ro.dv_exact), host(ro.dv_kernel), "dV", guards[2], out.dv);
  return out;
}

}  // namespace fmha::testing
