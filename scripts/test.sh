#!/usr/bin/env bash
# Runs the test suite of a build made by scripts/setup.sh: the CPU tests always; the GPU tests (GoogleTest cases
# and the seed's CLI matrix) too, where they skip with a message when no Hopper GPU is present.
#
#   scripts/test.sh [BUILD_DIR]        (default BUILD_DIR: build)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
[ -f "$build/CTestTestfile.cmake" ] || { echo "test: no build in $build: run scripts/setup.sh first" >&2; exit 1; }
cd "$build"
ctest -L cpu --output-on-failure -j "$(nproc)"
# Without a Hopper GPU every gpu test reports "skipped" with the reason (GoogleTest cases via GTEST_SKIP, CLI runs
# via exit code 77).
ctest -L gpu --output-on-failure -j "$(nproc)"
