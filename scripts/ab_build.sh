#!/usr/bin/env bash
# Builds the C library (libfmha_c.so) of another version of the kernels for an A/B run of bench/bench_fwd.py.
#
#   scripts/ab_build.sh NAME REF [DEFINE ...]
#
#   NAME    the column name in the benchmark; the library goes to build-ab/NAME/libfmha_c.so (its build tree to
#           build-ab-obj/NAME)
#   REF     a git commit, branch or tag to build (checked out in a temporary worktree), or "." for the working tree
#   DEFINE  compile definitions for host and device code, e.g. FMHA_TIMELINE=1 (without -D)
#
# All A/B libraries (about 2 MB each) live under build-ab/, so one `carry` entry ("build-ab") takes them all to the
# GPU machine (the device tool carries at most 8 paths and 64 MiB). There, for example:
#   python3 bench/bench_fwd.py --lib build/lib/libfmha_c.so --alt main=build-ab/main/libfmha_c.so --dtypes bf16
# Needs scripts/setup.sh to have run once (CUTLASS headers in .deps/). Builds only the library (no tests, no tools).
# Environment: FMHA_KERNEL_SET (default ci), FMHA_JOBS (default nproc).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 2 ]; then
  echo "usage: scripts/ab_build.sh NAME REF [DEFINE ...]   (got $# arguments)" >&2
  exit 2
fi
name=$1 ref=$2
shift 2
case $name in
  *[!A-Za-z0-9_-]* | "") echo "ab_build: NAME: expected letters, digits, _ or -, got '$name'" >&2; exit 2 ;;
esac
flags=""
for d in "$@"; do flags+=" -D$d"; done
mkdir -p "$root/build-ab/$name" "$root/build-ab-obj"
out=$root/build-ab-obj/$name
src=$root
if [ "$ref" != "." ]; then
  git -C "$root" rev-parse --verify --quiet "$ref^{commit}" >/dev/null ||
    { echo "ab_build: REF: expected a git commit, branch or tag, got '$ref'" >&2; exit 2; }
  src=$root/build-ab-obj/.src-$name
  rm -rf "$src"
  git -C "$root" worktree prune
  git -C "$root" worktree add --detach --quiet "$src" "$ref"
  ln -sfn "$root/.deps" "$src/.deps"  # the pinned CUTLASS headers of this checkout
fi
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
cmake -S "$src" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFMHA_BUILD_TESTS=OFF \
  -DFMHA_KERNEL_SET="${FMHA_KERNEL_SET:-ci}" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_CUDA_FLAGS="$flags" >"$out.configure.log" 2>&1 ||
  { tail -20 "$out.configure.log" >&2; exit 1; }
ninja -C "$out" -j "${FMHA_JOBS:-$(nproc)}" fmha_c
cp "$out/lib/libfmha_c.so" "$root/build-ab/$name/libfmha_c.so"
if [ "$ref" != "." ]; then
  git -C "$root" worktree remove --force "$src"
fi
echo "ab_build: $root/build-ab/$name/libfmha_c.so ($ref${flags:+,$flags})"
