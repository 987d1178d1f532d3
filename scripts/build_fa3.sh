#!/usr/bin/env bash
# Builds FlashAttention-3, the strongest Hopper peer of the side-by-side benchmarks (bench/bench_fwd.py, bench_bwd.py,
# bench_decode.py take `--fa3 DEST`), on the GPU machine. FA3 is never part of fmha: this only builds a copy of it.
#
#   scripts/build_fa3.sh SRC DEST [fp16] [bwd] [decode] [fp8] [mla] [d256]
#
# SRC: a checkout of Dao-AILab/flash-attention at commit 0251105a (2026-08-15; the results in bench/results were
# measured with it) with its CUTLASS submodule in csrc/cutlass, or a .tgz of such a tree (hopper/ and csrc/cutlass
# suffice). DEST: the folder to build in (a copy of SRC goes there). The bf16 forward at head dims 64 and 128 is
# always built; each word adds kernels through FA3's own FLASH_ATTENTION_DISABLE_* switches:
#   fp16    fp16 for everything built          bwd     the backward        decode  paged KV, split-KV, KV append, packed GQA
#   fp8     the e4m3 forward                   mla     head dims 192 / 128 (MLA prefill, forward and backward: FA3's
#                                                      backward at 192 / 128 runs its head-dim-192 kernels) and 64 / 512
#   d256    head dims 192 and 256
# Writes DEST/build.log and, when done, DEST/build.rc (the exit status). Measured on the H200 machine (16 cores):
# `bwd decode fp8` about 5 minutes, the forward alone about 2, `bwd mla` about 3. Start it in the background at the
# top of a device call and run the tests meanwhile. Then: PYTHONPATH=DEST/hopper python3 -c 'import flash_attn_interface'
set -u
usage="usage: scripts/build_fa3.sh SRC DEST [fp16] [bwd] [decode] [fp8] [mla] [d256]"
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
src=$1
dest=$(realpath -m "$2")
shift 2
mkdir -p "$dest" || exit 1
rm -f "$dest/build.rc"
trap 'echo $? > "$dest/build.rc"' EXIT  # every exit, early ones included, leaves its status for a poller
for feature in "$@"; do
  case $feature in
    fp16 | bwd | decode | fp8 | mla | d256) ;;
    *) echo "build_fa3.sh: feature: expected one of fp16 bwd decode fp8 mla d256, got '$feature'" >&2; exit 2 ;;
  esac
done
if [ -d "$src" ]; then
  cp -r "$src"/. "$dest"/ || exit 1
else
  tar xzf "$src" -C "$dest" --strip-components=1 || { echo "build_fa3.sh: SRC: expected a folder or a .tgz, got $src" >&2; exit 2; }
fi
[ -f "$dest/hopper/setup.py" ] && [ -d "$dest/csrc/cutlass/include" ] ||
  { echo "build_fa3.sh: SRC: expected hopper/setup.py and csrc/cutlass/include in $src" >&2; exit 2; }
[ -f "$dest/README.md" ] || echo "# FlashAttention-3" > "$dest/README.md"  # its setup.py reads ../README.md
# The machine reaches no network: no submodule update (csrc/cutlass is already there).
sed -i 's/^    subprocess.run(\["git", "submodule".*$/    pass/' "$dest/hopper/setup.py"
for f in SPLIT PAGEDKV APPENDKV LOCAL SOFTCAP PACKGQA FP16 FP8 HDIM96 HDIM192 HDIM256 SM80 HDIMDIFF64 HDIMDIFF192 \
         CLUSTER BACKWARD; do
  export "FLASH_ATTENTION_DISABLE_$f=TRUE"
done
enable() { for f in "$@"; do export "FLASH_ATTENTION_DISABLE_$f=FALSE"; done; }
for feature in "$@"; do
  case $feature in
    fp16) enable FP16 ;;
    bwd) enable BACKWARD ;;
    decode) enable SPLIT PAGEDKV APPENDKV PACKGQA ;;
    fp8) enable FP8 ;;
    mla) enable HDIMDIFF64 HDIMDIFF192 HDIM192 ;;
    d256) enable HDIM256 HDIM192 ;;
  esac
done
cd "$dest/hopper" || exit 1
start=$(date +%s)
MAX_JOBS=${MAX_JOBS:-$(nproc)} NVCC_THREADS=${NVCC_THREADS:-2} python3 setup.py build_ext --inplace > "$dest/build.log" 2>&1
rc=$?
echo "build_fa3.sh: rc=$rc in $(( $(date +%s) - start )) s (features: $*); log $dest/build.log"
exit $rc
