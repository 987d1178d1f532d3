#!/usr/bin/env python3
"""CPU test of bench/plot.py on a small hand-made benchmark JSON (the format bench/bench_fwd.py --json writes: rows
with and without FA3, a failed backend as null, an --alt column and best_peer keys that are not drawn, a missing
panel): the PNG exists, is a PNG of the expected size in pixels (10×8 in at 150 dpi; 4 panels a row with --dtype all)
and is not trivially small; which columns are drawn and how the axis and versions are labelled; exit status 2 with a
message for a JSON without rows, an unreadable or malformed file, or a dtype the file lacks. Needs matplotlib: where it
cannot be imported the test FAILS (scripts/setup.sh installs a pinned one into .deps/python, where plot.py looks).
Exits non-zero with a message on the first failure."""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
PLOT = os.path.join(ROOT, "bench", "plot.py")


def check(cond, what):
    if not cond:
        sys.exit(f"test_plot: FAILED: {what}")


sys.path.insert(0, os.path.join(ROOT, "bench"))
import plot  # noqa: E402  (puts .deps/python, scripts/setup.sh's pinned matplotlib, on sys.path)

try:
    import matplotlib  # noqa: F401  (plot.py needs it; the test does not skip without it)
except ImportError as e:
    sys.exit(f"test_plot: FAILED: matplotlib is missing ({e}); run scripts/setup.sh, which installs the pinned "
             "one into .deps/python")

check([c for c, *_ in plot.LIBS] == ["fmha", "fa3", "cudnn", "fa2"], f"the four libraries drawn: {plot.LIBS}")
check([plot.seq_label(s) for s in (512, 1024, 2048, 16384, 768)] == ["512", "1k", "2k", "16k", "768"], "x labels")
check(plot.cudnn_label(91900) == "9.19.0" and plot.cudnn_label(8902) == "8.9.2", "cuDNN version labels")


def row(dtype, d, causal, s, fmha, cudnn, fa2, fa3=None, with_fa3=True):
    r = {"dtype": dtype, "d": d, "causal": causal, "seqlen": s, "batch": 16384 // s, "heads": 2048 // d,
         "err_vs_cudnn": 0.0078, "fmha_ms": 1.0, "fmha_tflops": fmha, "s12_tflops": fmha * 3, "cudnn_tflops": cudnn,
         "fa2_tflops": fa2}
    if with_fa3:
        r.update(fa3_tflops=fa3, err_fa3_vs_cudnn=0.0078)
        if fa3 is None:
            r["fa3_error"] = "This flash attention build does not support headdim 64"
    peers = {k: r.get(k + "_tflops") for k in ("cudnn", "fa2", "fa3") if r.get(k + "_tflops")}
    best = max(peers, key=peers.get)
    r.update(best_peer=best, best_peer_tflops=peers[best], ratio_vs_best_peer=fmha / peers[best])
    return r


rows = []
for s, base in ((512, 400.0), (1024, 480.0), (4096, 600.0), (16384, 640.0)):
    rows.append(row("bf16", 128, False, s, base, base * 0.97, base / 2, base * 1.05))
    rows.append(row("bf16", 128, True, s, base * 0.9, base * 0.85, base / 2.2, base))
    rows.append(row("bf16", 64, False, s, base * 0.75, base * 0.7, base / 2.5, None))  # FA3 fails on d 64
    rows.append(row("fp16", 128, False, s, base, base * 1.02, base / 2, with_fa3=False))  # a run without FA3
# no (bf16, 64, causal) rows at all: that panel is empty, not an error
data = {"device": "NVIDIA H200", "torch": "2.11.0+cu130", "cudnn": 91900, "fa3": "/opt/fa3", "command": "test",
        "rows": rows}

xs, ys = plot.series(rows, "bf16", 64, False, "fa3")
check(xs == [] and ys == [], f"a null column is skipped: {xs} {ys}")
xs, ys = plot.series(rows, "bf16", 128, True, "fa3")
check(xs == [512, 1024, 4096, 16384] and ys == [400.0, 480.0, 600.0, 640.0], f"fa3, bf16 d 128 causal: {xs} {ys}")
check(plot.series(rows, "fp16", 128, False, "fa3") == ([], []), "no fa3 key: skipped")
title = plot.suptitle(data, rows)
check("NVIDIA H200" in title and "torch 2.11.0+cu130" in title and "cuDNN 9.19.0" in title and
      "16k tokens, h = 2048/d" in title, f"suptitle: {title}")


def run(*args):
    p = subprocess.run([sys.executable, PLOT, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def png_size(path):
    """(width, height) from a PNG's IHDR chunk; fails the test unless the file starts with the PNG signature."""
    with open(path, "rb") as f:
        head = f.read(24)
    check(head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path}: not a PNG ({head[:16]!r})")
    return struct.unpack(">II", head[16:24])


with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "result.json")
    with open(src, "w") as f:
        json.dump(data, f)
    for args, size in (((), (1500, 1200)), (("--dtype", "fp16"), (1500, 1200)),
                       (("--dtype", "all"), (2700, round((4.3 * 2 + 0.6) * 150)))):
        out = os.path.join(tmp, f"plot{len(args)}{'_'.join(args)}.png")
        rc, msg = run(src, out, *args)
        check(rc == 0, f"plot.py {' '.join(args)}: exit {rc}: {msg}")
        check(os.path.isfile(out), f"{out} written")
        w, h = png_size(out)
        check((w, h) == size, f"{' '.join(args) or 'bf16'}: {w}x{h} pixels, want {size[0]}x{size[1]}")
        check(os.path.getsize(out) > 30000, f"a figure, not a blank: {os.path.getsize(out)} bytes")

    # bad inputs: exit 2 with a message, no PNG
    no_rows = os.path.join(tmp, "empty.json")
    with open(no_rows, "w") as f:
        json.dump({"device": "NVIDIA H200", "rows": []}, f)
    broken = os.path.join(tmp, "broken.json")
    with open(broken, "w") as f:
        f.write('{"rows": [')
    not_obj = os.path.join(tmp, "list.json")
    with open(not_obj, "w") as f:
        json.dump([1, 2], f)
    for args, words in (((no_rows,), "no rows"), ((broken,), "cannot read"), ((not_obj,), "no rows"),
                        ((os.path.join(tmp, "absent.json"),), "cannot read"),
                        ((src, "--dtype", "fp8"), "no rows of dtype fp8")):
        out = os.path.join(tmp, "bad.png")
        rc, msg = run(args[0], out, *args[1:])
        check(rc == 2 and words in msg and msg.startswith("plot.py: "), f"{args}: exit 2 with '{words}': {rc} {msg}")
        check(not os.path.exists(out), f"{args}: no PNG written")
print("test_plot: all checks passed")
