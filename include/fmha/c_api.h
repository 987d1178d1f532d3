/* fmha: C entry points for bindings (ctypes, other languages). Thin wrappers over the C++ API in fmha/fwd.h. */
#ifndef FMHA_C_API_H
#define FMHA_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of fmha_fwd_params. A new field gives a new version (and a new struct_size). A library accepts exactly
 * the version and size it was built with, so callers compile against the header of the library they load. */
#define FMHA_FWD_PARAMS_VERSION 1

/* Arguments of fmha_fwd: the C image of fmha::FwdParams (fmha/fwd.h has the full semantics, layouts and alignment).
 * Fill it with fmha_fwd_params_init, which sets struct_size, version and the defaults below, then set the fields.
 * Element codes (dtype, out_dtype): 0 fp16, 1 bf16; out_dtype -1 = the input dtype. Strides are in elements; call
 * fmha_fwd_params_set_contiguous_strides after the shape fields for contiguous BSHD (or packed varlen) tensors. */
typedef struct fmha_fwd_params {
  uint32_t struct_size; /* sizeof(fmha_fwd_params) as the caller compiled it: 232 bytes in version 1 */
  uint32_t version;     /* FMHA_FWD_PARAMS_VERSION */
  int32_t dtype;        /* Q, K, V: 0 fp16, 1 bf16 (default 1) */
  int32_t out_dtype;    /* O: -1 (default) = dtype */
  int32_t batch, heads_q, heads_kv;
  int32_t head_dim;           /* of Q and K */
  int32_t head_dim_v;         /* of V and O; 0 (default) = head_dim */
  int32_t seqlen_q, seqlen_k; /* dense lengths; varlen: the largest entry lengths */
  int32_t total_q, total_k;   /* varlen: rows of Q/O and of K/V */
  int32_t sm_count;           /* SMs for the persistent scheduler; 0 = all */
  const int32_t* cu_seqlens_q; /* device int[batch+1], or NULL (dense) */
  const int32_t* cu_seqlens_k; /* device int[batch+1], or NULL (dense) */
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse; /* optional: dense [batch][heads_q][seqlen_q], varlen [heads_q][total_q] */
  int64_t q_row_stride, q_head_stride, q_batch_stride;
  int64_t k_row_stride, k_head_stride, k_batch_stride;
  int64_t v_row_stride, v_head_stride, v_batch_stride;
  int64_t o_row_stride, o_head_stride, o_batch_stride;
  int32_t mask;         /* 0 none, 1 residual, 2 causal */
  int32_t causal_align; /* 0 q-begin (top-left), 1 q-end (bottom-right) */
  float softmax_scale;  /* 0 = 1/sqrt(head_dim) */
  int32_t scheduler;    /* 0 auto, 1 one CTA per tile, 2 persistent */
  int32_t pingpong;     /* 0 auto, 1 off, 2 on */
  int32_t reserved;     /* 0; keeps the size a multiple of 8 with no hidden padding */
} fmha_fwd_params;

/* Sets struct_size, version and every default (bf16, one head of dim 128, no lengths, null pointers, zero strides,
 * no mask, default scale, the library's schedule). Does nothing when p is NULL. */
void fmha_fwd_params_init(fmha_fwd_params* p);

/* Sets the 12 strides of p for contiguous tensors from its shape fields (heads, head dims, lengths; packed varlen
 * tensors when cu_seqlens_q is set), as fmha::set_contiguous_strides. Does nothing when p is NULL. */
void fmha_fwd_params_set_contiguous_strides(fmha_fwd_params* p);

/* Bytes of workspace fmha_fwd needs for p (0 for every forward problem today; 0 too when p is invalid). */
size_t fmha_fwd_workspace_size(const fmha_fwd_params* p);

/* Forward attention, asynchronous on `stream` (a cudaStream_t or NULL). workspace / workspace_bytes: device memory,
 * 256-byte aligned, at least fmha_fwd_workspace_size(p) bytes (NULL / 0 when that is 0). Returns 0 on success,
 * else a fmha::StatusCode value: 1 invalid argument (also a NULL p, or a struct_size or version the library does not
 * know), 2 not supported (dtype, head dim, device, no GPU), 3 kernel not built, 4 CUDA error, 5 internal. On a
 * failure the message (argument, expected, actual) is copied into err, cut to err_len - 1 bytes and NUL-terminated;
 * err may be NULL, and on success it is left as it was. */
int fmha_fwd(const fmha_fwd_params* p, void* workspace, size_t workspace_bytes, void* stream, char* err, int err_len);

/* Version of the linked library, "MAJOR.MINOR.PATCH" (the same string as fmha::version()). Never null. */
const char* fmha_version(void);

/* Forward attention on contiguous tensors with positional arguments (see fmha::FwdParams for the full semantics):
 * the first C entry point, kept as a thin shim over fmha_fwd so that older and newer builds can be timed by the
 * same benchmark (bench/bench_fwd.py); new code should use fmha_fwd_params and fmha_fwd.
 *   dtype:  0 = fp16, 1 = bf16 (Q, K, V, O)
 *   dense (cu_seqlens_q == NULL): q, o [batch][seqlen_q][heads_q][head_dim]; k, v [batch][seqlen_k][heads_kv][head_dim]
 *   varlen (cu_seqlens_q, cu_seqlens_k: device int[batch+1]): q, o [total_q][heads_q][head_dim]; k, v
 *           [total_k][heads_kv][head_dim]; seqlen_q / seqlen_k are the largest entry lengths.
 *   lse:    optional fp32, dense [batch][heads_q][seqlen_q], varlen [heads_q][total_q]
 *   mask:   0 none, 1 residual, 2 causal; causal_align: 0 q-begin (top-left), 1 q-end (bottom-right)
 *   softmax_scale: 0 = 1/sqrt(head_dim)
 *   scheduler: 0 auto, 1 one CTA per tile, 2 persistent; pingpong: 0 auto, 1 off, 2 on
 *   stream: a cudaStream_t or NULL
 *   err / err_len: buffer for the error message (may be NULL)
 * Pointers: device-accessible; q, k, v, o 16-byte aligned, lse and cu_seqlens 4-byte aligned; O must not overlap
 *   Q, K or V. head_dim a multiple of 8 up to 128; heads_q a multiple of heads_kv.
 * Returns 0 on success, else a fmha::StatusCode value with the message in err:
 *   1 invalid argument, 2 not supported (dtype, head dim, device), 3 kernel not built, 4 CUDA error, 5 internal.
 * The call is asynchronous on `stream`: errors raised while the kernel runs surface on that stream. */
int fmha_fwd_contiguous(int dtype, int batch, int heads_q, int heads_kv, int head_dim, int seqlen_q, int seqlen_k,
                        const int* cu_seqlens_q, const int* cu_seqlens_k, int total_q, int total_k, const void* q,
                        const void* k, const void* v, void* o, float* lse, int mask, int causal_align,
                        float softmax_scale, int scheduler, int pingpong, void* stream, char* err,
                        int err_len);

#ifdef __cplusplus
}
#endif

#endif /* FMHA_C_API_H */
