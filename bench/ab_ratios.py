#!/usr/bin/env python3
"""Prints an A/B table from a bench/bench_fwd.py JSON: each fmha column's TFLOPS relative to a base column.

Usage: python3 bench/ab_ratios.py RESULT.json [--base NAME]

RESULT.json  written by `bench/bench_fwd.py --json` with one or more `--alt NAME=PATH` libraries
--base NAME  the column the others are divided by (default: main; `fmha` is the --lib library)

Each row prints the base column's TFLOPS, then column/base for every other fmha column (fmha and the alternates),
then the base column's ratio to cuDNN and, where the run timed it, to FlashAttention-3 (fa3). Ratios above 1 mean the column is faster than the base. Judge a difference
against an A/A pair (two byte copies of one library) in the same run: same-kernel columns differ by a few per cent.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--base", default="main")
    args = ap.parse_args()
    with open(args.json) as f:
        rows = json.load(f)["rows"]
    if not rows:
        sys.exit(f"ab_ratios: {args.json}: expected at least one row, got none")
    peers = {"cudnn", "fa2", "fa3", "best_peer"}  # not A/B builds
    cols = [k[:-7] for k in rows[0] if k.endswith("_tflops") and k[:-7] not in peers]
    if args.base not in cols:
        sys.exit(f"ab_ratios: --base: expected one of {', '.join(cols)}, got '{args.base}'")
    others = [c for c in cols if c != args.base]
    print(f"{'dtype':5} {'d':>4} {'causal':>6} {'seqlen':>6} | {args.base + ' TF':>10} | " +
          " ".join(f"{c[:9]:>9}" for c in others) + f" | {args.base + '/cuDNN':>12} {args.base + '/FA3':>12}")
    for r in rows:
        base = r.get(args.base + "_tflops")
        cells = []
        for c in others:
            v = r.get(c + "_tflops")
            cells.append(f"{v / base:9.3f}" if v and base else f"{'-':>9}")
        cud, fa3 = r.get("cudnn_tflops"), r.get("fa3_tflops")
        print(f"{r['dtype']:5} {r['d']:4} {int(r['causal']):6} {r['seqlen']:6} | "
              f"{base if base else float('nan'):10.1f} | " + " ".join(cells) +
              f" | {base / cud if base and cud else float('nan'):12.3f}"
              f" {base / fa3 if base and fa3 else float('nan'):12.3f}")


if __name__ == "__main__":
    main()
