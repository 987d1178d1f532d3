#!/usr/bin/env python3
"""Clock and power of the GPU while fmha and cuDNN each run one forward problem back to back (H200 diagnostic).

Usage (on the GPU machine):
  python3 bench/power_probe.py --lib build/lib/libfmha_c.so [--seconds 3] [--problems bf16:128:8192:0,...]

--lib       libfmha_c.so to time (the C API of src/api/c_api.cpp, loaded as bench/bench_fwd.py does)
--seconds   how long each backend runs per problem while nvidia-smi samples every 50 ms (default 3)
--rounds    alternating fmha / cuDNN runs per problem (default 2)
--problems  comma list of DTYPE:D:SEQLEN:CAUSAL (bf16|fp16, head dim, sequence length, 0|1); shapes as in
            bench/bench_fwd.py: 16k total tokens, h = 2048 / d

For each problem and backend it prints the throughput over the sampled window (TFLOPS), the median SM clock (MHz),
the median board power (W), the clock-event reasons nvidia-smi reported most often (hex bitmask; 0x4 = software
power cap, 0x20 = software thermal slowdown, 0x1 = idle; see `nvidia-smi --help-query-gpu`), and two derived
figures: TFLOPS per GHz (the work a kernel does per clock cycle, independent of the clock the card chose) and
energy per unit of work (J per PFLOP). A kernel that does more per cycle but draws more power can still run slower
when the card holds its power cap by lowering the clock. Writes JSON with --json.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from bench_fwd import load_fmha  # noqa: E402


def parse_problem(text):
    parts = text.split(":")
    if len(parts) != 4 or parts[0] not in ("bf16", "fp16") or parts[3] not in ("0", "1"):
        raise argparse.ArgumentTypeError(f"--problems: expected DTYPE:D:SEQLEN:CAUSAL (e.g. bf16:128:8192:0), got '{text}'")
    return parts[0], int(parts[1]), int(parts[2]), parts[3] == "1"


def sample_while(fn, seconds):
    """Runs fn back to back for `seconds` while nvidia-smi samples clocks and power; returns (calls, elapsed s,
    samples). Each sample: (sm clock MHz, power W, clock-event reasons bitmask)."""
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,clocks_event_reasons.active",
                            "--format=csv,noheader,nounits", "-lms", "50"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.2)  # the sampler's start-up
    torch.cuda.synchronize()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            fn()
        calls += 20
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    smi.terminate()
    out, _ = smi.communicate()
    samples = []
    for line in out.splitlines():
        f = [x.strip() for x in line.split(",")]
        try:
            samples.append((float(f[0]), float(f[1]), int(f[2], 16)))
        except (ValueError, IndexError):
            continue
    return calls, elapsed, samples


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--problems", default="bf16:128:8192:0,fp16:128:8192:0,bf16:64:2048:1,bf16:64:8192:0")
    ap.add_argument("--rounds", type=int, default=2, help="fmha/cuDNN runs per problem, alternating (default 2)")
    ap.add_argument("--json")
    args = ap.parse_args()
    problems = [parse_problem(p) for p in args.problems.split(",")]
    fmha = load_fmha(args.lib)
    err = ctypes.create_string_buffer(512)
    rows = []
    limits = subprocess.run(["nvidia-smi", "--query-gpu=name,power.limit,enforced.power.limit,clocks.max.sm",
                             "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    print(f"# {limits} (name, power limit, enforced power limit, max SM clock)")
    print(f"{'problem':18} {'backend':7} {'TFLOPS':>7} {'MHz':>6} {'W':>6} {'reasons':>8} {'TF/GHz':>7} {'J/PF':>6}")
    for dt_name, d, s, causal in problems:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dt_name]
        b, h = max(1, 16384 // s), 2048 // d
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(3))
        o = torch.empty_like(q)
        lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        stream = torch.cuda.current_stream().cuda_stream
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def run_fmha():
            rc = fmha(1 if dt_name == "bf16" else 0, b, h, h, d, s, s, None, None, 0, 0, q.data_ptr(), k.data_ptr(),
                      v.data_ptr(), o.data_ptr(), lse.data_ptr(), 2 if causal else 0, 0, 0.0, 0, 0, stream, err, 512)
            if rc != 0:
                raise RuntimeError(f"fmha_fwd_contiguous: {err.value.decode()}")

        def run_cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        name = f"{dt_name} d{d} {s} {'c' if causal else 'nc'}"
        for backend, fn in [("fmha", run_fmha), ("cudnn", run_cudnn)] * args.rounds:
            sample_while(fn, 0.5)  # settle the clock at this backend's own level
            calls, elapsed, smp = sample_while(fn, args.seconds)
            if not smp:
                sys.exit("power_probe: nvidia-smi returned no samples")
            tflops = flops * calls / elapsed / 1e12
            mhz = statistics.median(x[0] for x in smp)
            watts = statistics.median(x[1] for x in smp)
            reasons = statistics.mode(x[2] for x in smp)
            row = {"problem": name, "backend": backend, "tflops": tflops, "sm_mhz": mhz, "power_w": watts,
                   "clock_event_reasons": reasons, "samples": len(smp), "tflops_per_ghz": tflops / (mhz / 1e3),
                   "joule_per_pflop": watts / (tflops / 1e3)}
            rows.append(row)
            print(f"{name:18} {backend:7} {tflops:7.1f} {mhz:6.0f} {watts:6.1f} {reasons:#8x} "
                  f"{row['tflops_per_ghz']:7.1f} {row['joule_per_pflop']:6.2f}", flush=True)
        del q, k, v, o, lse
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "command": " ".join(sys.argv), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
