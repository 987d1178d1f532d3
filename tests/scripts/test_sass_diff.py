#!/usr/bin/env python3
"""CPU test of scripts/sass_diff.py on hand-written cuobjdump -sass listings: kernels are paired by configuration
(the same kernel under another position in the file pairs); a moved parameter offset differs unless
--allow-param-moves is given, and then only as one consistent mapping in bank 0; a changed operand, opcode,
control field (stall count) or instruction count, or a kernel present in one build only, is reported and fails. Exits non-zero with a message on the first failure."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "sass_diff.py")
# fwd_kernel<FwdConfig<half_t, 32, 192>, false, false> and fwd_kernel<FwdConfig<bfloat16_t, 128, 128>, true, true>
K1 = "_ZN4fmha6kernel10fwd_kernelINS0_9FwdConfigIN7cutlass6half_tELi32ELi192EEELb0ELb0EEEvNS0_15FwdKernelParamsIT_EE"
K2 = ("_ZN4fmha6kernel10fwd_kernelINS0_9FwdConfigIN7cutlass10bfloat16_tELi128ELi128EEELb1ELb1EEEvNS0_15Fwd"
      "KernelParamsIT_EE")
# K1 under its name with the trailing FwdConfig arguments at the forward's values (128, 2, 1, true), and with others
# (64, 1, 2, false): the first pairs with K1, the second is another configuration.
K1_LONG = ("_ZN4fmha6kernel10fwd_kernelINS0_9FwdConfigIN7cutlass6half_tELi32ELi192ELi128ELi2ELi1ELb1EEELb0ELb0EEEvNS0_"
           "15FwdKernelParamsIT_EE")
K1_OTHER = ("_ZN4fmha6kernel10fwd_kernelINS0_9FwdConfigIN7cutlass6half_tELi32ELi192ELi64ELi1ELi2ELb0EEELb0ELb0EEEvNS0_"
            "15FwdKernelParamsIT_EE")


def func(name, insns):
    out = [f"\t\tFunction : {name}", '\t.headerflags\t@"EF_CUDA_SM90"']
    for i, (text, w2) in enumerate(insns):
        out.append(f"        /*{i * 16:04x}*/                   {text} ;   /* 0x00000a00ff017b82 */")
        out.append(f"                                                      /* 0x{w2:016x} */")
    return "\n".join(out)


BASE = [("LDC R1, c[0x0][0x28]", 0x000fe20000000800), ("S2R R5, SR_TID.X", 0x000e620000002100),
        ("ISETP.NE.AND P0, PT, R5, RZ, PT", 0x002fe40003f05270), ("EXIT", 0x000fea0003800000)]


def run(old, new, tmp, *flags):
    paths = []
    for n, text in (("old", old), ("new", new)):
        p = os.path.join(tmp, n + ".sass")
        with open(p, "w") as f:
            f.write("\nFatbin elf code:\n" + text + "\n")
        paths.append(p)
    r = subprocess.run([sys.executable, SCRIPT, *paths, *flags], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def check(cond, what, out):
    if not cond:
        sys.exit(f"test_sass_diff: FAILED: {what}\n{out}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        old = func(K1, BASE) + "\n" + func(K2, BASE)
        rc, out = run(old, func(K2, BASE) + "\n" + func(K1, BASE), tmp)  # the same kernels in another order
        check(rc == 0 and "fp16 32 192 none no-pingpong" in out and "bf16 128 128 causal pingpong" in out
              and out.count("identical") == 2, "the same code in another order must pair and be identical", out)
        moved = list(BASE)
        moved[0] = ("LDC R1, c[0x0][0x388]", BASE[0][1])  # a parameter at another offset
        rc, out = run(old, func(K2, BASE) + "\n" + func(K1, moved), tmp)
        check(rc == 1, "a moved parameter offset must differ by default", out)
        rc, out = run(old, func(K2, BASE) + "\n" + func(K1, moved), tmp, "--allow-param-moves")
        check(rc == 0 and "0x28->0x388" in out, "--allow-param-moves accepts one consistent move and prints it", out)
        # Two reads that swap their offsets are another program, not a move: refused even with the allowance.
        two = [("LDC R1, c[0x0][0x28]", BASE[0][1]), ("LDC R2, c[0x0][0x2c]", BASE[1][1])] + BASE[2:]
        swapped = [("LDC R1, c[0x0][0x2c]", BASE[0][1]), ("LDC R2, c[0x0][0x2c]", BASE[1][1])] + BASE[2:]
        rc, out = run(func(K1, two), func(K1, swapped), tmp, "--allow-param-moves")
        check(rc == 1, "two parameters read from one offset must differ even with --allow-param-moves", out)
        other_bank = list(BASE)
        other_bank[0] = ("LDC R1, c[0x3][0x28]", BASE[0][1])
        rc, out = run(func(K1, BASE), func(K1, other_bank), tmp, "--allow-param-moves")
        check(rc == 1, "another constant bank must differ", out)
        for what, change in (("an operand", (1, ("S2R R6, SR_TID.X", BASE[1][1]))),
                             ("an opcode", (3, ("BRA 0x30", BASE[3][1]))),
                             ("a stall count", (2, (BASE[2][0], BASE[2][1] ^ (1 << 41))))):
            changed = list(BASE)
            changed[change[0]] = change[1]
            rc, out = run(old, func(K1, changed) + "\n" + func(K2, BASE), tmp)
            check(rc == 1 and "1 of 4 instructions differ" in out, f"{what} changed: expected one difference", out)
        rc, out = run(old, func(K1, BASE + [("NOP", 0x000fc00000000000)]) + "\n" + func(K2, BASE), tmp)
        check(rc == 1 and "OLD 4, NEW 5" in out, "an extra instruction", out)
        rc, out = run(old, func(K1, BASE), tmp)
        check(rc == 1 and "only in OLD" in out, "a kernel missing from NEW", out)
        rc, out = run(old, func(K1_LONG, BASE) + "\n" + func(K2, BASE), tmp)
        check(rc == 0 and out.count("identical") == 2, "the forward's default trailing arguments pair with the "
              "three-argument name", out)
        rc, out = run(old, func(K1_OTHER, BASE) + "\n" + func(K2, BASE), tmp)
        check(rc == 1 and "only in OLD" in out and "only in NEW" in out and "64, 1, 2, false" in out,
              "other trailing arguments are another configuration", out)
        rc, out = run("no functions here", "nor here", tmp)
        check(rc == 2, "no kernels at all: expected exit 2", out)
    print("test_sass_diff: all checks passed")


if __name__ == "__main__":
    main()
