#!/usr/bin/env python3
"""Host time per call of the PyTorch package in eager mode, against the C API's (bench/host_overhead.cpp).

On a problem so small that the GPU keeps up with the launches (1 × 128 × 1 head × d 64, bf16, the host_overhead
problem), times 20 rounds of 1000 calls each (the stream drained between rounds) of
  * fmha.attention(q, k, v)            (the Python function: argument handling + the operator)
  * torch.ops.fmha.fwd(q, k, v, …)     (the C++ operator through the dispatcher)
  * torch.empty_like(q) twice          (the allocations the operator makes for O and LSE, for scale)
and prints the median µs per call of each; with --host-overhead BIN LIB it also runs
`BIN LIB` (build/bin/fmha_host_overhead build/lib/libfmha_c.so) and prints fmha.attention's time minus the C API's.
GPU machine; PYTHONPATH must reach the fmha package (e.g. build/python).
"""
import argparse
import json
import re
import statistics
import subprocess
import time

import torch

import fmha


def per_call_us(fn, rounds=20, calls=1000):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        times.append((t1 - t0) / calls * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host-overhead", nargs=2, metavar=("BIN", "LIB"))
    ap.add_argument("--json")
    a = ap.parse_args()
    q = torch.randn(1, 128, 1, 64, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    op = torch.ops.fmha.fwd.default
    res = {
        "fmha.attention_us": per_call_us(lambda: fmha.attention(q, k, v)),
        "torch.ops.fmha.fwd_us": per_call_us(lambda: op(q, k, v, 0.0, False, True)),
        "two_empty_like_us": per_call_us(lambda: (torch.empty_like(q), torch.empty_like(q))),
    }
    if a.host_overhead:
        out = subprocess.run(list(a.host_overhead), capture_output=True, text=True, check=True).stdout
        m = re.findall(r"median[^0-9]*([0-9.]+)", out)
        res["c_api_us"] = float(m[-1]) if m else None
        res["c_api_output"] = out.strip().splitlines()[-3:]
        if res["c_api_us"] is not None:
            res["python_minus_c_api_us"] = res["fmha.attention_us"] - res["c_api_us"]
    res["device"] = torch.cuda.get_device_name()
    res["torch"] = torch.__version__
    print(json.dumps(res, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
