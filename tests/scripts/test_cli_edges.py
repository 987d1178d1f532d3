#!/usr/bin/env python3
"""CPU test of fmha_fwd's command-line edges, run on the built binary (no GPU needed; on a GPU machine the same
checks hold because every case here ends before the GPU check or is answered before any launch):
  * a head dim the library has no kernel for (--d=136, --d=256) is a usage error (exit 2) before the GPU check, like
    an invalid one (--d=100), and the message names the option (--d), not the library's field (head_dim);
  * the library's other messages use option names too (--b × --h × ceil(--q / …) for too many work tiles);
  * --help states the supported head dims, and --tolerance defaults to the scale-aware rule;
  * the warning for --varlen-q without --varlen comes before the GPU check (so it shows on any machine) and once.
Usage: test_cli_edges.py PATH/TO/fmha_fwd. Exits non-zero with a message on the first failure."""
import subprocess
import sys


def run(tool, *args):
    p = subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, out=""):
    if not cond:
        sys.exit(f"test_cli_edges: FAILED: {what}\n{out}")


def main():
    tool = sys.argv[1]
    for d in ("136", "256", "100"):
        rc, out, err = run(tool, f"--d={d}")
        check(rc == 2, f"--d={d}: expected exit 2 (usage error, before the GPU check), got {rc}", err)
        check(err.startswith("Error: --d: expected "), f"--d={d}: expected a message naming --d", err)
        check("head_dim" not in err and "no CUDA GPU" not in err, f"--d={d}: library field name or GPU check", err)
    rc, out, err = run(tool, "--d=64", "--b=70000", "--h=20000", "--q=1000000")
    check(rc == 2 and "Error: --b × --h × ceil(--q / " in err, "work-tile limit: expected option names", err)
    rc, out, err = run(tool, "--h=9", "--h_k=6")
    check(rc == 2 and "Error: --h_k: expected a divisor of --h=9, got 6" in err, "--h_k divisor message", err)
    rc, out, err = run(tool, "--help")
    line = next((l for l in out.splitlines() if l.strip().startswith("--d=")), "")
    check(rc == 0 and "multiple of 8 from 8 to 128" in line, "--help: --d states the supported head dims", out)
    tol = next((l for l in out.splitlines() if l.strip().startswith("--tolerance=")), "")
    check("[default: scaled]" in tol, "--help: --verify's rule defaults to the scale-aware one (scaled)", out)
    # Without --varlen the list is ignored, with a warning printed once before anything else, GPU or not.
    rc, out, err = run(tool, "--varlen-q=128", "--b=1,1", "--q=64", "--h=1", "--iterations=1")
    check(rc in (0, 77), f"--varlen-q without --varlen: expected exit 0 (GPU) or 77 (no GPU), got {rc}", err)
    warning = "Warning: --varlen-q is ignored without --varlen\n"
    check(err.startswith(warning), "the --varlen-q warning must come first, before the GPU check", err)
    check(err.count(warning) == 1, "the --varlen-q warning must print once for the two runs of --b=1,1", err)
    print("test_cli_edges: all checks passed")


if __name__ == "__main__":
    main()
