#!/usr/bin/env python3
"""Context-parallel benchmark: fmha.distributed.ring_attention on 1, 2, 4 … GPUs of one machine (NCCL, one process
per GPU, spawned by this script), bf16, d 128, heads 32 / 8 (GQA), causal (zigzag split), total sequence 64k / 128k /
256k tokens, batch 1: the time of the forward and of forward + backward per step (the slowest rank's median over
--reps steps, CUDA events, the ranks aligned by a barrier before each step), and the scaling efficiency
t(1 GPU) / (n · t(n GPUs)). The 1-GPU row runs the same code (a ring of one rank). Worlds above the GPU count are
left out (and said so).

Usage: PYTHONPATH=build/python python3 bench/bench_ring.py [--worlds 1,2,4,8] [--seqlens 65536,131072,262144]
       [--reps 5] [--json OUT.json]
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

H, HK, D = 32, 8, 128


def rank_main(rank, world, seqlens, reps, init_file, results):
    import fmha.distributed as fd
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        for s in seqlens:
            s_local = s // world
            g = torch.Generator(device="cuda").manual_seed(rank)
            q = torch.randn(1, s_local, H, D, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
            k = torch.randn(1, s_local, HK, D, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
            v = torch.randn(1, s_local, HK, D, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
            d_out = torch.randn_like(q)
            row = {"world": world, "seqlen": s}
            for mode in ("fwd", "fwd_bwd"):
                times = []
                for i in range(reps + 1):  # the first step warms up
                    dist.barrier()
                    torch.cuda.synchronize()
                    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    t0.record()
                    if mode == "fwd":
                        with torch.no_grad():
                            fd.ring_attention(q, k, v, causal=True)
                    else:
                        out = fd.ring_attention(q, k, v, causal=True)
                        torch.autograd.grad(out, (q, k, v), d_out)
                    t1.record()
                    torch.cuda.synchronize()
                    if i > 0:
                        times.append(t0.elapsed_time(t1))
                med = torch.tensor(sorted(times)[len(times) // 2], device="cuda")
                dist.all_reduce(med, op=dist.ReduceOp.MAX)  # the slowest rank's median
                row[f"{mode}_ms"] = med.item()
            if rank == 0:
                results.put(row)
            del q, k, v, d_out
            torch.cuda.empty_cache()
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worlds", default="1,2,4,8")
    ap.add_argument("--seqlens", default="65536,131072,262144")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    gpus = torch.cuda.device_count()
    worlds = [w for w in (int(x) for x in args.worlds.split(",")) if w <= gpus]
    skipped = [int(x) for x in args.worlds.split(",") if int(x) > gpus]
    if skipped:
        print(f"# left out: worlds {skipped} (this machine has {gpus} GPU(s))")
    seqlens = [int(x) for x in args.seqlens.split(",")]
    rows = []
    for world in worlds:
        with tempfile.TemporaryDirectory() as tmp:
            ctx = mp.get_context("spawn")
            results = ctx.Queue()
            mp.spawn(rank_main, args=(world, seqlens, args.reps, os.path.join(tmp, "init"), results), nprocs=world)
            while not results.empty():
                rows.append(results.get())
    base = {r["seqlen"]: r for r in rows if r["world"] == 1}
    print(f"{'GPUs':>4} {'seqlen':>7} | {'fwd ms':>9} {'eff':>5} | {'fwd+bwd ms':>10} {'eff':>5}")
    for r in sorted(rows, key=lambda r: (r["seqlen"], r["world"])):
        for mode in ("fwd", "fwd_bwd"):
            b = base.get(r["seqlen"])
            if b:
                r[f"{mode}_efficiency"] = b[f"{mode}_ms"] / (r["world"] * r[f"{mode}_ms"])
        eff = lambda m: f"{r[m + '_efficiency']:5.2f}" if m + "_efficiency" in r else "  n/a"  # noqa: E731
        print(f"{r['world']:>4} {r['seqlen']:>7} | {r['fwd_ms']:9.2f} {eff('fwd')} | {r['fwd_bwd_ms']:10.2f} "
              f"{eff('fwd_bwd')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "gpus": gpus, "torch": torch.__version__,
                       "command": " ".join(sys.argv), "left_out_worlds": skipped, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
