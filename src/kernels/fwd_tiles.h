// Tile table of the forward kernels: the one source of truth for tile sizes, read by the kernel configuration
// (src/kernels/kernel/fwd_kernel.cuh, nvcc) and by the host heuristics and validation (src/api/fwd.cpp, g++).
// Plain constexpr C++: no CUDA or CuTe here.
#pragma once

namespace fmha::tiles {

/// Head-dim tiles that have kernels (src/instantiations/manifest.cmake); other head dims (multiples of 8 up to
/// 128) run on the next larger tile with the extra columns predicated off.
constexpr int fwd_head_dim_tile(int head_dim) { return head_dim <= 32 ? 32 : head_dim <= 64 ? 64 : 128; }

/// Default query rows per CTA tile (fwd_block_m_for below picks the tile of a problem): 64 per consumer warpgroup;
/// three consumer warpgroups at head-dim tiles up to 64 (a short Q·Kᵀ leaves each softmax less GEMM time to hide
/// behind, so a third warpgroup's GEMMs fill the gap, as in FlashAttention-3's d 64 kernels), two at 128
/// (registers: O alone takes 64 per thread there).
constexpr int fwd_block_m(int head_dim_tile) { return head_dim_tile <= 64 ? 192 : 128; }

/// Longest key length (per entry; the varlen maximum) for which causal problems at head-dim tiles up to 64 use
/// 128-row tiles (two consumer warpgroups) instead of 192: their tiles walk only a few key blocks, and the third
/// warpgroup lost 11–12 % at causal 512–1k (docs/perf-log.md, v4). Raising the limit to 2048 or 4096 lost 3 % at
/// 2k and 7 % at 4k (v7). Since the two-warpgroup kernel divides with FastDivmod in its tile decode and issues
/// its tiles' second Q·Kᵀ early (v10), it is ahead at 2k and 4k too: 2048 against 1024 +2.3 to +4.7 % at causal 2k
/// (three runs, both dtypes), 4096 against 2048 +1.3 to +3.9 % at causal 4k (two runs). With the row sums on the
/// tensor cores in the causal 192-row kernels too (v13), 2048 against 4096 gained +2.7 / +3.4 % at causal 4k
/// (bf16 / fp16) and 1024 matched 2048 at 2k (−0.2 / +0.2 %), so the limit is back at 2048.
constexpr int kFwdShortCausalMaxKeys = 2048;

/// Longest key length (per entry; the varlen maximum) for which non-causal problems at head-dim tiles up to 64 use
/// 128-row tiles too. Against the 192-row kernel (two runs, both dtypes, docs/perf-log.md v11): +2.2 to +2.5 % at
/// 1k, +0.2 to +0.9 % at 512, −3 to −5 % at 2k, −3 to −6 % at 4k and −8 to −10 % at 8k–16k.
constexpr int kFwdShortNonCausalMaxKeys = 1024;

/// Query rows per CTA tile for a problem: fwd_block_m(head_dim_tile), or 128 for short problems at head-dim tiles up
/// to 64 (kFwdShortCausalMaxKeys, kFwdShortNonCausalMaxKeys). Read by the launch code and by the host validation
/// and names.
constexpr int fwd_block_m_for(int head_dim_tile, bool causal, int seqlen_k) {
  const bool short_rows = causal ? seqlen_k <= kFwdShortCausalMaxKeys
                                 : seqlen_k <= kFwdShortNonCausalMaxKeys;
  return head_dim_tile <= 64 && short_rows ? 128 : fwd_block_m(head_dim_tile);
}

/// Query rows per CTA tile of the kernel that runs a problem: fwd_block_m_for of the tile of its head dim (any
/// supported head dim, not only a tile), with seqlen_k the (varlen maximum) key length. The rule the API's launch,
/// validation and kernel names follow, and the GPU test harness with them.
constexpr int fwd_rows_per_tile(int head_dim, bool causal, int seqlen_k) {
  return fwd_block_m_for(fwd_head_dim_tile(head_dim), causal, seqlen_k);
}

/// Whether the kernel with `block_m` query rows per tile and this mask sums each softmax row on the tensor cores
/// (L = P·1 in the P·V wgmma batch, with P rounded to the element type, folded once per key block into a running
/// sum kept in L's odd accumulator columns; src/kernels/kernel/fwd_kernel.cuh) instead of adding the fp32 P with
/// FADDs: the three-warpgroup (192-row) kernels, both masks. Their LSE is then ln of the sum of the rounded P
/// (docs/numerics.md). Measured against the FADD sums (docs/perf-log.md v12, v13): the running sum in two extra
/// registers (v12) +0.4 to +3.4 % at d 64 non-causal 2k–16k; in L's odd columns (v13) a further +1.4 to +3.4 % at
/// 4k–16k, ±0.3 % at 2k; causal (v13) +1.4 / +1.5 % at 8k and, with 192-row tiles from 2049 keys, +4 % at 4k
/// against the same tiles with FADD sums. In the two-warpgroup kernels a first version lost 0.5–8.4 % (d 128, and
/// d 64 short rows).
constexpr bool fwd_mma_row_sum(int block_m, bool /*causal*/) { return block_m == 192; }

/// Keys per mainloop block.
constexpr int fwd_block_n(int /*head_dim_tile*/) { return 128; }

/// Shared-memory pipeline stages for K and for V: two at every head-dim tile (at 128, two Q buffers, two K and two V
/// stages take 192 KiB, with the O staging about 226 KiB of the 227 KiB a CTA may have; deeper pipelines at head-dim
/// tiles up to 64 measured no gain, docs/perf-log.md v13).
constexpr int fwd_stages(int /*head_dim_tile*/) { return 2; }

/// Largest head dim the forward kernels take.
constexpr int kFwdMaxHeadDim = 128;

// ---- decode (src/kernels/kernel/decode_kernel.cuh, src/api/decode.cpp): the forward kernel's body with one consumer
// warpgroup of 64 packed query rows. Decode streams the cache once, so it is bound by memory: two CTAs share an SM,
// so that while one CTA's consumers load Q, run a tile's first softmax or write its outputs, the other CTA's
// producer keeps the SM's loads in flight (with one CTA per SM the memory pipe idled at every tile boundary: 0.62×
// cuDNN at 128 × 1k keys, docs/perf-log.md). Each CTA then holds one Q buffer and two K and two V stages of 16 KiB
// (64 keys at head-dim tile 128, 128 keys at 64) and no O staging (decode stores O from registers).

/// Query rows per decode tile (one consumer warpgroup).
constexpr int kDecodeBlockM = 64;

/// CTAs of the decode kernel resident per SM (the plan counts sm_count · this many CTA slots).
constexpr int kDecodeCtasPerSm = 2;

/// Keys per decode key block at a head-dim tile (64 or 128): one K or V stage is 16 KiB of 16-bit elements.
constexpr int decode_block_n(int head_dim_tile) { return head_dim_tile <= 64 ? 128 : 64; }

/// Head-dim tile of the decode kernel that runs a head dim (a multiple of 8 up to 128).
constexpr int decode_head_dim_tile(int head_dim) { return head_dim <= 64 ? 64 : 128; }

}  // namespace fmha::tiles
