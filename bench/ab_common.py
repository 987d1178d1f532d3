"""Shared parts of the A/B drivers of tool builds (bench/decode_ab.py through fmha_gen, bench/bwd_ab.py through
fmha_bwd): the NAME=EXECUTABLE build list, one tool run read back from its --json file, and the ABBA order of the
builds (forward, then backward, `rounds` times)."""
import json
import os
import subprocess
import sys
import tempfile


def parse_builds(ap, specs, tool):
    """[(name, path)] from NAME=PATH specs; an argparse error naming `builds` for a spec without a name or an
    executable."""
    builds = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not os.access(path, os.X_OK):
            ap.error(f"builds: expected NAME=executable {tool}, got {spec!r}")
        builds.append((name, path))
    return builds


def run_json(binary, args, prog):
    """Runs `binary args --json=FILE` and returns the first entry of the file's `runs`; exits with a message naming
    the command and its output (prog: the driver's name) when the tool fails."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [binary] + list(args) + [f"--json={out}"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"{prog}: {' '.join(cmd)} failed ({p.returncode}): {p.stdout[-500:]} {p.stderr[-500:]}")
        with open(out) as f:
            return json.load(f)["runs"][0]


def abba(builds, rounds, measure):
    """{name: [measure(path), …]}: every build measured in the order builds + reversed(builds), `rounds` times."""
    values = {name: [] for name, _ in builds}
    for _ in range(rounds):
        for name, path in builds + builds[::-1]:
            values[name].append(measure(path))
    return values
