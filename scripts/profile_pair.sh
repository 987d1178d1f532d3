#!/usr/bin/env bash
# Profiles fmha's forward kernel and cuDNN's (PyTorch SDPA) on the same problem with Nsight Compute (--set full,
# clocks left alone: measure the card as found), and writes a side-by-side table of the metrics that tell where the time goes
# (scripts/ncu_compare.py): duration, grid and block size, registers, shared memory, tensor-pipe and MUFU (xu)
# activity, issue slots, L2 hit rate, warp stall reasons, and executed instructions and stall samples per SASS
# opcode. The cuDNN launch comes from bench/peer_launch.py (PyTorch SDPA, inputs as bench/bench_fwd.py makes them);
# fmha's from bench's fmha_fwd CLI on its own random inputs: the same problem, not the same numbers.
# Run on the GPU machine; the .ncu-rep files open in the Nsight Compute GUI for the SASS of either kernel.
#
#   scripts/profile_pair.sh BUILD_DIR OUT_DIR DTYPE B H S D CAUSAL(0|1) [NAME]
#
# Writes OUT_DIR/NAME_{fmha,cudnn}.ncu-rep, their raw-metric CSVs and OUT_DIR/NAME_compare.txt (NAME default
# DTYPE_dD_sS_cCAUSAL). Exits 2 on a bad argument (naming it), non-zero when either profile or the table failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage="usage: scripts/profile_pair.sh BUILD_DIR OUT_DIR DTYPE(fp16|bf16) B H S D CAUSAL(0|1) [NAME]"
if [ $# -lt 8 ] || [ $# -gt 9 ]; then
  echo "$usage   (got $# arguments)" >&2
  exit 2
fi
build=$1 out=$2 dtype=$3 b=$4 h=$5 s=$6 d=$7 causal=$8
name=${9:-${dtype}_d${d}_s${s}_c${causal}}
bad() { echo "profile_pair: $1: expected $2, got '$3'" >&2; exit 2; }
case $dtype in fp16 | bf16) ;; *) bad DTYPE "fp16 or bf16" "$dtype" ;; esac
for arg in B:$b H:$h S:$s D:$d; do
  case ${arg#*:} in '' | *[!0-9]* | 0*) bad "${arg%%:*}" "a positive integer" "${arg#*:}" ;; esac
done
case $causal in 0 | 1) ;; *) bad CAUSAL "0 or 1" "$causal" ;; esac
[ -x "$build/bin/fmha_fwd" ] || bad BUILD_DIR "a build with bin/fmha_fwd" "$build"
case $name in *[!A-Za-z0-9_.-]* | "") bad NAME "letters, digits, _ . or -" "$name" ;; esac
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
python3 "$root/scripts/ncu_compare.py" fmha "$out/${name}_fmha_raw.csv" "$out/${name}_fmha_sass.csv" \
  cudnn "$out/${name}_cudnn_raw.csv" "$out/${name}_cudnn_sass.csv" > "$out/${name}_compare.txt"
rc3=$?
# ncu exits 0 when no kernel matched its filter: a profile counts only if its report holds a kernel row.
for who in fmha cudnn; do
  if [ "$(wc -l < "$out/${name}_${who}_raw.csv" 2>/dev/null || echo 0)" -lt 3 ]; then
    echo "profile_pair $name: no $who kernel was profiled (see $out/${name}_$who.log)" >&2
    if [ $who = fmha ]; then rc1=1; else rc2=1; fi
  fi
done
echo "profile_pair $name: fmha rc=$rc1, cudnn rc=$rc2, table rc=$rc3 ($out/${name}_compare.txt)"
[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ $rc3 -eq 0 ]
