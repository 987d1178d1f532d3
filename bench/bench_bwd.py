#!/usr/bin/env python3
"""Backward benchmark: fmha's backward (torch.ops.fmha.bwd, the algorithm kAuto picks: one pass or two) against
cuDNN (PyTorch SDPA pinned to the cuDNN backend, its backward through torch.autograd.grad) and, where it is built with its bwd
feature, FlashAttention-3's backward (flash_attn_interface._flash_attn_backward), side by side in one process on the
same inputs, each given its own forward's output and LSE.

Rows: d 64 and 128, non-causal and causal, seqlen 1k … 16k at 16k tokens (batch = 16384 / seqlen), heads = 2048 / d;
with --mla also the MLA prefill shape (head dims 192 / 128, batch 1, 128 heads, causal, --mla-seqlens; fmha's O and
LSE there from an fp32 forward in torch, as fmha has no forward at these head dims yet);
bf16 (and fp16 with --dtypes bf16,fp16; FA3 only for --fa3-dtypes, the dtypes it was built for: bf16 by default). TFLOPS = 2.5 × the forward's
4 · b · h · s_q · s_k · d (half of it causal) over the median time (bench_fwd.time_interleaved: backends interleaved
loop by loop, ~20 ms loops). "n/a" where a backend refuses a shape. Beside the timing, every row checks fmha's dQ,
dK, dV against cuDNN's (max |difference|).

Columns: "fmha" is the default call (bwd algorithm "auto"); --variants adds fmha columns of explicit choices:
"1p" (one pass), "2p" (two passes), "det" (deterministic, "auto"), "det1p" (deterministic one pass), each timed in
the same interleaved loops and reported as TFLOPS and as a ratio to the default.

Usage: PYTHONPATH=build/python python3 bench/bench_bwd.py [--json out.json] [--fa3 DIR] [--reps 7]
       [--dtypes bf16] [--dims 64,128] [--seqlens 1024,2048,4096,8192,16384] [--deterministic]
       [--variants 1p,2p,det,det1p] [--mla [--mla-seqlens 8192]] [--plot OUT.png]
       python3 bench/bench_bwd.py --replot RESULT.json OUT.png     (no GPU: redraws a result's chart)
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEPS = os.path.join(HERE, "..", ".deps", "python")  # the pinned matplotlib of scripts/setup.sh
SERIES = (("fmha", "fmha", "tab:red"), ("cudnn", "cuDNN", "tab:green"), ("fa3", "FA3", "tab:blue"))
# Extra fmha columns (--variants): name -> (deterministic, bwd algorithm).
VARIANTS = {"1p": (False, "one_pass"), "2p": (False, "two_pass"), "det": (True, "auto"), "det1p": (True, "one_pass")}


def plot(result, out):
    """TFLOPS per sequence length, one panel per (head dim, mask), a line per backend."""
    if os.path.isdir(DEPS):
        sys.path.insert(0, DEPS)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["rows"]
    panels = sorted({(r["dtype"], r["head_dim"], r["causal"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False, sharey=True)
    for ax, (dt, d, causal) in zip(axes[0], panels):
        rs = sorted((r for r in rows if (r["dtype"], r["head_dim"], r["causal"]) == (dt, d, causal)),
                    key=lambda r: r["seqlen"])
        series = SERIES
        if any("fmha_2p_tflops" in r for r in rs):  # explicit algorithms measured: draw them instead of "auto"
            series = (("fmha_2p", "fmha, two passes", "tab:red"), ("fmha_1p", "fmha, one pass", "tab:orange")) + SERIES[1:]
        for col, label, colour in series:
            pts = [(r["seqlen"], r[col + "_tflops"]) for r in rs if col + "_tflops" in r]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label, color=colour)
        ax.set_xscale("log", base=2)
        ax.set_xticks([r["seqlen"] for r in rs])
        ax.set_xticklabels([f"{r['seqlen'] // 1024}k" for r in rs])
        ax.set_xlabel("sequence length (16k tokens per batch)")
        dv = rs[0].get("head_dim_v", d)
        ax.set_title(f"{dt}, d {d if dv == d else f'{d}/{dv}'}, {'causal' if causal else 'non-causal'}, "
                     f"{rs[0]['heads']} heads")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("TFLOPS (2.5 x forward FLOPs)")
    axes[0][0].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"Backward, {result.get('device', '')}; torch {result.get('torch', '')}", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"bench_bwd.py: wrote {out}")


def reference_forward(q, k, v, causal):
    """O (q's dtype, [b, s, h, d_v]) and LSE (fp32, [b, h, s], natural log) of softmax attention in fp32, a few heads
    at a time (for head dims no fmha forward takes; causal aligned at the beginning, as fmha.attention's default
    q-begin when s_q = s_k)."""
    import torch
    b, s, h, d = q.shape
    out = torch.empty(b, s, h, v.shape[-1], device=q.device, dtype=q.dtype)
    lse = torch.empty(b, h, s, device=q.device, dtype=torch.float32)
    step = max(1, (1 << 29) // (s * k.shape[1]))  # heads per chunk: ~2 GB of fp32 scores
    for i in range(b):
        for h0 in range(0, h, step):
            qs, ks, vs = (x[i, :, h0:h0 + step].transpose(0, 1).float() for x in (q, k, v))
            sc = (qs @ ks.transpose(1, 2)) * d ** -0.5
            if causal:
                sc.masked_fill_(torch.ones(s, k.shape[1], device=q.device, dtype=torch.bool).triu(1), float("-inf"))
            m = torch.logsumexp(sc, -1)
            out[i, :, h0:h0 + step] = (torch.exp(sc - m[..., None]) @ vs).transpose(0, 1).to(q.dtype)
            lse[i, h0:h0 + step] = m
            del sc
    return out, lse


def load_fa3(fa3_dir):
    try:
        if fa3_dir:
            sys.path.insert(0, os.path.abspath(os.path.join(fa3_dir, "hopper")))
        from flash_attn_interface import _flash_attn_backward, flash_attn_func
        return (flash_attn_func, _flash_attn_backward), None
    except Exception as e:  # noqa: BLE001 (any import failure leaves the column out)
        return None, f"{type(e).__name__}: {e}"


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--replot":
        with open(sys.argv[2]) as f:
            plot(json.load(f), sys.argv[3])
        return
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sys.path.insert(0, HERE)
    from bench_fwd import time_interleaved
    import fmha
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    ap.add_argument("--fa3", default=os.environ.get("FMHA_FA3_DIR") or None)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
    ap.add_argument("--deterministic", action="store_true", help="fmha's (and FA3's) deterministic backward")
    ap.add_argument("--fa3-dtypes", default="bf16",
                    help="dtypes FA3 was built for (its build without the fp16 feature crashes on fp16 inputs)")
    ap.add_argument("--variants", default="", help="extra fmha columns: 1p, 2p, det, det1p")
    ap.add_argument("--mla", action="store_true",
                    help="add the MLA prefill rows: head dims 192 / 128, batch 1, 128 heads, causal (--mla-seqlens)")
    ap.add_argument("--mla-seqlens", default="8192")
    ap.add_argument("--fa3-mla", action="store_true",
                    help="time FA3 on the MLA rows too (its build needs hdim 192 backward kernels: "
                         "scripts/build_fa3.sh SRC DEST bwd mla; without them its backward crashes the process)")
    ap.add_argument("--plot", metavar="OUT.png")
    args = ap.parse_args()
    variants = [x for x in args.variants.split(",") if x]
    bad = [x for x in variants if x not in VARIANTS]
    if bad:
        ap.error(f"--variants: expected a list of {', '.join(VARIANTS)}, got {', '.join(bad)}")
    torch.manual_seed(0)
    fa3, fa3_err = load_fa3(args.fa3)
    if fa3 is None:
        print(f"# FlashAttention-3 backward: not available ({fa3_err})")
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    rows = []
    # (dtype, batch, seqlen, heads, head dim of Q/K, head dim of V, causal)
    shapes = [(dname, max(1, 16384 // s), s, 2048 // d, d, d, causal)
              for dname in args.dtypes.split(",") for d in (int(x) for x in args.dims.split(",") if x)
              for causal in (False, True) for s in (int(x) for x in args.seqlens.split(",") if x)]
    if args.mla:
        shapes += [(dname, 1, s, 128, 192, 128, True) for dname in args.dtypes.split(",")
                   for s in (int(x) for x in args.mla_seqlens.split(","))]
    for dname, b, s, h, d, dv, causal in shapes:
        dt = dtypes[dname]
        q, k = (torch.randn(b, s, h, d, device="cuda", dtype=dt) for _ in range(2))
        v, dout = (torch.randn(b, s, h, dv, device="cuda", dtype=dt) for _ in range(2))
        if dv == d:
            out, lse = fmha.attention(q, k, v, causal=causal, return_lse=True)
        else:  # no fmha forward at these head dims: O and LSE from an fp32 forward
            out, lse = reference_forward(q, k, v, causal)
        fns = {"fmha": lambda q=q, k=k, v=v, out=out, lse=lse, dout=dout, causal=causal:
               torch.ops.fmha.bwd(dout, q, k, v, out, lse, None, 0.0, causal, True, args.deterministic)}
        for name in variants:
            det, algo = VARIANTS[name]
            if dv != d and algo == "one_pass":
                continue  # two passes only at 192 / 128
            fns["fmha_" + name] = (lambda q=q, k=k, v=v, out=out, lse=lse, dout=dout, causal=causal,
                                   det=det, algo=algo:
                                   torch.ops.fmha.bwd(dout, q, k, v, out, lse, None, 0.0, causal, True,
                                                      det, algo))
        qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            try:
                ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            except RuntimeError as e:
                print(f"# cuDNN refused {dname} d{d}/{dv} s{s}: {str(e).splitlines()[0][:120]}")
                ot = None
        if ot is not None:
            dot = dout.transpose(1, 2)

            def cudnn(ot=ot, qt=qt, kt=kt, vt=vt, dot=dot):
                return torch.autograd.grad(ot, (qt, kt, vt), dot, retain_graph=True)
            fns["cudnn"] = cudnn
        if fa3 is not None and dname in args.fa3_dtypes.split(",") and (dv == d or args.fa3_mla):
            fa3_fwd, fa3_bwd = fa3
            try:
                o3, lse3 = fa3_fwd(q, k, v, causal=causal, return_attn_probs=True)[:2]
                g3 = [torch.empty_like(x) for x in (q, k, v)]

                def fa3_call(o3=o3, lse3=lse3, g3=g3, q=q, k=k, v=v, dout=dout, causal=causal, d=d):
                    return fa3_bwd(dout, q, k, v, o3, lse3, dq=g3[0], dk=g3[1], dv=g3[2],
                                   softmax_scale=d ** -0.5, is_causal=causal,
                                   deterministic=args.deterministic)
                fns["fa3"] = fa3_call
            except (RuntimeError, TypeError) as e:
                print(f"# FA3 refused {dname} d{d}/{dv} s{s}: {str(e).splitlines()[0][:120]}")
        errs = {}
        if "cudnn" in fns:
            ref = [g.transpose(1, 2).float() for g in fns["cudnn"]()]
            got = fns["fmha"]()
            for name, g, r in zip(("dq", "dk", "dv"), got, ref):
                errs[name] = (g.float() - r).abs().max().item()
        med, failed = time_interleaved(fns, args.reps, 20.0, 5.0, seed=s * 31 + d + causal)
        flops = 2.5 * 2 * b * h * s * s * (d + dv) / (2 if causal else 1)
        row = {"dtype": dname, "batch": b, "seqlen": s, "heads": h, "head_dim": d, "head_dim_v": dv,
               "causal": causal, "deterministic": args.deterministic, "errors": failed, "max_abs_vs_cudnn": errs}
        for name, ms in med.items():
            row[f"{name}_ms"] = ms
            row[f"{name}_tflops"] = flops / ms / 1e9
        for peer in ("cudnn", "fa3"):
            if f"{peer}_tflops" in row and "fmha_tflops" in row:
                row[f"ratio_vs_{peer}"] = row["fmha_tflops"] / row[f"{peer}_tflops"]
        for name in variants:
            if f"fmha_{name}_ms" in row and "fmha_ms" in row:
                row[f"fmha_{name}_vs_default"] = row["fmha_ms"] / row[f"fmha_{name}_ms"]
        rows.append(row)
        print("# row " + json.dumps(row), flush=True)  # kept if a later row fails
        del q, k, v, dout, out, lse, fns
        torch.cuda.empty_cache()
    print("TFLOPS (backward = 2.5 x forward FLOPs); ratio = fmha / peer")
    print(f"{'dt':>4} {'d':>3} {'causal':>6} {'s':>6} | {'fmha':>7} {'cudnn':>7} {'fa3':>7} | {'/cudnn':>7} {'/fa3':>7}"
          " | max |d| vs cuDNN" + "".join(f" | {name:>6}" for name in variants))
    for r in rows:
        def cell(k, f="7.1f"):
            return format(r[k], f) if k in r else f"{'n/a':>7}"
        err = max(r["max_abs_vs_cudnn"].values()) if r["max_abs_vs_cudnn"] else float("nan")
        print(f"{r['dtype']:>4} {r['head_dim']:>3} {str(r['causal']):>6} {r['seqlen']:>6} | {cell('fmha_tflops')} "
              f"{cell('cudnn_tflops')} {cell('fa3_tflops')} | {cell('ratio_vs_cudnn', '7.3f')} "
              f"{cell('ratio_vs_fa3', '7.3f')} | {err:.2e}" +
              "".join(f" | {cell('fmha_' + name + '_tflops', '6.1f')}" for name in variants))
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "command": " ".join(sys.argv),
              "fa3_unavailable": fa3_err, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
