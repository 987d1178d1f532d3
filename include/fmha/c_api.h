/* fmha: C entry points for bindings (ctypes, other languages). Thin wrappers over the C++ API in fmha/fwd.h. */
#ifndef FMHA_C_API_H
#define FMHA_C_API_H

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the linked library, "MAJOR.MINOR.PATCH" (the same string as fmha::version()). Never null. */
const char* fmha_version(void);

/* Forward attention on contiguous tensors (see fmha::FwdParams for the full semantics).
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
