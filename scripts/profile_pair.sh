#!/usr/bin/env bash
# Profiles fmha's forward kernel and cuDNN's (PyTorch SDPA) on the same problem with Nsight Compute (--set full,
# clocks left alone as METHOD.md asks), and writes a side-by-side table of the metrics that tell where the time goes:
# duration, tensor-pipe and MUFU (xu) activity, issue slots, instruction counts by pipe, registers, shared memory,
# grid and block size, warp stall reasons. Run on the GPU machine.
#
#   scripts/profile_pair.sh BUILD_DIR OUT_DIR DTYPE B H S D CAUSAL(0|1) [NAME]
#
# Writes OUT_DIR/NAME_{fmha,cudnn}.ncu-rep, their raw-metric CSVs and OUT_DIR/NAME_compare.txt (NAME default
# DTYPE_dD_sS_cCAUSAL). Exits non-zero when either profile failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 8 ]; then
  echo "usage: scripts/profile_pair.sh BUILD_DIR OUT_DIR DTYPE B H S D CAUSAL(0|1) [NAME]   (got $# arguments)" >&2
  exit 2
fi
build=$1 out=$2 dtype=$3 b=$4 h=$5 s=$6 d=$7 causal=$8
name=${9:-${dtype}_d${d}_s${s}_c${causal}}
mkdir -p "$out"
mask=none peer_causal=()
if [ "$causal" = 1 ]; then mask=causal; peer_causal=(--causal); fi
ncu_args=(--clock-control none --set full --force-overwrite)
ncu "${ncu_args[@]}" --kernel-name regex:fwd_kernel --launch-skip 1 --launch-count 1 --export "$out/${name}_fmha" \
  "$build/bin/fmha_fwd" --dtype="$dtype" --b="$b" --h="$h" --q="$s" --k="$s" --d="$d" --mask=$mask \
  --iterations=1 --warmup_iterations=1 > "$out/${name}_fmha.log" 2>&1
rc1=$?
ncu "${ncu_args[@]}" --profile-from-start off --launch-count 1 --export "$out/${name}_cudnn" \
  python3 "$root/bench/peer_launch.py" --dtype "$dtype" --b "$b" --h "$h" --s "$s" --d "$d" "${peer_causal[@]}" \
  > "$out/${name}_cudnn.log" 2>&1
rc2=$?
for who in fmha cudnn; do
  ncu --import "$out/${name}_$who.ncu-rep" --page raw --csv > "$out/${name}_${who}_raw.csv" 2>/dev/null
  ncu --import "$out/${name}_$who.ncu-rep" --page details --csv > "$out/${name}_${who}_details.csv" 2>/dev/null
  # Per-instruction SASS with execution counts and stall samples (opcode mix of each kernel).
  ncu --import "$out/${name}_$who.ncu-rep" --page source --print-source sass --csv > "$out/${name}_${who}_sass.csv" 2>/dev/null
done
python3 - "$out/${name}_fmha_raw.csv" "$out/${name}_cudnn_raw.csv" > "$out/${name}_compare.txt" <<'PY'
import csv, sys
def load(path):
    try:
        rows = list(csv.reader(open(path)))
    except OSError:
        return {}
    if len(rows) < 3:
        return {}
    return dict(zip(rows[0], rows[2]))  # header, units, first kernel
a, c = load(sys.argv[1]), load(sys.argv[2])
keys = ["Kernel Name", "gpu__time_duration.sum", "sm__cycles_elapsed.avg", "launch__grid_size", "launch__block_size",
        "launch__registers_per_thread", "launch__shared_mem_per_block_dynamic", "launch__occupancy_limit_shared_mem",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
        "sm__instruction_throughput.avg.pct_of_peak_sustained_active",
        "smsp__issue_active.avg.pct_of_peak_sustained_active", "smsp__inst_executed.sum",
        "smsp__inst_executed_pipe_xu.sum", "smsp__inst_executed_pipe_fma.sum", "smsp__inst_executed_pipe_alu.sum",
        "smsp__inst_executed_pipe_fmaheavy.sum", "smsp__inst_executed_pipe_lsu.sum", "smsp__inst_executed_pipe_uniform.sum",
        "sm__warps_active.avg.pct_of_peak_sustained_active", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__t_sector_hit_rate.pct", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]
keys += sorted(k for k in set(a) | set(c) if k.startswith("smsp__average_warps_issue_stalled_") and k.endswith("_per_issue_active.ratio"))
print(f"{'metric':<90} {'fmha':>22} {'cudnn':>22}")
for k in keys:
    va, vc = a.get(k, "-"), c.get(k, "-")
    print(f"{k:<90} {va[:60]:>22} {vc[:60]:>22}")
PY
echo "profile_pair $name: fmha rc=$rc1, cudnn rc=$rc2 ($out/${name}_compare.txt)"
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]
