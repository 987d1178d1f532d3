#!/usr/bin/env python3
"""A/B of backward kernels through two or more fmha_bwd builds: each build runs every row in turn, in ABBA order
(builds forward, then backward, `--rounds` times), and the table gives each build's best median time relative to
the first (the base). Give the base twice (two copies of one binary) for the A/A control: a difference inside the
A/A spread is noise.

Usage: python3 bench/bwd_ab.py NAME=FMHA_BWD [NAME=FMHA_BWD ...] [--rows d128,d128c,d64,d64c] [--algos 1p,2p]
       [--seqlen 8192] [--iterations 30] [--rounds 1] [--dtype bf16] [--json OUT.json]

Rows: dD (non-causal) or dDc (causal), 16k tokens (batch 16384 / seqlen), heads 2048 / D. Each run is one fmha_bwd
process (fmha's forward for O and LSE, then --iterations timed backward calls; about 7 s at 8k): keep a device
call's rows few. Times are fmha_bwd's median per process; each build's figure is its best over the rounds' runs.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_common import abba, parse_builds, run_json  # noqa: E402


def run(binary, d, causal, algo, a):
    args = [f"--dtype={a.dtype}", f"--d={d}", f"--h={2048 // d}", f"--b={max(1, 16384 // a.seqlen)}",
            f"--q={a.seqlen}", f"--k={a.seqlen}", f"--mask={'causal' if causal else 'none'}",
            f"--iterations={a.iterations}"] + (["--two-pass"] if algo == "2p" else [])
    return run_json(binary, args, "bwd_ab")["time_ms_median"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", help="NAME=path/to/fmha_bwd; the first is the base")
    ap.add_argument("--rows", default="d128,d128c,d64,d64c")
    ap.add_argument("--algos", default="1p,2p")
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    ap.add_argument("--json")
    a = ap.parse_args()
    builds = parse_builds(ap, a.builds, "fmha_bwd")
    rows = []
    for r in a.rows.split(","):
        if not r.startswith("d") or not r.rstrip("c")[1:].isdigit():
            ap.error(f"--rows: expected dD or dDc (e.g. d128c), got {r!r}")
        rows.append((int(r.rstrip("c")[1:]), r.endswith("c")))
    algos = a.algos.split(",")
    if any(x not in ("1p", "2p") for x in algos):
        ap.error(f"--algos: expected 1p and/or 2p, got {a.algos!r}")
    result = []
    for d, causal in rows:
        for algo in algos:
            times = abba(builds, a.rounds, lambda path: run(path, d, causal, algo, a))
            best = {name: min(t) for name, t in times.items()}
            base = best[builds[0][0]]
            label = f"d{d} {'causal' if causal else 'none'} {algo}"
            print(f"{label:18s} " + "  ".join(f"{n} {best[n]:.3f} ms ({best[n] / base:.3f})" for n, _ in builds),
                  flush=True)
            result.append({"head_dim": d, "causal": causal, "algo": algo, "times_ms": times,
                           "ratio": {n: best[n] / base for n, _ in builds}})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "rows": result}, f, indent=1)


if __name__ == "__main__":
    main()
