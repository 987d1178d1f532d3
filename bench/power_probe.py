#!/usr/bin/env python3
"""Clock and power of the GPU while fmha and cuDNN each run one forward problem back to back (H200 diagnostic).

Usage (on the GPU machine):
  python3 bench/power_probe.py --lib build/lib/libfmha_c.so [--seconds 3] [--rounds 2] [--gpu 0]
                               [--problems bf16:128:8192:0,...] [--json FILE]

--lib       libfmha_c.so to time (the C API of src/api/c_api.cpp, loaded as bench/bench_fwd.py does)
--seconds   length of each timed loop (default 3); a backend first runs untimed for --settle seconds (default 1)
--rounds    rounds per problem (default 2); odd rounds run fmha then cuDNN, even rounds cuDNN then fmha
--gpu       the nvidia-smi index (-i) of the GPU that torch uses (default 0; with several GPUs, the one
            CUDA_VISIBLE_DEVICES names first)
--problems  comma list of DTYPE:D:SEQLEN:CAUSAL (bf16|fp16, head dim, sequence length, 0|1); shapes as in
            bench/bench_fwd.py: 16k total tokens, h = 2048 / d

One nvidia-smi process samples the GPU every 50 ms from before the untimed run to the end of the timed loop, with
its own time stamps (so that nvidia-smi's output buffering does not matter). Only samples taken during the timed
loop count, and for power only those from 1 s
after its start on: `power.draw` is averaged over about a second on recent GPUs, so earlier samples would still
hold the time before the loop. Where nvidia-smi has `power.draw.instant`, that field is read instead and every
sample of the loop counts.

For each problem, backend and round it prints the throughput of the timed loop (TFLOPS), the median SM clock
(MHz), the median board power (W), the share of samples whose clock-event reasons have the software power-cap bit
(0x4) set, the GPU temperature (median, °C), and two derived figures: TFLOPS per GHz (the work a kernel does per
clock cycle, whatever clock the card chose) and energy per unit of work (J per PFLOP = W / PFLOPS). At a power cap
the card lowers the clock to hold the power, so a kernel can gain either by more work per cycle or by less energy
per FLOP. Writes every row to --json.

History: the first version (commits 90db969..f0e982e, used for perf-log v15) started a sampler per timed loop after
a 0.2 s idle gap and kept every sample; its power medians of 2 s loops are biased low by that gap (its clocks are
not, apart from a few samples).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime

POWER_CAP_BIT = 0x4  # clocks_event_reasons: software power cap


def parse_problem(text):
    """DTYPE:D:SEQLEN:CAUSAL -> (dtype name, head dim, seqlen, causal); raises ValueError with the expected form."""
    parts = text.split(":")
    bad = ValueError(f"--problems: expected DTYPE:D:SEQLEN:CAUSAL (e.g. bf16:128:8192:0), got '{text}'")
    if len(parts) != 4 or parts[0] not in ("bf16", "fp16") or parts[3] not in ("0", "1"):
        raise bad
    try:
        d, s = int(parts[1]), int(parts[2])
    except ValueError:
        raise bad from None
    if d <= 0 or s <= 0:
        raise bad
    return parts[0], d, s, parts[3] == "1"


def parse_sample(line):
    """One nvidia-smi CSV line (timestamp "YYYY/MM/DD HH:MM:SS.mmm" in local time, clock MHz, power W, reasons hex,
    temperature °C) -> (seconds since the epoch, clock, power, reasons, temperature), or None if unreadable
    (nvidia-smi prints "[N/A]" or "[Not Supported]" for fields it cannot read)."""
    f = [x.strip() for x in line.split(",")]
    if len(f) != 5:
        return None
    try:
        t = datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        return t, float(f[1]), float(f[2]), int(f[3], 16), float(f[4])
    except ValueError:
        return None


class Sampler:
    """Runs `nvidia-smi -i GPU --query-gpu=timestamp,... -lms 50` in the background; a thread reads its lines as
    they come, so the pipe never fills. `smi` is the command to run."""

    def __init__(self, gpu, power_field, smi="nvidia-smi", period_ms=50):
        fields = f"timestamp,clocks.sm,{power_field},clocks_event_reasons.active,temperature.gpu"
        self.proc = subprocess.Popen([smi, "-i", str(gpu), f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                                      "-lms", str(period_ms)], stdout=subprocess.PIPE, text=True)
        self.samples = []  # parse_sample tuples
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            s = parse_sample(line)
            if s is not None:
                self.samples.append(s)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.thread.join(timeout=5)
        return list(self.samples)


def summarise(samples, start, end, power_skip):
    """Medians over the parse_sample tuples stamped in [start, end] (power: in [start + power_skip, end]); times in
    seconds since the epoch. Returns a dict, or raises RuntimeError naming what is missing."""
    inside = [s[1:] for s in samples if start <= s[0] <= end]
    powered = [s[1:] for s in samples if start + power_skip <= s[0] <= end]
    if not inside or not powered:
        raise RuntimeError(f"power_probe: expected nvidia-smi samples inside the timed loop ({end - start:.2f} s, "
                           f"power from {power_skip:.1f} s on), got {len(inside)} and {len(powered)}")
    return {"sm_mhz": statistics.median(s[0] for s in inside), "power_w": statistics.median(s[1] for s in powered),
            "power_cap_share": sum(1 for s in inside if s[2] & POWER_CAP_BIT) / len(inside),
            "temperature_c": statistics.median(s[3] for s in inside), "samples": len(inside),
            "power_samples": len(powered)}


def power_field(smi="nvidia-smi"):
    """'power.draw.instant' where this nvidia-smi knows it, else 'power.draw' (about a 1 s average)."""
    listing = subprocess.run([smi, "--help-query-gpu"], capture_output=True, text=True).stdout
    return "power.draw.instant" if "power.draw.instant" in listing else "power.draw"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--problems",
                    default="bf16:128:8192:0,fp16:128:8192:0,bf16:128:4096:1,bf16:64:2048:1,bf16:64:8192:0")
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        problems = [parse_problem(p) for p in args.problems.split(",")]
    except ValueError as e:
        ap.error(str(e))
    for name, v in (("--seconds", args.seconds), ("--rounds", args.rounds)):
        if v <= 0:
            ap.error(f"{name}: expected a positive number, got {v}")
    if args.settle < 0:
        ap.error(f"--settle: expected a number >= 0, got {args.settle}")

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from bench_fwd import fmha_call, load_fmha, make_inputs

    fmha = load_fmha(args.lib)
    field = power_field()
    power_skip = 0.0 if field == "power.draw.instant" else 1.0
    limits = subprocess.run(["nvidia-smi", "-i", args.gpu, "--query-gpu=name,power.limit,enforced.power.limit,"
                             "clocks.max.sm", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    print(f"# {limits} (name, power limit, enforced power limit, max SM clock); torch device "
          f"{torch.cuda.get_device_name()}; power field {field}")
    print(f"{'problem':18} {'backend':7} {'TFLOPS':>7} {'MHz':>6} {'W':>6} {'cap%':>5} {'°C':>4} {'TF/GHz':>7} "
          f"{'J/PF':>7}")
    rows = []
    for dt_name, d, s, causal in problems:
        b, h, q, k, v, o, lse = make_inputs(dt_name, d, s)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        run_fmha = fmha_call(fmha, dt_name, b, h, d, s, causal, q, k, v, o, lse)

        def run_cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

        def loop(fn, seconds):
            """Runs fn back to back for about `seconds`; returns (calls, elapsed s)."""
            torch.cuda.synchronize()
            t0, calls = time.perf_counter(), 0
            while time.perf_counter() - t0 < seconds:
                for _ in range(20):
                    fn()
                calls += 20
                torch.cuda.synchronize()
            return calls, time.perf_counter() - t0

        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        name = f"{dt_name} d{d} {s} {'c' if causal else 'nc'}"
        for r in range(args.rounds):
            order = [("fmha", run_fmha), ("cudnn", run_cudnn)]
            for backend, fn in (order if r % 2 == 0 else order[::-1]):
                sampler = Sampler(args.gpu, field)
                loop(fn, args.settle)  # the sampler starts meanwhile; the clock settles at this backend's level
                start = time.time()
                calls, elapsed = loop(fn, args.seconds)
                end = time.time()
                stats = summarise(sampler.stop(), start, end, power_skip)
                tflops = flops * calls / elapsed / 1e12
                row = {"problem": name, "backend": backend, "round": r + 1, "tflops": tflops, **stats,
                       "tflops_per_ghz": tflops / (stats["sm_mhz"] / 1e3),
                       "joule_per_pflop": stats["power_w"] / (tflops / 1e3), "power_field": field}
                rows.append(row)
                print(f"{name:18} {backend:7} {tflops:7.1f} {stats['sm_mhz']:6.0f} {stats['power_w']:6.1f} "
                      f"{100 * stats['power_cap_share']:5.0f} {stats['temperature_c']:4.0f} "
                      f"{row['tflops_per_ghz']:7.1f} {row['joule_per_pflop']:7.1f}", flush=True)
        del q, k, v, o, lse
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "limits": limits, "command": " ".join(sys.argv),
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
