#!/usr/bin/env python3
"""CPU test of fmha_gen's command-line edges, run on the built binary (no GPU needed: every case here ends before
the GPU check, or is the GPU check itself):
  * --varlen with --k=0 is a usage error (exit 2; the length draw would never end), --k=1 --varlen is not;
  * refusals use option names: --h % --h_k, --q past 16, --page and --split below 0;
  * --help lists the seed's generation options and fmha's additions, with the per-tensor init styles;
  * a valid problem on a machine without a GPU exits 77 (skipped), with a GPU it would run.
Usage: test_gen_cli_edges.py PATH/TO/fmha_gen. Exits non-zero with a message on the first failure."""
import subprocess
import sys


def run(tool, *args):
    p = subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, out=""):
    if not cond:
        sys.exit(f"test_gen_cli_edges: FAILED: {what}\n{out}")


def main():
    tool = sys.argv[1]
    rc, out, err = run(tool, "--varlen", "--k=0")
    check(rc == 2 and "Error: --k: expected ≥ 1 with --varlen" in err, "--varlen --k=0: a usage error naming --k", err)
    rc, out, err = run(tool, "--varlen", "--k=1", "--b=3")
    check(rc in (0, 1, 77), f"--varlen --k=1: a valid problem (0, 1 or 77 without a GPU), got {rc}", err)
    rc, out, err = run(tool, "--h=4", "--h_k=3")
    check(rc == 2 and "Error: --h % --h_k: expected 0" in err, "--h % --h_k in option names", err)
    rc, out, err = run(tool, "--q=17")
    check(rc == 2 and "Error: --q: expected an integer in [1, 16]" in err, "--q range", err)
    rc, out, err = run(tool, "--page=-1")
    check(rc == 2 and "Error: --page:" in err, "--page below 0", err)
    rc, out, err = run(tool, "--split=-1")
    check(rc == 2 and "Error: --split:" in err, "--split below 0", err)
    rc, out, err = run(tool, "--help")
    check(rc == 0, "--help exits 0", err)
    for opt in ("--b=", "--h=", "--h_k=", "--k=", "--d=", "--varlen", "--remap", "--cache-only", "--clear-cache",
                "--iterations=", "--verify", "--verbose", "--sm-count=", "--kernel-filter=", "--init-style=",
                "--init-style-q=", "--init-style-cache-k=", "--init-style-cache-v=", "--init-style-new-k=",
                "--init-style-new-v=", "--dtype=", "--q=", "--page=", "--split=", "--scale=", "--json="):
        check(any(l.strip().startswith(opt) for l in out.splitlines()), f"--help lists {opt}", out)
    rc, out, err = run(tool, "--b=2", "--h=4", "--h_k=2", "--k=64")
    check(rc in (0, 77), f"a valid problem: 0 with a GPU, 77 without, got {rc}", err)
    print("test_gen_cli_edges: OK")


if __name__ == "__main__":
    main()
