#!/usr/bin/env python3
"""Static schedule of SASS from its control bits (no GPU): the stall cycles ptxas encodes after each instruction,
its yield bit, the scoreboards it sets (write / read) and the ones it waits for, so that a code path's static length
in cycles can be read before spending device time (docs/perf-log.md, v14 items 1 and 3).

On sm_70 and later every instruction is 128 bits; cuobjdump prints them as two 64-bit words, and the control field
is the top 23 bits of the second word (bits 105–127 of the instruction): stall count (4 bits, 105–108), yield (109),
write scoreboard (110–112, 7 = none), read scoreboard (113–115, 7 = none), wait mask (116–121: one bit per
scoreboard), operand reuse (122–125). The stall count is the fixed number of cycles before the warp may issue its
next instruction; variable-latency results (MUFU, loads, shuffles) are waited for through the scoreboards instead.
Static cycles are the sum of the stall counts over the listed instructions in address order, so a span that holds
branches counts the paths not taken too; pick spans without them for a path's length. A fatbin with the same
function for several architectures keeps the last one listed.

Usage:
  sass_ctrl.py FILE                                   list the functions: instructions, static cycles, MUFU.EX2
  sass_ctrl.py FILE --function SUBSTR                 every instruction of the one function whose name contains
                                                      SUBSTR (or equals it), with its control fields and the
                                                      cycle it issues at
  sass_ctrl.py FILE --function SUBSTR --from RE --to RE [--nth N]
                                                      only the N-th (default 1) span from an instruction matching RE
                                                      to the next one matching the second RE (included), then a
                                                      summary: instructions, static cycles, MUFU.EX2 count and the
                                                      histogram of cycles between consecutive MUFU.EX2
FILE is a cuobjdump -sass listing (.txt) or an object, cubin or library (then cuobjdump runs; --cuobjdump PATH, or
the one scripts/setup.sh installs). Exit 0; 1 when the file cannot be read or cuobjdump fails; 2 on bad usage or
when no function / span matches (the message says which).
"""
import argparse
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DEFAULT_CUOBJDUMP = os.path.join(ROOT, ".deps", "pip-cudatools", "nvidia", "cu13", "bin", "cuobjdump")


def control(hi):
    """Control fields of an instruction from its second 64-bit word."""
    c = hi >> 41
    return {"stall": c & 0xF, "yield": (c >> 4) & 1, "wbar": (c >> 5) & 7, "rbar": (c >> 8) & 7,
            "wait": (c >> 11) & 0x3F, "reuse": (c >> 17) & 0xF}


def parse(text):
    """{function name: [(address, instruction text, control fields)]} of a cuobjdump -sass listing."""
    funcs, name = {}, None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.search(r"Function : (\S+)", lines[i])
        if m:
            name = m.group(1)
            funcs[name] = []
            i += 1
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s+/\* (0x[0-9a-f]+) \*/", lines[i])
        if m and name and i + 1 < len(lines):
            m2 = re.match(r"\s+/\* (0x[0-9a-f]+) \*/", lines[i + 1])
            if m2:
                funcs[name].append((m.group(1), m.group(2), control(int(m2.group(1), 16))))
                i += 2
                continue
        i += 1
    return funcs


def fmt(addr, text, c, cycle):
    bar = lambda b: "-" if b == 7 else str(b)
    return (f"{cycle:6d}  {addr:>6s}  stall {c['stall']:2d} y{c['yield']} wr {bar(c['wbar'])} rd {bar(c['rbar'])} "
            f"wait {c['wait']:06b}  {text}")


def summary(ins):
    """(instructions, static cycles, MUFU.EX2 count, Counter of cycles between consecutive MUFU.EX2)."""
    cycle, last, gaps, mufu = 0, None, collections.Counter(), 0
    for _, text, c in ins:
        if "MUFU.EX2" in text:
            mufu += 1
            if last is not None:
                gaps[cycle - last] += 1
            last = cycle
        cycle += c["stall"]
    return len(ins), cycle, mufu, gaps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--function")
    ap.add_argument("--from", dest="start")
    ap.add_argument("--to", dest="end")
    ap.add_argument("--nth", type=int, default=1)
    ap.add_argument("--cuobjdump", default=DEFAULT_CUOBJDUMP)
    a = ap.parse_args()
    if (a.start is None) != (a.end is None):
        ap.error("--from and --to go together")
    if a.start is not None and a.function is None:
        ap.error("--from/--to need --function")
    if a.nth < 1:
        ap.error(f"--nth: expected a positive number, got {a.nth}")
    if a.file.endswith(".txt"):
        try:
            text = open(a.file, errors="replace").read()
        except OSError as e:
            sys.exit(f"sass_ctrl: cannot read {a.file}: {e}")
    else:
        try:
            text = subprocess.run([a.cuobjdump, "-sass", a.file], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit(f"sass_ctrl: cuobjdump on {a.file} failed: {e}")
    funcs = parse(text)
    if not funcs:
        print(f"sass_ctrl: no SASS function in {a.file}", file=sys.stderr)
        return 2
    if a.function is None:
        print(f"{'instructions':>12s} {'static cycles':>13s} {'MUFU.EX2':>8s}  function")
        for name, ins in funcs.items():
            n, cyc, mufu, _ = summary(ins)
            print(f"{n:12d} {cyc:13d} {mufu:8d}  {name}")
        return 0
    match = [a.function] if a.function in funcs else [n for n in funcs if a.function in n]
    if len(match) != 1:
        print(f"sass_ctrl: --function '{a.function}': expected one matching function, got {len(match)}"
              + (": " + ", ".join(match) if match else ""), file=sys.stderr)
        return 2
    ins = funcs[match[0]]
    if a.start is not None:
        starts = [i for i, (_, t, _) in enumerate(ins) if re.search(a.start, t)]
        if len(starts) < a.nth:
            print(f"sass_ctrl: --from '{a.start}': {len(starts)} matches, --nth {a.nth} asked", file=sys.stderr)
            return 2
        s = starts[a.nth - 1]
        e = next((i for i in range(s + 1, len(ins)) if re.search(a.end, ins[i][1])), None)
        if e is None:
            print(f"sass_ctrl: --to '{a.end}': no match after instruction {ins[s][0]}", file=sys.stderr)
            return 2
        ins = ins[s:e + 1]
    cycle = 0
    for addr, text, c in ins:
        print(fmt(addr, text, c, cycle))
        cycle += c["stall"]
    n, cyc, mufu, gaps = summary(ins)
    print(f"\n{n} instructions, {cyc} static cycles, {mufu} MUFU.EX2; cycles between consecutive MUFU.EX2: "
          + (", ".join(f"{g}: {k}" for g, k in sorted(gaps.items())) if gaps else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
