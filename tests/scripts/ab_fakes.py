"""Helpers of the CPU tests of the A/B drivers (test_decode_ab.py, test_bwd_ab.py): a check that exits with the
test's name and what failed, and fake tool executables (shell scripts) that log their name and arguments and write
the JSON a tool's --json writes."""
import os
import stat
import sys


def checker(test):
    """check(cond, what): exits non-zero with "<test>: FAILED: <what>" when cond is false."""
    def check(cond, what):
        if not cond:
            sys.exit(f"{test}: FAILED: {what}")
    return check


def fake(path, name, log, run_json, rc=0):
    """An executable at `path` that appends "<name> <args>" to `log`, then exits `rc` (printing "boom") if rc is
    non-zero, else writes {"runs": [run_json]} (run_json: the JSON text of one run) to its --json=FILE."""
    with open(path, "w") as f:
        f.write(f"""#!/bin/sh
echo "{name} $*" >> {log}
for a in "$@"; do case $a in --json=*) out=${{a#--json=}};; esac; done
[ {rc} -eq 0 ] || {{ echo boom; exit {rc}; }}
printf '{{"runs": [{run_json}]}}' > "$out"
""")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


def builds(tmp, run_json_format):
    """The three fakes both A/B tests use, in folder `tmp`: "a" (logs A, 2 ms), "b" (logs B, 1 ms) and "bad" (logs X,
    exits 3). run_json_format: one run's JSON with %s for the median time. Returns (log, a, b, bad) paths."""
    log = os.path.join(tmp, "calls.log")
    a, b, bad = (os.path.join(tmp, n) for n in ("a", "b", "bad"))
    for path, name, ms, rc in ((a, "A", 2.0, 0), (b, "B", 1.0, 0), (bad, "X", 1.0, 3)):
        fake(path, name, log, run_json_format % ms, rc)
    return log, a, b, bad
