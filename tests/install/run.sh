#!/usr/bin/env bash
# CPU test of fmha's install and CMake package (ctest: install_package, label cpu). Two installs, each followed by
# a consumer project (tests/install/consumer) that finds it with find_package(fmha) and links fmha::fmha and
# fmha::fmha_c, and a parent project that adds fmha's source tree:
#   1. the build under test (BUILD_DIR), installed with cmake --install; a find_package(fmha 9.0) must be refused;
#   2. a library-only build of SOURCE_DIR (FMHA_LIBRARY_ONLY=ON, no kernels), configured with CLI11, nlohmann-json
#      and GoogleTest made unfindable: it must need none of them;
#   3. add_subdirectory(SOURCE_DIR) in a parent project (no kernels): library only by default, fmha::fmha links.
#
#   tests/install/run.sh SOURCE_DIR BUILD_DIR [WORK_DIR]
set -euo pipefail
src=$(realpath "${1:?usage: run.sh SOURCE_DIR BUILD_DIR [WORK_DIR]}")
build=$(realpath "${2:?usage: run.sh SOURCE_DIR BUILD_DIR [WORK_DIR]}")
work=$(realpath -m "${3:-$build/install-test}")
rm -rf "$work" && mkdir -p "$work"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)

consumer() {  # consumer PREFIX NAME: configure, build and run the consumer against the install at PREFIX
  cmake -S "$src/tests/install/consumer" -B "$work/$2" "${gen[@]}" -DCMAKE_PREFIX_PATH="$1" > "$work/$2.log" 2>&1 ||
    { cat "$work/$2.log"; echo "install test: configuring the consumer against $1 failed" >&2; exit 1; }
  cmake --build "$work/$2" >> "$work/$2.log" 2>&1 ||
    { cat "$work/$2.log"; echo "install test: building the consumer against $1 failed" >&2; exit 1; }
  "$work/$2/consumer_cpp" && LD_LIBRARY_PATH="$1/lib:${LD_LIBRARY_PATH:-}" "$work/$2/consumer_c"
}

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; echo "install test: cmake --install $build failed" >&2; exit 1; }
for f in include/fmha/fwd.h include/fmha/version.h include/fmha/c_api.h lib/libfmha.a lib/libfmha_c.so \
         lib/cmake/fmha/fmhaConfig.cmake lib/cmake/fmha/fmhaConfigVersion.cmake share/doc/fmha/LICENSE; do
  [ -e "$work/prefix/$f" ] || { echo "install test: $f missing from the install" >&2; exit 1; }
done
consumer "$work/prefix" consumer-full

# A version the package must refuse: 0.1 installed, 9.0 asked for.
mkdir -p "$work/wrong"
printf 'cmake_minimum_required(VERSION 3.25)\nproject(w LANGUAGES CXX)\nfind_package(fmha 9.0 REQUIRED)\n' \
  > "$work/wrong/CMakeLists.txt"
if cmake -S "$work/wrong" -B "$work/wrong/b" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/wrong.log" 2>&1; then
  echo "install test: find_package(fmha 9.0) accepted an install of version 0.x" >&2; exit 1
fi
grep -q 'version: 0\.' "$work/wrong.log" ||
  { cat "$work/wrong.log"; echo "install test: the 9.0 configure failed for another reason than the version" >&2; exit 1; }

cmake -S "$src" -B "$work/libonly" "${gen[@]}" -DFMHA_LIBRARY_ONLY=ON -DFMHA_KERNEL_SET=none \
      -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
      -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON > "$work/libonly.log" 2>&1 ||
  { cat "$work/libonly.log"; echo "install test: the library-only configure failed" >&2; exit 1; }
cmake --build "$work/libonly" >> "$work/libonly.log" 2>&1 &&
  cmake --install "$work/libonly" --prefix "$work/prefix-libonly" >> "$work/libonly.log" 2>&1 ||
  { cat "$work/libonly.log"; echo "install test: the library-only build or install failed" >&2; exit 1; }
[ ! -e "$work/libonly/bin" ] && [ ! -e "$work/libonly/tests" ] ||
  { echo "install test: the library-only build made tools or tests" >&2; exit 1; }
consumer "$work/prefix-libonly" consumer-libonly

# 3. add_subdirectory: a parent project that builds fmha from its source (library only by default there).
mkdir -p "$work/parent"
cat > "$work/parent/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(parent LANGUAGES C CXX)
set(FMHA_KERNEL_SET none CACHE STRING "")
set(CMAKE_DISABLE_FIND_PACKAGE_CLI11 ON)
set(CMAKE_DISABLE_FIND_PACKAGE_GTest ON)
add_subdirectory("$src" fmha)
add_executable(consumer_cpp "$src/tests/install/consumer/main.cpp")
target_link_libraries(consumer_cpp PRIVATE fmha::fmha)
CMAKE
cmake -S "$work/parent" -B "$work/parent/b" "${gen[@]}" > "$work/parent.log" 2>&1 && cmake --build "$work/parent/b" \
  >> "$work/parent.log" 2>&1 || { cat "$work/parent.log"; echo "install test: the add_subdirectory parent failed" >&2; exit 1; }
[ ! -e "$work/parent/b/fmha/bin" ] ||
  { echo "install test: add_subdirectory built fmha's tools (FMHA_LIBRARY_ONLY should default to ON)" >&2; exit 1; }
"$work/parent/b/consumer_cpp"
echo "install test: passed (install + find_package, version check, library-only build without CLI11 /"\
     "nlohmann-json / GoogleTest, add_subdirectory)"
