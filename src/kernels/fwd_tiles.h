// Tile table of the forward kernels: the one source of truth for tile sizes, read by the kernel configuration
// (src/kernels/kernel/fwd_kernel.cuh, nvcc) and by the host heuristics and validation (src/api/fwd.cpp, g++).
// Plain constexpr C++: no CUDA or CuTe here.
#pragma once

namespace fmha::tiles {

/// Head-dim tiles that have kernels (src/instantiations/manifest.cmake); other head dims (multiples of 8 up to
/// 128) run on the next larger tile with the extra columns predicated off.
constexpr int fwd_head_dim_tile(int head_dim) { return head_dim <= 32 ? 32 : head_dim <= 64 ? 64 : 128; }

/// Query rows per CTA tile: 64 per consumer warpgroup; three consumer warpgroups at head-dim tiles up to 64 (a
/// short Q·Kᵀ leaves each softmax less GEMM time to hide behind, so a third warpgroup's GEMMs fill the gap, as in
/// FlashAttention-3's d 64 kernels), two at 128 (registers: O alone takes 64 per thread there).
constexpr int fwd_block_m(int head_dim_tile) { return head_dim_tile <= 64 ? 192 : 128; }

// A/B hook (branch exp/s4-ab): keys per block of the head-dim-128 kernels. Values other than 128 need the extended
// wgmma shapes (-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED, without which CuTe splits N=160 into five N=32 wgmmas),
// and at most 160 fit the shared memory while O has its own staging buffer.
#ifndef FMHA_TUNE_FWD_BLOCK_N_D128
#define FMHA_TUNE_FWD_BLOCK_N_D128 128
#endif

/// Keys per mainloop block.
constexpr int fwd_block_n(int head_dim_tile) { return head_dim_tile == 128 ? FMHA_TUNE_FWD_BLOCK_N_D128 : 128; }

/// Shared-memory pipeline stages for K and for V.
constexpr int fwd_stages(int /*head_dim_tile*/) { return 2; }

/// Largest head dim the forward kernels take.
constexpr int kFwdMaxHeadDim = 128;

}  // namespace fmha::tiles
