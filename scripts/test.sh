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
# ctest's own "100% tests passed, 0 tests failed out of N" counts skips as passes, so it is replaced by one line
# that says how many GPU tests ran, passed, failed and were skipped.
log=$(mktemp)
rc=0
ctest -L gpu --output-on-failure > "$log" 2>&1 || rc=$?
grep -vE '^ *[0-9]+/[0-9]+ Test +#.*(Passed|Skipped)|^ +Start +[0-9]+:|^\s*[0-9]+ - .*\(Skipped\)$|^The following tests did not run:$|^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+$' "$log" || true
total=$(sed -nE 's/^[0-9]+% tests passed, [0-9]+ tests failed out of ([0-9]+)$/\1/p' "$log")
failed=$(sed -nE 's/^[0-9]+% tests passed, ([0-9]+) tests failed out of [0-9]+$/\1/p' "$log")
skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.*Skipped' "$log" || true)
total=${total:-0} failed=${failed:-0}
echo "test: GPU suite: $total tests, $((total - skipped - failed)) passed, $failed failed, $skipped skipped"
if [ "$skipped" -gt 0 ]; then
  reason=$("$build/tests/fmha_gpu_tests" --gtest_filter='FwdGpu.NonDefaultStream' 2>/dev/null | grep -m1 -o 'skipped: .*' || true)
  echo "test: $skipped GPU tests skipped (${reason:-see ctest -V}); run scripts/gpu_check.sh on a Hopper machine"
fi
rm -f "$log"
exit "$rc"
