#!/usr/bin/env python3
"""CPU test of scripts/sass_ctrl.py on a hand-written cuobjdump -sass listing whose control words encode known
fields: the decoded stall counts, scoreboards and wait masks, the static cycle total, the MUFU.EX2 spacing, span
selection with --from / --to / --nth, and exit code 2 for an unknown function or span. Exits non-zero with a message
on the first failure."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "sass_ctrl.py")


def hi_word(stall, yld=1, wbar=7, rbar=7, wait=0, reuse=0):
    """Second 64-bit word of an instruction with these control fields (the opcode bits below are left 0)."""
    ctrl = stall | yld << 4 | wbar << 5 | rbar << 8 | wait << 11 | reuse << 17
    return ctrl << 41


INS = [  # (text, stall, write scoreboard, wait mask)
    ("FFMA.FTZ R1, R2, UR4, R3", 1, 7, 0),
    ("MUFU.EX2 R1, R1", 1, 2, 0),
    ("FADD.FTZ R5, R5, R6", 7, 7, 0),
    ("MUFU.EX2 R7, R7", 8, 3, 0),
    ("FADD.FTZ R5, R5, R1", 2, 7, 0b000100),
    ("WARPGROUP.DEPBAR.LE gsb0, 0x0", 2, 7, 0),
]


def listing():
    out = ["\tcode for sm_90a", "\t\tFunction : _Z6kernelv", "\t.headerflags\t@\"EF_CUDA_SM90\""]
    for i, (text, stall, wbar, wait) in enumerate(INS):
        out.append(f"        /*{i * 16:04x}*/                   {text} ;                /* 0x0000000000000000 */")
        out.append(f"                                                                 /* 0x{hi_word(stall, wbar=wbar, wait=wait):016x} */")
    return "\n".join(out) + "\n"


def run(path, *args):
    return subprocess.run([sys.executable, SCRIPT, path, *args], capture_output=True, text=True)


def check(cond, what):
    if not cond:
        sys.exit(f"test_sass_ctrl: FAILED: {what}")


def main():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.txt")
        with open(path, "w") as f:
            f.write(listing())
        r = run(path)
        check(r.returncode == 0, f"listing exit 0 (got {r.returncode}: {r.stderr})")
        check(r.stdout.splitlines()[1].split() == ["6", "21", "2", "_Z6kernelv"],
              f"function summary: 6 instructions, 21 static cycles, 2 MUFU.EX2: {r.stdout}")
        r = run(path, "--function", "kernel")
        check(r.returncode == 0, "--function exit 0")
        rows = [l for l in r.stdout.splitlines() if "stall" in l]
        check(len(rows) == 6, f"six instruction rows, got {len(rows)}")
        check(rows[1].split()[0] == "1" and "wr 2" in rows[1], f"MUFU issues at cycle 1 and sets scoreboard 2: {rows[1]}")
        check(rows[3].split()[0] == "9", f"second MUFU issues at cycle 9: {rows[3]}")
        check("wait 000100" in rows[4], f"FADD waits for scoreboard 2: {rows[4]}")
        check("21 static cycles, 2 MUFU.EX2" in r.stdout and "8: 1" in r.stdout, f"summary line: {r.stdout}")
        r = run(path, "--function", "kernel", "--from", "MUFU", "--to", "MUFU", "--nth", "1")
        check(r.returncode == 0 and "3 instructions, 16 static cycles, 2 MUFU.EX2" in r.stdout, f"span: {r.stdout}")
        r = run(path, "--function", "nothing")
        check(r.returncode == 2 and "expected one matching function" in r.stderr, f"unknown function: {r.stderr}")
        r = run(path, "--function", "kernel", "--from", "MUFU", "--to", "MUFU", "--nth", "3")
        check(r.returncode == 2 and "--nth 3" in r.stderr, f"missing span: {r.stderr}")
    print("test_sass_ctrl: all checks passed")


if __name__ == "__main__":
    main()
