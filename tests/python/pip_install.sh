#!/usr/bin/env bash
# CPU test: `pip install --no-build-isolation .` of the Python package works from a checkout, with torch 2.11.0 and
# scikit-build-core on the path (.deps/torch, .deps/skbuild), linking the kernels of an existing build
# (FMHA_PREBUILT_DIR) so nothing compiles twice; the installed package then imports and runs on meta tensors.
#
#   tests/python/pip_install.sh SOURCE_DIR BUILD_DIR PYTHONPATH_OF_THE_BUILD
set -euo pipefail
src=$1 build=$2
torch_path=${3##*:}  # the folder holding torch (the last entry of the build's PYTHONPATH)
target=$(mktemp -d)
trap 'rm -rf "$target"' EXIT
export PYTHONPATH="$torch_path:$src/.deps/skbuild"
FMHA_PREBUILT_DIR="$build" python3 -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --target "$target" "$src"
test -f "$target/fmha/libfmha_torch.so" || { echo "pip_install: no fmha/libfmha_torch.so in the install" >&2; exit 1; }
FMHA_TARGET="$target" PYTHONPATH="$target:$torch_path" python3 - <<'PY'
import os, torch, fmha
q = torch.empty(2, 64, 8, 128, device="meta", dtype=torch.bfloat16)
k = torch.empty(2, 64, 2, 128, device="meta", dtype=torch.bfloat16)
out = fmha.attention(q, k, k, causal=True)
assert out.shape == q.shape, out.shape
assert fmha.__file__.startswith(os.environ["FMHA_TARGET"]), fmha.__file__  # the installed copy, not the build tree
print("pip_install: ok,", fmha.__file__)
PY
