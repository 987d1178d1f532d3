#!/usr/bin/env python3
"""Plot of a forward benchmark result (the JSON that bench/bench_fwd.py --json writes): TFLOPS against sequence length
for fmha, FlashAttention-3, cuDNN and FlashAttention-2, one panel per (head dim, mask).

Usage: python3 bench/plot.py RESULT.json OUT.png [--dtype bf16|fp16|all]
With one dtype (default bf16) the figure is a 2×2 grid: d 128 non-causal, d 128 causal (top), d 64 non-causal,
d 64 causal (bottom). With --dtype all it has one row of those four panels per dtype in the JSON. x is the sequence
length (log2 axis), y TFLOPS from 0; one line per library that has a value in the panel's rows (columns fmha_tflops,
fa3_tflops, cudnn_tflops, fa2_tflops; --alt, --variants and best_peer columns are not drawn). Rows, columns and values
that are missing (or null: a backend that failed on that shape) are left out of the panel, not errors.
Exit status 2, with a message, when the JSON cannot be read or has no rows (of the dtype asked for); 1 when
matplotlib is missing. scripts/setup.sh installs a pinned matplotlib into .deps/python of this checkout; plot.py
looks there first.
"""
import argparse
import json
import os
import sys

DEPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".deps", "python")
if os.path.isdir(DEPS):
    sys.path.insert(0, DEPS)  # the pinned matplotlib of scripts/setup.sh

# (column in the rows, legend label, colour, marker): fixed, so a library looks the same in every panel and figure
LIBS = (("fmha", "fmha", "tab:red", "o"), ("fa3", "FA3", "tab:blue", "s"), ("cudnn", "cuDNN", "tab:green", "^"),
        ("fa2", "FA2", "tab:gray", "v"))
PANELS = ((128, False), (128, True), (64, False), (64, True))  # (head dim, causal), in reading order


def fail(msg):
    print(f"plot.py: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    """The result's top level (a dict) and its rows (a non-empty list of dicts); exits 2 with a message otherwise."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        fail(f"{path}: cannot read the benchmark JSON ({e})")
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not any(isinstance(r, dict) for r in rows):
        fail(f"{path}: no rows (expected a JSON object with a non-empty list \"rows\", as bench/bench_fwd.py writes)")
    return data, [r for r in rows if isinstance(r, dict)]


def seq_label(s):
    """512 -> "512", 1024 -> "1k", 16384 -> "16k"."""
    return f"{s // 1024}k" if s >= 1024 and s % 1024 == 0 else str(s)


def cudnn_label(v):
    """torch.backends.cudnn.version()'s integer as a version: 91900 -> "9.19.0" (cuDNN 9 and later:
    major·10000 + minor·100 + patch), 8902 -> "8.9.2" (before 9: major·1000 + minor·100 + patch)."""
    if not isinstance(v, int) or isinstance(v, bool):
        return str(v)
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v // 100 % 10}.{v % 100}"


def series(rows, dtype, d, causal, col):
    """(seqlens, tflops) of one library in one panel, sorted by seqlen; rows without a number are left out (the last
    row wins where a problem appears twice)."""
    points = {}
    for r in rows:
        try:
            if r.get("dtype") != dtype or int(r.get("d")) != d or bool(r.get("causal")) != causal:
                continue
            s, t = int(r["seqlen"]), r.get(col + "_tflops")
        except (KeyError, TypeError, ValueError):
            continue
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0 and s > 0:
            points[s] = float(t)
    xs = sorted(points)
    return xs, [points[s] for s in xs]


def suptitle(data, rows):
    tokens = {r["batch"] * r["seqlen"] for r in rows if isinstance(r.get("batch"), int) and
              isinstance(r.get("seqlen"), int)}
    tok = seq_label(tokens.pop()) if len(tokens) == 1 else "16k"
    parts = [f"Forward attention, {data['device']}" if data.get("device") else "Forward attention"]
    versions = ", ".join(p for p in (f"torch {data['torch']}" if data.get("torch") else "",
                                     f"cuDNN {cudnn_label(data['cudnn'])}" if data.get("cudnn") else "") if p)
    if versions:
        parts.append(versions)
    parts.append(f"{tok} tokens, h = 2048/d")
    return "; ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="result of bench/bench_fwd.py --json")
    ap.add_argument("out", help="the PNG to write")
    ap.add_argument("--dtype", default="bf16", help="bf16, fp16 (one 2x2 figure) or all (a row of panels per dtype)")
    args = ap.parse_args()

    data, rows = load(args.json)
    present = list(dict.fromkeys(r.get("dtype") for r in rows if isinstance(r.get("dtype"), str)))
    dtypes = present if args.dtype == "all" else [args.dtype]
    if not dtypes or not any(r.get("dtype") in dtypes for r in rows):
        fail(f"{args.json}: no rows of dtype {args.dtype} (the file has: {', '.join(present) or 'none'})")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, FixedFormatter, NullLocator
    except ImportError as e:
        sys.exit(f"plot.py: needs matplotlib ({e}); run scripts/setup.sh (it installs the pinned one into .deps/python)")

    plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "legend.fontsize": 9})
    if len(dtypes) == 1:
        fig, axes = plt.subplots(2, 2, figsize=(10, 8), squeeze=False)
        cells = [(dtypes[0], panel, axes[i // 2][i % 2]) for i, panel in enumerate(PANELS)]
    else:
        fig, axes = plt.subplots(len(dtypes), 4, figsize=(18, 4.3 * len(dtypes) + 0.6), squeeze=False)
        cells = [(dt, panel, axes[j][i]) for j, dt in enumerate(dtypes) for i, panel in enumerate(PANELS)]

    ticks = sorted({int(r["seqlen"]) for r in rows if isinstance(r.get("seqlen"), int) and r["seqlen"] > 0})
    for dt, (d, causal), ax in cells:
        drawn = 0
        top = 0.0
        for col, label, colour, marker in LIBS:
            xs, ys = series(rows, dt, d, causal, col)
            if not xs:
                continue
            ax.plot(xs, ys, marker=marker, color=colour, label=label, linewidth=2.4 if col == "fmha" else 1.6,
                    markersize=6, zorder=3 if col == "fmha" else 2)
            drawn += 1
            top = max(top, max(ys))
        ax.set_title(f"{dt} d {d} {'causal' if causal else 'non-causal'}")
        ax.set_xscale("log", base=2)
        if ticks:
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_major_formatter(FixedFormatter([seq_label(s) for s in ticks]))
            ax.set_xlim(ticks[0] / 1.25, ticks[-1] * 1.25)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOPS")
        ax.set_ylim(0, top * 1.12 if top else 1)
        ax.grid(True, alpha=0.3)
        if drawn:
            ax.legend(loc="lower right")
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="gray")
            ax.set_yticks([])
    fig.suptitle(suptitle(data, rows), fontsize=12)
    fig.tight_layout()
    try:
        fig.savefig(args.out, dpi=150)
    except OSError as e:
        sys.exit(f"plot.py: {args.out}: cannot write ({e})")
    plt.close(fig)
    print(f"plot.py: wrote {args.out} ({', '.join(dtypes)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
