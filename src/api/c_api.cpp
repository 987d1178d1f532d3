// C entry points (include/fmha/c_api.h).
#include "fmha/c_api.h"

#include <cstring>

#include "fmha/fwd.h"
#include "fmha/version.h"

extern "C" const char* fmha_version(void) { return fmha::version(); }

static int fwd_contiguous_impl(int dtype, int batch, int heads_q, int heads_kv, int head_dim, int seqlen_q,
                                   int seqlen_k, const int* cu_seqlens_q, const int* cu_seqlens_k, int total_q,
                                   int total_k, const void* q, const void* k, const void* v, void* o, float* lse,
                                   int mask, int causal_align, float softmax_scale, int scheduler, int pingpong,
                                   void* stream,
                                   char* err, int err_len) {
  fmha::FwdParams p;
  fmha::Status s;
  if (dtype != 0 && dtype != 1) {
    s = fmha::Status::invalid("dtype: expected 0 (fp16) or 1 (bf16), got " + std::to_string(dtype));
  } else if (mask < 0 || mask > 2) {
    s = fmha::Status::invalid("mask: expected 0 (none), 1 (residual) or 2 (causal), got " + std::to_string(mask));
  } else if (causal_align < 0 || causal_align > 1) {
    s = fmha::Status::invalid("causal_align: expected 0 (qbegin) or 1 (qend), got " + std::to_string(causal_align));
  } else if (scheduler < 0 || scheduler > 2) {
    s = fmha::Status::invalid("scheduler: expected 0 (auto), 1 (individual) or 2 (persistent), got " +
                              std::to_string(scheduler));
  } else if (pingpong < 0 || pingpong > 2) {
    s = fmha::Status::invalid("pingpong: expected 0 (auto), 1 (off) or 2 (on), got " + std::to_string(pingpong));
  } else {
    p.dtype = dtype == 0 ? fmha::DType::kFP16 : fmha::DType::kBF16;
    p.batch = batch, p.heads_q = heads_q, p.heads_kv = heads_kv, p.head_dim = head_dim;
    p.seqlen_q = seqlen_q, p.seqlen_k = seqlen_k;
    p.cu_seqlens_q = cu_seqlens_q, p.cu_seqlens_k = cu_seqlens_k, p.total_q = total_q, p.total_k = total_k;
    p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse;
    p.mask = static_cast<fmha::MaskType>(mask);
    p.causal_align = static_cast<fmha::CausalAlign>(causal_align);
    p.softmax_scale = softmax_scale;
    p.scheduler = static_cast<fmha::TileScheduler>(scheduler);
    p.pingpong = static_cast<fmha::Toggle>(pingpong);
    fmha::set_contiguous_strides(p);
    s = fmha::fwd(p, static_cast<cudaStream_t>(stream));
  }
  if (!s.is_ok() && err != nullptr && err_len > 0) {
    std::strncpy(err, s.message().c_str(), size_t(err_len) - 1);
    err[err_len - 1] = '\0';
  }
  return static_cast<int>(s.code());
}

extern "C" int fmha_fwd_contiguous(int dtype, int batch, int heads_q, int heads_kv, int head_dim, int seqlen_q,
                                   int seqlen_k, const int* cu_seqlens_q, const int* cu_seqlens_k, int total_q,
                                   int total_k, const void* q, const void* k, const void* v, void* o, float* lse,
                                   int mask, int causal_align, float softmax_scale, int scheduler, int pingpong,
                                   void* stream, char* err, int err_len) {
  try {  // no C++ exception (std::bad_alloc from a message string) may cross the C boundary
    return fwd_contiguous_impl(dtype, batch, heads_q, heads_kv, head_dim, seqlen_q, seqlen_k, cu_seqlens_q,
                               cu_seqlens_k, total_q, total_k, q, k, v, o, lse, mask, causal_align, softmax_scale,
                               scheduler, pingpong, stream, err, err_len);
  } catch (...) {
    if (err != nullptr && err_len > 0) {
      std::strncpy(err, "internal error: exception in fmha_fwd_contiguous", size_t(err_len) - 1);
      err[err_len - 1] = '\0';
    }
    return static_cast<int>(fmha::StatusCode::kInternalError);
  }
}
