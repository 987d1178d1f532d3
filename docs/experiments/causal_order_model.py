#!/usr/bin/env python3
"""Static model of the persistent forward scheduler's balance for dense causal problems (docs/perf-log.md, v8 and
"Next session"). Each CTA c of G takes its tiles in a fixed order; a tile's cost is the key blocks it walks
(ceil(min((m + 1) · block_m, s) / 128)) plus one block of fixed cost. Printed per order: max / mean of the per-CTA
cost (1.0 = perfect balance; the makespan grows with it) and the mean number of distinct (batch, head) pairs among
the tiles of one wave (how many heads' K and V the concurrently running CTAs read).

Orders: main (tile index over (batch, head) fastest, query blocks longest first, one section: the order on main);
sect (the same in L2 sections of 16 MiB of K and V, what v5 measured for causal problems); snake (sections, CTA map
reversed every other wave: the dropped exp/s8-order); pairs (sections, units of query blocks m_blocks - 1 - q and q
of one head, the middle blocks of odd counts after all pairs: exp/s8-pairs). Shapes of bench/bench_fwd.py: 16384 tokens, b = 16384 / s, h = 2048 / d, bf16, 132 CTAs.
No arguments; no GPU needed; it models the static assignment only (no clocks, no memory system). Dense causal
problems above 4096 keys run one CTA per tile (src/api/fwd.cpp), so the 8k rows only show the trend.
"""
import math


def run(s, d, order, ctas=132, block_n=128):
    block_m = 128 if (d == 128 or s <= 1024) else 192  # src/kernels/fwd_tiles.h: fwd_block_m_for
    b, h = 16384 // s, 2048 // d
    mb, bh = math.ceil(s / block_m), b * h
    sec = bh if order == "main" else max(1, min(bh, int(16 * 2**20 // (2 * s * d * 2))))
    cost = lambda m: math.ceil(min((m + 1) * block_m, s) / block_n) + 1.0
    units, middles = [], []  # each unit: the (bh, m_block) tiles one CTA takes in a row
    for bh0 in range(0, bh, sec):
        n_bh = min(sec, bh - bh0)
        if order == "pairs":  # full pairs per section; the middle blocks of odd counts after all of them
            units += [[(bh0 + x, mb - 1 - q), (bh0 + x, q)] for q in range(mb // 2) for x in range(n_bh)]
            middles += [[(bh0 + x, mb // 2)] for x in range(n_bh)] if mb % 2 else []
        else:
            units += [[(bh0 + r % n_bh, mb - 1 - r // n_bh)] for r in range(n_bh * mb)]
    units += middles
    load, heads = [0.0] * ctas, []
    for k in range(math.ceil(len(units) / ctas)):
        wave = set()
        for c in range(ctas):
            i = ctas - 1 - c if (order == "snake" and k % 2) else c
            if k * ctas + i < len(units):
                for x, m in units[k * ctas + i]:
                    load[c] += cost(m)
                    wave.add(x)
        heads.append(len(wave))
    return max(load) / (sum(load) / ctas), sum(heads) / len(heads)


if __name__ == "__main__":
    orders = ("main", "sect", "snake", "pairs")
    print("d     s  " + "  ".join(f"{o:>16}" for o in orders) + "   (max/mean, heads per wave)")
    for d in (64, 128):
        for s in (512, 1024, 2048, 4096, 8192):
            print(f"{d:<3} {s:>5}  " + "  ".join("{:>9.3f} {:>6.0f}".format(*run(s, d, o)) for o in orders))
