#!/usr/bin/env python3
"""CPU test of scripts/ncu_compare.py on small hand-written Nsight Compute CSVs (raw page and SASS source page, in
the layout `ncu --import … --csv` writes): the metric values, units and per-opcode counts reach the table, units
that differ between the reports stay with their values, a missing file gives '-', and a wrong argument count exits
2. Exits non-zero with a message on the first failure."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "ncu_compare.py")

RAW = '''"Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","launch__block_size",\
"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
"","us","Mbyte","",""
"{name}","{time}","{dram}","{block}","{wait}"
'''
SASS = '''"Kernel Name","{name}",
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed"
"0x10","      MUFU.EX2 R1, R2","30","20","30","{mufu}"
"0x20","@P0   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], RZ, !UPT","10","5","10","{hgmma}"
"0x30","      MUFU.EX2 R3, R4","10","5","10","{mufu}"
'''


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def check(cond, what):
    if not cond:
        print(f"test_ncu_compare: FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as d:
        files = {}
        for who, (time, dram, block, mufu, hgmma) in {"a": ("407.7", "855.8", "512", "1000000", "300000"),
                                                      "b": ("349.6", "201.4", "384", "2000000", "100000")}.items():
            files[who + "_raw"] = os.path.join(d, who + "_raw.csv")
            files[who + "_sass"] = os.path.join(d, who + "_sass.csv")
            with open(files[who + "_raw"], "w") as f:
                f.write(RAW.format(name="kern_" + who + "_a_name_longer_than_the_columns", time=time, dram=dram, block=block,
                                   wait="1.9" if who == "a" else "0.8"))
            with open(files[who + "_sass"], "w") as f:
                f.write(SASS.format(name="kern_" + who, mufu=mufu, hgmma=hgmma))
        r = run("fmha", files["a_raw"], files["a_sass"], "cudnn", files["b_raw"], files["b_sass"])
        check(r.returncode == 0, f"exit code {r.returncode}, stderr {r.stderr!r}")
        lines = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines() if ln.strip()}
        check(lines["gpu__time_duration.sum"][1:] == ["[us]", "407.7", "349.6"], f"time row {lines.get('gpu__time_duration.sum')}")
        check(lines["dram__bytes_read.sum"][1:] == ["[Mbyte]", "855.8", "201.4"], f"DRAM row {lines.get('dram__bytes_read.sum')}")
        check(lines["launch__block_size"][1:] == ["512", "384"], f"block row {lines.get('launch__block_size')}")
        # Two MUFU lines of 1e6 / 2e6 each; the predicated HGMMA is counted under its opcode.
        check(lines["MUFU"][1:3] == ["2.00", "4.00"], f"MUFU row {lines.get('MUFU')}")
        check(lines["HGMMA"][1:3] == ["0.30", "0.10"], f"HGMMA row {lines.get('HGMMA')}")
        # Samples: MUFU 40 of 50 samples in both.
        check(lines["MUFU"][3:5] == ["80.0", "80.0"], f"MUFU samples {lines.get('MUFU')}")
        check(lines["wait"][1:] == ["(stall", "per", "issue)", "1.9", "0.8"], f"stall row {lines.get('wait')}")
        check("fmha: kern_a_a_name_longer_than_the_columns" in r.stdout, "the full kernel name is printed")
        r = run("fmha", files["a_raw"], files["a_sass"], "cudnn", os.path.join(d, "missing.csv"), os.path.join(d, "x"))
        check(r.returncode == 0, "a missing file is not an error")
        row = next((ln.split() for ln in r.stdout.splitlines() if ln.startswith("gpu__time")), [])
        check(row[-2:] == ["407.7", "-"], f"a missing file shows '-': {row}")
        # A SASS table without the warp-sampling column (a profile without samples) still counts instructions.
        nosamples = os.path.join(d, "nosamples.csv")
        with open(files["a_sass"]) as f, open(nosamples, "w") as g:
            for line in f:
                cells = line.rstrip("\n").split('","')
                g.write('","'.join(cells[:2] + cells[5:]) + "\n" if len(cells) > 5 else line)
        r = run("fmha", files["a_raw"], nosamples, "cudnn", files["b_raw"], files["b_sass"])
        check(r.returncode == 0, f"no sampling column: exit {r.returncode}, {r.stderr!r}")
        mufu = next((ln.split() for ln in r.stdout.splitlines() if ln.startswith("MUFU")), [])
        check(mufu[1:4] == ["2.00", "4.00", "0.0"], f"no sampling column: MUFU row {mufu}")
        # Units that differ between the two reports (ncu scales each to its magnitude) stay with their values.
        giga = os.path.join(d, "giga_raw.csv")
        with open(giga, "w") as f:
            f.write(RAW.replace('"","us","Mbyte"', '"","ms","Gbyte"').format(
                name="kern_g", time="1.6", dram="1.134682", block="384", wait="0.5"))
        r = run("fmha", giga, files["a_sass"], "cudnn", files["b_raw"], files["b_sass"])
        check(r.returncode == 0, f"units that differ: exit {r.returncode}, {r.stderr!r}")
        lines = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines() if ln.strip()}
        check(lines["dram__bytes_read.sum"][1:] == ["1.134682", "Gbyte", "201.4", "Mbyte"],
              f"units that differ: DRAM row {lines.get('dram__bytes_read.sum')}")
        check(lines["gpu__time_duration.sum"][1:] == ["1.6", "ms", "349.6", "us"],
              f"units that differ: time row {lines.get('gpu__time_duration.sum')}")
        r = run("only-one")
        check(r.returncode == 2 and "expected 6 arguments, got 1" in r.stderr, f"bad usage: {r.returncode} {r.stderr!r}")
    print("test_ncu_compare: ok")


if __name__ == "__main__":
    main()
