#!/usr/bin/env python3
"""CPU test of bench/bwd_ab.py against fake fmha_bwd executables (shell scripts that write the JSON fmha_bwd --json
writes, with a fixed median time): the ABBA order of the calls (logged by the fakes), the options passed, the
ratios printed and written (a build half as slow reads 0.500, its copy 1.000), and exit status with a message for a
missing executable, a bad row and a failing fmha_bwd. Exits non-zero with a message on the first failure."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ab_fakes  # noqa: E402
AB = os.path.join(HERE, "..", "..", "bench", "bwd_ab.py")


check = ab_fakes.checker("test_bwd_ab")


with tempfile.TemporaryDirectory() as tmp:
    log, a, b, bad = ab_fakes.builds(tmp, '{"time_ms_median": %s}')
    out_json = os.path.join(tmp, "ab.json")
    p = subprocess.run([sys.executable, AB, f"old={a}", f"new={b}", f"old2={a}", "--rows", "d128c,d64",
                        "--algos", "2p", "--seqlen", "4096", "--iterations", "7", "--json", out_json],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"exit 0, got {p.returncode}: {p.stderr}")
    calls = [l.split()[0] for l in open(log)]
    check(calls == ["A", "B", "A", "A", "B", "A"] * 2, f"ABBA order per row, got {calls}")
    first = open(log).readline().split()
    for opt in ("--d=128", "--h=16", "--b=4", "--q=4096", "--k=4096", "--mask=causal", "--iterations=7",
                "--two-pass", "--dtype=bf16"):
        check(opt in first, f"option {opt} passed to fmha_bwd: {first}")
    check("--mask=none" in open(log).readlines()[-1].split(), "the second row is non-causal")
    rows = json.load(open(out_json))["rows"]
    check(len(rows) == 2 and rows[0]["head_dim"] == 128 and rows[0]["causal"] and rows[1]["head_dim"] == 64,
          f"two rows: {rows}")
    check(abs(rows[0]["ratio"]["new"] - 0.5) < 1e-9 and abs(rows[0]["ratio"]["old2"] - 1.0) < 1e-9,
          f"ratios new 0.5, old2 1: {rows[0]}")
    check("(0.500)" in p.stdout and "(1.000)" in p.stdout, f"ratios printed: {p.stdout}")
    p = subprocess.run([sys.executable, AB, f"old={a}", f"new={os.path.join(tmp, 'missing')}"], capture_output=True,
                       text=True)
    check(p.returncode != 0 and "expected NAME=executable fmha_bwd" in p.stderr, f"missing executable: {p.stderr}")
    p = subprocess.run([sys.executable, AB, f"old={a}", "--rows", "e128"], capture_output=True, text=True)
    check(p.returncode != 0 and "--rows: expected dD or dDc" in p.stderr, f"a bad row: {p.stderr}")
    p = subprocess.run([sys.executable, AB, f"old={a}", f"new={bad}", "--rows", "d64", "--algos", "1p"],
                       capture_output=True, text=True)
    check(p.returncode != 0 and "failed (3)" in p.stderr, f"a failing fmha_bwd: {p.stderr}")
print("test_bwd_ab: all checks passed")
