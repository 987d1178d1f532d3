#!/usr/bin/env python3
"""Forward attention benchmark: fmha against cuDNN and FlashAttention-2 (PyTorch SDPA backends) and, where it is
built, FlashAttention-3 (its own `flash_attn_interface`), side by side.

One process, the same inputs for every backend, CUDA-event timing: the backends take turns loop by loop in a new
random order every round (so thermal and clock drift, and the clock left by the previous backend, hit all alike),
each loop lasts about 20 ms after an untimed 5 ms pre-roll of the same backend, and each backend reports the median
over its loops after a warm-up.
Shapes: total tokens 16k (batch = 16384 / seqlen), heads = 2048 / d, dense BSHD.
FLOPs = 4 · batch · heads · seqlen² · d, halved for causal (docs/numerics.md). Each fmha output (and FA3's) is also
compared with cuDNN's (max abs difference, reported as `err`).

Usage: python3 bench/bench_fwd.py --lib build/lib/libfmha_c.so [--json out.json] [--dtypes bf16,fp16]
       [--dims 64,128] [--seqlens 512,1024,2048,4096,8192,16384] [--causal 0,1] [--reps 15] [--fa3 DIR]
`fmha` is the library's default schedule; --variants also times every explicit (scheduler, ping-pong) choice;
--alt NAME=PATH (repeatable) also times another build of libfmha_c.so (an A/B of a kernel change) with its default
schedule, interleaved with the rest and checked against cuDNN the same way.
--fa3 DIR (default: $FMHA_FA3_DIR) times FlashAttention-3 from the build in DIR (DIR/hopper/flash_attn_interface.py)
as the column `fa3`; without it a plain `import flash_attn_interface` is tried. FA3 is never required: where it does
not import, one line `# FlashAttention-3: not available (reason)` is printed and the column is left out.
Each row also names its fastest peer among cudnn, fa2 and fa3 (`best_peer`, `best_peer_tflops`) and gives fmha's
ratio to it (`ratio_vs_best_peer`), to cuDNN (`ratio_vs_cudnn`) and to FA3 (`ratio_vs_fa3`, where FA3 ran).
"""
import argparse
import ctypes
import json
import os
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


PEERS = ("cudnn", "fa2", "fa3")  # the other libraries fmha is compared with (row keys <name>_tflops)


def load_fa3(fa3_dir=None):
    """FlashAttention-3's `flash_attn_func`, from the build in `fa3_dir` (its folder `hopper/`, put first on
    sys.path, must hold flash_attn_interface.py, and the module must come from there) or, with fa3_dir None or "",
    from wherever a plain `import flash_attn_interface` finds it (PYTHONPATH, site-packages). Returns
    (flash_attn_func, path of the module's file) on success and (None, reason) otherwise: a missing folder or file,
    an import that fails in any way (a missing compiled extension, one built for another torch or CUDA, an error while
    the module runs), a module imported earlier from elsewhere, or a module without flash_attn_func. Never raises; a
    failed call leaves sys.path and sys.modules as they were."""
    hopper, preloaded = None, "flash_attn_interface" in sys.modules
    if fa3_dir:
        hopper = os.path.abspath(os.path.join(fa3_dir, "hopper"))
        if not os.path.isfile(os.path.join(hopper, "flash_attn_interface.py")):
            return None, f"no {os.path.join(hopper, 'flash_attn_interface.py')}"
        sys.path.insert(0, hopper)
    try:
        import flash_attn_interface
        module_file = os.path.abspath(getattr(flash_attn_interface, "__file__", None) or "?")
        if hopper and os.path.dirname(module_file) != hopper:
            raise ImportError(f"flash_attn_interface was already imported from {module_file}")
        fn = getattr(flash_attn_interface, "flash_attn_func", None)
        if not callable(fn):
            raise ImportError(f"{module_file} has no flash_attn_func")
        return fn, module_file
    except Exception as e:  # anything the import raises means: no FA3 here, and the benchmark goes on without it
        if hopper and hopper in sys.path:
            sys.path.remove(hopper)
        if not preloaded:  # a module this call imported but cannot use (no flash_attn_func) is dropped again
            sys.modules.pop("flash_attn_interface", None)
        lines = str(e).strip().splitlines()
        return None, f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def fa3_call(flash_attn_func, q, k, v, causal):
    """A function of no arguments that runs FlashAttention-3 (`flash_attn_func`, from load_fa3) once on the
    benchmark's tensors as make_inputs makes them: q, k, v of shape (b, s, h, d), bf16 or fp16 — BSHD is FA3's own
    layout, so no transpose — with the default softmax scale 1/sqrt(d) and causal or no mask (FA3's causal mask is
    aligned bottom-right, which is top-left here since s_q = s_k). The function returns the output, (b, s, h, d) in
    q's dtype (element 0 where flash_attn_func returns a tuple (out, lse), as some versions do), and raises
    RuntimeError for any failure of the call (other exceptions are re-raised as RuntimeError with the original as
    the cause), so that time_interleaved leaves FA3 out of a problem it does not take."""
    def fn():
        try:
            out = flash_attn_func(q, k, v, softmax_scale=None, causal=causal)
        except RuntimeError:
            raise
        except Exception as e:
            raise RuntimeError(f"flash_attn_func: {type(e).__name__}: {e}") from e
        return out[0] if isinstance(out, tuple) else out
    return fn


def peer_ratios(row, peers=PEERS):
    """fmha against its peers in one result row (a dict with keys "<backend>_tflops"; a missing, None or zero value
    means that backend did not run). Returns a dict with, where at least one peer ran, "best_peer" (the name of the
    fastest peer in `peers`, the first in that order on a tie), "best_peer_tflops" and "ratio_vs_best_peer"
    (fmha_tflops / best_peer_tflops), and "ratio_vs_<peer>" for cudnn and fa3 where they ran; a ratio is None where
    fmha did not run. fmha itself, its --alt builds and --variants columns are never peers. Pure: no torch."""
    ran = {p: row.get(p + "_tflops") for p in peers}
    ran = {p: t for p, t in ran.items() if t}
    fmha = row.get("fmha_tflops")
    out = {}
    if ran:
        best = max(ran, key=ran.get)
        out.update(best_peer=best, best_peer_tflops=ran[best], ratio_vs_best_peer=fmha / ran[best] if fmha else None)
    for p in ("cudnn", "fa3"):
        if p in ran:
            out["ratio_vs_" + p] = fmha / ran[p] if fmha else None
    return out


def print_table(rows, variants=False):
    """The closing table, one line per row: TFLOPS of every backend that has a column (the "<name>_ms" keys: fmha,
    --alt, --variants, cudnn, fa2, fa3), then fmha / the best peer and that peer's name, fmha / cuDNN, fmha / FA3
    (n/a where absent) and the max abs differences from cuDNN (err_*_vs_cudnn)."""
    names = list(dict.fromkeys(k[:-3] for r in rows for k in r if k.endswith("_ms")))
    errs = list(dict.fromkeys(k for r in rows for k in r if k.startswith("err") and k.endswith("_vs_cudnn")))
    width = {n: max(5, len(n)) for n in names}
    print("TFLOPS; fmha = the library's default schedule" +
          ("; fmha_<i|p>_<pp|nopp> = individual/persistent scheduler, with/without ping-pong" if variants else "") +
          "; best = the fastest of cudnn, fa2, fa3")
    err_names = " ".join("fmha" if e == "err_vs_cudnn" else e[4:-9] for e in errs)
    print(f"{'dtype':5} {'d':>3} {'causal':>6} {'seqlen':>6} | " + " ".join(f"{n:>{width[n]}}" for n in names) +
          f" | {'fmha/best':>9} {'best':>5} {'fmha/cuDNN':>10} {'fmha/FA3':>8} | err vs cuDNN ({err_names})")

    def num(x, w, fmt):
        return f"{x:{w}{fmt}}" if isinstance(x, (int, float)) else f"{'n/a':>{w}}"
    for r in rows:
        print(f"{r['dtype']:5} {r['d']:3} {str(r['causal']):>6} {r['seqlen']:6} | " +
              " ".join(num(r.get(n + "_tflops"), width[n], ".0f") for n in names) +
              f" | {num(r.get('ratio_vs_best_peer'), 9, '.3f')} {r.get('best_peer') or 'n/a':>5}"
              f" {num(r.get('ratio_vs_cudnn'), 10, '.3f')} {num(r.get('ratio_vs_fa3'), 8, '.3f')} | " +
              " ".join(num(r.get(e), 8, ".2e") for e in errs))


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
    ap.add_argument("--fa3", metavar="DIR", default=os.environ.get("FMHA_FA3_DIR") or None,
                    help="also time FlashAttention-3 built in DIR (DIR/hopper/flash_attn_interface.py) as the column "
                         "fa3 (default: $FMHA_FA3_DIR; without either, a plain `import flash_attn_interface` is tried)")
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
    fa3_fn, fa3_info = load_fa3(args.fa3)
    fa3_module = fa3_info if fa3_fn else None
    print(f"# FlashAttention-3: {fa3_module}" if fa3_fn else f"# FlashAttention-3: not available ({fa3_info})",
          flush=True)
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
                    if fa3_fn:
                        fns["fa3"] = fa3_call(fa3_fn, q, k, v, causal)
                        try:
                            row["err_fa3_vs_cudnn"] = (fns["fa3"]().float() - ref.float()).abs().max().item()
                        except RuntimeError:  # the warm-up in time_interleaved records the message as fa3_error
                            row["err_fa3_vs_cudnn"] = None
                    seed = zlib.crc32(f"{dt_name} {d} {causal} {s}".encode())
                    medians, errors = time_interleaved(fns, args.reps, args.loop_ms, args.preroll_ms, seed)
                    for name in fns:
                        ms = medians.get(name)
                        row[name + "_ms"] = ms
                        row[name + "_tflops"] = flops / (ms * 1e-3) / 1e12 if ms else None
                        if name in errors:
                            row[name + "_error"] = errors[name]
                    row.update(peer_ratios(row))

                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    del q, k, v, o, lse, ref
    if args.json:
        with open(args.json, "w") as f:
            # fa3: the --fa3 / $FMHA_FA3_DIR folder FA3 came from (the module's folder where a plain import found
            # it), null where it did not run; fa3_module: its flash_attn_interface.py; fa3_unavailable: why not
            fa3_src = (args.fa3 or os.path.dirname(fa3_module)) if fa3_fn else None
            json.dump({"device": dev, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                       "fa3": fa3_src, "fa3_module": fa3_module, "fa3_unavailable": None if fa3_fn else fa3_info,
                       "command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    print()
    print_table(rows, args.variants)


if __name__ == "__main__":
    main()
