#!/usr/bin/env python3
"""CPU test of bench/bench_fwd.py's peers without a GPU, PyTorch or FlashAttention-3: load_fa3 against fake
`flash_attn_interface` modules written to temp folders (an import that works gives the function and the module's file;
a missing folder, a module that raises while importing, one without flash_attn_func, one imported earlier from
elsewhere give (None, reason), never an exception, and leave sys.path as it was), fa3_call (BSHD tensors passed as they
are, causal and the default scale, element 0 of a tuple, any failure as RuntimeError), peer_ratios (the fastest of
cudnn / fa2 / fa3 that ran, never fmha nor an --alt column, the ratios), and main() end to end on a stub torch whose
CUDA events measure a simulated clock that each backend advances by its own cost: FA3 timed in the interleaved loops
as the column fa3, the best peer and ratios in every row, FA3's error and its failure on one shape, the JSON top level
(fa3, fa3_module), the printed table, and a run where FA3 is not available (one line, no column).
Exits non-zero with a message on the first failure."""
import contextlib
import io
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")

sys.path.insert(0, HERE)
from stub_torch import TORCH as STUB  # noqa: E402

ATTENTION = '''
import contextlib
import torch
class SDPBackend:
    CUDNN_ATTENTION = "cudnn"
    FLASH_ATTENTION = "fa2"
_current = [None]
COST = {"cudnn": 1.25, "fa2": 2.0}
@contextlib.contextmanager
def sdpa_kernel(backend):
    _current[0] = backend
    yield
    _current[0] = None
def scaled_dot_product_attention(q, k, v, is_causal=False):
    torch._tick(COST[_current[0]])
    return torch.T(q.shape, q.dtype)
'''
# FA3 stand-in: BSHD in and out, 0.8 ms a call (the fastest peer), returns (out, lse) as FA3 2.x does; it refuses
# head dim 64 the way a build without those kernels would (RuntimeError); it records its calls.
FAKE_FA3 = '''
import torch
calls = []
def flash_attn_func(q, k, v, softmax_scale=None, causal=False, **kw):
    calls.append((q, k, v, softmax_scale, causal))
    if q.shape[-1] == 64:
        raise RuntimeError("This flash attention build does not support headdim 64")
    torch._tick(0.8)
    return torch.T(q.shape, q.dtype), None
'''


def check(cond, what):
    if not cond:
        sys.exit(f"test_bench_peers: FAILED: {what}")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def forget_fa3():
    sys.modules.pop("flash_attn_interface", None)


with tempfile.TemporaryDirectory() as tmp:
    write(os.path.join(tmp, "stub", "torch", "__init__.py"), STUB)
    write(os.path.join(tmp, "stub", "torch", "nn", "__init__.py"), "from . import functional\n")
    write(os.path.join(tmp, "stub", "torch", "nn", "functional.py"),
          "from .attention import scaled_dot_product_attention\n")
    write(os.path.join(tmp, "stub", "torch", "nn", "attention.py"), ATTENTION)
    sys.path[:0] = [os.path.join(tmp, "stub"), os.path.join(ROOT, "bench")]
    import bench_fwd
    import torch

    # --- load_fa3: an import that works
    good = os.path.join(tmp, "fa3good")
    write(os.path.join(good, "hopper", "flash_attn_interface.py"), FAKE_FA3)
    path_before = list(sys.path)
    fn, info = bench_fwd.load_fa3(good)
    hopper = os.path.abspath(os.path.join(good, "hopper"))
    check(fn is not None and fn is sys.modules["flash_attn_interface"].flash_attn_func,
          f"load_fa3(DIR): flash_attn_func from DIR/hopper (got {fn}, {info})")
    check(info == os.path.join(hopper, "flash_attn_interface.py"), f"load_fa3(DIR): the module's file, got {info}")
    check(sys.path[0] == hopper, f"load_fa3(DIR): DIR/hopper first on sys.path ({sys.path[:2]})")
    fake = sys.modules["flash_attn_interface"]

    # --- fa3_call: BSHD as it is, causal, default scale; element 0 of a tuple; a plain tensor as it is
    q, k, v = (torch.randn(2, 1024, 16, 128, dtype="bf16") for _ in range(3))
    out = bench_fwd.fa3_call(fn, q, k, v, True)()
    check(fake.calls[-1] == (q, k, v, None, True), f"fa3_call: (q, k, v, softmax_scale=None, causal=True): "
          f"{fake.calls[-1]}")
    check(isinstance(out, torch.T) and out.shape == q.shape, f"fa3_call: element 0 of (out, lse): {out}")
    plain = torch.T(q.shape, q.dtype)
    check(bench_fwd.fa3_call(lambda *a, **kw: plain, q, k, v, False)() is plain, "fa3_call: a lone tensor as is")

    def wrong_type(*a, **kw):
        raise ValueError("q must be on CUDA")
    for bad, msg in ((wrong_type, "flash_attn_func: ValueError: q must be on CUDA"),
                     (fn, "This flash attention build does not support headdim 64")):
        try:
            bench_fwd.fa3_call(bad, *(torch.randn(2, 1024, 32, 64, dtype="bf16") for _ in range(3)), False)()
            check(False, "fa3_call: a failing call raises")
        except RuntimeError as e:
            check(str(e) == msg, f"fa3_call: RuntimeError '{msg}', got '{e}'")

    # --- load_fa3: a module imported earlier from elsewhere is not taken for DIR's
    other = os.path.join(tmp, "fa3other")
    write(os.path.join(other, "hopper", "flash_attn_interface.py"), FAKE_FA3)
    before = list(sys.path)
    fn2, why = bench_fwd.load_fa3(other)
    check(fn2 is None and "already imported from" in why and hopper in why, f"already imported elsewhere: {why}")
    check(sys.path == before, "a failed load_fa3 leaves sys.path as it was")
    forget_fa3()
    sys.path.remove(hopper)

    # --- load_fa3: imports that fail give (None, reason) and no exception
    bad_cases = {
        "missing": (None, "flash_attn_interface.py"),
        "noext": ("import flash_attn_3_cuda_not_built\n", "ModuleNotFoundError: No module named 'flash_attn_3_cuda"),
        "oserror": ("raise OSError('libcudart.so.12: cannot open shared object file')\n",
                    "OSError: libcudart.so.12: cannot open shared object file"),
        "nofunc": ("def flash_attn_varlen_func():\n    pass\n", "has no flash_attn_func"),
        "syntax": ("def (:\n", "SyntaxError"),
    }
    for name, (text, want) in bad_cases.items():
        d = os.path.join(tmp, "fa3_" + name)
        if text is not None:
            write(os.path.join(d, "hopper", "flash_attn_interface.py"), text)
        before = list(sys.path)
        try:
            fn2, why = bench_fwd.load_fa3(d)
        except BaseException as e:  # noqa: B036 - the point is that nothing escapes
            check(False, f"load_fa3 ({name}) raised {type(e).__name__}: {e}")
        check(fn2 is None and isinstance(why, str) and want in why and "\n" not in why,
              f"load_fa3 ({name}): (None, a one-line reason with '{want}'), got ({fn2}, {why!r})")
        check(sys.path == before, f"load_fa3 ({name}) leaves sys.path as it was")
        check("flash_attn_interface" not in sys.modules, f"load_fa3 ({name}) leaves no module behind")

    # --- load_fa3 without a folder: a plain import, found on sys.path or not
    fn2, why = bench_fwd.load_fa3(None)
    check(fn2 is None and why.startswith("ModuleNotFoundError"), f"load_fa3(None), nothing importable: {why}")
    sys.path.insert(0, hopper)
    fn2, where = bench_fwd.load_fa3(None)
    check(fn2 is not None and where == os.path.join(hopper, "flash_attn_interface.py"),
          f"load_fa3(None) finds flash_attn_interface on sys.path: {fn2}, {where}")
    fn3, _ = bench_fwd.load_fa3("")
    check(fn3 is fn2, "load_fa3('') is a plain import too")
    sys.path.remove(hopper)
    forget_fa3()

    # --- peer_ratios: the fastest peer that ran, never fmha or an --alt / variant / best_peer column
    row = {"fmha_tflops": 550.0, "s12_tflops": 900.0, "fmha_p_pp_tflops": 950.0, "cudnn_tflops": 500.0,
           "fa2_tflops": 300.0, "fa3_tflops": 600.0}
    r = bench_fwd.peer_ratios(row)
    want = {"best_peer": "fa3", "best_peer_tflops": 600.0, "ratio_vs_best_peer": 550.0 / 600.0,
            "ratio_vs_cudnn": 1.1, "ratio_vs_fa3": 550.0 / 600.0}
    check(r.keys() == want.keys() and all(abs(r[k] - v) < 1e-12 if isinstance(v, float) else r[k] == v
                                          for k, v in want.items()), f"peer_ratios, all peers: {r} != {want}")
    row.update(r, best_peer_tflops=9999.0)
    check(bench_fwd.peer_ratios(row)["best_peer"] == "fa3", "a best_peer_tflops key is not a peer")
    r = bench_fwd.peer_ratios({"fmha_tflops": 700.0, "cudnn_tflops": 500.0, "fa2_tflops": 520.0})
    check(r["best_peer"] == "fa2" and abs(r["ratio_vs_best_peer"] - 700 / 520) < 1e-12 and "ratio_vs_fa3" not in r,
          f"peer_ratios without FA3 (fmha the fastest, still not a peer): {r}")
    r = bench_fwd.peer_ratios({"fmha_tflops": 400.0, "cudnn_tflops": None, "fa2_tflops": 250.0, "fa3_tflops": None,
                               "fa3_error": "no"})
    check(r == {"best_peer": "fa2", "best_peer_tflops": 250.0, "ratio_vs_best_peer": 1.6},
          f"peers that failed (None) are not peers, and no cuDNN / FA3 ratio without them: {r}")
    check(bench_fwd.peer_ratios({"fmha_tflops": 400.0}) == {}, "no peer ran: nothing")
    r = bench_fwd.peer_ratios({"fmha_tflops": None, "cudnn_tflops": 500.0, "fa3_tflops": 450.0})
    check(r == {"best_peer": "cudnn", "best_peer_tflops": 500.0, "ratio_vs_best_peer": None, "ratio_vs_cudnn": None,
                "ratio_vs_fa3": None}, f"fmha failed: ratios None: {r}")

    # --- main() end to end: fmha 1.0 ms a call, cuDNN 1.25, FA2 2.0, FA3 0.8 (and no head dim 64)
    fmha_calls = []

    def fake_lib(*args):
        fmha_calls.append(args)
        torch._tick(1.0)
        return 0
    bench_fwd.load_fmha = lambda path: fake_lib

    def run_main(extra, env_fa3=None):
        out_json = os.path.join(tmp, "out.json")
        if os.path.exists(out_json):
            os.remove(out_json)
        argv = ["bench_fwd.py", "--lib", "fake.so", "--json", out_json, "--dtypes", "bf16", "--dims", "128,64",
                "--seqlens", "1024", "--causal", "0,1", "--reps", "3"] + extra
        saved_argv, saved_env = sys.argv, os.environ.pop("FMHA_FA3_DIR", None)
        if env_fa3 is not None:
            os.environ["FMHA_FA3_DIR"] = env_fa3
        sys.argv, buf = argv, io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                bench_fwd.main()
        finally:
            sys.argv = saved_argv
            os.environ.pop("FMHA_FA3_DIR", None)
            if saved_env is not None:
                os.environ["FMHA_FA3_DIR"] = saved_env
        with open(out_json) as f:
            return json.load(f), buf.getvalue()

    def close(a, b):
        return a is not None and b is not None and abs(a - b) < 1e-9 * max(1.0, abs(b))

    for how in ("option", "env"):
        forget_fa3()
        while hopper in sys.path:
            sys.path.remove(hopper)
        res, text = run_main(["--fa3", good] if how == "option" else [], env_fa3=good if how == "env" else None)
        check(res["fa3"] == good and res["fa3_module"] == os.path.join(hopper, "flash_attn_interface.py") and
              res["fa3_unavailable"] is None, f"JSON top level ({how}): fa3 {res['fa3']}, {res['fa3_module']}")
        check(f"# FlashAttention-3: {res['fa3_module']}" in text.splitlines(), f"the FA3 line ({how})")
        rows = res["rows"]
        check(len(rows) == 4 and [(r["d"], r["causal"]) for r in rows] == [(128, False), (128, True), (64, False),
                                                                           (64, True)], "four rows in order")
        for r in rows:
            flops = 4.0 * r["batch"] * r["heads"] * 1024 ** 2 * r["d"] * (0.5 if r["causal"] else 1.0)
            for name, ms in (("fmha", 1.0), ("cudnn", 1.25), ("fa2", 2.0)):
                check(close(r.get(name + "_ms"), ms) and close(r.get(name + "_tflops"), flops / ms / 1e9),
                      f"{name} timed: {r.get(name + '_ms')} ms, want {ms}")
            if r["d"] == 128:
                check(close(r.get("fa3_ms"), 0.8) and close(r.get("fa3_tflops"), flops / 0.8 / 1e9),
                      f"fa3 timed in the loops: {r.get('fa3_ms')}")
                check(r["best_peer"] == "fa3" and close(r["best_peer_tflops"], r["fa3_tflops"]) and
                      close(r["ratio_vs_best_peer"], 0.8) and close(r["ratio_vs_fa3"], 0.8) and
                      close(r["ratio_vs_cudnn"], 1.25), f"ratios with FA3 the best peer: {r}")
                check(r["err_fa3_vs_cudnn"] == 0.25, f"FA3's error vs cuDNN: {r.get('err_fa3_vs_cudnn')}")
            else:  # the fake FA3 refuses head dim 64: no time, its message, cuDNN the best peer
                check(r["fa3_ms"] is None and r["fa3_tflops"] is None and "headdim 64" in r["fa3_error"] and
                      r["err_fa3_vs_cudnn"] is None, f"FA3 failing on d 64: {r}")
                check(r["best_peer"] == "cudnn" and close(r["ratio_vs_best_peer"], 1.25) and
                      "ratio_vs_fa3" not in r, f"ratios without FA3: {r}")
        lines = text.splitlines()
        head = next((i for i, line in enumerate(lines) if line.startswith("dtype")), None)
        check(head is not None, "the table's header")
        cols = lines[head].split("|")
        check(cols[1].split() == ["fmha", "cudnn", "fa2", "fa3"], f"TFLOPS columns of the table: {cols[1]}")
        check(cols[2].split() == ["fmha/best", "best", "fmha/cuDNN", "fmha/FA3"], f"ratio columns: {cols[2]}")
        body = [line.split("|") for line in lines[head + 1:]]
        check(len(body) == 4, f"one table line per row: {lines[head + 1:]}")
        check(body[0][2].split() == ["0.800", "fa3", "1.250", "0.800"], f"table row d 128: {body[0][2]}")
        check(body[2][1].split()[3] == "n/a" and body[2][2].split() == ["1.250", "cudnn", "1.250", "n/a"],
              f"table row d 64 (FA3 n/a): {body[2]}")

    # --- main() where FA3 does not import: one line, no column, null in the JSON
    forget_fa3()
    missing = os.path.join(tmp, "nowhere")
    res, text = run_main(["--fa3", missing])
    na = [line for line in text.splitlines() if line.startswith("# FlashAttention-3")]
    check(len(na) == 1 and na[0].startswith("# FlashAttention-3: not available (") and na[0].endswith(")"),
          f"one 'not available' line: {na}")
    check(res["fa3"] is None and res["fa3_module"] is None and "nowhere" in res["fa3_unavailable"],
          f"JSON top level without FA3: {res['fa3']}, {res['fa3_module']}, {res['fa3_unavailable']}")
    for r in res["rows"]:
        check(not any(k.startswith("fa3") or k == "err_fa3_vs_cudnn" or k == "ratio_vs_fa3" for k in r),
              f"no FA3 keys without FA3: {sorted(r)}")
        check(r["best_peer"] == "cudnn" and close(r["ratio_vs_best_peer"], 1.25), f"best peer cuDNN: {r}")
    head = next(i for i, line in enumerate(text.splitlines()) if line.startswith("dtype"))
    check(text.splitlines()[head].split("|")[1].split() == ["fmha", "cudnn", "fa2"], "no fa3 TFLOPS column")
    check(all(line.split("|")[2].split()[-1] == "n/a" for line in text.splitlines()[head + 1:]), "fmha/FA3 n/a")
print("test_bench_peers: all checks passed")
