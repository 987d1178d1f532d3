// The decode operator of fmha (torch.ops.fmha.decode), registered beside ops.cpp's forward operators:
//   fmha::decode(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor seqlens_k, Tensor? page_table,
//                Tensor? cache_batch_idx, Tensor? k_new, Tensor? v_new, int max_seqlen_k, int num_splits,
//                float softmax_scale) -> (Tensor, Tensor)
//     q [b, n, h, d] (n new tokens); contiguous caches [slots, capacity, h_k, d], or paged [pages, page_size, h_k, d]
//     with page_table int32 [rows, pages_per_seq] (row stride any); seqlens_k int32 [b] (cached tokens before the
//     call); cache_batch_idx int32 [b] (entry b's slot or page-table row); k_new, v_new [b, n, h_k, d] (the append:
//     written into the caches in place, hence the (a!) / (b!) annotations). Returns out [b, n, h, d] (contiguous,
//     q's dtype) and lse [b, n, h] (fp32, natural log). max_seqlen_k: the plan's bound on the keys after the append
//     (0 = the cache's capacity); num_splits: 0 = the heuristic. Semantics, clamping and errors as fmha::decode
//     (include/fmha/decode.h); the split-KV workspace comes from torch's caching allocator, so the call can be
//     captured in a CUDA graph (the plan depends on shapes and the two integers only).
// Index tensors must be int32, contiguous (page_table: unit stride along its pages, at least one row), on q's
// device; every tensor's head-dim mode contiguous. No backward: with grad mode on and an input that requires grad,
// the Autograd kernel raises NotImplementedError. No sequences (b = 0) give empty outputs.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cfloat>
#include <cstdint>
#include <optional>
#include <string>

#include "fmha/decode.h"
#include "torch_status.h"

namespace {

using at::Tensor;

void raise_if_error(const fmha::Status& s, bool meta = false) {
  fmha::torch_ops::raise_if_error(s, "fmha.decode: ", meta);
}

/// Checks the tensors' ranks, dtypes and devices (what DecodeParams cannot express).
void check_inputs(const Tensor& q, const Tensor& kc, const Tensor& vc, const Tensor& lens,
                  const std::optional<Tensor>& table, const std::optional<Tensor>& idx,
                  const std::optional<Tensor>& kn, const std::optional<Tensor>& vn, bool meta) {
  TORCH_CHECK_VALUE(q.dim() == 4, "fmha.decode: q: expected 4 dimensions [b, n, h, d], got ", q.dim());
  TORCH_CHECK_VALUE(kc.dim() == 4 && vc.dim() == 4, "fmha.decode: k_cache, v_cache: expected 4 dimensions, got ",
                    kc.dim(), ", ", vc.dim());
  TORCH_CHECK_VALUE(q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16,
                    "fmha.decode: q.dtype: expected torch.float16 or torch.bfloat16, got ", q.scalar_type());
  TORCH_CHECK_VALUE(kc.scalar_type() == q.scalar_type() && vc.scalar_type() == q.scalar_type(),
                    "fmha.decode: k_cache.dtype, v_cache.dtype: expected q's dtype ", q.scalar_type(), ", got ",
                    kc.scalar_type(), ", ", vc.scalar_type());
  TORCH_CHECK_VALUE(kc.sizes() == vc.sizes(), "fmha.decode: v_cache.shape: expected k_cache's ", kc.sizes(),
                    ", got ", vc.sizes());
  if (!meta) TORCH_CHECK_VALUE(q.is_cuda(), "fmha.decode: q.device: expected a CUDA device, got ", q.device());
  auto same_device = [&](const char* n, const Tensor& t) {
    TORCH_CHECK_VALUE(t.device() == q.device(), "fmha.decode: ", n, ".device: expected q's device ", q.device(),
                      ", got ", t.device());
  };
  same_device("k_cache", kc), same_device("v_cache", vc);
  auto unit_last = [&](const char* n, const Tensor& t) {
    TORCH_CHECK_VALUE(t.stride(3) == 1 || t.size(3) == 1, "fmha.decode: ", n,
                      ".stride(3) (the head dim): expected 1 (contiguous), got ", t.stride(3));
  };
  unit_last("q", q), unit_last("k_cache", kc), unit_last("v_cache", vc);
  auto index = [&](const char* n, const Tensor& t, int rank) {
    TORCH_CHECK_VALUE(t.scalar_type() == at::kInt, "fmha.decode: ", n, ".dtype: expected torch.int32, got ",
                      t.scalar_type(), " (use .to(torch.int32))");
    TORCH_CHECK_VALUE(t.dim() == rank, "fmha.decode: ", n, ": expected ", rank, " dimension(s), got ", t.dim());
    TORCH_CHECK_VALUE(t.stride(rank - 1) == 1 || t.size(rank - 1) <= 1, "fmha.decode: ", n,
                      ": expected a contiguous last dimension, got stride ", t.stride(rank - 1));
    same_device(n, t);
  };
  index("seqlens_k", lens, 1);
  TORCH_CHECK_VALUE(lens.size(0) == q.size(0), "fmha.decode: seqlens_k.shape[0]: expected b = ", q.size(0),
                    ", got ", lens.size(0));
  if (idx) {
    index("cache_batch_idx", *idx, 1);
    TORCH_CHECK_VALUE(idx->size(0) == q.size(0), "fmha.decode: cache_batch_idx.shape[0]: expected b = ", q.size(0),
                      ", got ", idx->size(0));
  }
  if (table) {
    index("page_table", *table, 2);
    TORCH_CHECK_VALUE(table->size(0) >= 1 && table->size(1) >= 1, "fmha.decode: page_table.shape: expected at least "
                      "one row and one page, got ", table->sizes());
  }
  TORCH_CHECK_VALUE(kn.has_value() == vn.has_value(), "fmha.decode: k_new, v_new: expected both or neither");
  if (kn) {
    TORCH_CHECK_VALUE(kn->dim() == 4 && vn->dim() == 4, "fmha.decode: k_new, v_new: expected 4 dimensions");
    TORCH_CHECK_VALUE(kn->scalar_type() == q.scalar_type() && vn->scalar_type() == q.scalar_type(),
                      "fmha.decode: k_new.dtype, v_new.dtype: expected q's dtype ", q.scalar_type());
    TORCH_CHECK_VALUE(kn->sizes() == vn->sizes(), "fmha.decode: v_new.shape: expected k_new's ", kn->sizes(),
                      ", got ", vn->sizes());
    TORCH_CHECK_VALUE(kn->size(0) == q.size(0) && kn->size(1) == q.size(1) && kn->size(2) == kc.size(2) &&
                          kn->size(3) == q.size(3),
                      "fmha.decode: k_new.shape: expected [b, n, h_k, d] = [", q.size(0), ", ", q.size(1), ", ",
                      kc.size(2), ", ", q.size(3), "], got ", kn->sizes());
    same_device("k_new", *kn), same_device("v_new", *vn);
    unit_last("k_new", *kn), unit_last("v_new", *vn);
  }
  TORCH_CHECK_VALUE(kc.size(3) == q.size(3), "fmha.decode: k_cache.shape[3] (head dim): expected q.shape[3] = ",
                    q.size(3), ", got ", kc.size(3));
}

/// A size-1 mode may have any stride in torch; fmha wants multiples of 8 (0 allowed where the mode has one entry).
int64_t stride_of(const Tensor& t, int d, int64_t fallback) { return t.size(d) == 1 ? fallback : t.stride(d); }

fmha::DecodeParams params_of(const Tensor& q, const Tensor& kc, const Tensor& vc, const Tensor& lens,
                             const std::optional<Tensor>& table, const std::optional<Tensor>& idx,
                             const std::optional<Tensor>& kn, const std::optional<Tensor>& vn, int64_t max_k,
                             int64_t splits, double scale, Tensor* out, Tensor* lse, bool real) {
  TORCH_CHECK_VALUE(max_k >= 0 && max_k <= INT32_MAX, "fmha.decode: max_seqlen_k: expected 0 … 2^31 - 1, got ", max_k);
  TORCH_CHECK_VALUE(splits >= 0 && splits <= INT32_MAX, "fmha.decode: num_splits: expected ≥ 0 (0 = heuristic), got ",
                    splits);
  TORCH_CHECK_VALUE(scale == 0.0 || (scale >= FLT_MIN && scale <= FLT_MAX),
                    "fmha.decode: softmax_scale: expected 0 (= 1/sqrt(head_dim)) or a normal fp32 value, got ", scale);
  alignas(256) static char fake[64];
  auto ptr = [&](const Tensor& t) -> void* { return real ? t.data_ptr() : static_cast<void*>(fake); };
  fmha::DecodeParams p;
  p.dtype = q.scalar_type() == at::kHalf ? fmha::DType::kFP16 : fmha::DType::kBF16;
  p.batch = int(q.size(0)), p.new_tokens = int(q.size(1)), p.heads_q = int(q.size(2)), p.head_dim = int(q.size(3));
  p.heads_kv = int(kc.size(2));
  p.max_seqlen_k = int(max_k), p.splits = int(splits), p.softmax_scale = float(scale);
  const int64_t d = p.head_dim;
  p.q = ptr(q);
  p.q_batch_stride = stride_of(q, 0, 0), p.q_token_stride = stride_of(q, 1, 0), p.q_head_stride = stride_of(q, 2, 0);
  p.o = out ? ptr(*out) : fake;
  p.o_head_stride = d, p.o_token_stride = p.heads_q * d, p.o_batch_stride = int64_t(p.new_tokens) * p.heads_q * d;
  p.lse = lse && real ? lse->data_ptr<float>() : nullptr;
  p.k_cache = ptr(kc), p.v_cache = ptr(vc);
  const int64_t row_fallback = (p.heads_kv * d + 7) / 8 * 8;
  p.k_slot_stride = stride_of(kc, 0, 0), p.k_row_stride = stride_of(kc, 1, row_fallback), p.k_head_stride = stride_of(kc, 2, 0);
  p.v_slot_stride = stride_of(vc, 0, 0), p.v_row_stride = stride_of(vc, 1, row_fallback), p.v_head_stride = stride_of(vc, 2, 0);
  p.slots = int(kc.size(0));
  p.seqlens_k = real ? lens.data_ptr<int>() : reinterpret_cast<const int*>(fake);
  p.cache_batch_idx = idx ? (real ? idx->data_ptr<int>() : reinterpret_cast<const int*>(fake)) : nullptr;
  if (table) {
    p.page_table = real ? table->data_ptr<int>() : reinterpret_cast<const int*>(fake);
    p.page_size = int(kc.size(1));
    p.pages_per_seq = int(table->size(1));
    p.page_table_stride = table->size(0) == 1 ? table->size(1) : table->stride(0);
    p.page_table_rows = int(table->size(0));
  } else {
    p.capacity = int(kc.size(1));
  }
  if (kn) {
    p.k_new = ptr(*kn), p.v_new = ptr(*vn);
    p.k_new_batch_stride = stride_of(*kn, 0, 0), p.k_new_token_stride = stride_of(*kn, 1, 0);
    p.k_new_head_stride = stride_of(*kn, 2, 0);
    p.v_new_batch_stride = stride_of(*vn, 0, 0), p.v_new_token_stride = stride_of(*vn, 1, 0);
    p.v_new_head_stride = stride_of(*vn, 2, 0);
  }
  return p;
}

std::tuple<Tensor, Tensor> decode_cuda(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                       const Tensor& seqlens_k, const std::optional<Tensor>& page_table,
                                       const std::optional<Tensor>& cache_batch_idx,
                                       const std::optional<Tensor>& k_new, const std::optional<Tensor>& v_new,
                                       int64_t max_seqlen_k, int64_t num_splits, double softmax_scale) {
  check_inputs(q, k_cache, v_cache, seqlens_k, page_table, cache_batch_idx, k_new, v_new, false);
  const c10::cuda::CUDAGuard guard(q.device());
  Tensor out = at::empty(q.sizes(), q.options());
  Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  if (q.size(0) == 0) return {out, lse};  // no sequences: nothing to attend or append
  fmha::DecodeParams p = params_of(q, k_cache, v_cache, seqlens_k, page_table, cache_batch_idx, k_new, v_new,
                                   max_seqlen_k, num_splits, softmax_scale, &out, &lse, true);
  fmha::DecodePlan plan;
  raise_if_error(fmha::decode_plan(p, &plan));
  Tensor ws = at::empty({int64_t(plan.workspace_bytes)}, q.options().dtype(at::kByte));
  raise_if_error(fmha::decode(p, plan, fmha::Workspace{plan.workspace_bytes ? ws.data_ptr() : nullptr,
                                                       plan.workspace_bytes},
                              c10::cuda::getCurrentCUDAStream(q.device().index()).stream()));
  return {out, lse};
}

std::tuple<Tensor, Tensor> decode_meta(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                       const Tensor& seqlens_k, const std::optional<Tensor>& page_table,
                                       const std::optional<Tensor>& cache_batch_idx,
                                       const std::optional<Tensor>& k_new, const std::optional<Tensor>& v_new,
                                       int64_t max_seqlen_k, int64_t num_splits, double softmax_scale) {
  check_inputs(q, k_cache, v_cache, seqlens_k, page_table, cache_batch_idx, k_new, v_new, true);
  if (q.size(0) == 0)  // no sequences: empty outputs, as on the GPU
    return {at::empty(q.sizes(), q.options()), at::empty({0, q.size(1), q.size(2)}, q.options().dtype(at::kFloat))};
  fmha::DecodeParams p = params_of(q, k_cache, v_cache, seqlens_k, page_table, cache_batch_idx, k_new, v_new,
                                   max_seqlen_k, num_splits, softmax_scale, nullptr, nullptr, false);
  p.sm_count = 132;  // the plan's shape checks only (no device in a Meta kernel)
  fmha::DecodePlan plan;
  raise_if_error(fmha::decode_plan(p, &plan), true);
  Tensor out = at::empty(q.sizes(), q.options());
  Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  return {out, lse};
}

// Decode has no backward: a call that would need one is refused (torch's fallback would return outputs without
// gradients).
std::tuple<Tensor, Tensor> decode_autograd(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                           const Tensor& seqlens_k, const std::optional<Tensor>& page_table,
                                           const std::optional<Tensor>& cache_batch_idx,
                                           const std::optional<Tensor>& k_new, const std::optional<Tensor>& v_new,
                                           int64_t max_seqlen_k, int64_t num_splits, double softmax_scale) {
  const bool grad = c10::GradMode::is_enabled() &&
                    (q.requires_grad() || k_cache.requires_grad() || v_cache.requires_grad() ||
                     (k_new && k_new->requires_grad()) || (v_new && v_new->requires_grad()));
  TORCH_CHECK_NOT_IMPLEMENTED(!grad, "fmha.decode: q, k_cache, v_cache, k_new, v_new: expected tensors that do not "
                              "require grad (or torch.no_grad()): decode has no backward pass");
  at::AutoDispatchBelowADInplaceOrView guard;
  static auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("fmha::decode", "").typed<decltype(decode_autograd)>();
  return op.call(q, k_cache, v_cache, seqlens_k, page_table, cache_batch_idx, k_new, v_new, max_seqlen_k, num_splits,
                 softmax_scale);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fmha, m) {
  m.def(
      "decode(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor seqlens_k, Tensor? page_table, "
      "Tensor? cache_batch_idx, Tensor? k_new, Tensor? v_new, int max_seqlen_k, int num_splits, "
      "float softmax_scale) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(fmha, Autograd, m) { m.impl("decode", &decode_autograd); }
TORCH_LIBRARY_IMPL(fmha, CUDA, m) { m.impl("decode", &decode_cuda); }
TORCH_LIBRARY_IMPL(fmha, CPU, m) { m.impl("decode", &decode_cuda); }
TORCH_LIBRARY_IMPL(fmha, Meta, m) { m.impl("decode", &decode_meta); }
