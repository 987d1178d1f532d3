"""End to end on the GPU: a small Llama-style decoder from `transformers` (GQA 8/2, head dim 64, 4 layers, random
weights from a fixed seed, bf16) whose prefill attention runs on fmha.attention and whose generation runs on
fmha.decode against a paged KV cache (16-key pages shuffled over a pool, the new token's K/V appended by the call).
Everything else is the stock model's own modules (embeddings, RMSNorm, rotary embedding, projections, MLP, head).

 * Teacher forcing: the logits of every position (prefill and decode) are within K = 2 times the stock bf16
   model's own error against the stock fp32 model (max over positions and the vocabulary).
 * Greedy generation of 32 tokens: fed the fp32 model's greedy tokens (so the contexts stay equal), fmha's greedy
   choice equals the fp32 model's at every step whose top-2 logit margin exceeds K times the stock bf16 model's
   error at that step (at least a quarter of the steps must be that clear).

Exits 77 (skipped) without an sm_90 GPU or without transformers.
Run: PYTHONPATH=<build>/python python3 tests/python/test_llama_e2e.py -v
"""
import math
import sys
import unittest

import torch

if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    print("test_llama_e2e: skipped: needs an sm_90 GPU", file=sys.stderr)
    sys.exit(77)
try:
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
except ImportError as e:
    print(f"test_llama_e2e: skipped: transformers is not importable ({e})", file=sys.stderr)
    sys.exit(77)

import fmha  # noqa: E402

K_FACTOR = 2.0
CONFIG = dict(vocab_size=512, hidden_size=512, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=8,
              num_key_value_heads=2, head_dim=64, max_position_embeddings=1024, rms_norm_eps=1e-5,
              initializer_range=0.04, tie_word_embeddings=False)
PAGE = 16
Q_SHARPEN = 3.0


def stock_models():
    """The fp32 model (the reference) and its bf16 copy (the stock noise), eager attention, on the GPU."""
    torch.manual_seed(0)
    cfg = LlamaConfig(**CONFIG)
    cfg._attn_implementation = "eager"
    m32 = LlamaForCausalLM(cfg).cuda().eval()
    with torch.no_grad():  # sharper attention than the small init gives: scores of a few units, not near-uniform
        for layer in m32.model.layers:
            layer.self_attn.q_proj.weight.mul_(Q_SHARPEN)
    m16 = LlamaForCausalLM(cfg).cuda().eval()
    m16.load_state_dict(m32.state_dict())
    return m32, m16.to(torch.bfloat16)


class FmhaLlama:
    """The bf16 model's forward with fmha's attention: prefill() over a prompt, then step() per new token."""

    def __init__(self, m, batch, capacity):
        self.m, self.cfg = m, m.config
        self.h, self.hk, self.d = self.cfg.num_attention_heads, self.cfg.num_key_value_heads, self.cfg.head_dim
        self.pages_per_seq = math.ceil(capacity / PAGE)
        num_pages = batch * self.pages_per_seq + 3
        g = torch.Generator().manual_seed(1)
        perm = torch.randperm(num_pages, generator=g)[: batch * self.pages_per_seq]
        self.table = perm.view(batch, self.pages_per_seq).to(torch.int32).cuda()
        shape = (num_pages, PAGE, self.hk, self.d)
        nan = float("nan")  # slots not yet written must never reach a result
        self.kc = [torch.full(shape, nan, device="cuda", dtype=torch.bfloat16) for _ in self.m.model.layers]
        self.vc = [torch.full(shape, nan, device="cuda", dtype=torch.bfloat16) for _ in self.m.model.layers]
        self.length = 0

    def qkv(self, layer, x, positions):
        b, s = x.shape[:2]
        a = layer.self_attn
        hdn = layer.input_layernorm(x)
        q = a.q_proj(hdn).view(b, s, self.h, self.d).transpose(1, 2)
        k = a.k_proj(hdn).view(b, s, self.hk, self.d).transpose(1, 2)
        v = a.v_proj(hdn).view(b, s, self.hk, self.d).transpose(1, 2)
        cos, sin = self.m.model.rotary_emb(x, positions)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return (t.transpose(1, 2).contiguous() for t in (q, k, v))  # [b, s, heads, d]

    def finish(self, layer, x, o):
        b, s = x.shape[:2]
        x = x + layer.self_attn.o_proj(o.reshape(b, s, self.h * self.d))
        return x + layer.mlp(layer.post_attention_layernorm(x))

    def logits(self, x):
        return self.m.lm_head(self.m.model.norm(x)).float()

    @torch.no_grad()
    def prefill(self, tokens):
        b, s = tokens.shape
        x = self.m.model.embed_tokens(tokens)
        positions = torch.arange(s, device="cuda")[None].expand(b, -1)
        j = torch.arange(s, device="cuda")
        pages, rows = self.table[:, j // PAGE].long(), (j % PAGE)[None].expand(b, -1)
        for i, layer in enumerate(self.m.model.layers):
            q, k, v = self.qkv(layer, x, positions)
            o = fmha.attention(q, k, v, causal=True)
            self.kc[i][pages, rows] = k  # the prompt's K/V into the paged cache
            self.vc[i][pages, rows] = v
            x = self.finish(layer, x, o)
        self.length = s
        return self.logits(x)

    @torch.no_grad()
    def step(self, token):
        b = token.shape[0]
        x = self.m.model.embed_tokens(token[:, None])
        positions = torch.full((b, 1), self.length, device="cuda")
        lens = torch.full((b,), self.length, device="cuda", dtype=torch.int32)
        for i, layer in enumerate(self.m.model.layers):
            q, k, v = self.qkv(layer, x, positions)
            o = fmha.decode(q, self.kc[i], self.vc[i], lens, page_table=self.table, k_new=k, v_new=v)
            x = self.finish(layer, x, o)
        self.length += 1
        return self.logits(x)[:, 0]


class LlamaEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m32, cls.m16 = stock_models()

    def test_teacher_forcing_logits(self):
        b, prompt, total = 3, 37, 100
        tokens = torch.randint(0, CONFIG["vocab_size"], (b, total), device="cuda",
                               generator=torch.Generator(device="cuda").manual_seed(2))
        with torch.no_grad():
            ref = self.m32(tokens).logits.double()
            stock = self.m16(tokens).logits.double()
        model = FmhaLlama(self.m16, b, total)
        got = [model.prefill(tokens[:, :prompt])]
        for t in range(prompt, total):
            got.append(model.step(tokens[:, t])[:, None])
        got = torch.cat(got, dim=1).double()
        noise = (stock - ref).abs().max().item()
        err = (got - ref).abs().max().item()
        err_decode = (got[:, prompt:] - ref[:, prompt:]).abs().max().item()
        print(f"\nlogits max |err| vs fp32: fmha {err:.4g} (decode positions {err_decode:.4g}), stock bf16 {noise:.4g}",
              file=sys.stderr)
        self.assertTrue(torch.isfinite(got).all(), "non-finite logits")
        self.assertLessEqual(err, K_FACTOR * noise, f"fmha's logits error {err:.4g} > {K_FACTOR} x stock {noise:.4g}")

    def test_greedy_tokens(self):
        b, prompt, steps = 2, 20, 32
        tokens = torch.randint(0, CONFIG["vocab_size"], (b, prompt), device="cuda",
                               generator=torch.Generator(device="cuda").manual_seed(3))
        seq = tokens
        with torch.no_grad():  # the fp32 model's greedy continuation
            for _ in range(steps):
                seq = torch.cat([seq, self.m32(seq).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            ref = self.m32(seq).logits[:, prompt - 1:-1].double()  # the logits that chose each token
            noise = (self.m16(seq).logits[:, prompt - 1:-1].double() - ref).abs().amax(-1)  # [b, steps]
        # fmha's greedy choice at every step, fed the fp32 model's tokens (teacher forcing keeps the contexts
        # equal, so that every step where the fp32 model's choice is clear is compared).
        model = FmhaLlama(self.m16, b, prompt + steps)
        ours = [model.prefill(tokens)[:, -1].argmax(-1)]
        for s_ in range(steps - 1):
            ours.append(model.step(seq[:, prompt + s_]).argmax(-1))
        ours = torch.stack(ours, dim=1)
        top2 = ref.topk(2, dim=-1).values
        clear = (top2[..., 0] - top2[..., 1]) > K_FACTOR * noise
        want = seq[:, prompt:]
        print(f"\ngreedy: {int(clear.sum())} of {b * steps} steps have a top-2 margin above {K_FACTOR} x the stock "
              f"noise; fmha agrees on {int((ours == want)[clear].sum())} of them, on "
              f"{int((ours == want).sum())} of all steps", file=sys.stderr)
        self.assertGreaterEqual(int(clear.sum()), b * steps // 4, "too few clear steps for a meaningful check")
        bad = (ours != want) & clear
        self.assertFalse(bad.any(), f"greedy tokens differ at clear steps (sequence, step): {bad.nonzero().tolist()}")


if __name__ == "__main__":
    unittest.main()
