#!/usr/bin/env bash
# Runs the test suite of a build made by scripts/setup.sh: the CPU tests always; the GPU tests (GoogleTest cases
# and the seed's CLI matrix) too, where they skip with a message when no Hopper GPU is present.
#
#   scripts/test.sh [BUILD_DIR]        (default BUILD_DIR: build)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(realpath -m "${1:-$root/build}")
[ -f "$build/CTestTestfile.cmake" ] || { echo "test: no build in $build: run scripts/setup.sh first" >&2; exit 1; }
cd "$build"
ctest -L cpu --output-on-failure -j "$(nproc)"
# GPU tests run one at a time (some take tens of GB of host and device memory). Without a Hopper GPU each one
# reports "skipped" (GoogleTest cases via GTEST_SKIP, CLI runs via exit code 77); the reason is printed once here.
log=$(mktemp)
rc=0
ctest -L gpu --output-on-failure > "$log" 2>&1 || rc=$?
grep -vE '^ *[0-9]+/[0-9]+ Test +#.*(Passed|Skipped)|^ +Start +[0-9]+:|^\s*[0-9]+ - .*\(Skipped\)$|^The following tests did not run:$' "$log" || true
skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.*Skipped' "$log" || true)
if [ "$skipped" -gt 0 ]; then
  reason=$("$build/tests/fmha_gpu_tests" --gtest_filter='FwdGpu.NonDefaultStream' 2>/dev/null | grep -m1 -o 'skipped: .*' || true)
  echo "test: $skipped GPU tests skipped (${reason:-see ctest -V}); run scripts/gpu_check.sh on a Hopper machine"
fi
rm -f "$log"
exit "$rc"
