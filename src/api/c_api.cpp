// C entry points (include/fmha/c_api.h): conversions of the C structs to the C++ API, with no C++ exception crossing
// the C boundary.
#include "fmha/c_api.h"

#include <cstddef>
#include <cstring>
#include <string>

#include "api/c_params.h"
#include "api/host.h"
#include "fmha/fwd.h"
#include "fmha/version.h"

// The ABI of version 1: a change here is a new FMHA_FWD_PARAMS_VERSION.
static_assert(sizeof(fmha_fwd_params) == 232, "fmha_fwd_params: version 1 is 232 bytes");
static_assert(offsetof(fmha_fwd_params, cu_seqlens_q) == 56, "fmha_fwd_params: no padding before the pointers");
static_assert(offsetof(fmha_fwd_params, q_row_stride) == 112, "fmha_fwd_params: strides after the 7 pointers");
static_assert(offsetof(fmha_fwd_params, mask) == 208, "fmha_fwd_params: codes after the 12 strides");
// The C codes are the C++ enums' values (the conversion casts them).
static_assert(int(fmha::MaskType::kNone) == 0 && int(fmha::MaskType::kResidual) == 1 &&
              int(fmha::MaskType::kCausal) == 2, "mask codes");
static_assert(int(fmha::CausalAlign::kQBegin) == 0 && int(fmha::CausalAlign::kQEnd) == 1, "causal_align codes");
static_assert(int(fmha::TileScheduler::kAuto) == 0 && int(fmha::TileScheduler::kIndividual) == 1 &&
              int(fmha::TileScheduler::kPersistent) == 2, "scheduler codes");
static_assert(int(fmha::Toggle::kAuto) == 0 && int(fmha::Toggle::kOff) == 1 && int(fmha::Toggle::kOn) == 2,
              "pingpong codes");

namespace {

void set_error(const fmha::Status& s, char* err, int err_len) {
  if (s.is_ok() || err == nullptr || err_len <= 0) return;
  std::strncpy(err, s.message().c_str(), size_t(err_len) - 1);
  err[err_len - 1] = '\0';
}

/// Runs `body` (returning a Status), writes its message to err and returns its code; an exception (std::bad_alloc
/// from a message string) becomes kInternalError.
template <class Body>
int guarded(const char* entry, char* err, int err_len, Body body) {
  try {
    const fmha::Status s = body();
    set_error(s, err, err_len);
    return static_cast<int>(s.code());
  } catch (...) {
    set_error(fmha::Status(fmha::StatusCode::kInternalError,
                           std::string("internal error: exception in ") + entry),
              err, err_len);
    return static_cast<int>(fmha::StatusCode::kInternalError);
  }
}

fmha::Status range(const char* name, int value, int lo, int hi, const char* meaning) {
  if (value >= lo && value <= hi) return fmha::Status::ok();
  return fmha::detail::invalid_arg(name, meaning, std::to_string(value));
}

}  // namespace

namespace fmha::detail {

Status fwd_params_from_c(const fmha_fwd_params* c, FwdParams* out) {
  FwdParams tmp;
  FwdParams* p = &tmp;  // written to `out` only once every check passed
  if (c == nullptr) return invalid_arg("params", "a fmha_fwd_params", "NULL");
  if (c->struct_size != sizeof(fmha_fwd_params))
    return invalid_arg("struct_size",
                       std::to_string(sizeof(fmha_fwd_params)) +
                           " (sizeof(fmha_fwd_params) of this library; call fmha_fwd_params_init)",
                       std::to_string(c->struct_size));
  if (c->version != FMHA_FWD_PARAMS_VERSION)
    return invalid_arg("version", std::to_string(FMHA_FWD_PARAMS_VERSION), std::to_string(c->version));
  if (c->reserved != 0)
    return invalid_arg("reserved", "0 (fmha_fwd_params_init sets it)", std::to_string(c->reserved));
  for (const fmha::Status& s :
       {range("dtype", c->dtype, 0, 1, "0 (fp16) or 1 (bf16)"),
        range("out_dtype", c->out_dtype, -1, 1, "-1 (the input dtype), 0 (fp16) or 1 (bf16)"),
        range("mask", c->mask, 0, 2, "0 (none), 1 (residual) or 2 (causal)"),
        range("causal_align", c->causal_align, 0, 1, "0 (qbegin) or 1 (qend)"),
        range("scheduler", c->scheduler, 0, 2, "0 (auto), 1 (individual) or 2 (persistent)"),
        range("pingpong", c->pingpong, 0, 2, "0 (auto), 1 (off) or 2 (on)")})
    if (!s) return s;
  auto dtype = [](int code) { return code == 0 ? fmha::DType::kFP16 : fmha::DType::kBF16; };
  p->dtype = dtype(c->dtype);
  if (c->out_dtype >= 0) p->out_dtype = dtype(c->out_dtype);
  p->batch = c->batch, p->heads_q = c->heads_q, p->heads_kv = c->heads_kv;
  p->head_dim = c->head_dim, p->head_dim_v = c->head_dim_v;
  p->seqlen_q = c->seqlen_q, p->seqlen_k = c->seqlen_k;
  p->cu_seqlens_q = c->cu_seqlens_q, p->cu_seqlens_k = c->cu_seqlens_k;
  p->total_q = c->total_q, p->total_k = c->total_k;
  p->q = c->q, p->k = c->k, p->v = c->v, p->o = c->o, p->lse = c->lse;
  p->q_row_stride = c->q_row_stride, p->q_head_stride = c->q_head_stride, p->q_batch_stride = c->q_batch_stride;
  p->k_row_stride = c->k_row_stride, p->k_head_stride = c->k_head_stride, p->k_batch_stride = c->k_batch_stride;
  p->v_row_stride = c->v_row_stride, p->v_head_stride = c->v_head_stride, p->v_batch_stride = c->v_batch_stride;
  p->o_row_stride = c->o_row_stride, p->o_head_stride = c->o_head_stride, p->o_batch_stride = c->o_batch_stride;
  p->mask = static_cast<fmha::MaskType>(c->mask);
  p->causal_align = static_cast<fmha::CausalAlign>(c->causal_align);
  p->softmax_scale = c->softmax_scale;
  p->scheduler = static_cast<fmha::TileScheduler>(c->scheduler);
  p->pingpong = static_cast<fmha::Toggle>(c->pingpong);
  p->sm_count = c->sm_count;
  *out = tmp;
  return fmha::Status::ok();
}

}  // namespace fmha::detail

using fmha::detail::fwd_params_from_c;

extern "C" const char* fmha_version(void) { return fmha::version(); }

extern "C" void fmha_fwd_params_init(fmha_fwd_params* c) {
  if (c == nullptr) return;
  std::memset(c, 0, sizeof *c);
  const fmha::FwdParams d;  // the C++ defaults, so that the two stay one
  c->struct_size = sizeof(fmha_fwd_params);
  c->version = FMHA_FWD_PARAMS_VERSION;
  c->dtype = d.dtype == fmha::DType::kFP16 ? 0 : 1;
  c->out_dtype = -1;
  c->batch = d.batch, c->heads_q = d.heads_q, c->heads_kv = d.heads_kv;
  c->head_dim = d.head_dim, c->head_dim_v = d.head_dim_v;
  c->mask = static_cast<int32_t>(d.mask);
  c->causal_align = static_cast<int32_t>(d.causal_align);
  c->softmax_scale = d.softmax_scale;
  c->scheduler = static_cast<int32_t>(d.scheduler);
  c->pingpong = static_cast<int32_t>(d.pingpong);
  c->sm_count = d.sm_count;
}

extern "C" void fmha_fwd_params_set_contiguous_strides(fmha_fwd_params* c) {
  if (c == nullptr) return;
  fmha::FwdParams p;
  p.heads_q = c->heads_q, p.heads_kv = c->heads_kv, p.head_dim = c->head_dim, p.head_dim_v = c->head_dim_v;
  p.seqlen_q = c->seqlen_q, p.seqlen_k = c->seqlen_k, p.cu_seqlens_q = c->cu_seqlens_q;
  fmha::set_contiguous_strides(p);
  c->q_row_stride = p.q_row_stride, c->q_head_stride = p.q_head_stride, c->q_batch_stride = p.q_batch_stride;
  c->k_row_stride = p.k_row_stride, c->k_head_stride = p.k_head_stride, c->k_batch_stride = p.k_batch_stride;
  c->v_row_stride = p.v_row_stride, c->v_head_stride = p.v_head_stride, c->v_batch_stride = p.v_batch_stride;
  c->o_row_stride = p.o_row_stride, c->o_head_stride = p.o_head_stride, c->o_batch_stride = p.o_batch_stride;
}

extern "C" size_t fmha_fwd_workspace_size(const fmha_fwd_params* c) {
  try {
    fmha::FwdParams p;
    return fwd_params_from_c(c, &p) ? fmha::fwd_workspace_size(p) : 0;
  } catch (...) {
    return 0;
  }
}

extern "C" int fmha_fwd(const fmha_fwd_params* c, void* workspace, size_t workspace_bytes, void* stream, char* err,
                        int err_len) {
  return guarded("fmha_fwd", err, err_len, [&] {
    fmha::FwdParams p;
    if (fmha::Status s = fwd_params_from_c(c, &p); !s) return s;
    return fmha::fwd(p, fmha::Workspace{workspace, workspace_bytes}, static_cast<cudaStream_t>(stream));
  });
}

extern "C" int fmha_fwd_contiguous(int dtype, int batch, int heads_q, int heads_kv, int head_dim, int seqlen_q,
                                   int seqlen_k, const int* cu_seqlens_q, const int* cu_seqlens_k, int total_q,
                                   int total_k, const void* q, const void* k, const void* v, void* o, float* lse,
                                   int mask, int causal_align, float softmax_scale, int scheduler, int pingpong,
                                   void* stream, char* err, int err_len) {
  fmha_fwd_params c;
  fmha_fwd_params_init(&c);
  c.dtype = dtype, c.batch = batch, c.heads_q = heads_q, c.heads_kv = heads_kv, c.head_dim = head_dim;
  c.seqlen_q = seqlen_q, c.seqlen_k = seqlen_k, c.cu_seqlens_q = cu_seqlens_q, c.cu_seqlens_k = cu_seqlens_k;
  c.total_q = total_q, c.total_k = total_k;
  c.q = q, c.k = k, c.v = v, c.o = o, c.lse = lse;
  c.mask = mask, c.causal_align = causal_align, c.softmax_scale = softmax_scale;
  c.scheduler = scheduler, c.pingpong = pingpong;
  fmha_fwd_params_set_contiguous_strides(&c);
  return fmha_fwd(&c, nullptr, 0, stream, err, err_len);
}
