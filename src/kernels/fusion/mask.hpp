// Masks over a key range, as small functors shared by the mainloop and its producer (so that both walk the same key
// blocks): the trip count of one query tile (how many key blocks it visits), which of those need per-element
// masking (the masked tail; the rest run the unmasked fast path), and the per-element predicate, which the
// mainloop applies to its own accumulator fragment. (A shared apply loop over the fragment changed the forward
// kernels' register allocation, so the loop stays in the mainloop.)
//
// The key range of a tile is [kKeyBegin, end) with kKeyBegin = 0 at compile time for the forward (every key of the
// entry up to the mask's limit); split-KV and sliding windows will give it a run-time start. Blocks are walked from
// the last to the first, so every block that needs masking (the causal diagonal, the partial tail past the entry's
// length) comes first.
//
// Rows i ∈ [m0, min(m0 + BlockM, sq)) of an entry with lengths (sq, sk); rows past sq are padding (the trip count
// ignores them, and they are never written). Indices i (query) and j (key) are within the entry.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

namespace fmha::kernel {

/// No mask, or the residual mask (the same visible set): row i sees keys j < sk. Keys past sk are never visible,
/// whatever the tile size, so the entry's last partial block is the masked tail.
template <int BlockM, int BlockN>
struct ResidualMask {
  static constexpr int kKeyBegin = 0;
  int sk;
  int offset;  ///< unused (the causal mask's diagonal offset; kept so that both masks share one layout)
  int m0;
  int sq;

  /// The mask of the tile whose first row is m0 (the causal alignment `qend` does not matter here).
  CUTLASS_DEVICE static ResidualMask make(int sk, bool /*qend*/, int m0, int sq) { return {sk, 0, m0, sq}; }

  /// Number of key blocks visited: blocks [0, n_blocks). Zero when no row of the tile sees a key.
  CUTLASS_DEVICE int n_blocks() const {
    const int hi = sk - kKeyBegin;  // keys of the range
    return hi <= 0 ? 0 : (hi + BlockN - 1) / BlockN;
  }

  /// Whether block n (keys kKeyBegin + n·BlockN …) contains a key that some row of the tile must not see.
  CUTLASS_DEVICE bool needs_mask(int n) const { return kKeyBegin + (n + 1) * BlockN > sk; }

  /// Whether row i sees key j.
  CUTLASS_DEVICE bool visible(int /*i*/, int j) const { return j < sk; }
};

/// Causal mask: row i sees keys j ≤ i + offset and j < sk. offset = 0 is the q-begin (top-left) alignment,
/// offset = sk − sq the q-end (bottom-right) one, where rows i < sq − sk see no key; make() picks it from the
/// alignment.
template <int BlockM, int BlockN>
struct CausalMask {
  static constexpr int kKeyBegin = 0;
  int sk;
  int offset;  ///< the diagonal's offset
  int m0;
  int sq;

  /// The mask of the tile whose first row is m0, for the alignment `qend` (bottom-right) or q-begin.
  CUTLASS_DEVICE static CausalMask make(int sk, bool qend, int m0, int sq) { return {sk, qend ? sk - sq : 0, m0, sq}; }

  /// Number of key blocks visited: up to the limit of the tile's last valid row.
  CUTLASS_DEVICE int n_blocks() const {
    const int hi = min(sk, min(m0 + BlockM, sq) + offset) - kKeyBegin;
    return hi <= 0 ? 0 : (hi + BlockN - 1) / BlockN;
  }

  /// Whether block n contains a key that some row of the tile must not see: past the limit of its first row.
  CUTLASS_DEVICE bool needs_mask(int n) const { return kKeyBegin + (n + 1) * BlockN > min(sk, m0 + 1 + offset); }

  /// Whether row i sees key j.
  CUTLASS_DEVICE bool visible(int i, int j) const { return j < sk && j <= i + offset; }
};

/// The forward kernel's mask type: CausalMask for causal kernels (either alignment), else ResidualMask.
template <int BlockM, int BlockN, bool Causal>
using FwdMask = std::conditional_t<Causal, CausalMask<BlockM, BlockN>, ResidualMask<BlockM, BlockN>>;

}  // namespace fmha::kernel
