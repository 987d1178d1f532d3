"""GPU tests of the PyTorch package (an sm_90 GPU): values against PyTorch's math attention in fp64 on the same
inputs, within k = 2 times the error of torch's own bf16/fp16 SDPA against fp64 (plus a floor of a few units of the
dtype's rounding); dense, BHSD views, GQA / MQA, causal in both alignments with s_q != s_k, varlen with empty
sequences; torch.library.opcheck on CUDA tensors; torch.compile(fullgraph=True) with Inductor; the current stream;
CUDA graphs; LSE against fp64 logsumexp; autograd (class Backward): dQ, dK, dV against fp64 autograd of the math
attention within k = 3 times the error of torch's own low-precision gradients (plus the same floor), dense, GQA,
both causal alignments, varlen, the deterministic option bit for bit, opcheck of the backward operators,
torch.compile of a training step, a loss that uses the returned LSE; fmha.combine (class Combine); the ring attention
of fmha.distributed simulated on one GPU (class Ring). Exits 77 (skipped) without a usable GPU.

Run: PYTHONPATH=<build>/python:<torch> python3 tests/python/test_torch_gpu.py -v
"""
import math
import sys
import unittest

import torch

if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    print("test_torch_gpu: skipped: needs an sm_90 GPU", file=sys.stderr)
    sys.exit(77)

import fmha  # noqa: E402

BF16, FP16 = torch.bfloat16, torch.float16
K_FACTOR = 2.0


def reference(q, k, v, causal, q_end, scale=None):
    """fp64 math attention over BSHD tensors (GQA by repeating K/V heads); returns O [b, s_q, h, d] and LSE [b, h, s_q]."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    qd, kd, vd = (x.double().transpose(1, 2) for x in (q, k, v))  # [b, h, s, d]
    kd = kd.repeat_interleave(h // hk, dim=1)
    vd = vd.repeat_interleave(h // hk, dim=1)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = (qd @ kd.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + (sk - sq if q_end else 0), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # rows without keys: O = 0
    return (p @ vd).transpose(1, 2), lse


def sdpa_low(q, k, v, causal, q_end):
    """torch's own attention in the input dtype (math backend, GQA by repeating), for the error budget."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    kt = kt.repeat_interleave(h // hk, dim=1)
    vt = vt.repeat_interleave(h // hk, dim=1)
    mask = None
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        mask = j <= i + (sk - sq if q_end else 0)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
    return o.transpose(1, 2).nan_to_num(0.0)


def rand(*shape, dtype=BF16):
    return torch.randn(*shape, device="cuda", dtype=dtype)


class Values(unittest.TestCase):
    def check(self, q, k, v, causal=False, q_end=True):
        out, lse = fmha.attention(q, k, v, causal=causal, causal_align="q_end" if q_end else "q_begin",
                                  return_lse=True)
        ref, ref_lse = reference(q, k, v, causal, q_end)
        low = sdpa_low(q, k, v, causal, q_end)
        eps = 2.0 ** -8 if q.dtype == BF16 else 2.0 ** -11
        budget = K_FACTOR * (low.double() - ref).abs().max().item() + 4 * eps * ref.abs().max().item()
        err = (out.double() - ref).abs().max().item()
        self.assertLessEqual(err, budget, f"O error {err:.3g} > budget {budget:.3g} (torch's own: "
                                          f"{(low.double() - ref).abs().max().item():.3g})")
        finite = torch.isfinite(ref_lse)
        self.assertTrue(torch.equal(torch.isfinite(lse), finite), "LSE: -inf exactly where a row sees no key")
        lse_err = (lse.double() - ref_lse)[finite].abs().max().item() if finite.any() else 0.0
        self.assertLessEqual(lse_err, 1e-3 + 2e-5 * ref_lse[finite].abs().max().item())
        return err, budget

    def test_dense(self):
        for dt in (BF16, FP16):
            for d in (32, 64, 128):
                self.check(rand(2, 300, 4, d, dtype=dt), rand(2, 300, 4, d, dtype=dt), rand(2, 300, 4, d, dtype=dt))

    def test_causal_alignments(self):
        for q_end in (True, False):
            for sq, sk in ((100, 333), (333, 100), (256, 256)):
                self.check(rand(1, sq, 4, 64), rand(1, sk, 2, 64), rand(1, sk, 2, 64), causal=True, q_end=q_end)

    def test_gqa_mqa_and_bhsd_views(self):
        q = rand(2, 8, 512, 128).transpose(1, 2)  # [b, h, s, d] storage viewed as BSHD
        k = rand(2, 1, 700, 128).transpose(1, 2)
        v = rand(2, 1, 700, 128).transpose(1, 2)
        self.check(q, k, v, causal=True)
        self.check(rand(1, 64, 12, 64), rand(1, 64, 4, 64), rand(1, 64, 4, 64))

    def test_varlen(self):
        lens_q, lens_k = [17, 0, 300, 64], [40, 5, 300, 0]
        h, hk, d = 4, 2, 64
        cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device="cuda")
        cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device="cuda")
        q, k, v = rand(sum(lens_q), h, d), rand(sum(lens_k), hk, d), rand(sum(lens_k), hk, d)
        for causal in (False, True):
            out, lse = fmha.attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal,
                                             return_lse=True)
            for b in range(len(lens_q)):
                q0, k0 = int(cu_q[b]), int(cu_k[b])
                if lens_q[b] == 0:
                    continue
                qs = q[q0:q0 + lens_q[b]][None]
                ks, vs = k[k0:k0 + lens_k[b]][None], v[k0:k0 + lens_k[b]][None]
                if lens_k[b] == 0:
                    self.assertEqual(out[q0:q0 + lens_q[b]].abs().max().item(), 0.0)
                    self.assertTrue(torch.all(lse[:, q0:q0 + lens_q[b]] == float("-inf")))
                    continue
                ref, ref_lse = reference(qs, ks, vs, causal, True)
                low = sdpa_low(qs, ks, vs, causal, True)
                budget = K_FACTOR * (low.double() - ref).abs().max().item() + 4 * 2 ** -8 * ref.abs().max().item()
                self.assertLessEqual((out[q0:q0 + lens_q[b]][None].double() - ref).abs().max().item(), budget)

    def test_scale(self):
        q, k, v = rand(1, 128, 2, 64), rand(1, 128, 2, 64), rand(1, 128, 2, 64)
        out = fmha.attention(q, k, v, softmax_scale=0.3)
        ref, _ = reference(q, k, v, False, True, scale=0.3)
        self.assertLess((out.double() - ref).abs().max().item(), 0.02)


class Integration(unittest.TestCase):
    def test_opcheck_cuda(self):
        q, k = rand(2, 128, 4, 64), rand(2, 200, 2, 64)
        torch.library.opcheck(torch.ops.fmha.fwd.default, (q, k, k, 0.0, True, True))
        cu = torch.tensor([0, 60, 100], dtype=torch.int32, device="cuda")
        x = rand(100, 4, 64)
        torch.library.opcheck(torch.ops.fmha.fwd_varlen.default, (x, x, x, cu, cu, 60, 60, 0.0, True, True))

    def test_inductor_fullgraph(self):
        def f(q, k, v):
            return fmha.attention(q, k, v, causal=True) * 2 + 1

        torch._dynamo.reset()
        g = torch.compile(f, fullgraph=True)
        q, k, v = rand(2, 256, 4, 64), rand(2, 256, 4, 64), rand(2, 256, 4, 64)
        self.assertTrue(torch.equal(g(q, k, v), f(q, k, v)))

    def test_current_stream(self):
        # The side stream is busy (a sleep) before it writes the input, so an operator that launched on another
        # stream would read the input before it exists.
        q, k, v = rand(4, 1024, 8, 128), rand(4, 1024, 8, 128), rand(4, 1024, 8, 128)
        expect = fmha.attention(q, k, v)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.cuda._sleep(100_000_000)
            q2 = q * 1
            out = fmha.attention(q2, k, v)
        torch.cuda.current_stream().wait_stream(s)
        self.assertTrue(torch.equal(out, expect))

    def test_cuda_graph(self):
        q, k, v = rand(2, 256, 4, 64), rand(2, 256, 4, 64), rand(2, 256, 4, 64)
        fmha.attention(q, k, v)  # load and warm up outside the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fmha.attention(q, k, v, causal=True)
        q.copy_(rand(2, 256, 4, 64))
        g.replay()
        self.assertTrue(torch.equal(out, fmha.attention(q, k, v, causal=True)))

    def test_misaligned_stride_error(self):
        x = rand(1, 64, 2, 72)[..., :68]  # head dim 68 (not a multiple of 8)
        with self.assertRaises(ValueError) as cm:
            fmha.attention(x, x, x)
        self.assertIn("head_dim", str(cm.exception))

    def test_empty_problems(self):
        q, k = rand(1, 8, 2, 64), rand(1, 0, 2, 64)
        out, lse = fmha.attention(q, k, k, return_lse=True)
        self.assertEqual(out.abs().max().item(), 0.0)
        self.assertTrue(torch.all(lse == float("-inf")))
        self.assertEqual(fmha.attention(rand(0, 8, 2, 64), rand(0, 8, 2, 64), rand(0, 8, 2, 64)).numel(), 0)
        cu = torch.tensor([0, 8], dtype=torch.int32, device="cuda")
        z = torch.tensor([0, 0], dtype=torch.int32, device="cuda")
        out = fmha.attention_varlen(rand(8, 2, 64), rand(0, 2, 64), rand(0, 2, 64), cu, z, 8, 0)
        self.assertEqual(out.abs().max().item(), 0.0)

    def test_misaligned_pointer_error(self):
        x = rand(1, 64, 2, 72)[..., 4:68]  # head dim 64, but 8-byte aligned rows
        with self.assertRaises(ValueError):
            fmha.attention(x, x, x)

    def test_mixed_devices_error(self):
        q = rand(1, 8, 2, 64)
        with self.assertRaises(ValueError) as cm:
            fmha.attention(q, q.cpu(), q)
        self.assertIn("k.device, v.device: expected q's device", str(cm.exception))



def grads(fn, inputs, d_out):
    """(dq, dk, dv) of sum(fn(*inputs) * d_out) with respect to the three inputs."""
    xs = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*xs)
    out.backward(d_out)
    return [x.grad for x in xs]


class Backward(unittest.TestCase):
    K_BWD = 3.0

    def check(self, q, k, v, causal=False, q_end=True):
        align = "q_end" if q_end else "q_begin"
        d_out = torch.randn_like(q)
        got = grads(lambda a, b, c: fmha.attention(a, b, c, causal=causal, causal_align=align), (q, k, v), d_out)
        ref = grads(lambda a, b, c: reference(a, b, c, causal, q_end)[0], (q.double(), k.double(), v.double()),
                    d_out.double())
        low = grads(lambda a, b, c: sdpa_low(a, b, c, causal, q_end), (q, k, v), d_out)
        eps = 2.0 ** -8 if q.dtype == BF16 else 2.0 ** -11
        for name, g, r, lo in zip(("dq", "dk", "dv"), got, ref, low):
            self.assertEqual(g.shape, r.shape, name)
            torch_err = (lo.double() - r).abs().max().item()
            budget = self.K_BWD * torch_err + 4 * eps * r.abs().max().item()
            err = (g.double() - r).abs().max().item()
            self.assertLessEqual(err, budget, f"{name}: error {err:.3g} > budget {budget:.3g} (torch's own: "
                                              f"{torch_err:.3g})")

    def test_dense(self):
        for dtype in (BF16, FP16):
            self.check(rand(2, 200, 4, 64, dtype=dtype), rand(2, 300, 4, 64, dtype=dtype),
                       rand(2, 300, 4, 64, dtype=dtype))

    def test_gqa_causal_both_alignments(self):
        q, k, v = rand(1, 150, 8, 128), rand(1, 260, 2, 128), rand(1, 260, 2, 128)
        self.check(q, k, v, causal=True, q_end=True)
        self.check(q, k, v, causal=True, q_end=False)

    def test_varlen(self):
        lens_q, lens_k = [70, 0, 129], [100, 33, 129]
        cu_q = torch.tensor([0, 70, 70, 199], dtype=torch.int32, device="cuda")
        cu_k = torch.tensor([0, 100, 133, 262], dtype=torch.int32, device="cuda")
        q, k, v, d_out = rand(199, 4, 64), rand(262, 2, 64), rand(262, 2, 64), rand(199, 4, 64)
        got = grads(lambda a, b, c: fmha.attention_varlen(a, b, c, cu_q, cu_k, 129, 129, causal=True), (q, k, v),
                    d_out)
        self.check_varlen_causal(got, q, k, v, d_out, lens_q, lens_k)

    def check_varlen_causal(self, got, q, k, v, d_out, lens_q, lens_k):
        """Packed gradients `got` of a causal (q-end) varlen call, per sequence against the dense path's fp64
        reference (5 % of the largest gradient, at least 0.05)."""
        oq = ok = 0
        for sq, sk in zip(lens_q, lens_k):
            sl_q, sl_k = slice(oq, oq + sq), slice(ok, ok + sk)
            ref = grads(lambda a, b, c: reference(a[None], b[None], c[None], True, True)[0][0],
                        (q[sl_q].double(), k[sl_k].double(), v[sl_k].double()), d_out[sl_q].double())
            for name, g, r in zip(("dq", "dk", "dv"), (got[0][sl_q], got[1][sl_k], got[2][sl_k]), ref):
                err = (g.double() - r).abs().max().item() if r.numel() else 0.0
                self.assertLessEqual(err, 0.05 * max(1.0, r.abs().max().item() if r.numel() else 1.0), name)
            oq, ok = oq + sq, ok + sk

    def test_deterministic_bitwise(self):
        # "auto" takes two passes for deterministic calls; the ordered one pass and plain two passes are repeatable
        # too, and every algorithm agrees with the others within rounding.
        q, k, v, d_out = rand(2, 700, 8, 128), rand(2, 700, 2, 128), rand(2, 700, 2, 128), rand(2, 700, 8, 128)
        results = {}
        for det, algo in ((True, "auto"), (True, "one_pass"), (False, "two_pass")):
            f = lambda a, b, c: fmha.attention(a, b, c, causal=True, deterministic=det,  # noqa: E731
                                               bwd_algorithm=algo)
            first = grads(f, (q, k, v), d_out)
            for _ in range(10):
                again = grads(f, (q, k, v), d_out)
                for a, b in zip(first, again):
                    self.assertTrue(torch.equal(a, b), algo)
            results[algo] = first
        plain = grads(lambda a, b, c: fmha.attention(a, b, c, causal=True, bwd_algorithm="one_pass"), (q, k, v),
                      d_out)
        for algo, got in results.items():
            for name, g, r in zip(("dq", "dk", "dv"), got, plain):
                err = (g.float() - r.float()).abs().max().item()
                self.assertLessEqual(err, 0.02 * max(1.0, r.float().abs().max().item()), f"{algo} {name}")

    def test_opcheck_backward(self):
        q, k = rand(2, 128, 4, 64), rand(2, 200, 2, 64)
        out, lse = torch.ops.fmha.fwd(q, k, k, 0.0, True, True)
        torch.library.opcheck(torch.ops.fmha.bwd.default, (rand(2, 128, 4, 64), q, k, k, out, lse, None, 0.0, True,
                                                           True, False))
        torch.library.opcheck(torch.ops.fmha.bwd.default, (rand(2, 128, 4, 64), q, k, k, out, lse,
                                                           torch.randn_like(lse), 0.0, True, True, False))
        q.requires_grad_()
        torch.library.opcheck(torch.ops.fmha.fwd.default, (q, k, k, 0.0, True, True, False))

    def test_compiled_training_step(self):
        torch._dynamo.reset()
        w = (torch.randn(256, 256, device="cuda") / 16).to(BF16).requires_grad_()

        def step(x):
            q = (x @ w).view(2, 128, 4, 64)  # [b, s, h, d]
            return fmha.attention(q, q, q, causal=True).float().square().mean()

        x = rand(2, 128, 256)
        loss = step(x)
        loss.backward()
        g_eager = w.grad.clone()
        w.grad = None
        torch.compile(step, fullgraph=True)(x).backward()
        self.assertTrue(torch.allclose(w.grad.float(), g_eager.float(), rtol=1e-2, atol=1e-3))

    def test_lse_gradient(self):
        # A loss of O and of the returned LSE, against fp64 autograd of the math attention's O and logsumexp.
        q, k, v = rand(2, 150, 4, 64), rand(2, 200, 2, 64), rand(2, 200, 2, 64)
        w_o, w_l = rand(2, 150, 4, 64), torch.randn(2, 4, 150, device="cuda")

        def loss_fmha(a, b, c):
            out, lse = fmha.attention(a, b, c, causal=True, return_lse=True)
            return (out.float() * w_o.float()).sum() + (lse * w_l).sum()

        def loss_ref(a, b, c):
            out, lse = reference(a, b, c, True, True)
            return (out * w_o.double()).sum() + (lse * w_l.double()).sum()

        got = grads(lambda a, b, c: loss_fmha(a, b, c), (q, k, v), torch.ones((), device="cuda"))
        ref = grads(lambda a, b, c: loss_ref(a, b, c), (q.double(), k.double(), v.double()),
                    torch.ones((), device="cuda", dtype=torch.float64))
        for name, g, r in zip(("dq", "dk", "dv"), got, ref):
            err = (g.double() - r).abs().max().item()
            self.assertLessEqual(err, 0.03 * r.abs().max().item() + 1e-2, name)
        # The LSE alone (no gradient into O).
        x = q.detach().clone().requires_grad_()
        fmha.attention(x, k, v, return_lse=True)[1].sum().backward()
        self.assertTrue(torch.isfinite(x.grad).all())

    def test_mla_head_dims_192_128(self):
        # The backward op at the MLA prefill head dims (two passes), given O and LSE of the fp64 forward (no fmha
        # forward takes 192 / 128 yet), against fp64 autograd under the budget of check().
        for dtype, causal in ((BF16, True), (FP16, False)):
            q, k, v = rand(2, 200, 4, 192, dtype=dtype), rand(2, 260, 2, 192, dtype=dtype), rand(2, 260, 2, 128,
                                                                                                 dtype=dtype)
            d_out = rand(2, 200, 4, 128, dtype=dtype)
            o64, lse64 = reference(q, k, v, causal, True)
            out, lse = o64.to(dtype), lse64.float().contiguous()
            got = torch.ops.fmha.bwd(d_out, q, k, v, out, lse, None, 0.0, causal, True, False)
            ref = grads(lambda a, b, c: reference(a, b, c, causal, True)[0], (q.double(), k.double(), v.double()),
                        d_out.double())
            low = grads(lambda a, b, c: sdpa_low(a, b, c, causal, True), (q, k, v), d_out)
            eps = 2.0 ** -8 if dtype == BF16 else 2.0 ** -11
            for name, g, r, lo in zip(("dq", "dk", "dv"), got, ref, low):
                self.assertEqual(g.shape, r.shape, name)
                budget = self.K_BWD * (lo.double() - r).abs().max().item() + 4 * eps * r.abs().max().item()
                err = (g.double() - r).abs().max().item()
                self.assertLessEqual(err, budget, f"{dtype} {name}: error {err:.3g} > budget {budget:.3g}")
            again = torch.ops.fmha.bwd(d_out, q, k, v, out, lse, None, 0.0, causal, True, False)
            for a, b in zip(got, again):
                self.assertTrue(torch.equal(a, b))  # two passes: repeatable
        torch.library.opcheck(torch.ops.fmha.bwd.default, (d_out, q, k, v, out, lse, None, 0.0, False, True, False))
        with self.assertRaises(NotImplementedError) as cm:
            torch.ops.fmha.bwd(d_out, q, k, v, out, lse, None, 0.0, False, True, False, "one_pass")
        self.assertIn("algorithm", str(cm.exception))
        with self.assertRaises(ValueError) as cm:  # out with the wrong head dim
            torch.ops.fmha.bwd(d_out, q, k, v, torch.empty_like(q), lse, None, 0.0, False, True, False)
        self.assertIn("expected q's shape with v's head dim", str(cm.exception))

        # Varlen at 192 / 128 (an empty sequence among them), per sequence against fp64 autograd.
        lens_q, lens_k = [70, 0, 129], [100, 33, 129]
        cu_q = torch.tensor([0, 70, 70, 199], dtype=torch.int32, device="cuda")
        cu_k = torch.tensor([0, 100, 133, 262], dtype=torch.int32, device="cuda")
        q, k, v, d_out = rand(199, 4, 192), rand(262, 2, 192), rand(262, 2, 128), rand(199, 4, 128)
        out, lse = torch.empty(199, 4, 128, device="cuda", dtype=BF16), torch.empty(4, 199, device="cuda")
        oq = ok = 0
        for sq, sk in zip(lens_q, lens_k):
            if sq:
                o64, l64 = reference(q[None, oq:oq + sq], k[None, ok:ok + sk], v[None, ok:ok + sk], True, True)
                out[oq:oq + sq], lse[:, oq:oq + sq] = o64[0].to(BF16), l64[0].float()
            oq, ok = oq + sq, ok + sk
        got = torch.ops.fmha.bwd_varlen(d_out, q, k, v, out, lse, None, cu_q, cu_k, 129, 129, 0.0, True, True, False)
        self.check_varlen_causal(got, q, k, v, d_out, lens_q, lens_k)


class Decode(unittest.TestCase):
    """fmha.decode against the forward reference on the gathered keys (contiguous and paged caches, the append,
    remap, GQA, several tokens, splits), and a CUDA graph replayed with new lengths."""

    def setUp(self):
        torch.manual_seed(0)

    def gathered(self, q, kc, vc, lens_after, slot_of, page_table=None):
        """Per sequence: the keys 0 … L-1 of its slot (or pages), as [1, L, h_k, d]."""
        outs, lses = [], []
        for i in range(q.shape[0]):
            L = int(lens_after[i])
            c = int(slot_of[i])
            if page_table is None:
                k, v = kc[c, :L], vc[c, :L]
            else:
                ps = kc.shape[1]
                rows = [page_table[c, j // ps].item() * ps + j % ps for j in range(L)]
                idx = torch.tensor(rows, device=q.device, dtype=torch.long)
                k = kc.reshape(-1, *kc.shape[2:])[idx]
                v = vc.reshape(-1, *vc.shape[2:])[idx]
            o, l = reference(q[i:i + 1], k[None], v[None], True, True)
            outs.append(o)
            lses.append(l)
        return torch.cat(outs), torch.cat(lses).transpose(1, 2)  # lse as [b, n, h]

    def run_case(self, dt, b, h, hk, d, n, cap, lens, paged=0, remap=False, splits=0, append=True):
        q = rand(b, n, h, d, dtype=dt)
        slots = b + 2
        lens_t = torch.tensor(lens, device="cuda", dtype=torch.int32)
        slot_of = torch.arange(b, device="cuda", dtype=torch.int32)
        if remap:
            slot_of = (slots - 1 - torch.arange(b, device="cuda")).to(torch.int32)
        table = None
        if paged:
            pps = (cap + paged - 1) // paged
            pages = slots * pps + 3
            kc = rand(pages, paged, hk, d, dtype=dt)
            vc = rand(pages, paged, hk, d, dtype=dt)
            table = torch.randperm(pages, device="cuda")[: slots * pps].reshape(slots, pps).to(torch.int32)
        else:
            kc = rand(slots, cap, hk, d, dtype=dt)
            vc = rand(slots, cap, hk, d, dtype=dt)
        kn = rand(b, n, hk, d, dtype=dt) if append else None
        vn = rand(b, n, hk, d, dtype=dt) if append else None
        kc0, vc0 = kc.clone(), vc.clone()
        out, lse = fmha.decode(q, kc, vc, lens_t, page_table=table, cache_batch_idx=slot_of if remap else None,
                               k_new=kn, v_new=vn, plan=fmha.DecodePlan(num_splits=splits), return_lse=True)
        after = [x + (n if append else 0) for x in lens]
        if append:  # the caches hold the new rows now; build the expected caches the same way
            for i in range(b):
                for t in range(n):
                    pos = lens[i] + t
                    c = int(slot_of[i])
                    if paged:
                        pg, r = int(table[c, pos // paged]), pos % paged
                        kc0[pg, r], vc0[pg, r] = kn[i, t], vn[i, t]
                    else:
                        kc0[c, pos], vc0[c, pos] = kn[i, t], vn[i, t]
            self.assertTrue(torch.equal(kc, kc0) and torch.equal(vc, vc0), "caches after the append")
        ref, ref_lse = self.gathered(q, kc0, vc0, after, slot_of, table)
        eps = 2.0 ** -8 if dt == BF16 else 2.0 ** -11
        err = (out.double() - ref).abs().max().item()
        self.assertLessEqual(err, 8 * eps * max(1.0, ref.abs().max().item()), f"O error {err:.3g}")
        finite = torch.isfinite(ref_lse)
        self.assertTrue(torch.equal(torch.isfinite(lse), finite))
        if finite.any():
            self.assertLessEqual((lse.double() - ref_lse)[finite].abs().max().item(), 1e-3)

    def test_contiguous(self):
        self.run_case(BF16, 3, 32, 8, 128, 1, 1024, [1000, 0, 300])
        self.run_case(FP16, 2, 16, 2, 64, 4, 512, [17, 400], remap=True, splits=3)

    def test_paged(self):
        self.run_case(BF16, 2, 8, 2, 128, 2, 512, [300, 77], paged=16, remap=True)
        self.run_case(FP16, 2, 8, 8, 128, 1, 1024, [900, 128], paged=256, splits=4)

    def test_paged_small_pages(self):  # pages of 1 and 5 keys: TMA boxes of one key
        self.run_case(BF16, 2, 8, 2, 128, 2, 200, [150, 9], paged=1, remap=True)
        self.run_case(FP16, 2, 8, 4, 64, 1, 512, [400, 33], paged=5, splits=3)

    def test_cache_only(self):
        self.run_case(BF16, 2, 8, 2, 128, 3, 256, [100, 2], append=False)

    def test_equals_forward(self):
        """Decode equals the forward (causal, q-end) on the same keys: its n tokens against a cache of L keys, both
        cache-only and with the last n keys appended, within twice the forward's own error budget of the fp64
        reference (each is within one budget of it)."""
        for dt, b, h, hk, d, n, L in ((BF16, 2, 32, 8, 128, 4, 777), (FP16, 3, 8, 1, 64, 1, 300)):
            q = rand(b, n, h, d, dtype=dt)
            k, v = rand(b, L, hk, d, dtype=dt), rand(b, L, hk, d, dtype=dt)
            o_fwd, lse_fwd = fmha.attention(q, k, v, causal=True, causal_align="q_end", return_lse=True)
            ref, _ = reference(q, k, v, True, True)
            low = sdpa_low(q, k, v, True, True)
            eps = 2.0 ** -8 if dt == BF16 else 2.0 ** -11
            budget = K_FACTOR * (low.double() - ref).abs().max().item() + 4 * eps * ref.abs().max().item()
            lens = torch.full((b,), L, device="cuda", dtype=torch.int32)
            o_only, lse_only = fmha.decode(q, k.clone(), v.clone(), lens, return_lse=True)
            kc, vc = k.clone(), v.clone()
            kc[:, L - n:], vc[:, L - n:] = float("nan"), float("nan")  # overwritten by the append
            o_app, lse_app = fmha.decode(q, kc, vc, lens - n, k_new=k[:, L - n:], v_new=v[:, L - n:],
                                         return_lse=True)
            self.assertTrue(torch.equal(kc, k) and torch.equal(vc, v), "caches after the append")
            lse_fwd_bnh = lse_fwd.transpose(1, 2)  # forward LSE [b, h, s_q] -> decode's [b, n, h]
            for name, o, lse in (("cache-only", o_only, lse_only), ("append", o_app, lse_app)):
                err = (o.double() - o_fwd.double()).abs().max().item()
                self.assertLessEqual(err, 2 * budget, f"{name}: |decode - forward| {err:.3g} > {2 * budget:.3g}")
                self.assertLessEqual((lse - lse_fwd_bnh).abs().max().item(), 1e-3, f"{name}: LSE")

    def test_cuda_graph_replay_new_lengths(self):
        b, h, hk, d, cap = 4, 16, 4, 128, 2048
        q = rand(b, 1, h, d)
        kc, vc = rand(b, cap, hk, d), rand(b, cap, hk, d)
        lens = torch.tensor([100, 1500, 7, 2000], device="cuda", dtype=torch.int32)
        plan = fmha.DecodePlan(max_seqlen_k=cap)
        fmha.decode(q, kc, vc, lens, plan=plan)  # warm-up (loads, allocator)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fmha.decode(q, kc, vc, lens, plan=plan)
        for new in ([5, 6, 7, 8], [2047, 1, 1024, 0]):
            lens.copy_(torch.tensor(new, device="cuda", dtype=torch.int32))
            g.replay()
            torch.cuda.synchronize()
            eager = fmha.decode(q, kc, vc, lens, plan=plan)
            self.assertTrue(torch.equal(out, eager), f"graph replay with lengths {new} differs from eager")

    def test_errors(self):
        q = rand(2, 1, 8, 128)
        kc = rand(2, 64, 2, 128)
        with self.assertRaises(ValueError) as cm:
            fmha.decode(q, kc, kc.clone(), torch.zeros(2, device="cuda", dtype=torch.int64))
        self.assertIn("seqlens_k.dtype: expected torch.int32", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            fmha.decode(q, kc, kc.clone(), torch.zeros(2, device="cuda", dtype=torch.int32),
                        plan=fmha.DecodePlan(max_seqlen_k=65))
        self.assertIn("max_seqlen_k", str(cm.exception))


class Combine(unittest.TestCase):
    """fmha.combine against an fp64 merge: empty parts (LSE = -inf, NaN outputs) contribute 0, all-empty rows give
    O = 0 and LSE = -inf; output dtypes fp32 and bf16."""

    def test_values(self):
        g = torch.Generator(device="cuda").manual_seed(3)
        o = torch.randn(3, 2, 37, 4, 72, device="cuda", generator=g)
        lse = torch.randn(3, 2, 37, 4, device="cuda", generator=g) * 5
        lse[1, 0] = -math.inf
        o[1, 0] = math.nan  # never read
        lse[:, 1, 5] = -math.inf  # a row no part reaches
        o[:, 1, 5] = math.nan
        ref_lse = torch.logsumexp(lse.double(), 0)
        w = torch.exp(lse.double() - ref_lse).nan_to_num(0.0)[..., None]
        ref = torch.where(w > 0, w * o.double(), torch.zeros_like(w)).sum(0)
        mag = torch.where(w > 0, w * o.double().abs(), torch.zeros_like(w)).sum(0)  # Σ of the terms' magnitudes
        for dt, rel in ((torch.float32, 0.0), (BF16, 2 ** -8)):  # the output's rounding, relative to it
            out, got_lse = fmha.combine(o, lse, out_dtype=dt)
            self.assertEqual((out.dtype, out.shape), (dt, torch.Size([2, 37, 4, 72])))
            excess = (out.double() - ref).abs() - (rel * ref.abs() + 2 ** -16 * mag + 1e-6)  # + fp32 weights, sums
            self.assertLessEqual(excess.max().item(), 0.0)
            self.assertTrue(torch.equal(got_lse[1, 5], torch.full_like(got_lse[1, 5], -math.inf)))
            self.assertTrue(torch.equal(out[1, 5].float(), torch.zeros_like(out[1, 5].float())))
            fin = ref_lse.isfinite()
            self.assertLess((got_lse.double() - ref_lse)[fin].abs().max().item(), 1e-5)

    def test_errors(self):
        o, lse = torch.zeros(2, 8, 16, device="cuda"), torch.zeros(2, 8, device="cuda")
        with self.assertRaises(ValueError) as cm:
            fmha.combine(o.half(), lse)
        self.assertIn("out_parts.dtype, lse_parts.dtype: expected torch.float32", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            fmha.combine(o, lse[:, :7])
        self.assertIn("lse_parts.shape: expected out_parts.shape[:-1]", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            fmha.combine(o.transpose(0, 1), lse.t())
        self.assertIn("expected contiguous tensors", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            fmha.combine(torch.zeros(2, 8, 600, device="cuda"), lse)
        self.assertIn("out_parts.shape[-1] (head dim): expected 1 ... 512, got 600", str(cm.exception))


class Ring(unittest.TestCase):
    """fmha.distributed's ring attention simulated in one process (1, 2, 4, 8 ranks; zigzag when causal; GQA) with
    fmha's kernels: the output and the gradients against fp64 autograd of the whole sequence, within twice the error
    of fmha.attention on the whole sequence plus a floor; deterministic gradients bit for bit over repeated runs."""

    def test_against_the_whole_sequence(self):
        import fmha.distributed as fd
        b, s, h, hk, d = 2, 1024, 8, 2, 128
        q, k, v, d_out = rand(b, s, h, d), rand(b, s, hk, d), rand(b, s, hk, d), rand(b, s, h, d)
        for causal in (False, True):
            ref = grads(lambda a, c, e: reference(a, c, e, causal, True)[0],
                        (q.double(), k.double(), v.double()), d_out.double())
            ref_out = reference(q, k, v, causal, True)[0]
            whole = grads(lambda a, c, e: fmha.attention(a, c, e, causal=causal), (q, k, v), d_out)
            whole_out = fmha.attention(q, k, v, causal=causal)
            for world in (1, 2, 4, 8):
                with self.subTest(causal=causal, world=world):
                    parts = [[p.detach().clone().requires_grad_() for p in fd.split(x, world, causal)]
                             for x in (q, k, v)]
                    outs = fd.ring_attention_simulated(*parts, causal=causal)
                    out = fd.merge(outs, causal)
                    got = torch.autograd.grad(outs, [p for ps in parts for p in ps], fd.split(d_out, world, causal))
                    pairs = [("out", out, whole_out, ref_out)]
                    for i, name in enumerate(("dq", "dk", "dv")):
                        pairs.append((name, fd.merge(got[i * world:(i + 1) * world], causal), whole[i], ref[i]))
                    for name, g, w, r in pairs:
                        r = r.double()
                        bound = 2 * (w.double() - r).abs().max().item() + 2 ** -8 * max(1.0, r.abs().max().item())
                        self.assertLessEqual((g.double() - r).abs().max().item(), bound, name)

    def test_deterministic(self):
        import fmha.distributed as fd
        q, k, v, d_out = rand(1, 512, 4, 64), rand(1, 512, 4, 64), rand(1, 512, 4, 64), rand(1, 512, 4, 64)

        def run():
            parts = [[p.detach().clone().requires_grad_() for p in fd.zigzag_split(x, 4)] for x in (q, k, v)]
            outs = fd.ring_attention_simulated(*parts, causal=True, deterministic=True)
            return [o.detach() for o in outs] + list(torch.autograd.grad(outs, [p for ps in parts for p in ps],
                                                                          fd.zigzag_split(d_out, 4)))
        first = run()
        for _ in range(3):
            for a, b in zip(first, run()):
                self.assertTrue(torch.equal(a, b))


if __name__ == "__main__":
    unittest.main()
