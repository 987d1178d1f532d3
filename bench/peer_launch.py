#!/usr/bin/env python3
"""One cuDNN forward-attention launch (PyTorch SDPA, cuDNN backend) inside a CUDA profiler range, for Nsight
Compute to profile next to fmha's kernel on the same problem (scripts/profile_pair.sh).

Inputs as in bench/bench_fwd.py (seed 0): Q, K, V of shape (b, s, h, d) in the given dtype, contiguous, passed to
SDPA as (b, h, s, d) views; causal means top-left aligned (q = k here, so both alignments agree). The warm-up launches run
outside the range; profile with `ncu --profile-from-start off`.

Usage: peer_launch.py --dtype bf16 --b 8 --h 32 --s 2048 --d 64 [--causal]
Needs a CUDA GPU and PyTorch with cuDNN; exits non-zero with a message otherwise.
"""
import argparse
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--b", type=int, required=True, help="batch")
    ap.add_argument("--h", type=int, required=True, help="heads (Q and KV)")
    ap.add_argument("--s", type=int, required=True, help="sequence length (queries = keys)")
    ap.add_argument("--d", type=int, required=True, help="head dim")
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    for name in ("b", "h", "s", "d"):
        if getattr(args, name) <= 0:
            ap.error(f"--{name}: expected a positive integer, got {getattr(args, name)}")
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"peer_launch.py: needs PyTorch ({e})", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("peer_launch.py: no CUDA device", file=sys.stderr)
        return 1
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    torch.manual_seed(0)  # as bench/bench_fwd.py, so the inputs are the benchmark's
    q, k, v = (torch.randn(args.b, args.s, args.h, args.d, device="cuda", dtype=dtype) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(3):
            torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=args.causal)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=args.causal)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
