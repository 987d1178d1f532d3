"""Ring attention across processes: fmha.distributed.ring_attention over torch.distributed, each rank's output and
gradients bit for bit equal to the simulated ring's (fmha.distributed.ring_attention_simulated: the same kernels in
the same order; deterministic backward), non-causal and causal (zigzag), GQA, forward and backward.

The script spawns the ranks itself: `world` ranks (default 2, or --world N), one GPU each over NCCL when the machine
has that many GPUs, else all of them on GPU 0 over gloo (the tensors then travel through host memory; NCCL refuses
two ranks on one GPU). --backend nccl|gloo forces one. Exits 77 (skipped) without an sm_90 GPU, or when nccl is
forced with fewer GPUs than ranks.

Run: PYTHONPATH=<build>/python:<torch> python3 tests/python/test_ring_dist.py [--world 2] [--backend gloo]
"""
import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def cases():
    # (batch, total sequence, heads, K/V heads, head dim, causal)
    return [(2, 1024, 8, 2, 128, False), (1, 2048, 4, 4, 64, True), (2, 1024, 8, 2, 128, True)]


def rank_main(rank, world, backend, init_file, failures):
    import fmha.distributed as fd
    device = rank if backend == "nccl" else 0
    torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        for b, s, h, hk, d, causal in cases():
            g = torch.Generator().manual_seed(s + h + causal)
            q, k, v, d_out = (torch.randn(b, s, x, d, generator=g).to("cuda", torch.bfloat16) for x in (h, hk, hk, h))
            parts = [fd.split(x, world, causal) for x in (q, k, v, d_out)]
            # The simulated ring over every rank's slice (the expected values).
            sim_in = [[p.clone().requires_grad_() for p in ps] for ps in parts[:3]]
            sim_out = fd.ring_attention_simulated(*sim_in, causal=causal, deterministic=True)
            # Every rank's loss Σ out_r · d_out_r reaches this rank's slices: the gradient of the sum over ranks.
            sim_all = torch.autograd.grad(sim_out, [p for ps in sim_in for p in ps], parts[3])
            sim_grads = tuple(sim_all[i * world + rank] for i in range(3))
            # The real ring: this rank's slice only.
            mine = [ps[rank].clone().requires_grad_() for ps in parts[:3]]
            out = fd.ring_attention(*mine, causal=causal, deterministic=True)
            got = torch.autograd.grad(out, mine, parts[3][rank])
            for name, a, e in zip(("out", "dq", "dk", "dv"), (out,) + got, (sim_out[rank],) + sim_grads):
                if not torch.equal(a, e):
                    failures.put(f"rank {rank}, case {(b, s, h, hk, d, causal)}: {name} differs from the simulated "
                                 f"ring (max |diff| {(a.float() - e.float()).abs().max().item():.3g})")
            dist.barrier()
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--backend", choices=("nccl", "gloo"))
    args = ap.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("test_ring_dist: skipped: needs an sm_90 GPU", file=sys.stderr)
        sys.exit(77)
    backend = args.backend or ("nccl" if torch.cuda.device_count() >= args.world else "gloo")
    if backend == "nccl" and torch.cuda.device_count() < args.world:
        print(f"test_ring_dist: skipped: nccl needs {args.world} GPUs, got {torch.cuda.device_count()}",
              file=sys.stderr)
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        ctx = mp.get_context("spawn")
        failures = ctx.Queue()
        mp.spawn(rank_main, args=(args.world, backend, os.path.join(tmp, "init"), failures), nprocs=args.world)
        msgs = []
        while not failures.empty():
            msgs.append(failures.get())
    for m in msgs:
        print("FAIL:", m)
    print(f"test_ring_dist: {args.world} ranks over {backend}, {len(cases())} cases: "
          f"{'FAILED' if msgs else 'passed'}")
    sys.exit(1 if msgs else 0)


if __name__ == "__main__":
    main()
