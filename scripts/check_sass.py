#!/usr/bin/env python3
"""Checks the SASS of the forward kernel units (no GPU needed): properties that the source cannot guarantee
because ptxas decides them, and that a performance regression would silently break.

For every forward kernel function in the given object files (cuobjdump -sass):
  1. HGMMA (wgmma) instructions are present: the GEMMs run on the Hopper tensor-core path.
  2. The mainloop overlap (docs/perf-log.md, v3): after each `WARPGROUP.DEPBAR.LE gsb0, 0x1` (S = Q·Kᵀ done,
     P·V still in flight) at least MIN_EXP `MUFU.EX2` come before the next `WARPGROUP.DEPBAR.LE gsb0, 0x0` (wait
     for P·V). ptxas once hoisted that wait above the whole softmax, which serialised softmax and P·V.
  3. Head-dim tile 128 units use no local memory (STL/LDL): a spill there costs ~10 % (v3, 160-key blocks).

Usage: check_sass.py --cuobjdump PATH [--objdir DIR] [OBJ...]   (DIR: every fwd_*.cu.o in it; exit 0: all hold; 1: a check failed, each failure printed;
2: bad usage or a tool error)
"""
import argparse
import glob
import os
import re
import subprocess
import sys

MIN_EXP = 64  # exponentials of one key block per thread: 2 rows × 32 columns (128 keys over a quad)


def functions(sass):
    """(name, [instruction text]) for every function of a cuobjdump -sass listing."""
    out, name, body = [], None, []
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name:
                out.append((name, body))
            name, body = m.group(1), []
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m and name:
            body.append(m.group(1).strip())
    if name:
        out.append((name, body))
    return out


def check_function(name, body, head_dim_tile):
    errors = []
    if not any("HGMMA" in ins for ins in body):
        errors.append("no HGMMA instruction")
    overlap_ok, loops = True, 0
    exps = None
    for ins in body:
        if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in ins:
            exps = 0
        elif "MUFU.EX2" in ins and exps is not None:
            exps += 1
        elif "WARPGROUP.DEPBAR.LE gsb0, 0x0" in ins and exps is not None:
            loops += 1
            if exps < MIN_EXP:
                overlap_ok = False
                errors.append(f"wait for P·V after only {exps} MUFU.EX2 (want ≥ {MIN_EXP}): the softmax does not "
                              "overlap P·V")
            exps = None
    if loops == 0:
        errors.append("no mainloop wait pair (DEPBAR.LE gsb0 0x1 then 0x0) found")
    if head_dim_tile == 128:
        spills = sum(1 for ins in body if re.search(r"\b(STL|LDL)\b", ins))
        if spills:
            errors.append(f"{spills} local-memory instructions (STL/LDL): register spills at head-dim tile 128")
    return errors, loops


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuobjdump", required=True)
    ap.add_argument("--objdir", help="check every fwd_*.cu.o in this directory")
    ap.add_argument("objects", nargs="*")
    args = ap.parse_args()
    if args.objdir:
        args.objects += sorted(glob.glob(os.path.join(args.objdir, "fwd_*.cu.o")))
    if not args.objects:
        print("check_sass: no forward kernel objects given (build a kernel set first)", file=sys.stderr)
        return 2
    if not (os.path.isfile(args.cuobjdump) and os.access(args.cuobjdump, os.X_OK)):
        print(f"check_sass: cuobjdump not found at '{args.cuobjdump}': run scripts/setup.sh (it installs cuobjdump "
              "and nvdisasm from PyPI) or put the CUDA toolkit's cuobjdump on PATH", file=sys.stderr)
        return 2
    failed, checked = 0, 0
    for obj in args.objects:
        m = re.search(r"fwd_(fp16|bf16)_d(\d+)", obj)
        if not m:
            print(f"check_sass: {obj}: expected a forward unit named fwd_<dtype>_d<head dim>", file=sys.stderr)
            return 2
        try:
            sass = subprocess.run([args.cuobjdump, "-sass", obj], check=True, capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"check_sass: cuobjdump on {obj} failed: {e}", file=sys.stderr)
            return 2
        funcs = [(n, b) for n, b in functions(sass) if "fwd_kernel" in n]
        if not funcs:
            print(f"[FAIL] {obj}: no forward kernel function in the SASS")
            failed += 1
            continue
        for name, body in funcs:
            checked += 1
            errors, loops = check_function(name, body, int(m.group(2)))
            tag = "[FAIL]" if errors else "[OK]  "
            print(f"{tag} {obj.rsplit('/', 1)[-1]} {name[:90]}: {loops} mainloop wait pairs")
            for e in errors:
                print(f"       {e}")
            failed += bool(errors)
    print(f"check_sass: {checked} kernel functions, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
