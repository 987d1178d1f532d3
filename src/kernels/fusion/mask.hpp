// Masks as small functors: which key blocks a query tile visits, which of those need per-element masking, and the
// per-element predicate. Shared by the forward mainloop and its producer so that both walk the same blocks.
#pragma once

#include <cute/tensor.hpp>

namespace fmha::kernel {

/// Key-block walk of one query tile.
///
/// Rows i ∈ [m0, min(m0 + BlockM, sq)) of an entry with lengths (sq, sk) (rows past sq are padding: n_blocks
/// ignores them and they are never written); keys visible to row i are [0, limit(i)) with
/// limit(i) = sk for no/residual masks and min(sk, i + 1 + offset) for causal (offset = 0 for q-begin, sk − sq for
/// q-end). Blocks are walked from the last to the first, so every block that needs masking comes first.
template <int BlockM, int BlockN, bool Causal>
struct MaskWalk {
  int sk;
  int offset;  ///< causal diagonal offset
  int m0;
  int sq;

  /// Number of key blocks visited: blocks [0, n_blocks). Zero when no row of the tile sees a key.
  CUTLASS_DEVICE int n_blocks() const {
    int hi = sk;
    if constexpr (Causal) hi = min(sk, min(m0 + BlockM, sq) + offset);  // limit of the tile's last valid row
    return hi <= 0 ? 0 : (hi + BlockN - 1) / BlockN;
  }

  /// Whether block n contains a key that some row of the tile must not see.
  CUTLASS_DEVICE bool needs_mask(int n) const {
    int lo = sk;
    if constexpr (Causal) lo = min(sk, m0 + 1 + offset);  // limit of the tile's first row
    return (n + 1) * BlockN > lo;
  }

  /// Whether row i (within the entry) sees key j (within the entry).
  CUTLASS_DEVICE bool visible(int i, int j) const {
    if constexpr (Causal) return j < sk && j <= i + offset;
    return j < sk;
  }
};

}  // namespace fmha::kernel
