#!/usr/bin/env python3
"""Decode benchmark: fmha.decode (contiguous and paged caches) against cuDNN (PyTorch SDPA pinned to the cuDNN
backend, contiguous cache, enable_gqa) and, where it is built with its decode feature, FlashAttention-3's
flash_attn_with_kvcache (contiguous and paged), side by side in one process on the same inputs.

Rows: bf16, d 128, heads 32/8 (and 64/8 with --heads 64), batch × cache length 128 × 1k, 64 × 4k, 32 × 16k, 8 × 64k,
1 × 128k, with 1 and 4 new tokens; every sequence holds the full length (cache-only: the new tokens' keys are the
cache's last ones). Bandwidth = bytes of K and V read once (batch · length · heads_kv · d · 2 tensors · 2 bytes)
over the median time (bench_fwd.time_interleaved: backends interleaved loop by loop, ~20 ms loops). Beside it the
same run measures a read-only ceiling (torch.sum over 2 GiB of bf16) and the copy ceiling (a 2 GiB copy, bytes read
plus written). "n/a" where a backend refuses a shape.

Usage: PYTHONPATH=build/python python3 bench/bench_decode.py [--json out.json] [--fa3 DIR] [--reps 9]
       [--heads 32,64] [--tokens 1,4] [--pages 16,64] [--plot OUT.png]
       python3 bench/bench_decode.py --replot RESULT.json OUT.png     (no GPU: redraws a result's bar chart)
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEPS = os.path.join(HERE, "..", ".deps", "python")  # the pinned matplotlib of scripts/setup.sh

ROWS = [(128, 1024), (64, 4096), (32, 16384), (8, 65536), (1, 131072)]


def load_fa3_kvcache(fa3_dir):
    try:
        if fa3_dir:
            sys.path.insert(0, os.path.abspath(os.path.join(fa3_dir, "hopper")))
        from flash_attn_interface import flash_attn_with_kvcache
        return flash_attn_with_kvcache, None
    except Exception as e:  # noqa: BLE001 (any import failure leaves the column out)
        return None, f"{type(e).__name__}: {e}"


def ceilings():
    """(read-only TB/s, copy TB/s) on 2 GiB of bf16."""
    x = torch.empty(1 << 30, device="cuda", dtype=torch.bfloat16).normal_()
    y = torch.empty_like(x)
    fns = {"read": lambda: x.sum(), "copy": lambda: y.copy_(x)}
    med, _ = time_interleaved(fns, 5, 50.0)
    n = x.numel() * 2
    return n / med["read"] / 1e9, 2 * n / med["copy"] / 1e9


SERIES = (("fmha", "fmha", "tab:red"), ("fmha_p16", "fmha paged 16", "salmon"), ("fmha_p64", "fmha paged 64", "mistyrose"),
          ("cudnn", "cuDNN", "tab:green"), ("fa3", "FA3", "tab:blue"), ("fa3_p16", "FA3 paged 16", "lightsteelblue"))


def plot(result, out):
    """A bar chart of a result: TB/s per (batch × length) row, one panel per (query heads, new tokens), with the
    read-only and copy ceilings of the same run as lines."""
    if os.path.isdir(DEPS):
        sys.path.insert(0, DEPS)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["rows"]
    panels = sorted({(r["heads_q"], r["new_tokens"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.6), squeeze=False)
    for ax, (h, n) in zip(axes[0], panels):
        rs = [r for r in rows if r["heads_q"] == h and r["new_tokens"] == n]
        names = [s for s in SERIES if any(s[0] + "_tbs" in r for r in rs)]
        width = 0.8 / max(1, len(names))
        for i, (col, label, colour) in enumerate(names):
            xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(rs))]
            ax.bar(xs, [r.get(col + "_tbs", 0) for r in rs], width, label=label, color=colour, edgecolor="gray")
        ax.axhline(rs[0]["read_ceiling_tbs"], color="black", linestyle="--", linewidth=1, label="read-only ceiling")
        ax.axhline(rs[0]["copy_ceiling_tbs"], color="black", linestyle=":", linewidth=1, label="copy ceiling")
        ax.set_xticks(range(len(rs)))
        ax.set_xticklabels([f"{r['batch']}×{r['seqlen_k'] // 1024}k" for r in rs])
        ax.set_xlabel("batch × cache length")
        ax.set_ylabel("TB/s (K and V read once)")
        ax.set_title(f"{h}/{rs[0]['heads_kv']} heads, d {rs[0]['head_dim']}, {n} new token{'s' if n > 1 else ''}")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(f"Decode, bf16, {result.get('device', '')}; torch {result.get('torch', '')}", fontsize=12)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    print(f"bench_decode.py: wrote {out}")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--replot":
        with open(sys.argv[2]) as f:
            plot(json.load(f), sys.argv[3])
        return
    global torch, fmha, time_interleaved, SDPBackend, sdpa_kernel
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sys.path.insert(0, HERE)
    from bench_fwd import time_interleaved
    import fmha
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    ap.add_argument("--fa3", default=os.environ.get("FMHA_FA3_DIR") or None)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--heads", default="32")
    ap.add_argument("--tokens", default="1,4")
    ap.add_argument("--pages", default="16,64")
    ap.add_argument("--plot", metavar="OUT.png")
    args = ap.parse_args()
    torch.manual_seed(0)
    fa3, fa3_err = load_fa3_kvcache(args.fa3)
    if fa3 is None:
        print(f"# FlashAttention-3 (flash_attn_with_kvcache): not available ({fa3_err})")
    read_tbs, copy_tbs = ceilings()
    print(f"# ceilings: read-only {read_tbs:.2f} TB/s, copy {copy_tbs:.2f} TB/s")
    dt, d, hk = torch.bfloat16, 128, 8
    pages = [int(p) for p in args.pages.split(",") if p]
    out_rows = []
    for h in (int(x) for x in args.heads.split(",")):
        for n in (int(x) for x in args.tokens.split(",")):
            for b, L in ROWS:
                q = torch.randn(b, n, h, d, device="cuda", dtype=dt)
                kc = torch.randn(b, L, hk, d, device="cuda", dtype=dt)
                vc = torch.randn(b, L, hk, d, device="cuda", dtype=dt)
                lens = torch.full((b,), L, device="cuda", dtype=torch.int32)
                plan = fmha.DecodePlan(max_seqlen_k=L)
                fns = {"fmha": lambda q=q, kc=kc, vc=vc, lens=lens, plan=plan: fmha.decode(q, kc, vc, lens, plan=plan)}
                paged = {}
                for ps in pages:  # the same keys in a shuffled page pool
                    npg = b * L // ps
                    perm = torch.randperm(npg, device="cuda")
                    table = perm.reshape(b, L // ps).to(torch.int32)
                    kp = torch.empty(npg, ps, hk, d, device="cuda", dtype=dt)
                    vp = torch.empty_like(kp)
                    kp[perm] = kc.reshape(npg, ps, hk, d)
                    vp[perm] = vc.reshape(npg, ps, hk, d)
                    paged[ps] = (kp, vp, table)
                    fns[f"fmha_p{ps}"] = (lambda q=q, kp=kp, vp=vp, t=table, lens=lens, plan=plan:
                                          fmha.decode(q, kp, vp, lens, page_table=t, plan=plan))
                qt = q.transpose(1, 2)
                kt, vt = kc.transpose(1, 2), vc.transpose(1, 2)
                # cuDNN: q [b, h, n, d] against [b, h_k, L, d] views; the n new tokens see keys up to L - n + t
                mask = None
                if n > 1:
                    i = torch.arange(n, device="cuda")[:, None]
                    j = torch.arange(L, device="cuda")[None, :]
                    mask = (j <= i + L - n)

                def cudnn(qt=qt, kt=kt, vt=vt, mask=mask):
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask,
                                                                                enable_gqa=True)
                fns["cudnn"] = cudnn
                if fa3 is not None:
                    fns["fa3"] = (lambda q=q, kc=kc, vc=vc, lens=lens:
                                  fa3(q, kc, vc, cache_seqlens=lens, causal=True))
                    for ps in pages:
                        if ps % 16 == 0:
                            kp, vp, t = paged[ps]
                            fns[f"fa3_p{ps}"] = (lambda q=q, kp=kp, vp=vp, t=t, lens=lens:
                                                 fa3(q, kp, vp, cache_seqlens=lens, page_table=t, causal=True))
                # correctness beside the timing: every fmha variant against cuDNN (where it takes the shape)
                errs = {}
                try:
                    ref = cudnn().transpose(1, 2).float()
                except RuntimeError as e:
                    ref = None
                    fns.pop("cudnn")
                    errs["cudnn_refused"] = str(e).splitlines()[0][:200]
                if ref is not None:
                    for name in [x for x in fns if x.startswith("fmha")]:
                        errs[name] = (fns[name]().float() - ref).abs().max().item()
                med, failed = time_interleaved(fns, args.reps, 20.0, 5.0, seed=b * 7919 + L + n)
                nbytes = b * L * hk * d * 2 * 2
                row = {"batch": b, "seqlen_k": L, "heads_q": h, "heads_kv": hk, "head_dim": d, "new_tokens": n,
                       "bytes_kv": nbytes, "read_ceiling_tbs": read_tbs, "copy_ceiling_tbs": copy_tbs,
                       "errors": failed, "max_abs_vs_cudnn": errs}
                for name, ms in med.items():
                    row[f"{name}_us"] = ms * 1e3
                    row[f"{name}_tbs"] = nbytes / ms / 1e9
                for peer in ("cudnn", "fa3", *(f"fa3_p{p}" for p in pages)):
                    if f"{peer}_tbs" in row:
                        mine = "fmha" if peer in ("cudnn", "fa3") else "fmha_" + peer.split("_")[1]
                        if f"{mine}_tbs" in row:
                            row[f"ratio_{mine}_vs_{peer}"] = row[f"{mine}_tbs"] / row[f"{peer}_tbs"]
                out_rows.append(row)
                del q, kc, vc, kt, vt, paged
                torch.cuda.empty_cache()
    names = ["fmha", *(f"fmha_p{p}" for p in pages), "cudnn", "fa3", *(f"fa3_p{p}" for p in pages)]
    print("TB/s (K and V bytes read once / time); ceilings: read-only %.2f, copy %.2f" % (read_tbs, copy_tbs))
    print(f"{'h':>3} {'n':>2} {'b':>4} {'L':>7} | " + " ".join(f"{x:>8}" for x in names) +
          " | fmha/cudnn fmha/fa3 p16/fa3p16 | err")
    for r in out_rows:
        cells = " ".join(f"{r[x + '_tbs']:8.2f}" if x + "_tbs" in r else f"{'n/a':>8}" for x in names)

        def ratio(k):
            return f"{r[k]:.3f}" if k in r else "n/a"
        print(f"{r['heads_q']:>3} {r['new_tokens']:>2} {r['batch']:>4} {r['seqlen_k']:>7} | {cells} | "
              f"{ratio('ratio_fmha_vs_cudnn'):>10} {ratio('ratio_fmha_vs_fa3'):>8} "
              f"{ratio('ratio_fmha_p16_vs_fa3_p16'):>13} | "
              f"{max([v for v in r['max_abs_vs_cudnn'].values() if isinstance(v, float)] or [float('nan')]):.2e}")
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "command": " ".join(sys.argv),
              "fa3_unavailable": fa3_err, "rows": out_rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
