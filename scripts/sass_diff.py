#!/usr/bin/env python3
"""Compares the SASS of the forward kernels of two builds, kernel by kernel, with the kernels paired by their
configuration (dtype, head-dim tile, query rows per tile, mask, ping-pong), not by mangled name, so that a refactor
that renames or re-templates the kernels can show that the machine code stayed the same.

Usage: sass_diff.py [--cuobjdump PATH] OLD NEW [--show N]
OLD, NEW: object files, libraries or executables (read with `cuobjdump -sass`), or text files that already hold a
cuobjdump -sass listing (recognised by their "Function :" lines).

For every configuration present in either build it prints one line: "identical", the number of instructions that
differ (with the first --show N differences, default 3), or "only in OLD/NEW". Two kernels are identical when their
instructions agree one by one in opcode, operands (constant-bank operands included) and control bits (stall count,
yield, scoreboards, wait mask, operand reuse: the top 23 bits of each instruction's second word). With
--allow-param-moves, kernel-parameter offsets (c[0x0][0x…]) may differ, as after a reordered parameter struct, but
only through one consistent one-to-one old → new mapping per kernel (printed), so that reading another field still
shows;
other banks stay exact. Nothing else is ignored. Exit 0 when every configuration is in both builds and identical, 1 otherwise, 2 on bad usage or a
tool error. Needs no GPU. c++filt (binutils) demangles the names.
"""
import argparse
import os
import re
import subprocess
import sys

FUNC = re.compile(r"^\s*Function : (\S+)")
# "/*0040*/   ISETP.NE.AND P0, PT, R5, RZ, PT ;   /* 0x000000ff0500720c */" then "/* 0x002fe40003f05270 */"
INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\*\s*0x([0-9a-f]{16})\s*\*/")
WORD2 = re.compile(r"^\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")
CBANK0 = re.compile(r"c\[0x0\]\[(0x[0-9a-f]+)\]")
DTYPES = {"cutlass::half_t": "fp16", "cutlass::bfloat16_t": "bf16", "cutlass::float_e4m3_t": "e4m3",
          "cutlass::float_e5m2_t": "e5m2"}


def fail(msg):
    print(f"sass_diff: {msg}", file=sys.stderr)
    sys.exit(2)


def listing(path, cuobjdump):
    """The cuobjdump -sass text of `path` (or its own text when it already is a listing)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError as e:
        fail(f"cannot read {path}: {e}")
    if b"Function :" in head and b"\0" not in head:
        with open(path, errors="replace") as f:
            return f.read()
    try:
        out = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"{cuobjdump} -sass {path} failed: {e}")
    return out.stdout


def functions(text):
    """{mangled name: [(instruction text, control bits)]} of every function in a listing (white space folded)."""
    funcs, cur, pending = {}, None, None
    for line in text.splitlines():
        m = FUNC.match(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            pending = None
            continue
        if cur is None:
            continue
        m = INSN.match(line)
        if m:
            pending = " ".join(m.group(2).split())
            continue
        m = WORD2.match(line)
        if m and pending is not None:
            control = int(m.group(1), 16) >> 41  # bits 105..127 of the instruction: the top 23 of word 2
            cur.append((pending, control))
            pending = None
    return funcs


def demangle(names):
    if not names:
        return {}
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"c++filt failed: {e}")
    return dict(zip(names, out.splitlines()))


# The trailing FwdConfig arguments of the forward's own kernels (src/kernels/kernel/fwd_kernel.cuh: 128-key blocks,
# two Q buffers, one CTA per SM, O staging), as the demangler writes them.
FWD_DEFAULTS = ", 128, 2, 1, true"


def config_of(demangled):
    """(dtype, head-dim tile, rows, mask, ping-pong) of a forward kernel's demangled name, or None for other
    functions. Knows the names `fmha::kernel::fwd_kernel<fmha::kernel::FwdConfig<T, HD, BM[, BN, SQ, CTAS, STAGE_O]>,
    Causal, PingPong>`; the trailing configuration arguments (keys per block, Q buffers, CTAs per SM, O staging, added
    for the decode family) pair with the three-argument names when they hold the forward's values (FWD_DEFAULTS), and
    are appended to the configuration otherwise. A refactor that renames the kernels extends this function."""
    m = re.match(r"void fmha::kernel::fwd_kernel<fmha::kernel::FwdConfig<([\w:]+), (\d+), (\d+)((?:, \w+)*)>, "
                 r"(true|false), (true|false)>", demangled)
    if not m:
        return None
    dtype = DTYPES.get(m.group(1), m.group(1))
    extra = m.group(4)
    key = (dtype, int(m.group(2)), int(m.group(3)), "causal" if m.group(5) == "true" else "none",
           "pingpong" if m.group(6) == "true" else "no-pingpong")
    return key if extra in ("", FWD_DEFAULTS) else key + (extra.lstrip(", "),)


def kernels(path, cuobjdump):
    funcs = functions(listing(path, cuobjdump))
    names = demangle(list(funcs))
    out = {}
    for mangled, insns in funcs.items():
        key = config_of(names.get(mangled, mangled))
        if key is None:
            continue
        if key in out:
            fail(f"{path}: two kernels with the configuration {key}")
        out[key] = insns
    return out


def param_offsets(text):
    return CBANK0.findall(text)


def compare(x, y, allow_moves):
    """Indices of the instructions that differ, and (allow_moves) the old → new parameter-offset mapping used."""
    mapping, reverse, diffs = {}, {}, []
    for i in range(max(len(x), len(y))):
        if i >= len(x) or i >= len(y):
            diffs.append(i)
            continue
        (tx, cx), (ty, cy) = x[i], y[i]
        if allow_moves and cx == cy and CBANK0.sub("c[0x0][P]", tx) == CBANK0.sub("c[0x0][P]", ty):
            # (identical instructions count too: an offset read unchanged maps to itself)
            ok = True
            for a, b in zip(param_offsets(tx), param_offsets(ty)):  # one to one: a move, not another read
                if mapping.setdefault(a, b) != b or reverse.setdefault(b, a) != a:
                    ok = False
            if ok:
                continue
        elif (tx, cx) == (ty, cy):
            continue
        diffs.append(i)
    return diffs, {a: b for a, b in mapping.items() if a != b}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--cuobjdump", default=os.environ.get("CUOBJDUMP", "cuobjdump"))
    ap.add_argument("--show", type=int, default=3, help="differences printed per kernel")
    ap.add_argument("--allow-param-moves", action="store_true",
                    help="accept kernel-parameter offsets that moved through one consistent mapping per kernel")
    a = ap.parse_args()
    old, new = kernels(a.old, a.cuobjdump), kernels(a.new, a.cuobjdump)
    if not old and not new:
        fail("no forward kernels in either build")
    bad = 0
    for key in sorted(set(old) | set(new)):
        label = " ".join(str(k) for k in key)
        if key not in new or key not in old:
            print(f"{label:40} only in {'OLD' if key in old else 'NEW'}")
            bad += 1
            continue
        x, y = old[key], new[key]
        diffs, moved = compare(x, y, a.allow_param_moves)
        if not diffs:
            note = f", parameters moved: {', '.join(f'{k}->{v}' for k, v in sorted(moved.items()))}" if moved else ""
            print(f"{label:40} identical ({len(x)} instructions{note})")
            continue
        bad += 1
        print(f"{label:40} {len(diffs)} of {max(len(x), len(y))} instructions differ "
              f"(OLD {len(x)}, NEW {len(y)} instructions)")
        for i in diffs[: a.show]:
            ox = f"{x[i][0]}  [ctrl {x[i][1]:06x}]" if i < len(x) else "-"
            ny = f"{y[i][0]}  [ctrl {y[i][1]:06x}]" if i < len(y) else "-"
            print(f"    #{i}: OLD {ox}\n    #{i}: NEW {ny}")
    print(f"sass_diff: {len(set(old) | set(new))} configurations, {bad} differ or are unpaired")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
