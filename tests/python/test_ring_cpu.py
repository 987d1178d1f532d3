"""The ring attention of fmha.distributed without a GPU: its bookkeeping (the zigzag split, which block each rank
attends at each step, the LSE merge, the dQ sums and the dK / dV accumulators that travel around the ring) with
fp64 reference kernels in place of fmha's (fmha.distributed._kernels), in the simulated ring of 1, 2, 3, 4 and 8
ranks, against fp64 autograd of the whole sequence's attention; and the process-group driver itself: 2, 3 and 4 CPU
processes over gloo, each rank's output and gradients bit for bit equal to the simulated ring's. The same tests on the GPU with fmha's kernels are in
tests/python/test_torch_gpu.py (class Ring).

Run: PYTHONPATH=<build>/python:<torch> python3 -m unittest tests/python/test_ring_cpu.py
"""
import datetime
import math
import os
import tempfile
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fmha.distributed as dist_attn


def ref_attention(q, k, v, causal, scale):
    """[b, s, h, d] attention in fp64 with GQA and the causal q-end mask; returns out and lse [b, h, s]."""
    h, hk = q.shape[2], k.shape[2]
    k, v = (x.repeat_interleave(h // hk, dim=2) for x in (k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq).logical_not(), -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return torch.einsum("bhqk,bkhd->bqhd", p, v), lse


class RefKernels:
    """fp64 stand-ins with the signatures of fmha.distributed._Kernels."""

    @staticmethod
    def attention(q, k, v, causal, softmax_scale):
        return ref_attention(q, k, v, causal, softmax_scale)

    @staticmethod
    def combine(out_parts, lse_parts, out_dtype):
        lse = torch.logsumexp(lse_parts, 0)
        w = torch.exp(lse_parts - lse).nan_to_num(0.0)  # all parts empty: weights 0
        o = torch.where(w[..., None] > 0, w[..., None] * out_parts, torch.zeros_like(out_parts)).sum(0)
        return o.to(out_dtype), lse

    @staticmethod
    def bwd(d_out, q, k, v, out, lse, d_lse, scale, causal, q_end, deterministic, algorithm):
        assert d_lse is None and q_end and algorithm in ("auto", "one_pass", "two_pass")
        h, hk = q.shape[2], k.shape[2]
        ke, ve = (x.repeat_interleave(h // hk, dim=2) for x in (k, v))
        scale = q.shape[-1] ** -0.5 if scale == 0.0 else scale
        s = torch.einsum("bqhd,bkhd->bhqk", q, ke) * scale
        if causal:
            sq, sk = q.shape[1], k.shape[1]
            s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq).logical_not(), -math.inf)
        p = torch.exp(s - lse[..., None])  # with the merged LSE: this block's share of the probabilities
        dp = torch.einsum("bqhd,bkhd->bhqk", d_out, ve)
        dsum = (d_out * out).sum(-1).transpose(1, 2)  # [b, h, s]
        ds = p * (dp - dsum[..., None])
        dq = torch.einsum("bhqk,bkhd->bqhd", ds, ke) * scale
        dk = torch.einsum("bhqk,bqhd->bkhd", ds, q) * scale
        dv = torch.einsum("bhqk,bqhd->bkhd", p, d_out)
        b, sk, d = k.shape[0], k.shape[1], k.shape[3]
        dk = dk.reshape(b, sk, hk, h // hk, d).sum(3)
        dv = dv.reshape(b, sk, hk, h // hk, d).sum(3)
        return dq, dk, dv


class SimulatedRing(unittest.TestCase):
    def setUp(self):
        self.saved = dist_attn._kernels
        dist_attn._kernels = RefKernels()

    def tearDown(self):
        dist_attn._kernels = self.saved

    def check(self, world, causal, b=2, s=48, h=4, hk=2, d=16, scale=None):
        g = torch.Generator().manual_seed(world * 10 + causal)
        q, k, v, d_out = (torch.randn(b, s, x, d, generator=g, dtype=torch.float64) for x in (h, hk, hk, h))
        ref_in = [x.clone().requires_grad_() for x in (q, k, v)]
        ref_out = ref_attention(*ref_in, causal, scale)[0]
        ref_grads = torch.autograd.grad(ref_out, ref_in, d_out)
        parts = [[p.clone().requires_grad_() for p in dist_attn.split(x, world, causal)] for x in (q, k, v)]
        outs = dist_attn.ring_attention_simulated(*parts, causal=causal, softmax_scale=scale)
        self.assertEqual(len(outs), world)
        out = dist_attn.merge(outs, causal)
        self.assertLess((out - ref_out).abs().max().item(), 2e-6)  # fp32 partials in the merge
        grads = torch.autograd.grad(outs, [p for ps in parts for p in ps], dist_attn.split(d_out, world, causal))
        for i, name in enumerate(("dq", "dk", "dv")):
            got = dist_attn.merge(grads[i * world:(i + 1) * world], causal)
            err = (got - ref_grads[i]).abs().max().item()
            self.assertLess(err, 2e-6, f"{name}, world {world}, causal {causal}")  # fp32 out and LSE

    def test_worlds(self):
        for world in (1, 2, 3, 4, 8):
            for causal in (False, True):
                with self.subTest(world=world, causal=causal):
                    self.check(world, causal)

    def test_scale_and_mqa(self):
        self.check(4, True, hk=1, scale=0.3)
        self.check(2, False, h=3, hk=3, scale=0.05)


def _gloo_rank(rank, world, init_file, failures):
    dist_attn._kernels = RefKernels()
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))  # a protocol error fails instead of hanging
    try:
        for causal in (False, True):
            g = torch.Generator().manual_seed(7 + causal)
            q, k, v, d_out = (torch.randn(2, 8 * world, x, 16, generator=g, dtype=torch.float64) for x in (4, 2, 2, 4))
            parts = [dist_attn.split(x, world, causal) for x in (q, k, v, d_out)]
            sim_in = [[p.clone().requires_grad_() for p in ps] for ps in parts[:3]]
            sim_out = dist_attn.ring_attention_simulated(*sim_in, causal=causal)
            sim_all = torch.autograd.grad(sim_out, [p for ps in sim_in for p in ps], parts[3])
            mine = [ps[rank].clone().requires_grad_() for ps in parts[:3]]
            out = dist_attn.ring_attention(*mine, causal=causal)
            got = (out,) + torch.autograd.grad(out, mine, parts[3][rank])
            want = (sim_out[rank],) + tuple(sim_all[i * world + rank] for i in range(3))
            for name, a, e in zip(("out", "dq", "dk", "dv"), got, want):
                if not torch.equal(a, e):
                    failures.put(f"world {world} rank {rank} causal {causal}: {name} differs from the simulated ring")
    finally:
        dist.destroy_process_group()


class ProcessGroupRing(unittest.TestCase):
    def test_gloo_processes(self):
        for world in (2, 3, 4):  # from 3 ranks on, exchanges overlap (the hang of 606ca21)
            with tempfile.TemporaryDirectory() as tmp:
                ctx = mp.get_context("spawn")
                failures = ctx.Queue()
                mp.spawn(_gloo_rank, args=(world, os.path.join(tmp, "init"), failures), nprocs=world)
                msgs = []
                while not failures.empty():
                    msgs.append(failures.get())
                self.assertEqual(msgs, [])


class Layout(unittest.TestCase):
    def test_zigzag(self):
        x = torch.arange(16).view(1, 16)
        parts = dist_attn.zigzag_split(x, 4)
        self.assertEqual([p.tolist()[0] for p in parts], [[0, 1, 14, 15], [2, 3, 12, 13], [4, 5, 10, 11],
                                                          [6, 7, 8, 9]])
        self.assertTrue(torch.equal(dist_attn.zigzag_merge(parts), x))
        self.assertTrue(torch.equal(dist_attn.merge(dist_attn.split(x, 4, False), False), x))

    def test_errors(self):
        with self.assertRaises(ValueError) as cm:
            dist_attn.zigzag_split(torch.zeros(1, 10), 4)
        self.assertIn("expected a multiple of 8, got 10", str(cm.exception))
        q = torch.zeros(1, 6, 2, 8)
        with self.assertRaises(ValueError) as cm:
            dist_attn.ring_attention_simulated([q, q], [q, q[:, :4]], [q, q[:, :4]])
        self.assertIn("rank 1: expected rank 0's shapes", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            dist_attn.ring_attention_simulated([q[:, :5]], [q[:, :5]], [q[:, :5]], causal=True)
        self.assertIn("zigzag split", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            dist_attn.ring_attention_simulated([q], [q], [q], bwd_algorithm="three_pass")
        self.assertIn("bwd_algorithm", str(cm.exception))
        with self.assertRaises(RuntimeError) as cm:
            dist_attn.ring_attention(q, q, q)
        self.assertIn("expected an initialised process group", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
