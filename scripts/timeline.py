#!/usr/bin/env python3
"""Per-warpgroup timeline of the forward kernel's mainloop (a diagnostic; docs/perf-log.md v14).

A library built with the FMHA_TIMELINE compile definition (scripts/ab_build.sh NAME . FMHA_TIMELINE=1) has thread 0
of every warpgroup of the first 8 CTAs write (event, clock64) stamps at the phase boundaries of the kernel
(src/kernels/kernel/fwd_kernel.cuh, FMHA_TL) into a buffer that the launch code copies to $FMHA_TIMELINE_FILE after
each launch. Stamps are SM clock cycles. Each stamp is a clock read and a store, and the instrumented kernels spill
more: d 64 causal 2k took ~12 % more cycles per CTA than the uninstrumented kernel under the profiler, and the
mainloop's static schedule grows by ~100 cycles (docs/perf-log.md v14). Compare phases between timeline builds, not
with uninstrumented times.

  scripts/timeline.py run LIB OUT_DIR NAME:DTYPE:D:SEQLEN:CAUSAL ...   (GPU machine, PyTorch: 20 warm-up launches,
                                                                       then one recorded launch per problem, shapes
                                                                       as bench/bench_fwd.py: 16k tokens, 2048/D heads)
  scripts/timeline.py report FILE [CONSUMER_WARPGROUPS]                  (anywhere: phase table of one recording;
                                                                       warpgroups default: those that wrote stamps)

The report gives, per transition between consecutive events of a consumer warpgroup, the count, median, mean and
90th percentile in cycles and its share of all consumer time, and how much of the span had one or more, and two or
more, warpgroups in their softmax at once.
"""
import collections
import os
import statistics
import struct
import sys

CTAS, SLOTS = 8, 8192  # kTimelineCtas, kTimelineSlots in fwd_kernel.cuh
EVENTS = {1: "tile", 2: "q_ready", 3: "prologue_done", 4: "kv_ready", 5: "gemms_issued", 6: "qk_done",
          7: "softmax_done", 8: "pv_done", 9: "loop_done", 10: "last_pv_done", 11: "epilogue_done", 12: "exit",
          20: "producer_k", 21: "producer_v"}


def run(lib_path, out_dir, specs):
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
    from bench_fwd import fmha_call, load_fmha, make_inputs  # the C entry point and inputs, as the benchmark has them
    f = load_fmha(lib_path)
    for spec in specs:
        parts = spec.split(":")
        if len(parts) != 5 or parts[1] not in ("bf16", "fp16"):
            sys.exit(f"timeline run: expected NAME:DTYPE(bf16|fp16):D:SEQLEN:CAUSAL(0|1), got '{spec}'")
        name, dt, d, s, causal = parts[0], parts[1], int(parts[2]), int(parts[3]), int(parts[4])
        os.makedirs(out_dir, exist_ok=True)
        b, h, q, k, v, o, lse = make_inputs(dt, d, s)
        run_fmha = fmha_call(f, dt, b, h, d, s, causal, q, k, v, o, lse)

        def launch():
            try:
                run_fmha()
            except RuntimeError as e:
                sys.exit(str(e))
        os.environ.pop("FMHA_TIMELINE_FILE", None)
        for _ in range(20):
            launch()
        torch.cuda.synchronize()
        os.environ["FMHA_TIMELINE_FILE"] = os.path.join(out_dir, name + ".bin")
        launch()
        torch.cuda.synchronize()
        os.environ.pop("FMHA_TIMELINE_FILE", None)
        print(f"timeline: {spec} -> {os.path.join(out_dir, name + '.bin')}")


def stamps(vals, cta, wg):
    base = (cta * 4 + wg) * SLOTS
    out = []
    for x in vals[base:base + SLOTS]:
        if x == 0:
            break
        out.append((x >> 56, x & ((1 << 56) - 1)))
    return out


def report(path, wgs=None):
    data = open(path, "rb").read()
    if len(data) != CTAS * 4 * SLOTS * 8:
        sys.exit(f"timeline report: {path}: expected {CTAS * 4 * SLOTS * 8} bytes, got {len(data)}")
    vals = struct.unpack(f"<{len(data) // 8}Q", data)
    if wgs is None:  # consumer warpgroups are 1 .. 3 (0 is the producer)
        wgs = max((wg for cta in range(CTAS) for wg in (1, 2, 3) if stamps(vals, cta, wg)), default=0)
    if not 1 <= wgs <= 3:
        sys.exit(f"timeline report: CONSUMER_WARPGROUPS: expected 1, 2 or 3, got {wgs}")
    phase, total = collections.defaultdict(list), collections.Counter()
    span = both = anyone = ctas = 0
    full = [(cta, wg) for cta in range(CTAS) for wg in range(4) if len(stamps(vals, cta, wg)) == SLOTS]
    if full:
        print(f"note: {len(full)} warpgroup streams hit the {SLOTS}-stamp limit and stop early (a shorter problem or "
              f"fewer events records whole launches)")
    for cta in range(CTAS):
        evs = {wg: stamps(vals, cta, wg) for wg in range(1, wgs + 1)}
        evs = {wg: e for wg, e in evs.items() if e}
        if not evs:
            continue
        ctas += 1
        span += max(e[-1][1] for e in evs.values()) - min(e[0][1] for e in evs.values())
        edges = []
        for ev in evs.values():
            for (a, ta), (b, tb) in zip(ev, ev[1:]):
                key = f"{EVENTS.get(a, a)} -> {EVENTS.get(b, b)}"
                phase[key].append(tb - ta)
                total[key] += tb - ta
                if a == 6 and b == 7:
                    edges += [(ta, 1), (tb, -1)]
        edges.sort()
        cur, last = 0, None
        for t, step in edges:
            if last is not None:
                both += (t - last) if cur >= 2 else 0
                anyone += (t - last) if cur >= 1 else 0
            cur, last = cur + step, t
    if span == 0:
        sys.exit(f"timeline report: {path}: no stamps")
    print(f"{path}: {ctas} CTAs, {wgs} consumer warpgroups, {span / ctas:.0f} cycles per CTA; softmax running in >= 1 warpgroup {anyone / span:.1%}, "
          f">= 2 warpgroups {both / span:.1%} of the span")
    print(f"{'transition':34s} {'count':>7s} {'median':>8s} {'mean':>8s} {'p90':>8s} {'share':>7s}")
    everything = sum(total.values())
    for key, v in sorted(phase.items(), key=lambda kv: -total[kv[0]]):
        v = sorted(v)
        print(f"{key:34s} {len(v):7d} {statistics.median(v):8.0f} {statistics.mean(v):8.0f} "
              f"{v[int(0.9 * (len(v) - 1))]:8.0f} {total[key] / everything:7.1%}")


def main():
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
    elif len(sys.argv) >= 5 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "report":
        if len(sys.argv) == 4 and not sys.argv[3].isdigit():
            sys.exit(f"timeline report: CONSUMER_WARPGROUPS: expected 1, 2 or 3, got '{sys.argv[3]}'")
        report(sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
