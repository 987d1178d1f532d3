#!/usr/bin/env python3
"""CPU test of bench/power_probe.py without a GPU or PyTorch: problem and nvidia-smi line parsing, the window and
power-skip selection of summarise, the background sampler against a fake nvidia-smi (arguments, time stamps, a stop
that returns what was read), the choice of the power field, and exit code 2 with a message naming the argument for
bad --problems / --seconds / --rounds. Exits non-zero with a message on the first failure."""
import importlib.util
import os
import stat
import subprocess
import sys
import tempfile
import time
from datetime import datetime

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "power_probe.py")
spec = importlib.util.spec_from_file_location("power_probe", SCRIPT)
pp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pp)


def check(cond, what):
    if not cond:
        sys.exit(f"test_power_probe: FAILED: {what}")


def raises(fn, exc, text):
    try:
        fn()
    except exc as e:
        return text in str(e)
    return False


# parse_problem
check(pp.parse_problem("bf16:128:8192:0") == ("bf16", 128, 8192, False), "parse_problem of a valid problem")
check(pp.parse_problem("fp16:64:2048:1") == ("fp16", 64, 2048, True), "parse_problem of a causal fp16 problem")
for bad in ("bf8:64:2048:1", "bf16:64:2048", "bf16:x:2048:0", "bf16:64:0:0", "bf16:64:2048:2", "bf16:-8:2048:0"):
    check(raises(lambda: pp.parse_problem(bad), ValueError, f"got '{bad}'"), f"parse_problem rejects '{bad}'")

# parse_sample
t = datetime(2026, 11, 30, 16, 50, 3, 123000).timestamp()
s = pp.parse_sample("2026/11/30 16:50:03.123, 1665, 612.34, 0x0000000000000004, 45\n")
check(s is not None and abs(s[0] - t) < 1e-6 and s[1:] == (1665.0, 612.34, 4, 45.0), f"parse_sample fields: {s}")
check(pp.parse_sample("2026/11/30 16:50:03.123, 1665, [N/A], 0x4, 45") is None, "parse_sample skips [N/A]")
check(pp.parse_sample("1665, 612.34, 0x4, 45") is None, "parse_sample skips a line with four fields")

# summarise: samples at 0.0 .. 3.0 s; the loop runs from 0.5 to 2.5 s; power counts from 1.5 s on (the loop's first
# second, 11 samples at 100 W, would otherwise outnumber its 10 at 650 W)
samples = []
for i in range(31):
    ts = i * 0.1
    inside = 0.5 <= ts <= 2.5
    samples.append((ts, 1700.0 if inside else 300.0, 650.0 if ts >= 1.55 else 100.0, 0x4 if ts < 1.0 else 0x0, 40.0))
st = pp.summarise(samples, 0.5, 2.5, 1.0)
check(st["sm_mhz"] == 1700.0, f"summarise clock uses only the loop's samples: {st}")
check(st["power_w"] == 650.0, f"summarise power skips the first second: {st}")
check(st["samples"] == 21 and st["power_samples"] == 11, f"summarise counts: {st}")
check(abs(st["power_cap_share"] - 5 / 21) < 1e-9, f"summarise power-cap share: {st}")
check(raises(lambda: pp.summarise(samples, 5.0, 6.0, 1.0), RuntimeError, "got 0 and 0"),
      "summarise raises without samples in the window")

with tempfile.TemporaryDirectory() as tmp:
    # A fake nvidia-smi: answers --help-query-gpu, and in -lms mode checks its arguments and prints a stamped line
    # every 10 ms until terminated.
    fake = os.path.join(tmp, "nvidia-smi")
    with open(fake, "w") as f:
        f.write(f"""#!{sys.executable}
import sys, time
from datetime import datetime
if sys.argv[1:] == ["--help-query-gpu"]:
    print("power.draw\\npower.draw.instant" if "INSTANT" in sys.argv[0] else "power.draw")
    sys.exit(0)
want = ["-i", "3", "--query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active,temperature.gpu",
        "--format=csv,noheader,nounits", "-lms", "50"]
if sys.argv[1:] != want:
    print("unexpected arguments", sys.argv[1:], file=sys.stderr)
    sys.exit(3)
while True:
    now = datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    print(f"{{now}}, 1650, 640.5, 0x0000000000000004, 50", flush=True)
    time.sleep(0.01)
""")
    os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
    t0 = time.time()
    sampler = pp.Sampler(3, "power.draw", smi=fake)
    time.sleep(0.4)
    got = sampler.stop()
    t1 = time.time()
    check(sampler.proc.returncode != 3, "the sampler passes the expected arguments to nvidia-smi")
    check(len(got) >= 5, f"the sampler read samples while running: {len(got)}")
    check(all(t0 - 1.0 <= x[0] <= t1 + 1.0 and x[1] == 1650.0 and x[3] == 4 for x in got),
          "the sampler's samples carry nvidia-smi's time stamps and values")
    check(pp.power_field(fake) == "power.draw", "power_field without power.draw.instant")
    instant = os.path.join(tmp, "INSTANT-nvidia-smi")
    os.symlink(fake, instant)
    check(pp.power_field(instant) == "power.draw.instant", "power_field with power.draw.instant")

# Argument errors exit 2 before anything needs PyTorch or a GPU, naming the argument.
for args, text in ((["--problems", "bf16:64:2048"], "--problems"), (["--seconds", "0"], "--seconds"),
                   (["--rounds", "0"], "--rounds"), (["--settle", "-1"], "--settle")):
    r = subprocess.run([sys.executable, SCRIPT, "--lib", "x.so", *args], capture_output=True, text=True)
    check(r.returncode == 2 and text in r.stderr,
          f"{args}: exit 2 naming {text}, got {r.returncode}: {r.stderr[-200:]}")

print("test_power_probe: all checks passed")
