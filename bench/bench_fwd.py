#!/usr/bin/env python3
"""Forward attention benchmark: fmha against PyTorch SDPA (cuDNN and FlashAttention-2 backends), side by side.

One process, the same inputs for every backend, CUDA-event timing: the backends take turns loop by loop in a new
random order every round (so thermal and clock drift, and the clock left by the previous backend, hit all alike),
each loop lasts about 20 ms after an untimed 5 ms pre-roll of the same backend, and each backend reports the median
over its loops after a warm-up.
Shapes follow shared/perf/h200-anchors.md: total tokens 16k (batch = 16384 / seqlen), heads = 2048 / d, dense BSHD.
FLOPs = 4 · batch · heads · seqlen² · d, halved for causal (docs/numerics.md). Each fmha output is also compared
with cuDNN's (max abs difference, reported as `err`).

Usage: python3 bench/bench_fwd.py --lib build/lib/libfmha_c.so [--json out.json] [--dtypes bf16,fp16]
       [--dims 64,128] [--seqlens 512,1024,2048,4096,8192,16384] [--causal 0,1] [--reps 15]
`fmha` is the library's default schedule; --variants also times every explicit (scheduler, ping-pong) choice;
--alt NAME=PATH (repeatable) also times another build of libfmha_c.so (an A/B of a kernel change) with its default
schedule, interleaved with the rest and checked against cuDNN the same way.
"""
import argparse
import ctypes
import json
import random
import statistics
import sys
import zlib

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def load_fmha(path):
    lib = ctypes.CDLL(path)
    f = lib.fmha_fwd_contiguous
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_int] * 7 + [ctypes.c_void_p] * 2 + [ctypes.c_int] * 2 + [ctypes.c_void_p] * 5 + \
        [ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
         ctypes.c_int]
    return f


def make_inputs(dt_name, d, s, total=16384):
    """The benchmark's inputs for one problem: batch b = max(1, total // s), h = 2048 // d heads, dense BSHD
    Q, K, V of shape (b, s, h, d) in dtype dt_name ("bf16" | "fp16"), Gaussian with seed 0, on the current CUDA
    device; O like Q (uninitialised) and LSE (b, h, s) fp32. Returns (b, h, q, k, v, o, lse). bench/power_probe.py
    and scripts/timeline.py use it too, so that all three run the same problems."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dt_name]
    b, h = max(1, total // s), 2048 // d
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    return b, h, q, k, v, o, lse


def fmha_call(lib, dt_name, b, h, d, s, causal, q, k, v, o, lse, scheduler=0, pingpong=0):
    """A function of no arguments that runs fmha once through `lib` (fmha_fwd_contiguous, from load_fmha) on the
    benchmark's tensors as make_inputs makes them: Q, K, V, O of shape (b, s, h, d) in dt_name ("bf16" | "fp16"),
    h query and h K/V heads, LSE (b, h, s) fp32; causal (top-left) or no mask, the default softmax scale 1/sqrt(d),
    on torch's current CUDA stream (taken now). scheduler / pingpong are the C API's values (0 = the library's
    choice). The function raises RuntimeError with the library's message when the call fails."""
    err = ctypes.create_string_buffer(512)
    stream = torch.cuda.current_stream().cuda_stream

    def fn():
        rc = lib(1 if dt_name == "bf16" else 0, b, h, h, d, s, s, None, None, 0, 0, q.data_ptr(), k.data_ptr(),
                 v.data_ptr(), o.data_ptr(), lse.data_ptr(), 2 if causal else 0, 0, 0.0, scheduler, pingpong, stream,
                 err, 512)
        if rc != 0:
            raise RuntimeError(f"fmha_fwd_contiguous: {err.value.decode()}")
    return fn


def time_interleaved(fns, reps, loop_ms, preroll_ms=0.0, seed=1234):
    """Median ms per call of each fn in `fns` (name -> callable). The backends take turns: every round times one
    loop of back-to-back calls of each (one CUDA-event pair per loop), so clock and temperature drift during a
    long sweep falls on all of them alike, and the order is shuffled every round. Each backend's loop holds enough calls to last about `loop_ms` (from
    its warm-up time), so that short kernels are not timed in bursts of a few microseconds while the card's clock
    settles. Before each timed loop the same backend runs untimed for about `preroll_ms`, so that the clock the
    previous backend left (higher after a slow, low-power one) has settled to this backend's own before timing starts.
    `seed` sets the shuffled orders (give each problem its own: one seed for all would repeat the same orders, and
    with them the same predecessors, in every row). A backend that raises during warm-up is left out (its error is
    returned instead)."""
    times, errors, inner = {}, {}, {}
    for name, fn in fns.items():
        try:
            for _ in range(3):
                fn()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(3):
                fn()
            end.record()
            end.synchronize()
            inner[name] = max(1, round(loop_ms / max(start.elapsed_time(end) / 3, 1e-3)))
            times[name] = []
        except RuntimeError as e:  # a backend that does not take this shape
            errors[name] = str(e).splitlines()[0]
    names = list(times)
    order = random.Random(seed)
    for _ in range(reps):
        # A fresh random order every round: a backend timed right after a slow, low-power one finds the card's
        # clock higher (3-6 % measured on the H200 for the backend that always followed FlashAttention-2), so no
        # backend may keep the same predecessor. Rotating the order is not enough: it keeps every predecessor.
        order.shuffle(names)
        for name in names:
            for _ in range(round(inner[name] * preroll_ms / loop_ms)):
                fns[name]()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner[name]):
                fns[name]()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / inner[name])
    return {n: statistics.median(t) for n, t in times.items()}, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--json")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--total", type=int, default=16384)
    ap.add_argument("--loop-ms", type=float, default=20.0, help="length of one timed loop per backend (ms)")
    ap.add_argument("--preroll-ms", type=float, default=5.0,
                    help="untimed run of the same backend before each timed loop (ms), so the clock settles")
    ap.add_argument("--variants", action="store_true",
                    help="also time every explicit schedule (scheduler × ping-pong) next to the library's choice")
    ap.add_argument("--alt", action="append", default=[], metavar="NAME=PATH",
                    help="also time the libfmha_c.so at PATH (default schedule) under the column NAME")
    args = ap.parse_args()

    fmha = load_fmha(args.lib)
    alts = []
    for spec in args.alt:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            ap.error(f"--alt: expected NAME=PATH, got '{spec}'")
        alts.append((name, load_fmha(path)))
    dev = torch.cuda.get_device_name()
    rows = []
    print(f"# device: {dev}; torch {torch.__version__}; cuDNN {torch.backends.cudnn.version()}")
    for dt_name in args.dtypes.split(","):
        for d in [int(x) for x in args.dims.split(",")]:
            for causal in [bool(int(x)) for x in args.causal.split(",")]:
                for s in [int(x) for x in args.seqlens.split(",")]:
                    b, h, q, k, v, o, lse = make_inputs(dt_name, d, s, args.total)

                    def fmha_fn(scheduler, pingpong, lib=fmha):
                        return fmha_call(lib, dt_name, b, h, d, s, causal, q, k, v, o, lse, scheduler, pingpong)
                    run_fmha = fmha_fn(0, 0)  # the library's choice

                    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # (b, h, s, d) views

                    def sdpa(backend):
                        def fn():
                            with sdpa_kernel(backend):
                                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                        return fn

                    flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
                    row = {"dtype": dt_name, "d": d, "causal": causal, "seqlen": s, "batch": b, "heads": h}
                    run_fmha()
                    ref = sdpa(SDPBackend.CUDNN_ATTENTION)().transpose(1, 2)
                    row["err_vs_cudnn"] = (o.float() - ref.float()).abs().max().item()
                    variants = [("fmha", run_fmha)]
                    for name, lib in alts:
                        fn = fmha_fn(0, 0, lib)
                        fn()
                        row[f"err_{name}_vs_cudnn"] = (o.float() - ref.float()).abs().max().item()
                        variants.append((name, fn))
                    if args.variants:  # every explicit schedule: i/p = individual/persistent, pp/nopp = ping-pong
                        variants += [(f"fmha_{sn}_{pn}", fmha_fn(si, pi)) for si, sn in ((1, "i"), (2, "p"))
                                     for pi, pn in ((2, "pp"), (1, "nopp"))]
                    fns = dict(variants + [("cudnn", sdpa(SDPBackend.CUDNN_ATTENTION)),
                                           ("fa2", sdpa(SDPBackend.FLASH_ATTENTION))])
                    seed = zlib.crc32(f"{dt_name} {d} {causal} {s}".encode())
                    medians, errors = time_interleaved(fns, args.reps, args.loop_ms, args.preroll_ms, seed)
                    for name in fns:
                        ms = medians.get(name)
                        row[name + "_ms"] = ms
                        row[name + "_tflops"] = flops / (ms * 1e-3) / 1e12 if ms else None
                        if name in errors:
                            row[name + "_error"] = errors[name]
                    if row.get("cudnn_tflops"):
                        row["ratio_vs_cudnn"] = row["fmha_tflops"] / row["cudnn_tflops"]

                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    del q, k, v, o, lse, ref
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                       "command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    print()
    names = [k[:-7] for k in rows[0] if k.endswith("_tflops")] if rows else []
    print("TFLOPS; fmha = the library's default schedule" +
          ("; fmha_<i|p>_<pp|nopp> = individual/persistent scheduler, with/without ping-pong" if args.variants else ""))
    print(f"{'dtype':5} {'d':>4} {'causal':>6} {'seqlen':>6} | " + " ".join(f"{n[:13]:>13}" for n in names) +
          f" | {'fmha/cuDNN':>10} | err")
    for r in rows:
        f = lambda x: f"{x:13.0f}" if x else f"{'n/a':>13}"
        print(f"{r['dtype']:5} {r['d']:4} {str(r['causal']):>6} {r['seqlen']:6} | " +
              " ".join(f(r[n + '_tflops']) for n in names) +
              f" | {r.get('ratio_vs_cudnn', 0):10.3f} | " +
              " ".join(f"{v:.2e}" for k, v in r.items() if k.startswith("err") and k.endswith("vs_cudnn")))

if __name__ == "__main__":
    main()
