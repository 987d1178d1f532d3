#!/usr/bin/env python3
"""Side-by-side table of two Nsight Compute profiles of one kernel launch each (scripts/profile_pair.sh): the
launch configuration, pipe utilisation, instruction counts and warp-stall ratios from the raw-metric CSVs
(`ncu --import R --page raw --csv`), then executed instructions and stall samples per SASS opcode from the source
CSVs (`ncu --import R --page source --print-source sass --csv`).

Usage: ncu_compare.py NAME_A RAW_A SASS_A NAME_B RAW_B SASS_B
A file that is missing or empty gives '-' in its column. Runs anywhere (no GPU needed).
"""
import collections
import csv
import sys

METRICS = [
    "Kernel Name", "gpu__time_duration.sum", "sm__cycles_elapsed.avg", "launch__grid_size", "launch__block_size",
    "launch__registers_per_thread", "launch__shared_mem_per_block_dynamic",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active", "smsp__inst_executed.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active", "lts__t_sector_hit_rate.pct", "dram__bytes_read.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
]
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"


def load_raw(path):
    """First kernel row of a raw-page CSV as ({metric: value}, {metric: unit}); empty dicts when unreadable."""
    try:
        with open(path, newline="", errors="replace") as f:
            rows = list(csv.reader(f))
    except OSError:
        return {}, {}
    if len(rows) < 3:
        return {}, {}
    return dict(zip(rows[0], rows[2])), dict(zip(rows[0], rows[1]))


def load_opcodes(path):
    """(executed warp instructions, stall samples) per opcode of a source-page CSV; empty counters when unreadable."""
    executed, samples = collections.Counter(), collections.Counter()
    try:
        with open(path, newline="", errors="replace") as f:
            rows = list(csv.reader(f))
    except OSError:
        return executed, samples
    header = next((r for r in rows if "Source" in r and "Instructions Executed" in r), None)
    if header is None:
        return executed, samples
    i_src, i_exe = header.index("Source"), header.index("Instructions Executed")
    sampled = "Warp Stall Sampling (All Samples)" in header  # absent when the profile took no warp samples
    i_smp = header.index("Warp Stall Sampling (All Samples)") if sampled else i_exe
    for r in rows[rows.index(header) + 1:]:
        if len(r) <= max(i_src, i_exe, i_smp) or not r[i_src].strip():
            continue
        words = r[i_src].split()
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        op = op.split(".")[0]
        try:
            executed[op] += int(r[i_exe].replace(",", "") or 0)
            samples[op] += int(r[i_smp].replace(",", "") or 0) if sampled else 0
        except ValueError:
            continue
    return executed, samples


def main(argv):
    if len(argv) != 7:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        print(f"ncu_compare.py: expected 6 arguments, got {len(argv) - 1}", file=sys.stderr)
        return 2
    name_a, raw_a, sass_a, name_b, raw_b, sass_b = argv[1:]
    (a, units_a), (b, units_b) = load_raw(raw_a), load_raw(raw_b)
    stalls = sorted(k for k in set(a) | set(b) if k.startswith(STALL_PREFIX) and k.endswith(STALL_SUFFIX))
    print(f"{name_a}: {a.get('Kernel Name', '-')}\n{name_b}: {b.get('Kernel Name', '-')}\n")
    print(f"{'metric':<72} {name_a:>24} {name_b:>24}")
    for k in METRICS + stalls:
        label = k[len(STALL_PREFIX):-len(STALL_SUFFIX)] + " (stall per issue)" if k in stalls else k
        ua, ub = units_a.get(k, ""), units_b.get(k, "")
        va, vb = a.get(k, "-")[:24], b.get(k, "-")[:24]
        if ua and ub and ua != ub and k in a and k in b:
            # Nsight Compute scales each report's unit by its own magnitude (Mbyte in one, Gbyte in the other): keep
            # each value with its unit rather than one label for both columns.
            va, vb = f"{a[k][:23 - len(ua)]} {ua}", f"{b[k][:23 - len(ub)]} {ub}"
        elif ua or ub:
            label += f" [{ua or ub}]"
        print(f"{label:<72} {va:>24} {vb:>24}")
    ea, sa = load_opcodes(sass_a)
    eb, sb = load_opcodes(sass_b)
    if ea or eb:
        ta, tb = max(sum(sa.values()), 1), max(sum(sb.values()), 1)
        print(f"\n{'opcode':<12} {name_a + ' M inst':>16} {name_b + ' M inst':>16} {name_a + ' samples %':>18} "
              f"{name_b + ' samples %':>18}")
        for op in sorted(set(ea) | set(eb), key=lambda o: -(ea[o] + eb[o]))[:30]:
            print(f"{op:<12} {ea[op] / 1e6:16.2f} {eb[op] / 1e6:16.2f} {100 * sa[op] / ta:18.1f} {100 * sb[op] / tb:18.1f}")
        print(f"{'total':<12} {sum(ea.values()) / 1e6:16.2f} {sum(eb.values()) / 1e6:16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
