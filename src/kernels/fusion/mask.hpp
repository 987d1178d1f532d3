// Masks over a key range, as small functors shared by the mainloop and its producer (so that both walk the same key
// blocks): the trip count of one query tile (how many key blocks it visits), which of those need per-element
// masking (the masked tail; the rest run the unmasked fast path), and the per-element predicate, which the
// mainloop applies to its own accumulator fragment. (A shared apply loop over the fragment changed the forward
// kernels' register allocation, so the loop stays in the mainloop.)
//
// The key range of a tile is [kKeyBegin, end) with kKeyBegin = 0 at compile time, in the coordinates of the tile's
// key range: the forward's range is every key of the entry; a decode split's range starts at its first key (the
// producer's K/V source is offset there, DecodeMask), and sliding windows will do the same. Blocks are walked from
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

  /// The transposed walk (backward): the row blocks [row_block_begin(n0), row_block_end(n0)) of BlockM rows
  /// are those holding a row that sees a key of the key block [n0, n0 + BlockN); begin == end when none does.
  CUTLASS_DEVICE int row_block_begin(int /*n0*/) const { return 0; }
  CUTLASS_DEVICE int row_block_end(int n0) const { return n0 < sk ? (sq + BlockM - 1) / BlockM : 0; }
  /// Whether the block of rows [i0, i0 + BlockM) and keys [n0, n0 + BlockN) holds a padding row (i ≥ sq) or a
  /// pair (i, j) that is not visible.
  CUTLASS_DEVICE bool needs_mask_block(int i0, int n0) const { return i0 + BlockM > sq || n0 + BlockN > sk; }
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

  /// The transposed walk (backward): the row blocks [row_block_begin(n0), row_block_end(n0)) of BlockM rows
  /// are those holding a row that sees a key of the key block [n0, n0 + BlockN): rows i ≥ n0 − offset, i < sq;
  /// begin == end when none does.
  CUTLASS_DEVICE int row_block_begin(int n0) const { return max(0, n0 - offset) / BlockM; }
  CUTLASS_DEVICE int row_block_end(int n0) const {
    return n0 < sk && max(0, n0 - offset) < sq ? (sq + BlockM - 1) / BlockM : row_block_begin(n0);
  }
  /// Whether the block of rows [i0, i0 + BlockM) and keys [n0, n0 + BlockN) holds a padding row (i ≥ sq) or a
  /// pair (i, j) that is not visible: its first row does not see its last key.
  CUTLASS_DEVICE bool needs_mask_block(int i0, int n0) const {
    return i0 + BlockM > sq || n0 + BlockN > sk || n0 + BlockN - 1 > i0 + offset;
  }
};

/// Decode's mask over one key split, in the split's coordinates (key j of the range is key k_begin + j of the
/// sequence): packed row i holds query token i / group (a tile's rows are the group · n query rows of one K/V head,
/// token-major: packed_row in kernel/decode_plan.hpp), and token t sees the range's keys j < sk with
/// j ≤ t + offset, where offset = (L − n) − k_begin for a sequence of L keys whose last n are the new tokens (causal
/// q-end per token). Rows past sq (= group · n) are padding.
template <int BlockM, int BlockN>
struct DecodeMask {
  static constexpr int kKeyBegin = 0;
  int sk;      ///< keys of the range
  int offset;  ///< token 0 sees keys j ≤ offset
  int m0;      ///< first packed row of the tile
  int sq;      ///< packed rows (group · n)
  int group;   ///< query heads per K/V head

  /// Number of key blocks visited: up to the limit of the tile's last valid row (all of the range for the last
  /// token).
  CUTLASS_DEVICE int n_blocks() const {
    const int last_token = (min(m0 + BlockM, sq) - 1) / group;
    const int hi = min(sk, last_token + offset + 1) - kKeyBegin;
    return hi <= 0 ? 0 : (hi + BlockN - 1) / BlockN;
  }

  /// Whether block n contains a key that some row of the tile must not see: past the limit of its first token.
  CUTLASS_DEVICE bool needs_mask(int n) const {
    return kKeyBegin + (n + 1) * BlockN > min(sk, m0 / group + offset + 1);
  }

  /// Whether packed row i sees key j.
  CUTLASS_DEVICE bool visible(int i, int j) const { return j < sk && j <= i / group + offset; }
};

/// The forward kernel's mask type: CausalMask for causal kernels (either alignment), else ResidualMask.
template <int BlockM, int BlockN, bool Causal>
using FwdMask = std::conditional_t<Causal, CausalMask<BlockM, BlockN>, ResidualMask<BlockM, BlockN>>;

}  // namespace fmha::kernel
