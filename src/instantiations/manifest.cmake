# One line per kernel translation unit:
#   fmha_kernel(<operation> <dtype> <head dim> [DV <head dim of V>] [OUT <output dtype>] SETS <sets...>)
# (DV defaults to the head dim, OUT to the dtype). Masks (none / residual / causal q-begin / causal q-end) and
# varlen live inside each unit. Sets: ci (compiled by CI, ≤ 30 min on 2 cores), full (GPU runs and benchmarks).
fmha_kernel(fwd fp16 32 SETS ci full)
fmha_kernel(fwd fp16 64 SETS ci full)
fmha_kernel(fwd fp16 128 SETS ci full)
fmha_kernel(fwd bf16 32 SETS ci full)
fmha_kernel(fwd bf16 64 SETS ci full)
fmha_kernel(fwd bf16 128 SETS ci full)
fmha_kernel(decode fp16 64 SETS ci full)
fmha_kernel(decode fp16 128 SETS ci full)
fmha_kernel(decode bf16 64 SETS ci full)
fmha_kernel(decode bf16 128 SETS ci full)
fmha_kernel(bwd fp16 64 SETS ci full)
fmha_kernel(bwd fp16 128 SETS ci full)
fmha_kernel(bwd bf16 64 SETS ci full)
fmha_kernel(bwd bf16 128 SETS ci full)
