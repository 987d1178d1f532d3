#!/usr/bin/env bash
# Set-up on a fresh Debian machine: system packages, pinned CUTLASS headers, configure and build.
#
#   scripts/setup.sh [BUILD_DIR]        (default BUILD_DIR: build)
#
# Environment: FMHA_KERNEL_SET=none|ci|full (default ci), FMHA_JOBS (default: nproc), FMHA_TORCH=OFF to skip
# torch and the PyTorch extension (default: install torch==2.11.0 into .deps/torch and build the extension).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
kernel_set=${FMHA_KERNEL_SET:-ci}
jobs=${FMHA_JOBS:-$(nproc)}
cutlass_version=4.2.0.0
matplotlib_version=3.11.2  # bench/plot.py (the README's plot) and its CPU test
cudatools_version=13.5.37  # cuobjdump + nvdisasm (PyPI), for scripts/check_sass.py; read sm_90a objects of nvcc 13.0
skbuild_version=0.11.6     # scikit-build-core: pip install of the Python package (pyproject.toml) and its CPU test
torch_version=2.11.0       # the PyTorch extension (python/fmha, src/torch): PyPI's CUDA 13.0 wheel, ~4.6 GB installed
deps=$root/.deps

# 1. System packages (Debian): compilers and host libraries. Installed only when missing.
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
command -v python3 >/dev/null || need+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
for pkg in libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break; done
fi
command -v nvcc >/dev/null || { echo "setup: nvcc not found: install the CUDA toolkit (13.0) first" >&2; exit 1; }

# pip_pinned DIR VERSION ARGS...: installs ARGS (pinned requirements and pip options) into $deps/DIR and returns
# 0, unless $deps/DIR/.version already says VERSION (returns 1). A failed install stops the set-up (explicitly:
# `set -e` does not reach into a function called with `||`) and leaves no stamp, so the next run tries again.
pip_pinned() {
  local dir=$1 version=$2
  shift 2
  [ "$(cat "$deps/$dir/.version" 2>/dev/null)" = "$version" ] && return 1
  echo "setup: installing $* into $deps/$dir"
  rm -rf "${deps:?}/$dir"
  python3 -m pip install -q --disable-pip-version-check --no-warn-conflicts --root-user-action=ignore \
      --target "$deps/$dir" "$@" ||
    { echo "setup: pip install $* failed" >&2; exit 1; }
  echo "$version" > "$deps/$dir/.version"
}

# 2. CUTLASS/CuTe headers from the pinned PyPI wheel (its C++ tree lives under cutlass_library/source).
if [ "$(cat "$deps/cutlass/.version" 2>/dev/null)" != "$cutlass_version" ]; then
  rm -rf "$deps/cutlass"
  pip_pinned pip-cutlass "$cutlass_version" --no-deps "nvidia-cutlass==$cutlass_version" || true
  mkdir -p "$deps/cutlass/tools/util"
  ln -sfn "$deps/pip-cutlass/cutlass_library/source/include" "$deps/cutlass/include"
  ln -sfn "$deps/pip-cutlass/cutlass_library/source/tools/util/include" "$deps/cutlass/tools/util/include"
  echo "$cutlass_version" > "$deps/cutlass/.version"
fi

# 3. cuobjdump and nvdisasm from pinned PyPI wheels (the Debian CUDA packages may lack them): the SASS check test.
if pip_pinned pip-cudatools "$cudatools_version" --no-deps "nvidia-cuda-cuobjdump==$cudatools_version" \
    "nvidia-cuda-nvdisasm==$cudatools_version"; then
  chmod +x "$deps"/pip-cudatools/nvidia/cu13/bin/*
fi

# 4. matplotlib from PyPI (pinned, with its dependencies) into .deps/python, where bench/plot.py looks first.
pip_pinned python "$matplotlib_version" "matplotlib==$matplotlib_version" || true

# 5. torch from PyPI (pinned, with its dependencies) into .deps/torch: the headers and libraries the extension
# builds against, and the torch its Python tests import (PYTHONPATH=<build>/python:.deps/torch); scikit-build-core
# into .deps/skbuild for the pip install test.
torch_args=(-DFMHA_TORCH=OFF)
if [ "${FMHA_TORCH:-}" != "OFF" ]; then
  pip_pinned torch "$torch_version" "torch==$torch_version" || true
  pip_pinned skbuild "$skbuild_version" "scikit-build-core==$skbuild_version" || true
  torch_args=(-DFMHA_TORCH=ON -DFMHA_TORCH_DIR="$deps/torch/torch")
fi

# 6. Configure and build.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFMHA_KERNEL_SET="$kernel_set" \
      -DCUTLASS_DIR="$deps/cutlass" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
      -DFMHA_CUOBJDUMP="$deps/pip-cudatools/nvidia/cu13/bin/cuobjdump" "${torch_args[@]}"
start=$(date +%s)
cmake --build "$build" -j "$jobs"
echo "setup: build finished in $(( $(date +%s) - start )) s (kernel set: $kernel_set)"
python3 "$root/scripts/tu_times.py" "$build" || true
