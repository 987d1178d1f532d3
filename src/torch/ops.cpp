// The PyTorch operators of fmha (torch.ops.fmha.*), registered in C++ with TORCH_LIBRARY: the schemas, the CUDA
// kernels (fmha::fwd on the current stream, under a device guard for the inputs' GPU) and the Meta kernels that
// torch.compile's fake tensors run, which apply fmha's own host validation (fmha::fwd_validate) wherever the
// shapes are concrete, so that a bad shape fails at trace time with the message the CUDA call would give.
//
// Loaded by python/fmha/__init__.py (torch.ops.load_library). No Python C API: the library loads into any Python
// that runs the torch it was built against (torch 2.11).
//
// Operators (layouts as include/fmha/fwd.h; q, k, v fp16 or bf16 on one CUDA device, head-dim mode contiguous):
//   fmha::fwd(Tensor q, Tensor k, Tensor v, float softmax_scale, bool causal, bool causal_q_end,
//             bool deterministic=False, str bwd_algorithm="auto") -> (Tensor, Tensor)
//     q [b, s_q, h, d], k and v [b, s_k, h_k, d] (BSHD, any strides the kernel takes); returns out [b, s_q, h, d]
//     (contiguous, q's dtype) and lse [b, h, s_q] (fp32, natural log). softmax_scale 0 = 1/sqrt(d).
//   fmha::fwd_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q,
//                    int max_seqlen_k, float softmax_scale, bool causal, bool causal_q_end,
//                    bool deterministic=False, str bwd_algorithm="auto") -> (Tensor, Tensor)
//     q [total_q, h, d], k and v [total_k, h_k, d] packed; cu_seqlens int32 [b + 1] contiguous on q's device;
//     returns out [total_q, h, d] and lse [h, total_q].
//   `deterministic` and `bwd_algorithm` do not change the forward: they are the options of the backward that autograd
//   runs for the call (a bad bwd_algorithm is refused by the forward already).
// Errors: a bad argument raises ValueError (torch's TORCH_CHECK_VALUE) with fmha's message ("<argument>: expected
// <expected>, got <actual>"); a valid request no kernel takes raises NotImplementedError (RuntimeError from the
// Meta kernels, where fake tensors would take NotImplementedError for a missing kernel); a CUDA failure
// RuntimeError. With symbolic shapes (torch.compile, dynamic=True) heads and head dim are specialised (guards), the
// lengths and strides are checked where concrete.
//   fmha::bwd(Tensor d_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor? d_lse,
//             float softmax_scale, bool causal, bool causal_q_end, bool deterministic, str algorithm="auto")
//             -> (Tensor, Tensor, Tensor)
//   fmha::bwd_varlen(Tensor d_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor? d_lse,
//                    Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k,
//                    float softmax_scale, bool causal, bool causal_q_end, bool deterministic, str algorithm="auto")
//                    -> (Tensor, Tensor, Tensor)
//     the gradients dq, dk, dv (contiguous, shaped like q, k, v) of the forward call with the same arguments, given
//     its out and lse, the gradient d_out of out and optionally the gradient d_lse of lse (fp32, lse's shape)
//     (include/fmha/bwd.h); v (and out, d_out, dv) may have a head dim of its own: 192 / 128 (MLA prefill, two
//     passes; no forward op takes it yet, so out and lse come from elsewhere, e.g. the cuDNN forward); algorithm "auto" (fmha::BwdAlgorithm::kAuto: the library picks), "one_pass" or
//     "two_pass" (fmha::BwdAlgorithm, include/fmha/bwd.h); the workspace comes from torch's caching allocator. Autograd for fmha::fwd and fmha::fwd_varlen is registered in Python (python/fmha/__init__.py,
//     torch.library.register_autograd) on these operators.
// Empty problems: no query rows give empty outputs; no keys give O = 0 and LSE = −inf (after the checks).
// LSE is always computed (the kernel writes it at almost no cost; fmha.attention returns it on request).
// Varlen contract (not checked: the lengths live on the device): cu_seqlens non-decreasing from 0, cu[b] ≤ total
// rows, every length ≤ max_seqlen; rows of q outside every sequence get unspecified O and LSE.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "fmha/bwd.h"
#include "fmha/fwd.h"
#include "torch_status.h"

namespace {

using at::Tensor;

void raise_if_error(const fmha::Status& s, bool meta = false) { fmha::torch_ops::raise_if_error(s, "fmha: ", meta); }

/// The fmha::BwdAlgorithm named by `name` ("auto", "one_pass", "two_pass"); ValueError naming the argument `arg`
/// otherwise (the forward ops' bwd_algorithm, the backward ops' algorithm).
fmha::BwdAlgorithm algorithm_of(c10::string_view name, const char* arg = "bwd_algorithm") {
  if (name == "auto") return fmha::BwdAlgorithm::kAuto;
  if (name == "one_pass") return fmha::BwdAlgorithm::kOnePass;
  if (name == "two_pass") return fmha::BwdAlgorithm::kTwoPass;
  TORCH_CHECK_VALUE(false, "fmha: ", arg, ": expected 'auto', 'one_pass' or 'two_pass', got '", std::string(name),
                    "'");
  return fmha::BwdAlgorithm::kAuto;
}

/// PyTorch's name of a dtype ("torch.float32"), for messages.
std::string torch_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    default: return std::string("torch.") + c10::toString(t);
  }
}

/// The softmax scale: 0 (the default, 1/sqrt(d)) or a normal fp32 value.
void check_scale(const char* op, double scale) {
  TORCH_CHECK_VALUE(scale == 0.0 || (scale >= FLT_MIN && scale <= FLT_MAX), "fmha.", op,
                    ": softmax_scale: expected 0 (= 1/sqrt(head_dim)) or a value in [", FLT_MIN, ", ", FLT_MAX,
                    "], got ", scale);
}

/// Checks made here because fmha::FwdParams cannot express them (the tensors' dtypes, devices and ranks).
void check_tensors(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, int rank, bool meta) {
  const std::string o(op);
  TORCH_CHECK_VALUE(q.dim() == rank && k.dim() == rank && v.dim() == rank, "fmha.", o, ": q, k, v: expected ",
                    rank, " dimensions (", rank == 4 ? "[b, s, h, d]" : "[total, h, d]", "), got ", q.dim(), ", ",
                    k.dim(), ", ", v.dim());
  TORCH_CHECK_VALUE(q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16, "fmha.", o,
                    ": q.dtype: expected torch.float16 or torch.bfloat16, got ", torch_name(q.scalar_type()),
                    " (cast the inputs, e.g. q.to(torch.bfloat16))");
  TORCH_CHECK_VALUE(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), "fmha.", o,
                    ": k.dtype, v.dtype: expected q's dtype ", torch_name(q.scalar_type()), ", got ",
                    torch_name(k.scalar_type()), ", ", torch_name(v.scalar_type()));
  if (!meta) TORCH_CHECK_VALUE(q.is_cuda(), "fmha.", o, ": q.device: expected a CUDA device, got ", q.device());
  TORCH_CHECK_VALUE(k.device() == q.device() && v.device() == q.device(), "fmha.", o,
                    ": k.device, v.device: expected q's device ", q.device(), ", got ", k.device(), ", ", v.device());
  const char* names[3] = {"q", "k", "v"};
  const Tensor* ts[3] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    const Tensor& t = *ts[i];
    TORCH_CHECK_VALUE(t.sym_stride(rank - 1) == 1 || t.sym_size(rank - 1) == 1, "fmha.", o, ": ", names[i],
                      ".stride(", rank - 1, ") (the head dim): expected 1 (contiguous), got ", t.sym_stride(rank - 1));
    for (int d = 0; d < rank; ++d) {
      auto n = t.sym_size(d).maybe_as_int();
      TORCH_CHECK_VALUE(!n || *n <= std::numeric_limits<int32_t>::max(), "fmha.", o, ": ", names[i], ".shape[", d,
                        "]: expected at most 2^31 - 1, got ", *n);
    }
  }
}

fmha::DType dtype_of(const Tensor& t) { return t.scalar_type() == at::kHalf ? fmha::DType::kFP16 : fmha::DType::kBF16; }

/// A stand-in address for validation of fake tensors (they have no storage): aligned like a real allocation.
const void* fake_ptr() { return reinterpret_cast<const void*>(uintptr_t(1) << 20); }

/// A fake tensor's stand-in data address: fake_ptr() plus its storage offset, so that a view whose first element
/// is misaligned fails at trace time as it would on the GPU.
const void* fake_data(const Tensor& t) {
  const int64_t off = t.sym_storage_offset().maybe_as_int().value_or(0);
  return static_cast<const char*>(fake_ptr()) + off * int64_t(t.element_size());
}

/// torch lets a mode of size 1 have any stride; fmha wants positive multiples of 8 for rows (a head or batch mode of
/// one entry may have stride 0): such strides are replaced by values fmha takes (they address nothing).
void fix_unit_strides(int64_t n_batch, int64_t n_rows, int64_t n_heads, int64_t& bs, int64_t& rs, int64_t& hs,
                      int64_t row_elems) {
  if (n_batch == 1) bs = 0;
  if (n_heads == 1) hs = 0;
  if (n_rows == 1) rs = (std::max<int64_t>(row_elems, 8) + 7) / 8 * 8;
}

/// Reads sizes and strides of possibly symbolic tensors into fmha::FwdParams. torch.compile with dynamic shapes:
/// heads and head dim are specialised (spec: guarded, they pick the kernel); a symbolic length is checked through a
/// stand-in of 2 (size); a symbolic stride sets `ok` to false (stride), and the caller then replaces the strides by
/// contiguous ones for the check (everything else is still checked).
struct SymReader {
  bool& ok;
  int64_t size(const c10::SymInt& x) const { return x.maybe_as_int().value_or(2); }
  int64_t spec(const c10::SymInt& x) const { return x.guard_int(__FILE__, __LINE__); }
  int64_t stride(const c10::SymInt& x) const {
    auto c = x.maybe_as_int();
    if (!c) ok = false;
    return c.value_or(0);
  }
};

// ------------------------------------------------------------------------------------------------------- dense

/// FwdParams of a dense call; `ok` false when some size or stride is symbolic (validation then skipped). With
/// `v_dim_free` (the backward ops) V's head dim may differ from K's (head_dim_v, e.g. 192 / 128); out is then
/// [b, s_q, h, head_dim_v].
fmha::FwdParams dense_params(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* out, const Tensor* lse,
                             double scale, bool causal, bool q_end, bool& ok, bool v_dim_free = false) {
  fmha::FwdParams p;
  ok = true;
  const SymReader rd{ok};
  p.dtype = dtype_of(q);
  p.batch = int(rd.size(q.sym_size(0)));
  p.seqlen_q = int(rd.size(q.sym_size(1)));
  p.heads_q = int(rd.spec(q.sym_size(2)));
  p.head_dim = int(rd.spec(q.sym_size(3)));
  p.head_dim_v = v_dim_free ? int(rd.spec(v.sym_size(3))) : 0;
  TORCH_CHECK_VALUE(!v_dim_free || p.head_dim_v >= 1,
                    "fmha.attention backward: v.shape[3] (head dim): expected at least 1, got ", p.head_dim_v);
  const int dv = p.head_dim_v != 0 ? p.head_dim_v : p.head_dim;
  p.seqlen_k = int(rd.size(k.sym_size(1)));
  p.heads_kv = int(rd.spec(k.sym_size(2)));
  p.q = out ? q.data_ptr() : fake_data(q);
  p.k = out ? k.data_ptr() : fake_data(k);
  p.v = out ? v.data_ptr() : fake_data(v);
  p.o = out ? out->data_ptr() : const_cast<void*>(fake_ptr());
  p.lse = lse ? lse->data_ptr<float>() : nullptr;
  p.q_batch_stride = rd.stride(q.sym_stride(0)), p.q_row_stride = rd.stride(q.sym_stride(1)), p.q_head_stride = rd.stride(q.sym_stride(2));
  p.k_batch_stride = rd.stride(k.sym_stride(0)), p.k_row_stride = rd.stride(k.sym_stride(1)), p.k_head_stride = rd.stride(k.sym_stride(2));
  p.v_batch_stride = rd.stride(v.sym_stride(0)), p.v_row_stride = rd.stride(v.sym_stride(1)), p.v_head_stride = rd.stride(v.sym_stride(2));
  if (ok) {
    fix_unit_strides(p.batch, p.seqlen_q, p.heads_q, p.q_batch_stride, p.q_row_stride, p.q_head_stride,
                     int64_t(p.heads_q) * p.head_dim);
    fix_unit_strides(p.batch, p.seqlen_k, p.heads_kv, p.k_batch_stride, p.k_row_stride, p.k_head_stride,
                     int64_t(p.heads_kv) * p.head_dim);
    fix_unit_strides(p.batch, p.seqlen_k, p.heads_kv, p.v_batch_stride, p.v_row_stride, p.v_head_stride,
                     int64_t(p.heads_kv) * dv);
  } else {
    fmha::set_contiguous_strides(p);  // symbolic strides: checked no further than a contiguous layout
  }
  // out is allocated contiguous [b, s_q, h, d_v]
  p.o_head_stride = dv, p.o_row_stride = int64_t(p.heads_q) * dv,
  p.o_batch_stride = int64_t(p.seqlen_q) * p.o_row_stride;
  p.mask = causal ? fmha::MaskType::kCausal : fmha::MaskType::kNone;
  p.causal_align = q_end ? fmha::CausalAlign::kQEnd : fmha::CausalAlign::kQBegin;
  p.softmax_scale = float(scale);
  // K and V must agree in shape: fmha::FwdParams has one seqlen_k / heads_kv / head_dim for both. (With symbolic
  // sizes these comparisons become guards of the compiled graph.)
  {
    for (int dim = 0; dim < (v_dim_free ? 3 : 4); ++dim) {
      TORCH_CHECK_VALUE(k.sym_size(dim) == v.sym_size(dim), "fmha.attention: v.shape[", dim,
                        "]: expected k.shape[", dim, "] = ", k.sym_size(dim), ", got ", v.sym_size(dim));
    }
    TORCH_CHECK_VALUE(k.sym_size(0) == q.sym_size(0), "fmha.attention: k.shape[0] (batch): expected q.shape[0] = ",
                      q.sym_size(0), ", got ", k.sym_size(0));
    TORCH_CHECK_VALUE(k.sym_size(3) == q.sym_size(3), "fmha.attention: k.shape[3] (head dim): expected q.shape[3] = ",
                      q.sym_size(3), ", got ", k.sym_size(3));
  }
  return p;
}

std::tuple<Tensor, Tensor> fwd_cuda(const Tensor& q, const Tensor& k, const Tensor& v, double softmax_scale,
                                    bool causal, bool causal_q_end, bool /*deterministic: the backward's*/,
                                    c10::string_view bwd_algorithm) {
  (void)algorithm_of(bwd_algorithm);  // the backward's option, checked when the forward runs
  check_tensors("attention", q, k, v, 4, false);
  check_scale("attention", softmax_scale);
  const c10::cuda::CUDAGuard guard(q.device());
  Tensor out = at::empty(q.sizes(), q.options());
  Tensor lse = at::empty({q.size(0), q.size(2), q.size(1)}, q.options().dtype(at::kFloat));
  bool ok = true;
  if (q.size(0) == 0 || q.size(1) == 0) {  // no query rows: nothing to compute (the shapes are still checked)
    dense_params(q, k, v, nullptr, nullptr, softmax_scale, causal, causal_q_end, ok);
    return {out, lse};
  }
  if (k.size(1) == 0) {  // no keys: every row sees none (O = 0, LSE = −inf), once the arguments pass
    fmha::FwdParams p = dense_params(q, k, v, nullptr, nullptr, softmax_scale, causal, causal_q_end, ok);
    raise_if_error(fmha::fwd_validate(p));
    return {out.zero_(), lse.fill_(-std::numeric_limits<float>::infinity())};
  }
  fmha::FwdParams p = dense_params(q, k, v, &out, &lse, softmax_scale, causal, causal_q_end, ok);
  raise_if_error(fmha::fwd(p, c10::cuda::getCurrentCUDAStream(q.device().index()).stream()));
  return {out, lse};
}

std::tuple<Tensor, Tensor> fwd_meta(const Tensor& q, const Tensor& k, const Tensor& v, double softmax_scale,
                                    bool causal, bool causal_q_end, bool /*deterministic: the backward's*/,
                                    c10::string_view bwd_algorithm) {
  (void)algorithm_of(bwd_algorithm);  // the backward's option, checked when the forward runs
  check_tensors("attention", q, k, v, 4, true);
  check_scale("attention", softmax_scale);
  bool ok = true;
  fmha::FwdParams p = dense_params(q, k, v, nullptr, nullptr, softmax_scale, causal, causal_q_end, ok);
  if (p.batch > 0 && p.seqlen_q > 0) raise_if_error(fmha::fwd_validate(p), true);
  Tensor out = at::empty_symint(q.sym_sizes(), q.options());
  Tensor lse = at::empty_symint({q.sym_size(0), q.sym_size(2), q.sym_size(1)}, q.options().dtype(at::kFloat));
  return {out, lse};
}

// ------------------------------------------------------------------------------------------------------ varlen

void check_cu(const char* name, const Tensor& cu, const Tensor& q, bool meta) {
  TORCH_CHECK_VALUE(cu.scalar_type() == at::kInt, "fmha.attention_varlen: ", name,
                    ".dtype: expected torch.int32, got ", torch_name(cu.scalar_type()), " (use .to(torch.int32))");
  TORCH_CHECK_VALUE(cu.dim() == 1, "fmha.attention_varlen: ", name, ": expected 1 dimension [b + 1], got ", cu.dim());
  TORCH_CHECK_VALUE(cu.sym_size(0) >= 2, "fmha.attention_varlen: ", name,
                    ".shape[0]: expected b + 1 >= 2, got ", cu.sym_size(0));
  TORCH_CHECK_VALUE(cu.is_contiguous(), "fmha.attention_varlen: ", name,
                    ": expected a contiguous tensor, got stride ", cu.sym_stride(0));
  (void)meta;
  TORCH_CHECK_VALUE(cu.device() == q.device(), "fmha.attention_varlen: ", name, ".device: expected q's device ",
                    q.device(), ", got ", cu.device());
}

/// FwdParams of a varlen call (packed [total, h, d]); `ok` and `v_dim_free` as dense_params'.
fmha::FwdParams varlen_params(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_q,
                              const Tensor& cu_k, int64_t max_q, int64_t max_k, const Tensor* out,
                              const Tensor* lse, double scale, bool causal, bool q_end, bool& ok,
                              bool v_dim_free = false) {
  fmha::FwdParams p;
  ok = true;
  const SymReader rd{ok};
  TORCH_CHECK_VALUE(max_q >= 0 && max_q <= INT32_MAX && max_k >= 0 && max_k <= INT32_MAX,
                    "fmha.attention_varlen: max_seqlen_q, max_seqlen_k: expected 0 ... 2^31 - 1, got ", max_q, ", ",
                    max_k);
  const bool real = out != nullptr;
  p.dtype = dtype_of(q);
  p.batch = int(rd.size(cu_q.sym_size(0))) - 1;
  p.total_q = int(rd.size(q.sym_size(0)));
  p.heads_q = int(rd.spec(q.sym_size(1)));
  p.head_dim = int(rd.spec(q.sym_size(2)));
  p.head_dim_v = v_dim_free ? int(rd.spec(v.sym_size(2))) : 0;
  TORCH_CHECK_VALUE(!v_dim_free || p.head_dim_v >= 1,
                    "fmha.attention_varlen backward: v.shape[2] (head dim): expected at least 1, got ", p.head_dim_v);
  const int dv = p.head_dim_v != 0 ? p.head_dim_v : p.head_dim;
  p.total_k = int(rd.size(k.sym_size(0)));
  p.heads_kv = int(rd.spec(k.sym_size(1)));
  p.seqlen_q = int(max_q);
  p.seqlen_k = int(max_k);
  p.cu_seqlens_q = real ? cu_q.data_ptr<int>() : static_cast<const int*>(fake_ptr());
  p.cu_seqlens_k = real ? cu_k.data_ptr<int>() : static_cast<const int*>(fake_ptr());
  p.q = real ? q.data_ptr() : fake_data(q);
  p.k = real ? k.data_ptr() : fake_data(k);
  p.v = real ? v.data_ptr() : fake_data(v);
  p.o = real ? out->data_ptr() : const_cast<void*>(fake_ptr());
  p.lse = lse ? lse->data_ptr<float>() : nullptr;
  p.q_row_stride = rd.stride(q.sym_stride(0)), p.q_head_stride = rd.stride(q.sym_stride(1));
  p.k_row_stride = rd.stride(k.sym_stride(0)), p.k_head_stride = rd.stride(k.sym_stride(1));
  p.v_row_stride = rd.stride(v.sym_stride(0)), p.v_head_stride = rd.stride(v.sym_stride(1));
  if (ok) {
    int64_t unused = 0;
    fix_unit_strides(0, p.total_q, p.heads_q, unused, p.q_row_stride, p.q_head_stride, int64_t(p.heads_q) * p.head_dim);
    fix_unit_strides(0, p.total_k, p.heads_kv, unused, p.k_row_stride, p.k_head_stride,
                     int64_t(p.heads_kv) * p.head_dim);
    fix_unit_strides(0, p.total_k, p.heads_kv, unused, p.v_row_stride, p.v_head_stride,
                     int64_t(p.heads_kv) * dv);
  } else {
    fmha::set_contiguous_strides(p);  // symbolic strides: checked no further than a packed layout
  }
  p.o_head_stride = dv, p.o_row_stride = int64_t(p.heads_q) * dv;
  p.mask = causal ? fmha::MaskType::kCausal : fmha::MaskType::kNone;
  p.causal_align = q_end ? fmha::CausalAlign::kQEnd : fmha::CausalAlign::kQBegin;
  p.softmax_scale = float(scale);
  {
    for (int dim = 0; dim < (v_dim_free ? 2 : 3); ++dim)
      TORCH_CHECK_VALUE(k.sym_size(dim) == v.sym_size(dim), "fmha.attention_varlen: v.shape[", dim,
                        "]: expected k.shape[", dim, "] = ", k.sym_size(dim), ", got ", v.sym_size(dim));
    TORCH_CHECK_VALUE(k.sym_size(2) == q.sym_size(2),
                      "fmha.attention_varlen: k.shape[2] (head dim): expected q.shape[2] = ", q.sym_size(2), ", got ",
                      k.sym_size(2));
    TORCH_CHECK_VALUE(cu_k.sym_size(0) == cu_q.sym_size(0),
                      "fmha.attention_varlen: cu_seqlens_k.shape[0]: expected cu_seqlens_q.shape[0] = ",
                      cu_q.sym_size(0), ", got ", cu_k.sym_size(0));
  }
  return p;
}

std::tuple<Tensor, Tensor> fwd_varlen_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_q,
                                           const Tensor& cu_k, int64_t max_q, int64_t max_k, double softmax_scale,
                                           bool causal, bool causal_q_end, bool /*deterministic: the backward's*/,
                                    c10::string_view bwd_algorithm) {
  (void)algorithm_of(bwd_algorithm);  // the backward's option, checked when the forward runs
  check_tensors("attention_varlen", q, k, v, 3, false);
  check_cu("cu_seqlens_q", cu_q, q, false);
  check_cu("cu_seqlens_k", cu_k, q, false);
  check_scale("attention_varlen", softmax_scale);
  const c10::cuda::CUDAGuard guard(q.device());
  Tensor out = at::empty(q.sizes(), q.options());
  Tensor lse = at::empty({q.size(1), q.size(0)}, q.options().dtype(at::kFloat));
  bool ok = true;
  if (q.size(0) == 0) {  // no query rows
    varlen_params(q, k, v, cu_q, cu_k, max_q, max_k, nullptr, nullptr, softmax_scale, causal, causal_q_end, ok);
    return {out, lse};
  }
  if (k.size(0) == 0) {  // no keys in any sequence: O = 0, LSE = −inf, once the arguments pass
    fmha::FwdParams p =
        varlen_params(q, k, v, cu_q, cu_k, max_q, max_k, nullptr, nullptr, softmax_scale, causal, causal_q_end, ok);
    raise_if_error(fmha::fwd_validate(p));
    return {out.zero_(), lse.fill_(-std::numeric_limits<float>::infinity())};
  }
  fmha::FwdParams p =
      varlen_params(q, k, v, cu_q, cu_k, max_q, max_k, &out, &lse, softmax_scale, causal, causal_q_end, ok);
  raise_if_error(fmha::fwd(p, c10::cuda::getCurrentCUDAStream(q.device().index()).stream()));
  return {out, lse};
}

std::tuple<Tensor, Tensor> fwd_varlen_meta(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_q,
                                           const Tensor& cu_k, int64_t max_q, int64_t max_k, double softmax_scale,
                                           bool causal, bool causal_q_end, bool /*deterministic: the backward's*/,
                                    c10::string_view bwd_algorithm) {
  (void)algorithm_of(bwd_algorithm);  // the backward's option, checked when the forward runs
  check_tensors("attention_varlen", q, k, v, 3, true);
  check_cu("cu_seqlens_q", cu_q, q, true);
  check_cu("cu_seqlens_k", cu_k, q, true);
  check_scale("attention_varlen", softmax_scale);
  bool ok = true;
  fmha::FwdParams p =
      varlen_params(q, k, v, cu_q, cu_k, max_q, max_k, nullptr, nullptr, softmax_scale, causal, causal_q_end, ok);
  if (p.total_q > 0) raise_if_error(fmha::fwd_validate(p), true);
  Tensor out = at::empty_symint(q.sym_sizes(), q.options());
  Tensor lse = at::empty_symint({q.sym_size(1), q.sym_size(0)}, q.options().dtype(at::kFloat));
  return {out, lse};
}

// ---------------------------------------------------------------------------------------------------- backward

/// BwdParams of the backward of the forward call `f` (its q, k, v, out and lse), with the gradient d_out of out and
/// the gradients dq, dk, dv allocated contiguous like q, k, v (dense [b, s, h, d] or packed [total, h, d]).
fmha::BwdParams bwd_params(const fmha::FwdParams& f, const Tensor& d_out, void* dq, void* dk, void* dv,
                           bool deterministic, fmha::BwdAlgorithm algorithm) {
  fmha::BwdParams p;
  p.dtype = f.dtype, p.batch = f.batch, p.heads_q = f.heads_q, p.heads_kv = f.heads_kv, p.head_dim = f.head_dim;
  p.head_dim_v = f.head_dim_v;
  p.seqlen_q = f.seqlen_q, p.seqlen_k = f.seqlen_k;
  p.cu_seqlens_q = f.cu_seqlens_q, p.cu_seqlens_k = f.cu_seqlens_k, p.total_q = f.total_q, p.total_k = f.total_k;
  fmha::set_bwd_contiguous_strides(p);  // d_out (made contiguous) and the gradients; q, k, v, out as the forward's
  p.q = f.q, p.k = f.k, p.v = f.v, p.o = f.o, p.lse = f.lse;
  p.q_row_stride = f.q_row_stride, p.q_head_stride = f.q_head_stride, p.q_batch_stride = f.q_batch_stride;
  p.k_row_stride = f.k_row_stride, p.k_head_stride = f.k_head_stride, p.k_batch_stride = f.k_batch_stride;
  p.v_row_stride = f.v_row_stride, p.v_head_stride = f.v_head_stride, p.v_batch_stride = f.v_batch_stride;
  p.o_row_stride = f.o_row_stride, p.o_head_stride = f.o_head_stride, p.o_batch_stride = f.o_batch_stride;
  p.d_o = d_out.data_ptr();
  p.dq = dq, p.dk = dk, p.dv = dv;
  p.mask = f.mask, p.causal_align = f.causal_align, p.softmax_scale = f.softmax_scale;
  p.deterministic = deterministic;
  p.algorithm = algorithm;
  return p;
}

/// The backward's own arguments: d_out and out shaped like q with V's head dim (v's last size), q's dtype and
/// device; lse (and d_lse) fp32.
void check_bwd_tensors(const char* op, const Tensor& d_out, const Tensor& q, const Tensor& v, const Tensor& out,
                       const Tensor& lse, const std::optional<Tensor>& d_lse) {
  if (d_lse) {
    TORCH_CHECK_VALUE(d_lse->scalar_type() == at::kFloat && d_lse->sym_sizes() == lse.sym_sizes() &&
                          d_lse->device() == lse.device(),
                      "fmha.", op, ": d_lse: expected a torch.float32 tensor of lse's shape ", lse.sym_sizes(),
                      " on its device, got ", torch_name(d_lse->scalar_type()), " ", d_lse->sym_sizes());
  }
  std::vector<c10::SymInt> o_shape(q.sym_sizes().begin(), q.sym_sizes().end());
  o_shape.back() = v.sym_size(v.dim() - 1);  // V's head dim
  TORCH_CHECK_VALUE(d_out.sym_sizes() == c10::SymIntArrayRef(o_shape) && out.sym_sizes() == c10::SymIntArrayRef(o_shape),
                    "fmha.", op, ": d_out, out: expected q's shape with v's head dim ", c10::SymIntArrayRef(o_shape),
                    ", got ", d_out.sym_sizes(), ", ", out.sym_sizes());
  TORCH_CHECK_VALUE(d_out.scalar_type() == q.scalar_type() && out.scalar_type() == q.scalar_type(), "fmha.", op,
                    ": d_out.dtype, out.dtype: expected q's dtype ", torch_name(q.scalar_type()), ", got ",
                    torch_name(d_out.scalar_type()), ", ", torch_name(out.scalar_type()));
  TORCH_CHECK_VALUE(lse.scalar_type() == at::kFloat, "fmha.", op, ": lse.dtype: expected torch.float32, got ",
                    torch_name(lse.scalar_type()));
  TORCH_CHECK_VALUE(d_out.device() == q.device() && out.device() == q.device() && lse.device() == q.device(), "fmha.",
                    op, ": d_out, out, lse: expected q's device ", q.device());
}

/// The gradients of both layouts once the arguments are checked: dq, dk, dv allocated like q, k, v, then fmha::bwd
/// with the forward's parameters from `make_fwd(out)` (out made contiguous) and a workspace from torch's caching
/// allocator (256-byte aligned: it aligns to 512). No rows or no keys: every gradient is zero.
template <class MakeFwd>
std::tuple<Tensor, Tensor, Tensor> bwd_gradients(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& out, const std::optional<Tensor>& d_lse,
                                                 bool deterministic, c10::string_view algorithm,
                                                 MakeFwd make_fwd) {
  const fmha::BwdAlgorithm algo = algorithm_of(algorithm, "algorithm");
  const c10::cuda::CUDAGuard guard(q.device());
  Tensor dq = at::empty(q.sizes(), q.options()), dk = at::empty(k.sizes(), k.options());
  Tensor dv = at::empty(v.sizes(), v.options());
  if (q.numel() == 0 || k.numel() == 0) return {dq.zero_(), dk.zero_(), dv.zero_()};
  const Tensor o = out.contiguous(), dout = d_out.contiguous();
  const fmha::FwdParams f = make_fwd(o);
  fmha::BwdParams p = bwd_params(f, dout, dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), deterministic, algo);
  const Tensor dlse = d_lse ? d_lse->contiguous() : Tensor();
  p.d_lse = dlse.defined() ? dlse.data_ptr<float>() : nullptr;
  const size_t bytes = fmha::bwd_workspace_size(p);
  Tensor ws = at::empty({int64_t(std::max<size_t>(bytes, 1))}, q.options().dtype(at::kByte));
  raise_if_error(fmha::bwd(p, fmha::Workspace{ws.data_ptr(), bytes},
                           c10::cuda::getCurrentCUDAStream(q.device().index()).stream()));
  return {dq, dk, dv};
}

/// The Meta kernels' outputs: gradients shaped like q, k, v (symbolic sizes kept).
std::tuple<Tensor, Tensor, Tensor> gradient_shapes(const Tensor& q, const Tensor& k, const Tensor& v) {
  return {at::empty_symint(q.sym_sizes(), q.options()), at::empty_symint(k.sym_sizes(), k.options()),
          at::empty_symint(v.sym_sizes(), v.options())};
}

std::tuple<Tensor, Tensor, Tensor> bwd_cuda(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& out, const Tensor& lse, const std::optional<Tensor>& d_lse,
                                            double softmax_scale, bool causal, bool causal_q_end, bool deterministic,
                                            c10::string_view algorithm) {
  check_tensors("attention backward", q, k, v, 4, false);
  check_bwd_tensors("attention backward", d_out, q, v, out, lse, d_lse);
  check_scale("attention backward", softmax_scale);
  TORCH_CHECK_VALUE(lse.dim() == 3 && lse.size(0) == q.size(0) && lse.size(1) == q.size(2) &&
                        lse.size(2) == q.size(1) && lse.is_contiguous(),
                    "fmha.attention backward: lse: expected a contiguous [b, h, s_q] tensor, got shape ", lse.sizes());
  return bwd_gradients(d_out, q, k, v, out, d_lse, deterministic, algorithm, [&](const Tensor& o) {
    bool ok = true;
    return dense_params(q, k, v, &o, &lse, softmax_scale, causal, causal_q_end, ok, true);
  });
}

std::tuple<Tensor, Tensor, Tensor> bwd_meta(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& out, const Tensor& lse, const std::optional<Tensor>& d_lse,
                                            double softmax_scale, bool causal, bool causal_q_end, bool deterministic,
                                            c10::string_view algorithm) {
  check_tensors("attention backward", q, k, v, 4, true);
  check_bwd_tensors("attention backward", d_out, q, v, out, lse, d_lse);
  check_scale("attention backward", softmax_scale);
  (void)causal, (void)causal_q_end, (void)deterministic, (void)algorithm_of(algorithm, "algorithm");
  return gradient_shapes(q, k, v);
}

std::tuple<Tensor, Tensor, Tensor> bwd_varlen_cuda(const Tensor& d_out, const Tensor& q, const Tensor& k,
                                                   const Tensor& v, const Tensor& out, const Tensor& lse,
                                                   const std::optional<Tensor>& d_lse, const Tensor& cu_q,
                                                   const Tensor& cu_k, int64_t max_q, int64_t max_k,
                                                   double softmax_scale, bool causal, bool causal_q_end,
                                                   bool deterministic, c10::string_view algorithm) {
  check_tensors("attention_varlen backward", q, k, v, 3, false);
  check_bwd_tensors("attention_varlen backward", d_out, q, v, out, lse, d_lse);
  check_cu("cu_seqlens_q", cu_q, q, false);
  check_cu("cu_seqlens_k", cu_k, q, false);
  check_scale("attention_varlen backward", softmax_scale);
  TORCH_CHECK_VALUE(lse.dim() == 2 && lse.size(0) == q.size(1) && lse.size(1) == q.size(0) && lse.is_contiguous(),
                    "fmha.attention_varlen backward: lse: expected a contiguous [h, total_q] tensor, got shape ",
                    lse.sizes());
  return bwd_gradients(d_out, q, k, v, out, d_lse, deterministic, algorithm, [&](const Tensor& o) {
    bool ok = true;
    return varlen_params(q, k, v, cu_q, cu_k, max_q, max_k, &o, &lse, softmax_scale, causal, causal_q_end, ok,
                         true);
  });
}

std::tuple<Tensor, Tensor, Tensor> bwd_varlen_meta(const Tensor& d_out, const Tensor& q, const Tensor& k,
                                                   const Tensor& v, const Tensor& out, const Tensor& lse,
                                                   const std::optional<Tensor>& d_lse, const Tensor& cu_q,
                                                   const Tensor& cu_k, int64_t max_q, int64_t max_k,
                                                   double softmax_scale, bool causal, bool causal_q_end,
                                                   bool deterministic, c10::string_view algorithm) {
  check_tensors("attention_varlen backward", q, k, v, 3, true);
  check_bwd_tensors("attention_varlen backward", d_out, q, v, out, lse, d_lse);
  check_cu("cu_seqlens_q", cu_q, q, true);
  check_cu("cu_seqlens_k", cu_k, q, true);
  check_scale("attention_varlen backward", softmax_scale);
  (void)max_q, (void)max_k, (void)causal, (void)causal_q_end, (void)deterministic, (void)algorithm_of(algorithm, "algorithm");
  return gradient_shapes(q, k, v);
}

}  // namespace

TORCH_LIBRARY(fmha, m) {
  m.def(
      "fwd(Tensor q, Tensor k, Tensor v, float softmax_scale, bool causal, bool causal_q_end, "
      "bool deterministic=False, str bwd_algorithm='auto') -> (Tensor, Tensor)");
  m.def(
      "fwd_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
      "int max_seqlen_k, float softmax_scale, bool causal, bool causal_q_end, bool deterministic=False, "
      "str bwd_algorithm='auto') -> (Tensor, Tensor)");
  m.def(
      "bwd(Tensor d_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor? d_lse, float softmax_scale, "
      "bool causal, bool causal_q_end, bool deterministic, str algorithm='auto') -> (Tensor, Tensor, Tensor)");
  m.def(
      "bwd_varlen(Tensor d_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor? d_lse, "
      "Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, float softmax_scale, bool causal, "
      "bool causal_q_end, bool deterministic, str algorithm='auto') -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(fmha, CUDA, m) {
  m.impl("fwd", &fwd_cuda);
  m.impl("fwd_varlen", &fwd_varlen_cuda);
  m.impl("bwd", &bwd_cuda);
  m.impl("bwd_varlen", &bwd_varlen_cuda);
}

// CPU tensors (and anything else that is not CUDA) reach the same checks, which name the device.
TORCH_LIBRARY_IMPL(fmha, CPU, m) {
  m.impl("fwd", &fwd_cuda);
  m.impl("fwd_varlen", &fwd_varlen_cuda);
  m.impl("bwd", &bwd_cuda);
  m.impl("bwd_varlen", &bwd_varlen_cuda);
}

TORCH_LIBRARY_IMPL(fmha, Meta, m) {
  m.impl("fwd", &fwd_meta);
  m.impl("fwd_varlen", &fwd_varlen_meta);
  m.impl("bwd", &bwd_meta);
  m.impl("bwd_varlen", &bwd_varlen_meta);
}
