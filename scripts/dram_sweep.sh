#!/usr/bin/env bash
# DRAM traffic of fmha's forward kernel and of cuDNN's (PyTorch SDPA) on the benchmark's problems, against the
# compulsory bytes: one Nsight Compute pass per problem and library with three metrics only (DRAM bytes read and
# written, L2 sector hit rate) and the kernel's duration, clocks left alone (METHOD.md). Problems have the shapes of
# bench/bench_fwd.py (16384 tokens per batch, h = 2048 / d, queries = keys). fmha runs through its fmha_fwd CLI on
# its own random inputs, cuDNN through bench/peer_launch.py: the same problem, not the same numbers (DRAM bytes do
# not depend on the values). Run on the GPU machine (~8 s per problem).
#
#   scripts/dram_sweep.sh BUILD_DIR OUT_DIR [DTYPE:D:SEQLEN:CAUSAL,...]
#
# Default problems: bf16, d 64 and 128, non-causal and causal, 2k–16k. Writes OUT_DIR/dram_sweep.txt (the table:
# per problem and library the read and written GB, the read as a multiple of the compulsory Q + K + V bytes, the L2
# hit rate and the kernel time) and the ncu logs. Exits 2 on a bad argument (naming it), 1 when a profile failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: scripts/dram_sweep.sh BUILD_DIR OUT_DIR [DTYPE:D:SEQLEN:CAUSAL,...]   (got $# arguments)" >&2
  exit 2
fi
build=$1 out=$2
problems=${3:-}
if [ -z "$problems" ]; then
  for d in 64 128; do for c in 0 1; do for s in 2048 4096 8192 16384; do problems+="bf16:$d:$s:$c,"; done; done; done
  problems=${problems%,}
fi
[ -x "$build/bin/fmha_fwd" ] || { echo "dram_sweep: BUILD_DIR: expected a build with bin/fmha_fwd, got '$build'" >&2; exit 2; }
mkdir -p "$out"
metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum
failed=0
IFS=, read -r -a list <<< "$problems"
for p in "${list[@]}"; do
  IFS=: read -r dtype d s causal <<< "$p"
  case "$dtype:$causal" in bf16:[01] | fp16:[01]) ;; *) echo "dram_sweep: problem '$p': expected DTYPE(bf16|fp16):D:SEQLEN:CAUSAL(0|1)" >&2; exit 2 ;; esac
  for v in "$d" "$s"; do
    case $v in '' | *[!0-9]* | 0*) echo "dram_sweep: problem '$p': D and SEQLEN must be positive integers" >&2; exit 2 ;; esac
  done
  b=$((16384 / s)) h=$((2048 / d))
  if [ "$b" -lt 1 ] || [ "$h" -lt 1 ]; then echo "dram_sweep: problem '$p': SEQLEN must be <= 16384 and D <= 2048" >&2; exit 2; fi
  name=${dtype}_d${d}_s${s}_c${causal}
  mask=none peer=()
  if [ "$causal" = 1 ]; then mask=causal peer=(--causal); fi
  ncu --clock-control none --metrics $metrics --csv --print-units base --log-file "$out/${name}_fmha.csv" \
    --kernel-name regex:fwd_kernel --launch-skip 1 --launch-count 1 \
    "$build/bin/fmha_fwd" --dtype="$dtype" --b=$b --h=$h --q="$s" --k="$s" --d="$d" --mask=$mask \
    --iterations=1 --warmup_iterations=1 > "$out/${name}_fmha.log" 2>&1 || failed=1
  ncu --clock-control none --metrics $metrics --csv --print-units base --log-file "$out/${name}_cudnn.csv" \
    --profile-from-start off --launch-count 1 \
    python3 "$root/bench/peer_launch.py" --dtype "$dtype" --b $b --h $h --s "$s" --d "$d" "${peer[@]}" \
    > "$out/${name}_cudnn.log" 2>&1 || failed=1
done
python3 - "$out" "$problems" > "$out/dram_sweep.txt" <<'EOF' || failed=1
import csv, sys
out, problems = sys.argv[1], sys.argv[2].split(",")
def read(path):
    try:
        lines = [l for l in open(path) if l.startswith('"')]
    except OSError:
        return None
    vals = {}
    for row in csv.DictReader(lines):
        vals[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    return vals or None
print(f"{'problem':22s} {'lib':5s} {'read GB':>8s} {'x compulsory':>12s} {'write GB':>8s} {'L2 hit %':>8s} {'ms':>7s}")
bad = 0
for p in problems:
    dtype, d, s, causal = p.split(":")
    d, s = int(d), int(s)
    b, h = 16384 // s, 2048 // d
    compulsory = 3 * b * s * h * d * 2  # Q, K and V once, 2 bytes per element
    name = f"{dtype}_d{d}_s{s}_c{causal}"
    for lib in ("fmha", "cudnn"):
        v = read(f"{out}/{name}_{lib}.csv")
        if v is None or "dram__bytes_read.sum" not in v:
            print(f"{name:22s} {lib:5s} no profile (see {name}_{lib}.log)")
            bad = 1
            continue
        rd, wr = v["dram__bytes_read.sum"], v.get("dram__bytes_write.sum", float("nan"))
        print(f"{name:22s} {lib:5s} {rd / 1e9:8.3f} {rd / compulsory:12.2f} {wr / 1e9:8.3f} "
              f"{v.get('lts__t_sector_hit_rate.pct', float('nan')):8.1f} {v.get('gpu__time_duration.sum', float('nan')) / 1e6:7.3f}")
sys.exit(bad)
EOF
cat "$out/dram_sweep.txt"
exit $failed
