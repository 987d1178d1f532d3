#!/usr/bin/env python3
"""CPU test of bench/decode_ab.py against fake fmha_gen executables (shell scripts that write the JSON fmha_gen
--json writes, with a fixed median time): the ABBA order of the calls (logged by the fakes), the options passed,
the ratios printed and written (a build twice as fast reads 2.000, its copy 1.000), and exit status with a message
for a missing executable and for a failing fmha_gen. Exits non-zero with a message on the first failure."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ab_fakes  # noqa: E402
AB = os.path.join(HERE, "..", "..", "bench", "decode_ab.py")


check = ab_fakes.checker("test_decode_ab")


with tempfile.TemporaryDirectory() as tmp:
    log, a, b, bad = ab_fakes.builds(tmp, '{"time_ms_median": %s, "extra": {"bytes": 4e9}}')
    out_json = os.path.join(tmp, "ab.json")
    p = subprocess.run([sys.executable, AB, f"old={a}", f"new={b}", f"old2={a}", "--rows", "4x512", "--pages", "0,16",
                        "--rounds", "1", "--iterations", "7", "--json", out_json], capture_output=True, text=True)
    check(p.returncode == 0, f"exit 0, got {p.returncode}: {p.stderr}")
    calls = [l.split()[0] for l in open(log)]
    check(calls == ["A", "B", "A", "A", "B", "A"] * 2, f"ABBA order per row, got {calls}")
    first = open(log).readline()
    for opt in ("--b=4", "--k=512", "--page=0", "--cache-only", "--init-style=1", "--iterations=7", "--h=32",
                "--h_k=8", "--d=128", "--q=1"):
        check(opt in first.split(), f"option {opt} passed to fmha_gen: {first}")
    rows = json.load(open(out_json))["rows"]
    check(len(rows) == 2 and rows[0]["page"] == 0 and rows[1]["page"] == 16, f"two rows: {rows}")
    check(abs(rows[0]["tbps"]["old"] - 2.0) < 1e-9, f"4e9 bytes in 2 ms = 2 TB/s: {rows[0]}")
    check(abs(rows[0]["ratio"]["new"] - 2.0) < 1e-9 and abs(rows[0]["ratio"]["old2"] - 1.0) < 1e-9,
          f"ratios new 2, old2 1: {rows[0]}")
    check("2.000" in p.stdout and "1.000" in p.stdout, f"ratios printed: {p.stdout}")
    p = subprocess.run([sys.executable, AB, f"old={a}", f"new={os.path.join(tmp, 'missing')}"], capture_output=True,
                       text=True)
    check(p.returncode != 0 and "expected NAME=executable fmha_gen" in p.stderr, f"missing executable: {p.stderr}")
    p = subprocess.run([sys.executable, AB, f"old={a}", f"new={bad}", "--rows", "1x16", "--pages", "0"],
                       capture_output=True, text=True)
    check(p.returncode != 0 and "failed (3)" in p.stderr, f"a failing fmha_gen: {p.stderr}")
print("test_decode_ab: OK")
