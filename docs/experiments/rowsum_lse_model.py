"""Numerical model of the forward kernel's row sums on the tensor cores (perf-log v12) against the GPU test rule.

Emulates, per query row, the non-causal 192-row kernel: 128-key blocks walked from the last to the first, lazy
rescaling (threshold 8 in log2 units), P = exp2(s·scale·log2e − base) in fp32 and rounded to bf16/fp16, the block's
row sum of the rounded P (L = P·1 on the tensor cores; exact enough within one block) folded into an fp32 running
sum, row_sum = (row_sum + L) · corr, the last block added without a factor. Checks LSE and O against the rule of
src/testing/fwd_runner.cpp: max |LSE − exact| ≤ 2 · E + 2e-5 · max(1, max |LSE|) + 1e-5, where E is the error of
the kernel reference with AttnShape::row_sum_rounded_p (P rounded relative to the exact row max, summed rounded).
The GPU cases fill their tensors with std::mt19937, so this models the same distributions, not the same numbers.
Run: python3 docs/experiments/rowsum_lse_model.py  (numpy; about a minute).
"""
import numpy as np

L2E = 1.4426950408889634


def bf16(x):
    x = np.asarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def case(rd, sq, sk, d, scale, ramp, seed, rows=None):
    rng = np.random.default_rng(seed)
    q = rd(rng.standard_normal((sq, d)).astype(np.float32))
    k = rng.standard_normal((sk, d)).astype(np.float32)
    if ramp:
        j = np.arange(sk)
        k = k * (1 + 2 * (sk - 1 - j) / sk)[:, None]
    k = rd(k)
    v = rd(rng.standard_normal((sk, d)).astype(np.float32))
    rows = range(sq) if rows is None else rows
    lse_err = e_model = lmag = 0.0
    o_err = o_model = omag = 0.0
    for i in rows:
        s = q[i].astype(np.float64) @ k.T.astype(np.float64)
        t = s * scale
        m = t.max()
        pe = np.exp(t - m)
        lse_exact = m + np.log(pe.sum())
        oe = pe @ v / pe.sum()
        pk = rd(pe.astype(np.float32)).astype(np.float64)  # kernel reference: rounded P, rounded sum
        lse_model = m + np.log(pk.sum())
        om = pk @ v / pk.sum()
        # kernel emulation
        s32 = s.astype(np.float32)
        run_max = -np.inf
        row_sum = np.float32(0)
        O = np.zeros(d, np.float32)
        nb = (sk + 127) // 128
        pending = None  # (L of the previous block) folded after the next softmax
        for n in range(nb - 1, -1, -1):
            blk = s32[n * 128:(n + 1) * 128]
            new = max(run_max, blk.max())
            if (new - run_max) * scale * L2E <= 8:
                new = run_max
            corr = np.float32(1) if new == run_max or new == -np.inf else np.float32(np.exp2((run_max - new) * scale * L2E))
            base = np.float32(new * scale * L2E)
            P = rd(np.exp2(blk * np.float32(scale * L2E) - base).astype(np.float32))
            if pending is not None:
                row_sum = np.float32((row_sum + pending) * corr)
            O = O * corr + (P.astype(np.float64) @ v[n * 128:(n + 1) * 128]).astype(np.float32)
            pending = np.float32(P.astype(np.float64).sum())
            run_max = new
        row_sum = np.float32(row_sum + pending)
        lse_kernel = np.float32(run_max * scale) + np.float32(np.log(row_sum))
        out = rd((O / row_sum).astype(np.float32))
        lse_err = max(lse_err, abs(lse_kernel - lse_exact))
        e_model = max(e_model, abs(lse_model - lse_exact))
        lmag = max(lmag, abs(lse_exact))
        o_err = max(o_err, np.abs(out - oe).max())
        o_model = max(o_model, np.abs(om - oe).max())
        omag = max(omag, np.abs(oe).max())
    lse_bound = 2 * e_model + 2e-5 * max(1.0, lmag) + 1e-5
    ulp = 2.0 ** (np.floor(np.log2(omag)) - (7 if rd is bf16 else 10))
    o_bound = 2 * o_model + 2 * ulp
    return lse_err, lse_bound, o_err, o_bound


if __name__ == "__main__":
    cases = [
        ("ramp d64 2100 keys scale 1", dict(sq=128, sk=2100, d=64, scale=1.0, ramp=True)),
        ("gaussian d64 1076 keys", dict(sq=256, sk=1076, d=64, scale=0.125, ramp=False)),
        ("gaussian d64 2048 keys", dict(sq=128, sk=2048, d=64, scale=0.125, ramp=False)),
        ("gaussian d64 270000 keys, 8 rows", dict(sq=8, sk=270000, d=64, scale=0.125, ramp=False)),
    ]
    for name, kw in cases:
        for tname, rd in (("bf16", bf16), ("fp16", f16)):
            for seed in range(2 if kw["sk"] < 100000 else 1):
                le, lb, oe, ob = case(rd, seed=seed, **kw)
                print(f"{name:34} {tname} seed {seed}: LSE err {le:.2e} bound {lb:.2e} {'OK' if le <= lb else 'FAIL'};"
                      f" O err {oe:.2e} bound {ob:.2e} {'OK' if oe <= ob else 'FAIL'}")
