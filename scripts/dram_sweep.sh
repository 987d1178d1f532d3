#!/usr/bin/env bash
# DRAM traffic of fmha's forward kernel and of cuDNN's (PyTorch SDPA) on the benchmark's problems, against the
# compulsory bytes: one Nsight Compute pass per problem and library with four metrics only (DRAM bytes read and
# written, L2 sector hit rate, kernel duration), clocks as found. Problems have the shapes of
# bench/bench_fwd.py (16384 tokens per batch, h = 2048 / d, queries = keys). fmha runs through its fmha_fwd CLI on
# its own random inputs, cuDNN through bench/peer_launch.py: the same problem, not the same numbers (DRAM bytes do
# not depend on the values). Run on the GPU machine (~20 s per problem: two profiled processes).
#
#   scripts/dram_sweep.sh BUILD_DIR OUT_DIR [DTYPE:D:SEQLEN:CAUSAL,...]
#   scripts/dram_sweep.sh --table OUT_DIR [DTYPE:D:SEQLEN:CAUSAL,...]
#
# Default problems: bf16, d 64 and 128, non-causal and causal, 2k–16k. BUILD_DIR needs bin/fmha_fwd (a full build;
# scripts/ab_build.sh builds only the library). Writes OUT_DIR/dram_sweep.txt (per problem and library: read and
# written GB, the read as a multiple of the compulsory Q + K + V bytes, the L2 hit rate, the kernel time, and the
# profiled kernel's grid and name) and the ncu logs (NAME_{fmha,cudnn}.csv). --table prints the table again from the
# logs already in OUT_DIR, without profiling. Exits 2 on a bad argument (naming it, before anything runs), 1 when a
# profile failed or holds no kernel.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage="usage: scripts/dram_sweep.sh BUILD_DIR|--table OUT_DIR [DTYPE:D:SEQLEN:CAUSAL,...]"
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "$usage   (got $# arguments)" >&2
  exit 2
fi
build=$1 out=$2
problems=${3:-}
if [ -z "$problems" ]; then
  for d in 64 128; do for c in 0 1; do for s in 2048 4096 8192 16384; do problems+="bf16:$d:$s:$c,"; done; done; done
  problems=${problems%,}
fi
# Every problem is checked before anything runs.
IFS=, read -r -a list <<< "$problems"
if [ ${#list[@]} -eq 0 ]; then echo "dram_sweep: no problem given" >&2; exit 2; fi
for p in "${list[@]}"; do
  IFS=: read -r dtype d s causal extra <<< "$p"
  case "$dtype:$causal" in
    bf16:[01] | fp16:[01]) ;;
    *) echo "dram_sweep: problem '$p': expected DTYPE(bf16|fp16):D:SEQLEN:CAUSAL(0|1)" >&2; exit 2 ;;
  esac
  if [ -n "$extra" ]; then echo "dram_sweep: problem '$p': expected four fields DTYPE:D:SEQLEN:CAUSAL" >&2; exit 2; fi
  for v in "$d" "$s"; do
    case $v in '' | *[!0-9]* | 0*) echo "dram_sweep: problem '$p': D and SEQLEN must be positive integers" >&2; exit 2 ;; esac
  done
  if [ "$s" -gt 16384 ] || [ "$d" -gt 2048 ]; then
    echo "dram_sweep: problem '$p': SEQLEN must be <= 16384 and D <= 2048 (16384 tokens, h = 2048 / d)" >&2
    exit 2
  fi
done
if [ "$build" != --table ] && [ ! -x "$build/bin/fmha_fwd" ]; then
  echo "dram_sweep: BUILD_DIR: expected a build with bin/fmha_fwd, got '$build'" >&2
  exit 2
fi
mkdir -p "$out"
metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum
failed=0
if [ "$build" != --table ]; then
  for p in "${list[@]}"; do
    IFS=: read -r dtype d s causal <<< "$p"
    b=$((16384 / s)) h=$((2048 / d))
    name=${dtype}_d${d}_s${s}_c${causal}
    mask=none peer=()
    if [ "$causal" = 1 ]; then mask=causal peer=(--causal); fi
    ncu --clock-control none --metrics $metrics --csv --print-units base --log-file "$out/${name}_fmha.csv" \
      --kernel-name regex:fwd_kernel --launch-skip 1 --launch-count 1 \
      "$build/bin/fmha_fwd" --dtype="$dtype" --b=$b --h=$h --q="$s" --k="$s" --d="$d" --mask=$mask \
      --iterations=1 --warmup_iterations=1 > "$out/${name}_fmha.log" 2>&1 || failed=1
    ncu --clock-control none --metrics $metrics --csv --print-units base --log-file "$out/${name}_cudnn.csv" \
      --profile-from-start off --launch-count 1 \
      python3 "$root/bench/peer_launch.py" --dtype "$dtype" --b $b --h $h --s "$s" --d "$d" ${peer[@]+"${peer[@]}"} \
      > "$out/${name}_cudnn.log" 2>&1 || failed=1
  done
fi
python3 - "$out" "${list[@]}" > "$out/dram_sweep.txt" <<'EOF' || failed=1
import csv, sys
out, problems = sys.argv[1], sys.argv[2:]
UNITS = {"dram__bytes_read.sum": "byte", "dram__bytes_write.sum": "byte", "gpu__time_duration.sum": "ns",
         "lts__t_sector_hit_rate.pct": "%"}
def read(path):
    """Metric values of the first kernel in an ncu --csv log, with its grid and name; None without one."""
    try:
        lines = [l for l in open(path) if l.startswith('"')]
    except OSError:
        return None
    vals, kernel = {}, None
    for row in csv.DictReader(lines):
        if kernel is None:
            kernel = (row["ID"], row["Grid Size"].replace(" ", ""), row["Kernel Name"])
        if row["ID"] != kernel[0] or row["Metric Name"] not in UNITS:
            continue
        if row["Metric Unit"] != UNITS[row["Metric Name"]]:
            sys.exit(f"dram_sweep: {path}: {row['Metric Name']} in '{row['Metric Unit']}', expected "
                     f"'{UNITS[row['Metric Name']]}' (ncu --print-units base)")
        vals[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    return (vals, kernel[1], kernel[2]) if kernel and len(vals) == len(UNITS) else None
print(f"{'problem':22s} {'lib':5s} {'read GB':>8s} {'x compulsory':>12s} {'write GB':>8s} {'L2 hit %':>8s} "
      f"{'ms':>7s}  grid, kernel")
bad = 0
for p in problems:
    dtype, d, s, causal = p.split(":")
    d, s = int(d), int(s)
    b, h = 16384 // s, 2048 // d
    compulsory = 3 * b * s * h * d * 2  # Q, K and V once, 2 bytes per element
    name = f"{dtype}_d{d}_s{s}_c{causal}"
    for lib in ("fmha", "cudnn"):
        r = read(f"{out}/{name}_{lib}.csv")
        if r is None:
            print(f"{name:22s} {lib:5s} no profile (see {name}_{lib}.log)")
            bad = 1
            continue
        v, grid, kernel = r
        rd, wr = v["dram__bytes_read.sum"], v["dram__bytes_write.sum"]
        print(f"{name:22s} {lib:5s} {rd / 1e9:8.3f} {rd / compulsory:12.2f} {wr / 1e9:8.3f} "
              f"{v['lts__t_sector_hit_rate.pct']:8.1f} {v['gpu__time_duration.sum'] / 1e6:7.3f}  {grid} {kernel[:90]}")
sys.exit(bad)
EOF
cat "$out/dram_sweep.txt"
exit $failed
