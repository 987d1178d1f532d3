#!/usr/bin/env python3
"""A/B of decode kernels through two or more fmha_gen builds: each build runs every row in turn, in ABBA order
(builds forward, then backward, `--rounds` times), and the table gives each build's median TB/s relative to the
first (the base). Give the base twice (two copies of one binary) for the A/A control: a difference inside the A/A
spread is noise.

Usage: python3 bench/decode_ab.py NAME=FMHA_GEN [NAME=FMHA_GEN ...] [--rows 128x1024,8x16384] [--pages 0,16,64]
       [--h 32 --h_k 8 --d 128 --q 1] [--iterations 300] [--rounds 2] [--json OUT.json]

Rows are batch x cache length; every sequence holds the full length, cache-only, inputs all ones (--init-style=1:
the values do not change the time, and the host builds the caches fast). TB/s is fmha_gen's (docs/numerics.md,
gen_bytes) over the median of its timed calls.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_common import abba, parse_builds, run_json  # noqa: E402


def run(binary, b, k, page, a):
    r = run_json(binary, [f"--b={b}", f"--k={k}", f"--h={a.h}", f"--h_k={a.h_k}", f"--d={a.d}", f"--q={a.q}",
                          f"--page={page}", "--cache-only", "--init-style=1", f"--iterations={a.iterations}"],
                 "decode_ab")
    return r["extra"]["bytes"] * 1e-12 / (r["time_ms_median"] * 1e-3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", help="NAME=path/to/fmha_gen; the first is the base")
    ap.add_argument("--rows", default="128x1024,8x16384")
    ap.add_argument("--pages", default="0,16,64")
    ap.add_argument("--h", type=int, default=32)
    ap.add_argument("--h_k", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--q", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    builds = parse_builds(ap, a.builds, "fmha_gen")
    rows = [tuple(int(x) for x in r.split("x")) for r in a.rows.split(",")]
    pages = [int(x) for x in a.pages.split(",")]
    res = {}  # (b, k, page) -> name -> [TB/s]
    for b, k in rows:
        for page in pages:
            res[(b, k, page)] = abba(builds, a.rounds, lambda path: run(path, b, k, page, a))
    base = builds[0][0]
    print(f"median TB/s of the base ({base}) and each build / base")
    print(f"{'b':>4} {'L':>7} {'page':>5} | {base:>8} | " + " ".join(f"{n:>8}" for n, _ in builds[1:]))
    table = []
    for (b, k, page), cell in res.items():
        med = {n: statistics.median(v) for n, v in cell.items()}
        ratios = {n: med[n] / med[base] for n in med if n != base}
        table.append({"b": b, "k": k, "page": page, "tbps": med, "ratio": ratios})
        print(f"{b:>4} {k:>7} {page:>5} | {med[base]:8.3f} | " + " ".join(f"{ratios[n]:8.3f}" for n, _ in builds[1:]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "rows": table}, f, indent=1)


if __name__ == "__main__":
    main()
