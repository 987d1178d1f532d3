#!/usr/bin/env python3
"""CPU test of scripts/dram_sweep.sh without a GPU: a fake ncu (on PATH) writes a metrics CSV in ncu's format
(thousands separators, base units) into its --log-file, with the bytes it was given per library. The test checks
the arguments of every ncu call (the fmha_fwd and peer shapes and dtype, --causal, the kernel filters, base units,
clocks left alone), the table (read GB, the multiple of the compulsory Q + K + V bytes, written GB, L2 hit rate, ms,
grid and kernel), --table (the table again from the logs, no profiling), exit code 1 for a profile without a kernel,
a failing ncu and a metric in other units, and exit code 2 with a message naming the bad problem before any ncu
call. Exits non-zero with a message on the first failure."""
import os
import stat
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "dram_sweep.sh")

FAKE_NCU = r'''#!/usr/bin/env bash
# fake ncu: records its arguments, writes a CSV into --log-file (none if FAKE_NCU_SKIP matches the command; exit 1
# if FAKE_NCU_FAIL does; the time in FAKE_NCU_TIME_UNIT, default ns)
log=""
for ((i = 1; i <= $#; i++)); do
  if [ "${!i}" = --log-file ]; then j=$((i + 1)); log=${!j}; fi
done
echo "$*" >> "$FAKE_NCU_ARGS"
case "$*" in *peer_launch*) bytes=201,326,592 kernel=cudnn_fake_kernel ;; *) bytes=318,767,104 kernel="void fwd_kernel<X>" ;; esac
if [ -n "${FAKE_NCU_SKIP:-}" ] && [[ "$*" == *"$FAKE_NCU_SKIP"* ]]; then echo "==PROF== no kernels" > "$log"; exit 0; fi
H='"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
P="\"0\",\"1\",\"p\",\"h\",\"$kernel\",\"1\",\"7\",\"(384, 1, 1)\",\"(132, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\""
{
  echo "==PROF== Connected to process 1"
  echo "$H"
  echo "$P,\"dram__bytes_read.sum\",\"byte\",\"$bytes\""
  echo "$P,\"dram__bytes_write.sum\",\"byte\",\"67,108,864\""
  echo "$P,\"gpu__time_duration.sum\",\"${FAKE_NCU_TIME_UNIT:-ns}\",\"1,597,000\""
  echo "$P,\"lts__t_sector_hit_rate.pct\",\"%\",\"91.50\""
} > "$log"
if [ -n "${FAKE_NCU_FAIL:-}" ] && [[ "$*" == *"$FAKE_NCU_FAIL"* ]]; then exit 1; fi
'''


def check(cond, what):
    if not cond:
        sys.exit(f"test_dram_sweep: FAILED: {what}")


with tempfile.TemporaryDirectory() as tmp:
    bindir = os.path.join(tmp, "path")
    build = os.path.join(tmp, "build")
    os.makedirs(bindir)
    os.makedirs(os.path.join(build, "bin"))
    for path, text in ((os.path.join(bindir, "ncu"), FAKE_NCU), (os.path.join(build, "bin", "fmha_fwd"), "#!/bin/sh\n")):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"], FAKE_NCU_ARGS=os.path.join(tmp, "args"))

    def run(*args, **extra):
        return subprocess.run(["bash", SCRIPT, *args], env=dict(env, **extra), capture_output=True, text=True)

    out = os.path.join(tmp, "out")
    r = run(build, out, "bf16:128:8192:0,fp16:64:2048:1")
    check(r.returncode == 0, f"exit 0 on two good problems (got {r.returncode}: {r.stderr})")
    table = open(os.path.join(out, "dram_sweep.txt")).read()
    lines = [l.split() for l in table.splitlines() if l.startswith(("bf16", "fp16"))]
    check(len(lines) == 4, f"four table rows (got {len(lines)})")
    # d 128, 8k: b = 2, h = 16; compulsory 3 * 2 * 8192 * 16 * 128 * 2 bytes = 201326592
    check(lines[0][:3] == ["bf16_d128_s8192_c0", "fmha", "0.319"], f"fmha row of d 128 8k: {lines[0]}")
    check(lines[0][3] == "1.58", f"fmha read = 1.58 x compulsory: {lines[0]}")
    check(lines[1][1] == "cudnn" and lines[1][3] == "1.00", f"cuDNN row reads 1.00 x: {lines[1]}")
    check(lines[0][4:8] == ["0.067", "91.5", "1.597", "(132,1,1)"], f"written GB, L2 hit %, ms, grid: {lines[0]}")
    check(" ".join(lines[0][8:]) == "void fwd_kernel<X>" and lines[1][8:] == ["cudnn_fake_kernel"],
          f"the profiled kernels are named: {lines[0][8:]}, {lines[1][8:]}")
    # d 64, 2k: b = 8, h = 32: compulsory 3 * 8 * 2048 * 32 * 64 * 2 = 201326592 as well
    check(lines[3][0] == "fp16_d64_s2048_c1" and lines[3][3] == "1.00", f"causal fp16 d 64 row: {lines[3]}")
    calls = open(os.path.join(tmp, "args")).read().splitlines()
    check(len(calls) == 4, f"two ncu calls per problem (got {len(calls)})")
    fmha_calls, peer_calls = calls[0::2], calls[1::2]
    check(all("fmha_fwd" in c for c in fmha_calls) and all("peer_launch.py" in c for c in peer_calls),
          "fmha first, then the peer, per problem")
    for c in calls:
        for flag in ("--clock-control none", "--csv", "--print-units base", "--launch-count 1",
                     "--metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum"):
            check(flag in c, f"'{flag}' in every ncu call: {c}")
    for c in fmha_calls:
        check("--kernel-name regex:fwd_kernel --launch-skip 1" in c, f"fmha's kernel filter: {c}")
    for c in peer_calls:
        check("--profile-from-start off" in c, f"the peer is profiled inside its range only: {c}")
    check("--dtype=bf16 --b=2 --h=16 --q=8192 --k=8192 --d=128 --mask=none" in calls[0], f"fmha_fwd shape: {calls[0]}")
    check("--dtype bf16 --b 2 --h 16 --s 8192 --d 128" in calls[1] and "--causal" not in calls[1],
          f"non-causal peer shape: {calls[1]}")
    check("--dtype=fp16 --b=8 --h=32 --q=2048 --k=2048 --d=64 --mask=causal" in calls[2], f"fp16 causal fmha: {calls[2]}")
    check("--dtype fp16 --b 8 --h 32 --s 2048 --d 64 --causal" in calls[3], f"fp16 peer shape with --causal: {calls[3]}")

    # --table: the same table from the logs, no ncu call
    os.remove(os.path.join(tmp, "args"))
    r = run("--table", out, "bf16:128:8192:0,fp16:64:2048:1")
    check(r.returncode == 0 and r.stdout == table, f"--table prints the same table (got {r.returncode}: {r.stdout})")
    check(not os.path.exists(os.path.join(tmp, "args")), "--table runs no ncu")

    r = run(build, os.path.join(tmp, "out2"), "bf16:64:4096:0", FAKE_NCU_SKIP="peer_launch")
    check(r.returncode == 1, f"exit 1 when a profile has no kernel (got {r.returncode})")
    check("no profile" in r.stdout, f"the missing profile is named in the table: {r.stdout}")
    r = run(build, os.path.join(tmp, "out3"), "bf16:64:4096:0", FAKE_NCU_FAIL="fmha_fwd")
    check(r.returncode == 1, f"exit 1 when ncu fails (got {r.returncode})")
    r = run(build, os.path.join(tmp, "out4"), "bf16:64:4096:0", FAKE_NCU_TIME_UNIT="usecond")
    check(r.returncode == 1 and "expected 'ns'" in r.stderr, f"exit 1 on a metric in other units (got {r.returncode}: {r.stderr})")

    os.remove(os.path.join(tmp, "args"))
    for bad, word in (("bf16:64:2048", "DTYPE"), ("bf8:64:2048:0", "DTYPE"), ("bf16:64:0:0", "SEQLEN"),
                      ("bf16:x:2048:1", "D and SEQLEN"), ("bf16:64:32768:0", "SEQLEN must be"),
                      ("bf16:64:2048:0:1", "four fields")):
        # the bad problem comes second: nothing may be profiled before the check
        r = run(build, os.path.join(tmp, "bad"), "bf16:64:2048:0," + bad)
        check(r.returncode == 2 and bad in r.stderr and word in r.stderr,
              f"exit 2 naming '{bad}' and {word} (got {r.returncode}: {r.stderr.strip()})")
    r = run(build, os.path.join(tmp, "bad"), "bf16:64:2048:0,,bf16:64:4096:0")
    check(r.returncode == 2 and "DTYPE" in r.stderr, f"exit 2 on an empty entry (got {r.returncode})")
    check(not os.path.exists(os.path.join(tmp, "args")), "no ncu call before the problems are checked")
    r = run(os.path.join(tmp, "nobuild"), out)
    check(r.returncode == 2 and "BUILD_DIR" in r.stderr, f"exit 2 naming BUILD_DIR (got {r.returncode})")
print("test_dram_sweep: all checks passed")
