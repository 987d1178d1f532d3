"""CPU-side tests of the PyTorch package (no GPU): the operators' schemas, the Meta kernels that torch.compile's fake
tensors run (shapes, dtypes, fmha's own validation errors at trace time), every argument error that needs no GPU,
torch.library.opcheck on meta tensors, and torch.compile(fullgraph=True, backend="aot_eager") of a module calling
both functions with no graph break.

Run: PYTHONPATH=<build>/python:<torch> python3 -m unittest tests/python/test_torch_cpu.py
"""
import unittest

import torch

import fmha

BF16, FP16 = torch.bfloat16, torch.float16


def meta(*shape, dtype=BF16):
    return torch.empty(*shape, device="meta", dtype=dtype)


class Schemas(unittest.TestCase):
    def test_schemas(self):
        self.assertEqual(str(torch.ops.fmha.fwd.default._schema),
                         "fmha::fwd(Tensor q, Tensor k, Tensor v, float softmax_scale, bool causal, bool causal_q_end, "
                         "bool deterministic=False, str bwd_algorithm=\"auto\") -> (Tensor, Tensor)")
        self.assertEqual(str(torch.ops.fmha.fwd_varlen.default._schema),
                         "fmha::fwd_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
                         "int max_seqlen_q, int max_seqlen_k, float softmax_scale, bool causal, bool causal_q_end, "
                         "bool deterministic=False, str bwd_algorithm=\"auto\") -> (Tensor, Tensor)")
        self.assertEqual(str(torch.ops.fmha.bwd.default._schema),
                         "fmha::bwd(Tensor d_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
                         "Tensor? d_lse, float softmax_scale, bool causal, bool causal_q_end, bool deterministic, "
                         "str algorithm=\"auto\") -> (Tensor, Tensor, Tensor)")


class MetaShapes(unittest.TestCase):
    def test_dense(self):
        for dt in (BF16, FP16):
            out, lse = fmha.attention(meta(2, 100, 8, 64, dtype=dt), meta(2, 300, 2, 64, dtype=dt),
                                      meta(2, 300, 2, 64, dtype=dt), causal=True, return_lse=True)
            self.assertEqual((out.shape, out.dtype), (torch.Size([2, 100, 8, 64]), dt))
            self.assertEqual((lse.shape, lse.dtype), (torch.Size([2, 8, 100]), torch.float32))
            self.assertEqual(fmha.attention(meta(1, 5, 1, 32), meta(1, 7, 1, 32), meta(1, 7, 1, 32)).shape,
                             torch.Size([1, 5, 1, 32]))

    def test_bhsd_view(self):
        # [b, h, s, d] tensors viewed as BSHD (transpose(1, 2)) are taken as they are.
        q = meta(2, 8, 128, 64).transpose(1, 2)
        k = meta(2, 4, 256, 64).transpose(1, 2)
        self.assertEqual(fmha.attention(q, k, k).shape, torch.Size([2, 128, 8, 64]))

    def test_varlen(self):
        cu = torch.empty(4, dtype=torch.int32, device="meta")
        out, lse = fmha.attention_varlen(meta(90, 4, 128), meta(120, 1, 128), meta(120, 1, 128), cu, cu, 50, 60,
                                         return_lse=True)
        self.assertEqual(out.shape, torch.Size([90, 4, 128]))
        self.assertEqual(lse.shape, torch.Size([4, 90]))


class Errors(unittest.TestCase):
    """Every argument error that needs no GPU: the message names the argument, the expected and the actual value."""

    def check(self, exc, fragment, fn, *args, **kw):
        with self.assertRaises(exc) as cm:
            fn(*args, **kw)
        self.assertIn(fragment, str(cm.exception))

    def test_dtype(self):
        f32 = meta(1, 8, 2, 64, dtype=torch.float32)
        self.check(ValueError, "q.dtype: expected torch.float16 or torch.bfloat16, got torch.float32", fmha.attention,
                   f32, f32, f32)
        self.check(ValueError, "k.dtype, v.dtype: expected q's dtype", fmha.attention, meta(1, 8, 2, 64),
                   meta(1, 8, 2, 64, dtype=FP16), meta(1, 8, 2, 64))

    def test_bwd_algorithm(self):
        x = meta(1, 8, 2, 64)
        msg = "bwd_algorithm: expected 'auto', 'one_pass' or 'two_pass', got 'three_pass'"
        self.check(ValueError, msg, fmha.attention, x, x, x, bwd_algorithm="three_pass")
        self.check(ValueError, msg, torch.ops.fmha.fwd, x, x, x, 0.0, False, True, False, "three_pass")
        out, lse = torch.ops.fmha.fwd(x, x, x, 0.0, False, True, False, "two_pass")
        self.check(ValueError, "algorithm: expected 'auto', 'one_pass' or 'two_pass', got 'three_pass'",
                   torch.ops.fmha.bwd, x, x, x, x, out, lse, None, 0.0, False, True, False, "three_pass")
        for name in ("auto", "one_pass", "two_pass"):
            dq, dk, dv = torch.ops.fmha.bwd(x, x, x, x, out, lse, None, 0.0, False, True, False, name)
            self.assertEqual(dq.shape, x.shape)

    def test_cpu_tensors(self):
        x = torch.zeros(1, 8, 2, 64, dtype=BF16)
        self.check(ValueError, "q.device: expected a CUDA device, got cpu", fmha.attention, x, x, x)
        cu = torch.tensor([0, 8], dtype=torch.int32)
        y = torch.zeros(8, 2, 64, dtype=BF16)
        self.check(ValueError, "q.device: expected a CUDA device, got cpu", fmha.attention_varlen, y, y, y, cu, cu, 8, 8)

    def test_shapes(self):
        self.check(ValueError, "q, k, v: expected 4 dimensions", fmha.attention, meta(8, 2, 64), meta(8, 2, 64),
                   meta(8, 2, 64))
        self.check(ValueError, "heads_q % heads_kv: expected 0, got 1 (heads_q=4, heads_kv=3)", fmha.attention,
                   meta(1, 8, 4, 64), meta(1, 8, 3, 64), meta(1, 8, 3, 64))
        self.check(ValueError, "v.shape[1]: expected k.shape[1] = 8, got 9", fmha.attention, meta(1, 8, 2, 64),
                   meta(1, 8, 2, 64), meta(1, 9, 2, 64))
        self.check(ValueError, "k.shape[0] (batch): expected q.shape[0] = 2, got 1", fmha.attention, meta(2, 8, 2, 64),
                   meta(1, 8, 2, 64), meta(1, 8, 2, 64))
        self.check(ValueError, "k.shape[3] (head dim): expected q.shape[3] = 64, got 32", fmha.attention,
                   meta(1, 8, 2, 64), meta(1, 8, 2, 32), meta(1, 8, 2, 32))
        self.check(ValueError, "q.stride(3) (the head dim): expected 1", fmha.attention,
                   meta(1, 8, 2, 64).transpose(2, 3), meta(1, 8, 2, 64), meta(1, 8, 2, 64))
        self.check(ValueError, "q.shape[1]: expected at most 2^31 - 1, got 4294967304", fmha.attention,
                   meta(1, 2**32 + 8, 1, 64), meta(1, 8, 1, 64), meta(1, 8, 1, 64))
        self.check(ValueError, "k.shape[0]: expected at most 2^31 - 1", fmha.attention_varlen, meta(8, 1, 64),
                   meta(2**32 + 8, 1, 64), meta(2**32 + 8, 1, 64), torch.empty(2, dtype=torch.int32, device="meta"),
                   torch.empty(2, dtype=torch.int32, device="meta"), 8, 8)

    def test_head_dim_not_supported(self):
        # On meta tensors a valid request no kernel takes is a RuntimeError (NotImplementedError on the GPU: fake
        # tensors would read that as a missing Meta kernel and drop the message).
        x = meta(1, 8, 2, 136)
        self.check(RuntimeError, "head_dim: expected ≤ 128, got 136", fmha.attention, x, x, x)
        y = meta(1, 8, 2, 60)
        self.check(ValueError, "head_dim", fmha.attention, y, y, y)

    def test_options(self):
        x = meta(1, 8, 2, 64)
        self.check(ValueError, "causal_align: expected 'q_end' or 'q_begin', got 'top'", fmha.attention, x, x, x,
                   causal=True, causal_align="top")
        for bad in (float("nan"), -1.0, 1e-50, 1e39, float("inf")):
            self.check(ValueError, "softmax_scale: expected a normal fp32 value > 0", fmha.attention, x, x, x,
                       softmax_scale=bad)
        # The operator itself (no Python wrapper): 0 is the default, a subnormal is refused.
        self.check(ValueError, "softmax_scale: expected 0 (= 1/sqrt(head_dim)) or a value in", torch.ops.fmha.fwd,
                   x, x, x, 1e-40, False, True)

    def test_misaligned_view(self):
        x = meta(1, 8, 2, 72)[..., 4:68]  # head dim 64 starting 8 bytes into a row
        self.check(ValueError, "q: expected", fmha.attention, x, x, x)

    def test_autograd_on_meta_tensors(self):
        # The backward operator's Meta kernel: gradients of the inputs' shapes (dK, dV of K/V's heads under GQA).
        q = meta(1, 8, 4, 64).requires_grad_()
        k = meta(1, 16, 2, 64).requires_grad_()
        out = fmha.attention(q, k, k, causal=True)
        self.assertTrue(out.requires_grad)
        out.sum().backward()
        self.assertEqual(q.grad.shape, q.shape)
        self.assertEqual(k.grad.shape, k.shape)
        with torch.no_grad():
            self.assertFalse(fmha.attention(q, k, k).requires_grad)
        q.grad = None
        out, lse = fmha.attention(q, k, k, return_lse=True)
        lse.sum().backward()  # a loss of the LSE alone: d_out is zeros, d_lse passes to the backward
        self.assertEqual(q.grad.shape, q.shape)
        bad = torch.empty(1, 4, 9, device="meta")  # lse is [1, 4, 8]
        self.check(ValueError, "d_lse: expected a torch.float32 tensor of lse's shape", torch.ops.fmha.bwd,
                   meta(1, 8, 4, 64), q, k, k, meta(1, 8, 4, 64), lse, bad, 0.0, False, True, False)

    def test_empty_problems(self):
        # No query rows: empty outputs (batch 0 too); no keys: shapes as usual (O = 0 on the GPU).
        self.assertEqual(fmha.attention(meta(0, 8, 2, 64), meta(0, 8, 2, 64), meta(0, 8, 2, 64)).shape,
                         torch.Size([0, 8, 2, 64]))
        self.assertEqual(fmha.attention(meta(1, 0, 2, 64), meta(1, 8, 2, 64), meta(1, 8, 2, 64)).shape,
                         torch.Size([1, 0, 2, 64]))
        self.assertEqual(fmha.attention(meta(1, 8, 2, 64), meta(1, 0, 2, 64), meta(1, 0, 2, 64)).shape,
                         torch.Size([1, 8, 2, 64]))

    def test_unit_modes_take_any_stride(self):
        # torch allows any stride on a mode of size 1; fmha's multiples of 8 are not asked of it.
        q = torch.empty_strided((1, 1, 2, 64), (3, 3, 64, 1), device="meta", dtype=BF16)
        k = torch.empty_strided((1, 5, 1, 64), (1000, 64, 5, 1), device="meta", dtype=BF16)
        self.assertEqual(fmha.attention(q, k, k).shape, torch.Size([1, 1, 2, 64]))

    def test_mixed_devices(self):
        cpu = torch.zeros(1, 8, 2, 64, dtype=BF16)
        self.check(ValueError, "k.device, v.device: expected q's device meta, got cpu", fmha.attention,
                   meta(1, 8, 2, 64), cpu, cpu)
        x = meta(16, 2, 64)
        cu = torch.empty(3, dtype=torch.int32, device="meta")
        self.check(ValueError, "cu_seqlens_k.device: expected q's device meta, got cpu", fmha.attention_varlen, x, x, x,
                   cu, torch.zeros(3, dtype=torch.int32), 8, 8)
        self.check(TypeError, "max_seqlen_q: expected an int, got float 200.7", fmha.attention_varlen, x, x, x, cu, cu,
                   200.7, 8)

    def test_cu_seqlens(self):
        x = meta(16, 2, 64)
        cu = torch.empty(3, dtype=torch.int32, device="meta")
        self.check(ValueError, "cu_seqlens_q.dtype: expected torch.int32, got torch.int64", fmha.attention_varlen, x, x, x,
                   torch.empty(3, dtype=torch.int64, device="meta"), cu, 8, 8)
        self.check(ValueError, "cu_seqlens_k: expected a contiguous tensor", fmha.attention_varlen, x, x, x, cu,
                   torch.empty(6, dtype=torch.int32, device="meta")[::2], 8, 8)
        self.check(ValueError, "cu_seqlens_q.shape[0]: expected b + 1 >= 2, got 1", fmha.attention_varlen, x, x, x,
                   torch.empty(1, dtype=torch.int32, device="meta"), cu, 8, 8)
        self.check(ValueError, "cu_seqlens_k.shape[0]: expected cu_seqlens_q.shape[0] = 3, got 4", fmha.attention_varlen,
                   x, x, x, cu, torch.empty(4, dtype=torch.int32, device="meta"), 8, 8)
        self.check(ValueError, "max_seqlen_q, max_seqlen_k: expected 0 ... 2^31 - 1, got -1", fmha.attention_varlen,
                   x, x, x, cu, cu, -1, 8)


class Opcheck(unittest.TestCase):
    def test_opcheck_meta(self):
        q, k = meta(2, 64, 4, 64), meta(2, 80, 2, 64)
        torch.library.opcheck(torch.ops.fmha.fwd.default, (q, k, k, 0.0, True, True))
        cu = torch.empty(3, dtype=torch.int32, device="meta")
        torch.library.opcheck(torch.ops.fmha.fwd_varlen.default,
                              (meta(100, 4, 64), meta(120, 2, 64), meta(120, 2, 64), cu, cu, 64, 80, 0.0, False, True))


class Compile(unittest.TestCase):
    def test_fullgraph_aot_eager(self):
        class Block(torch.nn.Module):
            def forward(self, q, k, v, cu, x):
                a = fmha.attention(q, k, v, causal=True)
                b, lse = fmha.attention_varlen(x, x, x, cu, cu, 32, 32, return_lse=True)
                return a * 2, b + 1, lse

        torch._dynamo.reset()
        m = torch.compile(Block(), fullgraph=True, backend="aot_eager")
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            q, k = torch.empty(2, 64, 4, 64, dtype=BF16, device="cuda"), torch.empty(2, 64, 2, 64, dtype=BF16, device="cuda")
            x = torch.empty(50, 2, 64, dtype=BF16, device="cuda")
            cu = torch.empty(3, dtype=torch.int32, device="cuda")
            a, b, lse = m(q, k, k, cu, x)
        self.assertEqual(a.shape, torch.Size([2, 64, 4, 64]))
        self.assertEqual(b.shape, torch.Size([50, 2, 64]))
        self.assertEqual(lse.shape, torch.Size([2, 50]))

    def test_symbolic_shapes_still_checked(self):
        # Dynamic shapes (symbolic sizes and strides): the static arguments are still checked at trace time.
        from torch.fx.experimental.proxy_tensor import make_fx

        def f(q, k, v):
            return fmha.attention(q, k, v, causal=True)

        ok = make_fx(f, tracing_mode="symbolic")(meta(2, 100, 8, 64), meta(2, 120, 2, 64), meta(2, 120, 2, 64))
        self.assertIn("fmha.fwd", str(ok.code))
        for kv_heads, d, fragment in ((3, 64, "heads_q % heads_kv: expected 0"), (2, 136, "head_dim: expected ≤ 128"),
                                      (2, 60, "head_dim")):
            with self.assertRaises(Exception) as cm:
                make_fx(f, tracing_mode="symbolic")(meta(2, 100, 8, d),
                                                    meta(2, 120, kv_heads, d), meta(2, 120, kv_heads, d))
            self.assertIn(fragment, str(cm.exception))

    def test_trace_time_error(self):
        # A shape error surfaces while tracing, with fmha's message.
        def f(q, k):
            return fmha.attention(q, k, k)

        torch._dynamo.reset()
        g = torch.compile(f, fullgraph=True, backend="aot_eager")
        with self.assertRaises(Exception) as cm:
            g(meta(1, 8, 4, 64), meta(1, 8, 3, 64))
        self.assertIn("heads_q % heads_kv: expected 0", str(cm.exception))


class Combine(unittest.TestCase):
    """torch.ops.fmha.combine without a GPU: its schema, the Meta kernel's shapes and the errors both kernels raise."""

    def test_schema_and_meta(self):
        self.assertEqual(str(torch.ops.fmha.combine.default._schema),
                         "fmha::combine(Tensor out_parts, Tensor lse_parts, ScalarType? out_dtype=None) -> "
                         "(Tensor, Tensor)")
        o, lse = fmha.combine(meta(3, 2, 7, 4, 72, dtype=torch.float32), meta(3, 2, 7, 4, dtype=torch.float32),
                              out_dtype=BF16)
        self.assertEqual((o.shape, o.dtype, lse.shape, lse.dtype),
                         (torch.Size([2, 7, 4, 72]), BF16, torch.Size([2, 7, 4]), torch.float32))
        torch.library.opcheck(torch.ops.fmha.combine.default,
                              (meta(2, 5, 16, dtype=torch.float32), meta(2, 5, dtype=torch.float32), None))

    def test_errors(self):
        f32 = torch.float32
        cases = [
            ((meta(2, 8, 16), meta(2, 8, dtype=f32)), "out_parts.dtype, lse_parts.dtype: expected torch.float32"),
            ((meta(2, 8, 16, dtype=f32), meta(2, 7, dtype=f32)), "lse_parts.shape: expected out_parts.shape[:-1]"),
            ((meta(0, 8, 16, dtype=f32), meta(0, 8, dtype=f32)), "out_parts.shape[0] (parts): expected >= 1, got 0"),
            ((meta(2, 8, 600, dtype=f32), meta(2, 8, dtype=f32)), "out_parts.shape[-1] (head dim): expected 1 ... 512"),
            ((meta(2, 8, 16, dtype=f32).transpose(0, 1), meta(2, 8, dtype=f32).t()), "expected contiguous tensors"),
            ((torch.zeros(2, 8, 16), torch.zeros(2, 8)), "out_parts.device: expected a CUDA device, got cpu"),
        ]
        for args, msg in cases:
            with self.assertRaises(ValueError, msg=msg) as cm:
                fmha.combine(*args)
            self.assertIn(msg, str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            fmha.combine(meta(2, 8, 16, dtype=f32), meta(2, 8, dtype=f32), out_dtype=torch.int32)
        self.assertIn("out_dtype: expected torch.float32, torch.float16 or torch.bfloat16", str(cm.exception))


class Decode(unittest.TestCase):
    """fmha.decode without a GPU: the Meta kernel's shapes and fmha's checks, errors naming the argument."""

    def meta(self, *shape, dtype=torch.bfloat16):
        return torch.empty(*shape, device="meta", dtype=dtype)

    def test_meta_shapes(self):
        q, kc = self.meta(3, 2, 16, 128), self.meta(3, 512, 4, 128)
        lens = self.meta(3, dtype=torch.int32)
        out, lse = torch.ops.fmha.decode(q, kc, kc, lens, None, None, None, None, 0, 0, 0.0)
        self.assertEqual(tuple(out.shape), (3, 2, 16, 128))
        self.assertEqual(tuple(lse.shape), (3, 2, 16))
        self.assertEqual(lse.dtype, torch.float32)
        out, lse = torch.ops.fmha.decode(self.meta(0, 1, 16, 128), kc, kc, self.meta(0, dtype=torch.int32), None,
                                         None, None, None, 0, 0, 0.0)  # no sequences: empty
        self.assertEqual(tuple(out.shape), (0, 1, 16, 128))

    def test_errors_name_the_argument(self):
        q, kc = self.meta(2, 1, 8, 128), self.meta(2, 64, 2, 128)
        lens = self.meta(2, dtype=torch.int32)
        cases = [
            ((q, kc, kc, self.meta(2, dtype=torch.int64)), {}, "seqlens_k.dtype: expected torch.int32"),
            ((q, kc, kc, lens), {"max_seqlen_k": 65}, "max_seqlen_k"),
            ((q, self.meta(1, 64, 2, 128), self.meta(1, 64, 2, 128), lens), {}, "slots"),
            ((q, kc, kc, lens), {"page_table": self.meta(0, 4, dtype=torch.int32)}, "page_table.shape"),
            ((q, self.meta(2, 64, 2, 256)[..., ::2], self.meta(2, 64, 2, 256)[..., ::2], lens), {},
             "k_cache.stride(3)"),
        ]
        for args, kw, msg in cases:
            plan = (kw.pop("max_seqlen_k", 0), 0)
            with self.assertRaises(ValueError, msg=msg) as cm:
                torch.ops.fmha.decode(*args, kw.get("page_table"), None, None, None, plan[0], plan[1], 0.0)
            self.assertIn(msg, str(cm.exception))

    def test_cpu_tensors(self):
        q, kc = torch.zeros(2, 1, 8, 128, dtype=torch.bfloat16), torch.zeros(2, 64, 2, 128, dtype=torch.bfloat16)
        with self.assertRaises(ValueError) as cm:
            fmha.decode(q, kc, kc.clone(), torch.zeros(2, dtype=torch.int32))
        self.assertIn("q.device: expected a CUDA device", str(cm.exception))

    def test_autograd_refused(self):
        q = torch.zeros(2, 1, 8, 128, dtype=torch.bfloat16, requires_grad=True)
        kc = torch.zeros(2, 64, 2, 128, dtype=torch.bfloat16)
        with self.assertRaises(NotImplementedError) as cm:
            fmha.decode(q, kc, kc.clone(), torch.zeros(2, dtype=torch.int32))
        self.assertIn("decode has no backward pass", str(cm.exception))

    def test_plan(self):
        self.assertEqual(repr(fmha.DecodePlan(100, 2)), "DecodePlan(max_seqlen_k=100, num_splits=2)")
        with self.assertRaises(TypeError):
            fmha.DecodePlan(max_seqlen_k=1.5)


if __name__ == "__main__":
    unittest.main()
