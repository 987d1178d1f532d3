#!/usr/bin/env python3
"""CPU test of bench_fwd.make_inputs and bench_fwd.fmha_call (shared by bench/bench_fwd.py, bench/power_probe.py and
scripts/timeline.py) without a GPU or PyTorch: a stub `torch` module stands in for tensors and streams, and a
recording function stands in for fmha_fwd_contiguous. Checks the shapes make_inputs asks for, the argument list of
the C call (include/fmha/c_api.h order: dtype, batch, heads_q, heads_kv, head_dim, seqlen_q, seqlen_k, no cu_seqlens,
Q, K, V, O, LSE pointers, mask, alignment, scale, scheduler, ping-pong, stream, error buffer and its length), the
RuntimeError that carries the library's message, and timeline.run's launches (20 untimed, one recorded, exit with the
message on failure). Exits non-zero with a message on the first failure."""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")

sys.path.insert(0, HERE)
from stub_torch import TORCH as STUB  # noqa: E402  (shared with test_bench_peers.py)


def check(cond, what):
    if not cond:
        sys.exit(f"test_fmha_call: FAILED: {what}")


with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "torch", "nn"))
    with open(os.path.join(tmp, "torch", "__init__.py"), "w") as f:
        f.write(STUB)
    open(os.path.join(tmp, "torch", "nn", "__init__.py"), "w").close()
    with open(os.path.join(tmp, "torch", "nn", "attention.py"), "w") as f:
        f.write("class SDPBackend:\n    CUDNN_ATTENTION = 1\n    FLASH_ATTENTION = 2\ndef sdpa_kernel(b):\n    pass\n")
    sys.path[:0] = [tmp, os.path.join(ROOT, "bench"), os.path.join(ROOT, "scripts")]
    import bench_fwd
    import timeline

    b, h, q, k, v, o, lse = bench_fwd.make_inputs("fp16", 64, 2048)
    check((b, h) == (8, 32), f"make_inputs: batch 16384 / 2048 = 8, heads 2048 / 64 = 32 (got {b}, {h})")
    check(q.shape == k.shape == v.shape == o.shape == (8, 2048, 32, 64) and q.dtype == "fp16", f"Q/K/V/O {q.shape}")
    check(lse.shape == (8, 32, 2048) and lse.dtype == "f32", f"LSE (b, h, s) fp32: {lse.shape} {lse.dtype}")
    check(len({x.data_ptr() for x in (q, k, v, o, lse)}) == 5, "five distinct tensors")

    calls = []

    def lib(*args):
        calls.append(args)
        return 0

    for dt, causal, sched, pp in (("bf16", True, 0, 0), ("fp16", False, 2, 1)):
        bench_fwd.fmha_call(lib, dt, b, h, 64, 2048, causal, q, k, v, o, lse, sched, pp)()
        a = calls[-1]
        want = (1 if dt == "bf16" else 0, b, h, h, 64, 2048, 2048, None, None, 0, 0, q.data_ptr(), k.data_ptr(),
                v.data_ptr(), o.data_ptr(), lse.data_ptr(), 2 if causal else 0, 0, 0.0, sched, pp, 77)
        check(len(a) == 24 and a[:22] == want, f"C call arguments for {dt} causal={causal}: {a[:22]} != {want}")
        check(len(a[22]) == 512 and a[23] == 512, "an error buffer of 512 bytes and its length")

    def failing(*args):
        args[22].value = b"head_dim: expected one of 32, 64, 128, got 40"
        return 3

    try:
        bench_fwd.fmha_call(failing, "bf16", b, h, 40, 2048, False, q, k, v, o, lse)()
        check(False, "a failing call raises")
    except RuntimeError as e:
        check(str(e) == "fmha_fwd_contiguous: head_dim: expected one of 32, 64, 128, got 40", f"message: {e}")

    # timeline.run: 20 warm-up launches and one with FMHA_TIMELINE_FILE set, the same arguments each time
    seen_file = []

    def recording(*args):
        seen_file.append(os.environ.get("FMHA_TIMELINE_FILE"))
        return lib(*args)

    bench_fwd.load_fmha = lambda path: recording
    calls.clear()
    out = os.path.join(tmp, "tl")
    timeline.run("lib.so", out, ["n:bf16:128:4096:1"])
    check(len(calls) == 21 and all(c[:22] == calls[0][:22] for c in calls), f"21 identical launches (got {len(calls)})")
    check(calls[0][:7] == (1, 4, 16, 16, 128, 4096, 4096) and calls[0][16] == 2, f"timeline's problem: {calls[0]}")
    check(seen_file == [None] * 20 + [os.path.join(out, "n.bin")], "the file is set for the last launch only")
    check("FMHA_TIMELINE_FILE" not in os.environ, "the variable is removed afterwards")
    bench_fwd.load_fmha = lambda path: failing
    try:
        timeline.run("lib.so", out, ["n:bf16:128:4096:0"])
        check(False, "timeline.run exits on a failing call")
    except SystemExit as e:
        check(str(e).startswith("fmha_fwd_contiguous: head_dim"), f"exit message: {e}")
print("test_fmha_call: all checks passed")
