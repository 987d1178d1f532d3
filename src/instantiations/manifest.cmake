# One line per kernel translation unit: fmha_kernel(<operation> <dtype> <head dim> <sets...>).
# Masks (none / residual / causal q-begin / causal q-end) and varlen live inside each unit.
# Sets: ci (compiled by CI, ≤ 30 min on 2 cores), full (GPU runs and benchmarks).
fmha_kernel(fwd fp16 32 ci full)
fmha_kernel(fwd fp16 64 ci full)
fmha_kernel(fwd fp16 128 ci full)
fmha_kernel(fwd bf16 32 ci full)
fmha_kernel(fwd bf16 64 ci full)
fmha_kernel(fwd bf16 128 ci full)
