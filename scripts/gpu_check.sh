#!/usr/bin/env bash
# The GPU job, on a machine with a Hopper GPU: builds the `full` kernel set unless BUILD_DIR already holds a build,
# runs the gpu test suite (GoogleTest cases and the seed's CLI matrix), compute-sanitizer on a smoke subset, and
# the forward benchmark against cuDNN / FlashAttention-2 / FlashAttention-3 (needs PyTorch with cuDNN; FA3 where
# FMHA_FA3_DIR names a build), then prints a compact summary
# table. Exits non-zero when any step failed, 77 without a GPU (nvidia-smi -L fails).
#
#   scripts/gpu_check.sh [BUILD_DIR] [OUT_DIR] [STEPS]
#
# BUILD_DIR default build; OUT_DIR default gpu-results (logs and JSON land there);
# STEPS: comma list of tests,cli,torch,sanitizer,bench,profile (default: all but profile; torch: the PyTorch package's
# GPU tests, tests/python/test_torch_gpu.py and the Llama end-to-end test tests/python/test_llama_e2e.py, with the
# machine's own torch and BUILD_DIR/python on PYTHONPATH). FMHA_BENCH_ARGS adds bench_fwd.py arguments;
# FMHA_GTEST_FILTER restricts the GoogleTest cases (default all); FMHA_SANITIZER_TOOLS picks the compute-sanitizer
# tools of the sanitizer step (default "memcheck racecheck synccheck"; one tool each lets three instances with
# separate OUT_DIRs run side by side); FMHA_PROFILE_ARGS picks the profiled problem
# (fmha_fwd options). FMHA_FA3_DIR names a FlashAttention-3 build for the benchmark (bench_fwd.py --fa3); while a
# compile runs on the machine (e.g. that build, started in the background) the benchmark waits, at most
# FMHA_FA3_WAIT_S seconds (default 420). FMHA_GPU_PACK=1 keeps OUT_DIR to one file, OUT_DIR/gpu_check.tgz, with
# everything the steps wrote (in a temporary folder), refreshed after every step: the device tool brings back at
# most 8 files per call, and a call that runs out of time still brings back the steps that finished.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(realpath -m "${1:-$root/build}")
out=$(realpath -m "${2:-$root/gpu-results}")
steps=",${3:-tests,cli,torch,sanitizer,bench},"
mkdir -p "$out"
pack() {
  [ -n "$pack_to" ] || return 0
  tar czf "$pack_to/gpu_check.tgz.part" -C "$out" . && mv -f "$pack_to/gpu_check.tgz.part" "$pack_to/gpu_check.tgz"
}
cd "$root"
if ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gpu_check: no GPU (nvidia-smi -L failed); this job needs a Hopper GPU (scripts/test.sh runs the CPU suite)" >&2
  exit 77
fi
pack_to=""
if [ "${FMHA_GPU_PACK:-0}" = 1 ]; then  # the steps write into a temporary folder; pack() copies it into OUT_DIR
  pack_to=$out
  out=$(mktemp -d)
fi

if [ ! -x "$build/tests/fmha_gpu_tests" ] || [ ! -x "$build/bin/fmha_fwd" ]; then
  FMHA_KERNEL_SET=full "$root/scripts/setup.sh" "$build" || exit 1
fi
# ctest files hold the absolute paths of the machine that configured the build: map them here if they differ.
configured=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
if [ -n "$configured" ] && [ ! -e "$configured" ]; then mkdir -p "$(dirname "$configured")" && ln -s "$root" "$configured"; fi

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  > "$out/device.txt" 2>&1
summary=()
failed=0
if [[ $steps == *,tests,* ]]; then
  "$build/tests/fmha_gpu_tests" --gtest_color=no --gtest_output="json:$out/gpu_tests.json" \
    --gtest_filter="${FMHA_GTEST_FILTER:-*}" > "$out/gpu_tests.log" 2>&1 || failed=1
  summary+=("gtest gpu:   $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]|^\[  SKIPPED \] [0-9]' "$out/gpu_tests.log" | tr '\n' ' ')")
  # The GPU tests skip only when no usable Hopper GPU is found: here, on a GPU machine, a skip is a failure (it
  # would otherwise read as a pass, e.g. on a GPU of another architecture).
  skipped=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?, listed below:$/\1/p' "$out/gpu_tests.log")
  if [ "${skipped:-0}" -gt 0 ]; then
    failed=1
    summary+=("gtest gpu:   FAILED: $skipped tests skipped ($(grep -m1 -o 'skipped: .*' "$out/gpu_tests.log"))")
  fi
fi
pack
if [[ $steps == *,cli,* ]]; then
  (cd "$build" && ctest -L gpu -R '^cli_' -j 4 --output-on-failure) > "$out/cli_tests.log" 2>&1 || failed=1
  skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.*Skipped' "$out/cli_tests.log")
  summary+=("cli matrix:  $(grep -E 'tests passed' "$out/cli_tests.log"), $skipped skipped")
  if [ "$skipped" -gt 0 ]; then failed=1; summary+=("cli matrix:  FAILED: $skipped runs skipped (exit 77: no usable GPU)"); fi
fi
pack
if [[ $steps == *,torch,* ]]; then
  if [ -f "$build/python/fmha/libfmha_torch.so" ]; then
    PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" python3 "$root/tests/python/test_torch_gpu.py" -v \
      > "$out/torch_gpu.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || failed=1
    summary+=("torch:       rc=$rc $(grep -E '^(Ran|OK|FAILED)' "$out/torch_gpu.log" | tr '\n' ' ')")
    # End to end: a small Llama-style decoder with prefill on fmha.attention and generation on fmha.decode
    # (tests/python/test_llama_e2e.py; needs transformers, which the GPU machines have: a skip is a failure here).
    PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" python3 "$root/tests/python/test_llama_e2e.py" -v \
      > "$out/llama_e2e.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || failed=1
    summary+=("llama e2e:   rc=$rc $(grep -E '^(Ran|OK|FAILED)|logits max|greedy:' "$out/llama_e2e.log" | tr '\n' ' ')")
    # Host time per eager call against the C API's (bench/torch_overhead.py).
    ho=(); [ -x "$build/bin/fmha_host_overhead" ] && ho=(--host-overhead "$build/bin/fmha_host_overhead" "$build/lib/libfmha_c.so")
    PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" python3 "$root/bench/torch_overhead.py" "${ho[@]}" \
      --json "$out/torch_overhead.json" > "$out/torch_overhead.log" 2>&1 || failed=1
    summary+=("overhead:    $(grep -E '_us"' "$out/torch_overhead.log" | tr -d ' \n')")
    # The real model (scripts/minilm_fmha.py), where its prepared folder .minilm travelled along.
    if [ -d "$root/.minilm" ]; then
      PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" python3 "$root/scripts/minilm_fmha.py" check "$root/.minilm" \
        --json "$out/minilm.json" > "$out/minilm.log" 2>&1
      rc=$?
      [ $rc -eq 0 ] || failed=1
      summary+=("minilm:      rc=$rc $(grep -E 'err|pass' "$out/minilm.log" | tr -d ' \n')")
      # One training step's gradients (fmha's backward through autograd) against the stock bf16 model's.
      PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" python3 "$root/scripts/minilm_fmha.py" train "$root/.minilm" \
        --json "$out/minilm_train.json" > "$out/minilm_train.log" 2>&1
      rc=$?
      [ $rc -eq 0 ] || failed=1
      summary+=("minilm grad: rc=$rc $(grep -E '"(rel_l2_err_fmha_vs_fp32|rel_l2_err_stock_bf16_vs_fp32|pass)"' "$out/minilm_train.log" | tr -d ' \n')")
    fi
  else
    failed=1
    summary+=("torch:       FAILED: no $build/python/fmha/libfmha_torch.so (configure with torch: FMHA_TORCH=ON)")
  fi
fi
pack
if [[ $steps == *,sanitizer,* ]]; then
  # Small cases that cover both tile schedulers, ping-pong on (d 128) and off (d 64), empty entries, a V tail,
  # NaN past the valid keys, and staging slices reused across tiles.
  filter='Seed/FwdCaseTest.MatchesReference/varlen_13_causal_qend_bf16:Seed/FwdCaseTest.MatchesReference/gqa_fp16'
  filter+=':Seed/FwdCaseTest.MatchesReference/varlen_07_causal_qend_bf16:Edge/FwdCaseTest.MatchesReference/E05_nan_past_keys'
  filter+=':Edge/FwdCaseTest.MatchesReference/E03a:Edge/FwdCaseTest.MatchesReference/varlen_persistent'
  filter+=':FwdGpu.AllScheduleVariantsMatchReference'
  # One persistent CTA walking many tiles: staging slices of O reused across tiles (TMA store at head-dim tiles <= 64).
  filter+=':Edge/FwdCaseTest.MatchesReference/d32_persistent_sm1:Edge/FwdCaseTest.MatchesReference/d64_persistent_sm1*'
  # NaN rows past the last entry on the 192-row non-causal tiles.
  filter+=':Edge/FwdCaseTest.MatchesReference/E05_nan_past_keys_192'
  # Warpgroups whose rows see none of the tile's keys, with and without ping-pong, on one persistent CTA.
  filter+=':Edge/FwdCaseTest.MatchesReference/qend_unseen_d64_sm1*'
  # The paired causal tile order (perf-log v9) on 5 persistent CTAs, and on every SM with 192-row tiles (the default
  # route of d 64 causal rows just past the short causal limit, tensor-core row sums; perf-log v13).
  filter+=':Edge/FwdCaseTest.MatchesReference/causal_pairs_d128_sm5:Edge/FwdCaseTest.MatchesReference/causal_pairs_192_fp16'
  # Causal tiles one CTA each, in two L2 sections of 4 and 2 query heads (perf-log v15 item 3).
  filter+=':Edge/FwdCaseTest.MatchesReference/causal_individual_sections_d128'
  # Extreme logits (|scale·q·k| up to 1e12, rows of every magnitude in one tile) on the 192-row and d 128 kernels.
  filter+=':Extreme/FwdCaseTest.MatchesReference/extreme_mixed_rows_192'
  filter+=':Extreme/FwdCaseTest.MatchesReference/extreme_mixed_rows_causal_d128_pingpong'
  # Decode: paged (16-key pages, 8 per block) with splits, a strided contiguous cache with remap, spare slots and
  # splits, cache-only with an empty sequence, three CTAs walking many tiles, and the append in each.
  filter+=':Decode/DecodeCaseTest.MatchesReference/paged16_bf16:Decode/DecodeCaseTest.MatchesReference/strided_extra_slots_fp16'
  filter+=':Decode/DecodeCaseTest.MatchesReference/cache_only_empty_bf16:Decode/DecodeCaseTest.MatchesReference/few_sms_bf16'
  # Pages of 5 keys (TMA boxes of one key) with splits; the paged producer at MLA's 576-element rows.
  filter+=':Decode/DecodeCaseTest.MatchesReference/paged5_fp16_d64:MlaParts.*'
  # Backward: varlen with empty entries and NaN rows (zeroed tails, GQA), causal d 64, the ordered dQ accumulation.
  filter+=':Bwd/BwdCaseTest.MatchesReference/varlen_empty_entries_gqa_bf16_d128'
  filter+=':Bwd/BwdCaseTest.MatchesReference/causal_qend_more_keys_bf16_d64'
  filter+=':Bwd/BwdCaseTest.MatchesReference/deterministic_varlen_fp16_d64'
  # The two-pass dQ kernel: varlen with empty entries (keys past an entry zeroed in shared memory), causal q-end.
  filter+=':TwoPass/BwdCaseTest.MatchesReference/two_pass_varlen_empty_entries_gqa_bf16_d128'
  filter+=':TwoPass/BwdCaseTest.MatchesReference/two_pass_causal_qend_more_keys_bf16_d64'
  for tool in ${FMHA_SANITIZER_TOOLS:-memcheck racecheck synccheck}; do
    compute-sanitizer --tool $tool --error-exitcode 99 "$build/tests/fmha_gpu_tests" --gtest_filter="$filter" \
      > "$out/sanitizer_$tool.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || failed=1
    summary+=("$tool:   rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tr '\n' ' ')")
  done
fi
pack
if [[ $steps == *,bench,* ]]; then
  # FlashAttention-3, when FMHA_FA3_DIR names a build of it (bench_fwd.py times it there; without it the column is
  # absent). A compile still running on this machine (an FA3 build started in the background: setup.py, nvcc, cicc,
  # ptxas) is waited for, up to FMHA_FA3_WAIT_S seconds (default 420), since it would disturb the clocks.
  if [ -n "${FMHA_FA3_DIR:-}" ]; then
    waited=0
    while pgrep -f 'setup.py build_ext|/nvcc |cicc|ptxas' > /dev/null && [ "$waited" -lt "${FMHA_FA3_WAIT_S:-420}" ]; do
      sleep 5; waited=$((waited + 5))
    done
    busy=$(pgrep -f 'setup.py build_ext|/nvcc |cicc|ptxas' > /dev/null && echo ', a compile still runs' || true)
    summary+=("fa3:         FMHA_FA3_DIR=$FMHA_FA3_DIR (waited ${waited} s for compiles$busy)")
  fi
  # shellcheck disable=SC2086  # FMHA_BENCH_ARGS: extra bench_fwd.py arguments, word-split on purpose
  python3 "$root/bench/bench_fwd.py" --lib "$build/lib/libfmha_c.so" --json "$out/bench_fwd.json" ${FMHA_BENCH_ARGS:-} \
    > "$out/bench_fwd.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || failed=1
  summary+=("bench:       rc=$rc (table below, JSON in bench_fwd.json)")
fi
pack
if [[ $steps == *,profile,* ]]; then
  # One forward launch under Nsight Compute (FMHA_PROFILE_ARGS: the fmha_fwd problem options; default bf16, d 128,
  # 8k, non-causal, the default schedule): tensor-pipe and MUFU (exp2) utilisation, issue stalls. Clocks left alone
  # (--clock-control none): measure the card as found. The report is OUT/fwd_profile.ncu-rep.
  # shellcheck disable=SC2086  # FMHA_PROFILE_ARGS: fmha_fwd options, word-split on purpose
  ncu --clock-control none --kernel-name regex:fwd_kernel --launch-skip 1 --launch-count 1 --set full \
      --export "$out/fwd_profile" --force-overwrite \
      "$build/bin/fmha_fwd" ${FMHA_PROFILE_ARGS:---dtype=bf16 --b=2 --h=16 --q=8192 --k=8192 --d=128} --iterations=1 \
      --warmup_iterations=1 > "$out/profile.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || failed=1
  ncu --import "$out/fwd_profile.ncu-rep" --page details --csv > "$out/profile_details.csv" 2>/dev/null
  # Every metric (pipe utilisation, stall reasons) and the per-instruction SASS view with its stall samples.
  ncu --import "$out/fwd_profile.ncu-rep" --page raw --csv > "$out/profile_raw.csv" 2>/dev/null
  ncu --import "$out/fwd_profile.ncu-rep" --page source --print-source sass --csv > "$out/profile_sass.csv" 2>/dev/null
  summary+=("profile:     rc=$rc (fwd_profile.ncu-rep, profile_details.csv)")
  grep -E '"(SM Busy|Issue Slots Busy|Compute \(SM\) Throughput|Memory Throughput|Registers Per Thread|Achieved Occupancy)"' \
    "$out/profile_details.csv" | cut -d, -f13- | head -12
fi
pack
echo "== summary ($(head -2 "$out/device.txt" | tail -1))"
printf '%s\n' "${summary[@]}"
[ -f "$out/bench_fwd.log" ] && sed -n '/^TFLOPS/,$p' "$out/bench_fwd.log"
if [ -n "$pack_to" ]; then
  pack
  rm -rf "$out"
fi
exit $failed
