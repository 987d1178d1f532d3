// CPU tests of the backward reference fmha::ref::bwd (reference/backward.cpp).
//
// The central check is against finite differences of the loss L = Σ O∘dO, where O comes from the real forward
// fmha::ref::fwd (Rounding::kExact): dL/dQ, dL/dK, dL/dV are exactly what bwd must return for that dO. The other
// tests pin down properties the finite differences cannot see bit for bit: exact zeros, memory left untouched,
// GQA = MHA with repeated K/V, varlen = independent batches, BHSD = BSHD, and the kKernel rounding mode.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "fmha/types.h"
#include "reference/attention.h"
#include "reference/dtype.h"
#include "reference/tensor.h"

namespace {

using fmha::CausalAlign;
using fmha::DType;
using fmha::MaskType;
using fmha::ref::AttnShape;
using fmha::ref::ConstView;
using fmha::ref::MutView;
using fmha::ref::Rounding;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Memory order of a test tensor. Seq-major is BSHD when dense and [total][H][D] when packed; head-major is BHSD
/// when dense and [H][total][D] when packed (the seed's backward layouts).
enum class Order { kSeqMajor, kHeadMajor };

/// How make_problem fills Q, K, V and dO.
enum class Values {
  kGrid,      ///< multiples of 1/16 in [-1, 1]: exact in float, and x ± k·2^-6 stays exact (finite differences)
  kGaussian,  ///< N(0, 1) floats, generally not representable in bf16/fp16 (rounding tests)
};

/// Host tensor [batch][token][head][dim] that owns its storage and row offsets. A dense tensor gives every entry
/// `rows` rows (the entry's length plus padding, which lies outside the valid rows); a packed tensor stores the
/// entries back to back with cumulative offsets, followed by `pad` unused rows. Views are made on demand, so a
/// copied Tensor is self-contained.
struct Tensor {
  std::vector<int> lens;
  int heads = 0;
  int dim = 0;
  bool packed = false;
  Order order = Order::kSeqMajor;
  int rows = 0;  ///< dense: rows per entry; packed: total rows including the tail padding
  std::vector<int> cu;
  std::vector<float> data;
  int64_t sb = 0, sr = 0, sh = 0;

  /// Storage offset of element (b, i, h, d), following the addressing rule of reference/tensor.h.
  int64_t offset(int b, int i, int h, int d) const {
    const int64_t row = (packed ? cu[b] : 0) + static_cast<int64_t>(i);
    return b * sb + row * sr + h * sh + d;
  }
  float& at(int b, int i, int h, int d) { return data[offset(b, i, h, d)]; }
  float at(int b, int i, int h, int d) const { return data[offset(b, i, h, d)]; }

  template <typename T>
  static fmha::ref::View<T> make_view(T* ptr, int64_t sb, int64_t sr, int64_t sh, const int* cu) {
    fmha::ref::View<T> v;
    v.data = ptr;
    v.stride_batch = sb;
    v.stride_row = sr;
    v.stride_head = sh;
    v.cu_seqlens = cu;
    return v;
  }
  MutView mut() { return make_view(data.data(), sb, sr, sh, packed ? cu.data() : nullptr); }
  ConstView view() const { return make_view(data.data(), sb, sr, sh, packed ? cu.data() : nullptr); }

  /// Calls f(b, i, h, d) for every element inside the valid rows.
  template <class F>
  void for_each(F&& f) const {
    for (size_t b = 0; b < lens.size(); ++b)
      for (int i = 0; i < lens[b]; ++i)
        for (int h = 0; h < heads; ++h)
          for (int d = 0; d < dim; ++d) f(static_cast<int>(b), i, h, d);
  }

  /// valid[o] is 1 for every storage offset o inside the valid rows, 0 for padding.
  std::vector<char> valid_mask() const {
    std::vector<char> valid(data.size(), 0);
    for_each([&](int b, int i, int h, int d) { valid[offset(b, i, h, d)] = 1; });
    return valid;
  }
};

/// A tensor of `heads` × `dim` per token with entry lengths `lens`, in the given order, filled with `fill`.
Tensor make_tensor(const std::vector<int>& lens, int heads, int dim, bool packed, Order order, int pad_rows = 0,
                   float fill = 0.0f) {
  Tensor t;
  t.lens = lens;
  t.heads = heads;
  t.dim = dim;
  t.packed = packed;
  t.order = order;
  const int64_t batch = static_cast<int64_t>(lens.size());
  int64_t total = 0;
  if (packed) {
    t.cu = fmha::ref::cumulative(lens);
    t.rows = t.cu.back() + pad_rows;
    total = static_cast<int64_t>(t.rows) * heads * dim;
    t.sb = 0;
  } else {
    t.rows = (lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end())) + pad_rows;
    total = batch * t.rows * heads * dim;
    t.sb = static_cast<int64_t>(t.rows) * heads * dim;
  }
  if (order == Order::kSeqMajor) {
    t.sr = static_cast<int64_t>(heads) * dim;
    t.sh = dim;
  } else {
    t.sh = static_cast<int64_t>(t.rows) * dim;
    t.sr = dim;
  }
  t.data.assign(static_cast<size_t>(std::max<int64_t>(total, 1)), fill);
  return t;
}

/// Same shape and layout as t, every element set to `fill`.
Tensor like(const Tensor& t, float fill) {
  Tensor r = t;
  std::fill(r.data.begin(), r.data.end(), fill);
  return r;
}

/// Copy of t's valid elements in another order (padding rows kept, filled with 0).
Tensor relayout(const Tensor& t, Order order, int pad_rows = 0) {
  Tensor r = make_tensor(t.lens, t.heads, t.dim, t.packed, order, pad_rows);
  t.for_each([&](int b, int i, int h, int d) { r.at(b, i, h, d) = t.at(b, i, h, d); });
  return r;
}

/// Attention problem plus the forward's O and LSE. LSE is stored head-major with dim 1 ([B][H][Sq] dense,
/// [H][total] packed), as in the seed.
struct Problem {
  AttnShape s;
  Tensor q, k, v, o, lse, d_o;
};

struct Grads {
  Tensor dq, dk, dv;
};

/// AttnShape with the given sizes, mask and scale (0 = default), exact rounding.
AttnShape shape(int hq, int hkv, int dqk, int dv, std::vector<int> sq, std::vector<int> sk,
                MaskType mask = MaskType::kNone, CausalAlign align = CausalAlign::kQBegin, double scale = 0.0) {
  AttnShape s;
  s.batch = static_cast<int>(sq.size());
  s.heads_q = hq;
  s.heads_kv = hkv;
  s.head_dim_qk = dqk;
  s.head_dim_v = dv;
  s.seqlens_q = std::move(sq);
  s.seqlens_k = std::move(sk);
  s.mask = mask;
  s.align = align;
  s.scale = scale;
  s.rounding = Rounding::kExact;
  return s;
}

/// Runs the real forward on p's inputs, overwriting p.o and p.lse.
void run_forward(Problem& p) {
  AttnShape s = p.s;
  s.rounding = Rounding::kExact;
  fmha::ref::fwd(s, p.q.view(), p.k.view(), p.v.view(), p.o.mut(), p.lse.mut());
}

/// Builds a problem with random inputs (see Values) and O, LSE from the real forward. Padding rows are 0.
Problem make_problem(const AttnShape& s, bool packed, Order order, uint32_t seed, Values values = Values::kGrid,
                     int pad_rows = 0) {
  Problem p;
  p.s = s;
  p.q = make_tensor(s.seqlens_q, s.heads_q, s.head_dim_qk, packed, order, pad_rows);
  p.k = make_tensor(s.seqlens_k, s.heads_kv, s.head_dim_qk, packed, order, pad_rows);
  p.v = make_tensor(s.seqlens_k, s.heads_kv, s.head_dim_v, packed, order, pad_rows);
  p.o = make_tensor(s.seqlens_q, s.heads_q, s.head_dim_v, packed, order, pad_rows);
  p.d_o = make_tensor(s.seqlens_q, s.heads_q, s.head_dim_v, packed, order, pad_rows);
  p.lse = make_tensor(s.seqlens_q, s.heads_q, 1, packed, Order::kHeadMajor, pad_rows);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> grid(-16, 16);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (Tensor* t : {&p.q, &p.k, &p.v, &p.d_o}) {
    t->for_each([&](int b, int i, int h, int d) {
      t->at(b, i, h, d) = values == Values::kGrid ? static_cast<float>(grid(rng)) / 16.0f : gauss(rng);
    });
  }
  run_forward(p);
  return p;
}

/// Runs bwd on p. The gradient buffers start as NaN (so any element bwd fails to write shows up), or as
/// `fill` when given.
Grads run_backward(const Problem& p, float fill = kNaN) {
  Grads g{like(p.q, fill), like(p.k, fill), like(p.v, fill)};
  fmha::ref::bwd(p.s, p.q.view(), p.k.view(), p.v.view(), p.o.view(), p.d_o.view(), p.lse.view(), g.dq.mut(),
                 g.dk.mut(), g.dv.mut());
  return g;
}

/// L = Σ O∘dO over the valid rows, with O recomputed by the real forward from p's current inputs.
double loss(Problem& p) {
  run_forward(p);
  double sum = 0.0;
  p.o.for_each([&](int b, int i, int h, int d) {
    sum += static_cast<double>(p.o.at(b, i, h, d)) * static_cast<double>(p.d_o.at(b, i, h, d));
  });
  return sum;
}

/// Last index (exclusive) of the keys row i sees, restated here from attention.h so that the tests do not rely
/// on the implementation of visible_keys (every mask here starts at key 0).
int key_end(const AttnShape& s, int sq, int sk, int i) {
  if (s.mask != MaskType::kCausal) return sk;
  const int hi = s.align == CausalAlign::kQBegin ? std::min(sk, i + 1) : std::min(sk, i + 1 + sk - sq);
  return std::max(hi, 0);
}

/// Bitwise equality of two floats (so NaN == NaN and 0 != -0 are both as stored).
bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Finite differences -----------------------------------------------------------------------------------------
//
// Step and stencil. Inputs are multiples of 1/16 in [-1, 1], so x ± 2^-6 and x ± 2^-5 are exact floats and the
// perturbation is exactly what the formula assumes. The five-point central stencil
//   f'(x) ≈ [8(f(x+h) − f(x−h)) − (f(x+2h) − f(x−2h))] / (12h),   h = 2^-6,
// has truncation error h^4·f⁽⁵⁾/30 ≈ 2e-9·f⁽⁵⁾: negligible here (L is linear in V, and the scaled scores are O(1)).
// The error that remains is noise: fwd stores O as float, so each evaluation of L carries a rounding error of
// about 2^-24·Σ|O·dO| over the rows the perturbation moves (≤ ~1e-6 for these sizes, |O|, |dO| ≤ 1), and the
// stencil multiplies it by (8+8+1+1)/(12h) ≈ 96: ~1e-4 in the worst case. Measured: at most 6.5e-6 for the
// 12/8-dim cases and 2.2e-5 for the 192/128 case. Tolerance: 2e-4 absolute plus 1e-4 relative (gradients here are
// 0.2 .. 2 at their largest). A wrong formula (a dropped D_i term, a missing GQA sum, a wrong scale, a wrong mask)
// is off by O(0.1) relative, three orders above this.

constexpr double kStep = 1.0 / 64.0;
constexpr double kFdAbsTol = 2e-4;
constexpr double kFdRelTol = 1e-4;

/// Compares every valid element of bwd's dQ, dK, dV with the five-point finite difference of L = Σ O∘dO
/// (O from the real fwd). Reports the first few mismatches per tensor, and requires each gradient to be
/// non-trivial (so the comparison cannot pass vacuously).
void check_against_finite_differences(const AttnShape& s, bool packed, uint32_t seed) {
  Problem p = make_problem(s, packed, Order::kSeqMajor, seed);
  const Grads g = run_backward(p);

  struct Item {
    const char* name;
    Tensor* x;
    const Tensor* grad;
  };
  const Item items[] = {{"dQ", &p.q, &g.dq}, {"dK", &p.k, &g.dk}, {"dV", &p.v, &g.dv}};
  for (const Item& it : items) {
    int failures = 0;
    double max_err = 0.0, max_fd = 0.0;
    it.x->for_each([&](int b, int i, int h, int d) {
      float& e = it.x->at(b, i, h, d);
      const float x0 = e;
      const double offsets[4] = {-2.0, -1.0, 1.0, 2.0};
      double f[4];
      for (int m = 0; m < 4; ++m) {
        e = static_cast<float>(x0 + offsets[m] * kStep);
        f[m] = loss(p);
      }
      e = x0;
      const double fd = (8.0 * (f[2] - f[1]) - (f[3] - f[0])) / (12.0 * kStep);
      const double got = it.grad->at(b, i, h, d);
      const double err = std::fabs(got - fd);
      max_err = std::max(max_err, err);
      max_fd = std::max(max_fd, std::fabs(fd));
      if (!(err <= kFdAbsTol + kFdRelTol * std::fabs(fd))) {
        if (++failures <= 5) {
          ADD_FAILURE() << it.name << "(b=" << b << ", i=" << i << ", h=" << h << ", d=" << d << "): bwd " << got
                        << " vs finite difference " << fd;
        }
      }
    });
    EXPECT_EQ(failures, 0) << it.name << ": " << failures << " elements off; max error " << max_err;
    EXPECT_GT(max_fd, 1e-2) << it.name << " is trivially small; the case does not test it";
  }
}

TEST(RefBwdFiniteDiff, MhaNoMask) {
  check_against_finite_differences(shape(2, 2, 8, 8, {3, 3}, {4, 4}), false, 1);
}

TEST(RefBwdFiniteDiff, GqaFourToTwoCausalQBeginExplicitScale) {
  check_against_finite_differences(shape(4, 2, 12, 8, {4}, {4}, MaskType::kCausal, CausalAlign::kQBegin, 0.3),
                                   false, 2);
}

TEST(RefBwdFiniteDiff, GqaThreeToOneResidualUnequalDims) {
  check_against_finite_differences(shape(3, 1, 12, 8, {3, 2}, {5, 5}, MaskType::kResidual), false, 3);
}

TEST(RefBwdFiniteDiff, CausalQBeginFewerQueriesThanKeys) {
  // Keys 3 and 4 are seen by no row: their dK, dV must come out 0.
  check_against_finite_differences(shape(2, 1, 12, 8, {3}, {5}, MaskType::kCausal, CausalAlign::kQBegin), false, 4);
}

TEST(RefBwdFiniteDiff, CausalQEndFewerQueriesThanKeys) {
  check_against_finite_differences(shape(2, 2, 12, 8, {3}, {5}, MaskType::kCausal, CausalAlign::kQEnd), false, 5);
}

TEST(RefBwdFiniteDiff, CausalQEndMoreQueriesThanKeys) {
  // Rows 0 and 1 see no key (LSE = −inf): zero dQ, no contribution to dK, dV.
  check_against_finite_differences(shape(4, 2, 12, 8, {5}, {3}, MaskType::kCausal, CausalAlign::kQEnd), false, 6);
}

TEST(RefBwdFiniteDiff, VarlenWithZeroLengthEntries) {
  // Entry 1 has no queries (its keys get dK = dV = 0), entry 2 has no keys (its rows get dQ = 0).
  check_against_finite_differences(
      shape(4, 2, 12, 8, {2, 0, 3, 3}, {3, 2, 0, 4}, MaskType::kCausal, CausalAlign::kQEnd), true, 7);
}

TEST(RefBwdFiniteDiff, MlaShape192x128) {
  check_against_finite_differences(shape(2, 1, 192, 128, {2}, {3}, MaskType::kCausal, CausalAlign::kQEnd), false, 8);
}

// Exact zeros and untouched memory ----------------------------------------------------------------------------

/// Runs bwd twice: on p, and on a copy whose every value bwd must not read is NaN (padding rows of all inputs;
/// Q, O, dO of rows that see no key; K, V of keys no row sees). Checks that the second run writes exactly the
/// same bits inside the valid rows, leaves a sentinel outside them untouched, gives dQ = 0 for rows that see no
/// key and dK = dV = 0 for keys no row sees, and that the case has such rows and keys.
void check_zeros_and_untouched(const AttnShape& s, bool packed, int pad_rows, uint32_t seed) {
  Problem p = make_problem(s, packed, Order::kSeqMajor, seed, Values::kGrid, pad_rows);
  const Grads clean = run_backward(p);

  Problem poisoned = p;
  for (Tensor* t : {&poisoned.q, &poisoned.k, &poisoned.v, &poisoned.o, &poisoned.d_o, &poisoned.lse}) {
    const std::vector<char> valid = t->valid_mask();
    for (size_t o = 0; o < valid.size(); ++o)
      if (!valid[o]) t->data[o] = kNaN;
  }
  int empty_rows = 0, unseen_keys = 0;
  std::vector<std::vector<char>> row_empty(s.batch), key_unseen(s.batch);
  for (int b = 0; b < s.batch; ++b) {
    const int sq = s.seqlens_q[b], sk = s.seqlens_k[b];
    row_empty[b].assign(sq, 0);
    key_unseen[b].assign(sk, 1);
    for (int i = 0; i < sq; ++i) {
      const int hi = key_end(s, sq, sk, i);
      for (int j = 0; j < hi; ++j) key_unseen[b][j] = 0;
      if (hi > 0) continue;
      row_empty[b][i] = 1;
      ++empty_rows;
      for (int h = 0; h < s.heads_q; ++h) {
        EXPECT_EQ(p.lse.at(b, i, h, 0), -std::numeric_limits<float>::infinity()) << "fwd LSE of an empty row";
        for (int d = 0; d < s.head_dim_qk; ++d) poisoned.q.at(b, i, h, d) = kNaN;
        for (int d = 0; d < s.head_dim_v; ++d) poisoned.o.at(b, i, h, d) = poisoned.d_o.at(b, i, h, d) = kNaN;
      }
    }
    for (int j = 0; j < sk; ++j) {
      if (!key_unseen[b][j]) continue;
      ++unseen_keys;
      for (int hk = 0; hk < s.heads_kv; ++hk) {
        for (int d = 0; d < s.head_dim_qk; ++d) poisoned.k.at(b, j, hk, d) = kNaN;
        for (int d = 0; d < s.head_dim_v; ++d) poisoned.v.at(b, j, hk, d) = kNaN;
      }
    }
  }
  EXPECT_GT(empty_rows + unseen_keys, 0) << "the case has no empty row and no unseen key";

  // Outputs: sentinel everywhere, NaN inside the valid rows (so an element left unwritten shows up).
  constexpr float kSentinel = 777.0f;
  Grads g{like(p.q, kSentinel), like(p.k, kSentinel), like(p.v, kSentinel)};
  for (Tensor* t : {&g.dq, &g.dk, &g.dv}) t->for_each([&](int b, int i, int h, int d) { t->at(b, i, h, d) = kNaN; });
  fmha::ref::bwd(s, poisoned.q.view(), poisoned.k.view(), poisoned.v.view(), poisoned.o.view(), poisoned.d_o.view(),
                 poisoned.lse.view(), g.dq.mut(), g.dk.mut(), g.dv.mut());

  struct Pair {
    const char* name;
    const Tensor* got;
    const Tensor* want;
  };
  const Pair pairs[] = {{"dQ", &g.dq, &clean.dq}, {"dK", &g.dk, &clean.dk}, {"dV", &g.dv, &clean.dv}};
  for (const Pair& pr : pairs) {
    const std::vector<char> valid = pr.got->valid_mask();
    int bad_inside = 0, bad_outside = 0;
    for (size_t o = 0; o < valid.size(); ++o) {
      const float x = pr.got->data[o];
      if (valid[o]) {
        bad_inside += !(std::isfinite(x) && same_bits(x, pr.want->data[o]));
      } else {
        bad_outside += !same_bits(x, kSentinel);
      }
    }
    EXPECT_EQ(bad_inside, 0) << pr.name << ": elements inside the valid rows that differ from the clean run "
                             << "(unwritten, or an unread value leaked in)";
    EXPECT_EQ(bad_outside, 0) << pr.name << ": elements outside the valid rows were written";
  }
  for (int b = 0; b < s.batch; ++b) {
    for (int i = 0; i < s.seqlens_q[b]; ++i) {
      if (!row_empty[b][i]) continue;
      for (int h = 0; h < s.heads_q; ++h)
        for (int d = 0; d < s.head_dim_qk; ++d)
          EXPECT_EQ(g.dq.at(b, i, h, d), 0.0f) << "dQ of empty row b=" << b << " i=" << i << " h=" << h;
    }
    for (int j = 0; j < s.seqlens_k[b]; ++j) {
      if (!key_unseen[b][j]) continue;
      for (int hk = 0; hk < s.heads_kv; ++hk) {
        for (int d = 0; d < s.head_dim_qk; ++d)
          EXPECT_EQ(g.dk.at(b, j, hk, d), 0.0f) << "dK of unseen key b=" << b << " j=" << j << " hk=" << hk;
        for (int d = 0; d < s.head_dim_v; ++d)
          EXPECT_EQ(g.dv.at(b, j, hk, d), 0.0f) << "dV of unseen key b=" << b << " j=" << j << " hk=" << hk;
      }
    }
  }
  // Keys that some row sees get a non-zero dV somewhere (guards against a bwd that writes zeros everywhere).
  double seen_dv = 0.0;
  g.dv.for_each([&](int b, int j, int hk, int d) {
    if (!key_unseen[b][j]) seen_dv = std::max(seen_dv, std::fabs(static_cast<double>(g.dv.at(b, j, hk, d))));
  });
  EXPECT_GT(seen_dv, 0.0);
}

TEST(RefBwd, EmptyRowsAndUnseenKeysGetExactZerosAndNothingElseIsTouched) {
  {
    SCOPED_TRACE("dense, padded, causal q-end, Sq > Sk in entry 0");
    check_zeros_and_untouched(shape(4, 2, 12, 8, {5, 2}, {3, 4}, MaskType::kCausal, CausalAlign::kQEnd), false, 2,
                              11);
  }
  {
    SCOPED_TRACE("dense, padded, causal q-begin, Sq < Sk in entry 0");
    check_zeros_and_untouched(shape(2, 1, 12, 8, {2, 3}, {4, 3}, MaskType::kCausal, CausalAlign::kQBegin), false, 1,
                              12);
  }
  {
    SCOPED_TRACE("packed with tail padding, zero-length entries, no mask");
    check_zeros_and_untouched(shape(2, 2, 8, 8, {3, 0, 2}, {0, 2, 3}), true, 2, 13);
  }
}

TEST(RefBwd, RowsWithMinusInfLseAreSkipped) {
  // The documented rule "rows with LSE = −inf contribute nothing" holds whatever the row's mask says: here two
  // rows that do see keys are handed LSE = −inf, with NaN in their Q, O and dO. They must get dQ = 0, and every
  // other gradient must equal that of the same problem with those rows' O and dO set to zero (which makes their
  // dS and their P·dO vanish).
  const AttnShape s = shape(2, 1, 12, 8, {4}, {3});
  const Problem p = make_problem(s, false, Order::kSeqMajor, 14);
  const int rows[2][2] = {{1, 0}, {3, 1}};  // (i, h)

  Problem skipped = p, zeroed = p;
  for (const auto& r : rows) {
    const int i = r[0], h = r[1];
    skipped.lse.at(0, i, h, 0) = -std::numeric_limits<float>::infinity();
    for (int d = 0; d < s.head_dim_qk; ++d) skipped.q.at(0, i, h, d) = kNaN;
    for (int d = 0; d < s.head_dim_v; ++d) {
      skipped.o.at(0, i, h, d) = skipped.d_o.at(0, i, h, d) = kNaN;
      zeroed.o.at(0, i, h, d) = zeroed.d_o.at(0, i, h, d) = 0.0f;
    }
  }
  const Grads got = run_backward(skipped);
  const Grads want = run_backward(zeroed);
  for (const auto& r : rows)
    for (int d = 0; d < s.head_dim_qk; ++d) EXPECT_EQ(got.dq.at(0, r[0], r[1], d), 0.0f);
  int diff = 0;
  auto cmp = [&](const Tensor& a, const Tensor& b) {
    a.for_each([&](int e, int i, int h, int d) { diff += !(a.at(e, i, h, d) == b.at(e, i, h, d)); });
  };
  cmp(got.dq, want.dq);
  cmp(got.dk, want.dk);
  cmp(got.dv, want.dv);
  EXPECT_EQ(diff, 0) << "elements that differ from the zeroed-row problem (NaN counts as a difference)";
}

// Structural equivalences -------------------------------------------------------------------------------------

TEST(RefBwd, GqaEqualsMhaWithRepeatedKvSummedOverGroups) {
  const int hq = 6, hkv = 2, group = hq / hkv;
  const AttnShape s = shape(hq, hkv, 12, 8, {4, 3}, {5, 5}, MaskType::kCausal, CausalAlign::kQEnd);
  const Problem p = make_problem(s, false, Order::kSeqMajor, 21);
  const Grads g = run_backward(p);

  // Same problem as MHA: K/V head h is the GQA head h / group. O and LSE are reused as they are.
  Problem m = p;
  m.s.heads_kv = hq;
  m.k = make_tensor(s.seqlens_k, hq, s.head_dim_qk, false, Order::kSeqMajor);
  m.v = make_tensor(s.seqlens_k, hq, s.head_dim_v, false, Order::kSeqMajor);
  m.k.for_each([&](int b, int j, int h, int d) { m.k.at(b, j, h, d) = p.k.at(b, j, h / group, d); });
  m.v.for_each([&](int b, int j, int h, int d) { m.v.at(b, j, h, d) = p.v.at(b, j, h / group, d); });
  const Grads gm = run_backward(m);

  // dQ does not involve the group sum: identical bits.
  int dq_diff = 0;
  g.dq.for_each([&](int b, int i, int h, int d) { dq_diff += !same_bits(g.dq.at(b, i, h, d), gm.dq.at(b, i, h, d)); });
  EXPECT_EQ(dq_diff, 0);

  // dK, dV: GQA rounds one fp64 sum to float; here `group` float terms are summed in fp64, so the two differ by
  // at most ~(group + 1)·2^-24 of Σ|terms|.
  auto check = [&](const char* name, const Tensor& got, const Tensor& per_head) {
    int bad = 0;
    double max_ref = 0.0;
    got.for_each([&](int b, int j, int hk, int d) {
      double sum = 0.0, mag = 0.0;
      for (int r = 0; r < group; ++r) {
        const double t = per_head.at(b, j, hk * group + r, d);
        sum += t;
        mag += std::fabs(t);
      }
      max_ref = std::max(max_ref, std::fabs(sum));
      const double diff = std::fabs(static_cast<double>(got.at(b, j, hk, d)) - sum);
      if (!(diff <= 4.0 * 6e-8 * mag)) {
        if (++bad <= 5) ADD_FAILURE() << name << "(b=" << b << ", j=" << j << ", hk=" << hk << ", d=" << d
                                      << "): GQA " << got.at(b, j, hk, d) << " vs summed MHA " << sum;
      }
    });
    EXPECT_EQ(bad, 0) << name;
    EXPECT_GT(max_ref, 1e-2) << name << " is trivially small";
  };
  check("dK", g.dk, gm.dk);
  check("dV", g.dv, gm.dv);
}

TEST(RefBwd, VarlenEqualsIndependentBatches) {
  const std::vector<int> sq = {3, 0, 4, 2, 1}, sk = {5, 2, 0, 2, 3};
  const AttnShape s = shape(4, 2, 12, 8, sq, sk, MaskType::kCausal, CausalAlign::kQBegin);
  const Problem p = make_problem(s, true, Order::kSeqMajor, 31);
  const Grads g = run_backward(p);

  for (int b = 0; b < s.batch; ++b) {
    SCOPED_TRACE("entry " + std::to_string(b));
    // Entry b alone, as a dense batch of one, with the same inputs, O and LSE.
    Problem e;
    e.s = shape(4, 2, 12, 8, {sq[b]}, {sk[b]}, MaskType::kCausal, CausalAlign::kQBegin);
    auto extract = [&](const Tensor& t, int len, Order order) {
      Tensor r = make_tensor({len}, t.heads, t.dim, false, order);
      r.for_each([&](int, int i, int h, int d) { r.at(0, i, h, d) = t.at(b, i, h, d); });
      return r;
    };
    e.q = extract(p.q, sq[b], Order::kSeqMajor);
    e.o = extract(p.o, sq[b], Order::kSeqMajor);
    e.d_o = extract(p.d_o, sq[b], Order::kSeqMajor);
    e.lse = extract(p.lse, sq[b], Order::kHeadMajor);
    e.k = extract(p.k, sk[b], Order::kSeqMajor);
    e.v = extract(p.v, sk[b], Order::kSeqMajor);
    const Grads ge = run_backward(e);
    int diff = 0;
    ge.dq.for_each([&](int, int i, int h, int d) { diff += !same_bits(ge.dq.at(0, i, h, d), g.dq.at(b, i, h, d)); });
    ge.dk.for_each([&](int, int j, int h, int d) { diff += !same_bits(ge.dk.at(0, j, h, d), g.dk.at(b, j, h, d)); });
    ge.dv.for_each([&](int, int j, int h, int d) { diff += !same_bits(ge.dv.at(0, j, h, d), g.dv.at(b, j, h, d)); });
    EXPECT_EQ(diff, 0);
  }
}

TEST(RefBwd, BhsdLayoutEqualsBshd) {
  for (const bool packed : {false, true}) {
    SCOPED_TRACE(packed ? "packed [total][H][D] vs [H][total][D]" : "dense BSHD vs BHSD");
    const AttnShape s = packed ? shape(4, 2, 12, 8, {3, 0, 2}, {2, 3, 4}, MaskType::kCausal, CausalAlign::kQEnd)
                               : shape(4, 2, 12, 8, {3, 3}, {5, 5}, MaskType::kCausal, CausalAlign::kQEnd);
    const Problem p = make_problem(s, packed, Order::kSeqMajor, 41);
    Problem t = p;
    t.q = relayout(p.q, Order::kHeadMajor);
    t.k = relayout(p.k, Order::kHeadMajor);
    t.v = relayout(p.v, Order::kHeadMajor);
    t.o = relayout(p.o, Order::kHeadMajor);
    t.d_o = relayout(p.d_o, Order::kHeadMajor);
    if (!packed) {
      // The seed's BHSD strides: head S·D, row D.
      EXPECT_EQ(t.q.sh, 3 * 12);
      EXPECT_EQ(t.q.sr, 12);
      EXPECT_EQ(t.k.sh, 5 * 12);
      EXPECT_EQ(t.v.sh, 5 * 8);
    }
    const Grads a = run_backward(p);
    const Grads b = run_backward(t);
    int diff = 0;
    a.dq.for_each([&](int e, int i, int h, int d) { diff += !same_bits(a.dq.at(e, i, h, d), b.dq.at(e, i, h, d)); });
    a.dk.for_each([&](int e, int j, int h, int d) { diff += !same_bits(a.dk.at(e, j, h, d), b.dk.at(e, j, h, d)); });
    a.dv.for_each([&](int e, int j, int h, int d) { diff += !same_bits(a.dv.at(e, j, h, d), b.dv.at(e, j, h, d)); });
    EXPECT_EQ(diff, 0);
  }
}

// kKernel rounding --------------------------------------------------------------------------------------------

/// Largest |a − b| over the valid elements of a, divided by the largest |b| (relative max-norm difference).
double rel_max_diff(const Tensor& a, const Tensor& b) {
  double diff = 0.0, ref = 0.0;
  a.for_each([&](int e, int i, int h, int d) {
    diff = std::max(diff, std::fabs(static_cast<double>(a.at(e, i, h, d)) - b.at(e, i, h, d)));
    ref = std::max(ref, std::fabs(static_cast<double>(b.at(e, i, h, d))));
  });
  return diff / ref;
}

/// Largest rel_max_diff over dQ, dK, dV.
double grads_rel_diff(const Grads& a, const Grads& b) {
  return std::max({rel_max_diff(a.dq, b.dq), rel_max_diff(a.dk, b.dk), rel_max_diff(a.dv, b.dv)});
}

/// Whether every valid element of a and b has the same bits.
bool grads_identical(const Grads& a, const Grads& b) {
  bool same = true;
  auto cmp = [&](const Tensor& x, const Tensor& y) {
    x.for_each([&](int e, int i, int h, int d) { same = same && same_bits(x.at(e, i, h, d), y.at(e, i, h, d)); });
  };
  cmp(a.dq, b.dq);
  cmp(a.dk, b.dk);
  cmp(a.dv, b.dv);
  return same;
}

TEST(RefBwd, KernelRoundingBf16DiffersFromExactByBoundedAmount) {
  const AttnShape s = shape(2, 1, 16, 16, {6, 5}, {7, 5}, MaskType::kCausal, CausalAlign::kQEnd);
  const Problem p = make_problem(s, false, Order::kSeqMajor, 51, Values::kGaussian);
  const Grads exact = run_backward(p);

  Problem pk = p;
  pk.s.rounding = Rounding::kKernel;
  pk.s.dtype = DType::kBF16;
  const Grads kernel = run_backward(pk);

  // Inputs are rounded on read: rounding Q, K, V, O, dO beforehand changes nothing.
  Problem pre = pk;
  for (Tensor* t : {&pre.q, &pre.k, &pre.v, &pre.o, &pre.d_o})
    t->for_each([&](int b, int i, int h, int d) { t->at(b, i, h, d) = fmha::ref::round_to(DType::kBF16, t->at(b, i, h, d)); });
  EXPECT_TRUE(grads_identical(kernel, run_backward(pre))) << "kKernel must round its inputs on read";

  // Bounds. bf16 keeps 8 significant bits: unit roundoff u = 2^-9 ≈ 2e-3. Rounding Q and K moves each scaled
  // score by up to ~2u·scale·Σ_d|q_d·k_d| (a few u for N(0,1) inputs at d = 16), and exp turns that into the same
  // relative change of P; rounding V, O, dO, P and dS adds about u each. Measured against the largest gradient of
  // each tensor (rows of dS sum to zero, so element-wise relative error is not meaningful) the change is 5.2u for
  // this case; the bound is 16u ≈ 3e-2. It must also be clearly above fp32/fp64 noise (1e-6). Rounding to a
  // coarser type (e4m3: u = 2^-4) breaks the upper bound, not rounding at all the lower one.
  const double u = std::ldexp(1.0, -9);
  const double all = grads_rel_diff(kernel, exact);
  EXPECT_GT(all, 1e-2 * u) << "kKernel (bf16) gives the exact result: no rounding happened";
  EXPECT_LT(all, 16.0 * u);

  // With inputs already bf16, the remaining difference comes from rounding P and dS alone: still non-zero, and
  // about one u (measured 0.95u); bound 4u.
  Problem pre_exact = pre;
  pre_exact.s.rounding = Rounding::kExact;
  const double ps_only = grads_rel_diff(run_backward(pre), run_backward(pre_exact));
  EXPECT_GT(ps_only, 1e-2 * u) << "P and dS are not rounded before the second products";
  EXPECT_LT(ps_only, 4.0 * u);

  // fp16 (11 significant bits) must land closer to the exact result than bf16.
  Problem ph = pk;
  ph.s.dtype = DType::kFP16;
  const double fp16 = grads_rel_diff(run_backward(ph), exact);
  EXPECT_GT(fp16, 0.0);
  EXPECT_LT(fp16, all);
  RecordProperty("bf16_rel_diff", std::to_string(all));
  RecordProperty("bf16_p_ds_only_rel_diff", std::to_string(ps_only));
  RecordProperty("fp16_rel_diff", std::to_string(fp16));
}

TEST(RefBwd, KernelRoundingFollowsTheDocumentedSteps) {
  // One query row against three keys, head dims 2, bf16, written out step by step from attention.h: Q, K, V, O,
  // dO rounded on read; P_j = exp(scale·S_j − LSE); dS_j = P_j·(dP_j − D) with the unrounded P; then P and dS
  // rounded (through float) before dV = P·dO, dQ = scale·Σ dS_j·K_j, dK_j = scale·dS_j·Q. Twenty random draws,
  // so that a one-ulp (bf16) deviation in any step shows up somewhere. Tolerance: float storage, 1e-6 of the
  // sum of the absolute terms.
  const double scale = 1.0 / std::sqrt(2.0);
  auto r = [](float x) { return static_cast<double>(fmha::ref::round_to(DType::kBF16, x)); };
  int bad = 0;
  for (uint32_t trial = 0; trial < 20; ++trial) {
    const Problem p = make_problem(shape(1, 1, 2, 2, {1}, {3}), false, Order::kSeqMajor, 100 + trial,
                                   Values::kGaussian);
    Problem pk = p;
    pk.s.rounding = Rounding::kKernel;
    pk.s.dtype = DType::kBF16;
    const Grads g = run_backward(pk);

    const double lse = p.lse.at(0, 0, 0, 0);
    double q[2], o[2], dout[2], k[3][2], v[3][2];
    for (int d = 0; d < 2; ++d) {
      q[d] = r(p.q.at(0, 0, 0, d));
      o[d] = r(p.o.at(0, 0, 0, d));
      dout[d] = r(p.d_o.at(0, 0, 0, d));
      for (int j = 0; j < 3; ++j) {
        k[j][d] = r(p.k.at(0, j, 0, d));
        v[j][d] = r(p.v.at(0, j, 0, d));
      }
    }
    const double big_d = dout[0] * o[0] + dout[1] * o[1];
    double dq[2] = {0, 0}, dq_mag[2] = {0, 0};
    auto expect_near = [&](const char* what, double got, double want, double mag) {
      if (!(std::fabs(got - want) <= 1e-6 * mag + 1e-30)) {
        if (++bad <= 5) ADD_FAILURE() << what << " trial " << trial << ": got " << got << ", want " << want;
      }
    };
    for (int j = 0; j < 3; ++j) {
      const double p_j = std::exp(scale * (q[0] * k[j][0] + q[1] * k[j][1]) - lse);
      const double dp_j = dout[0] * v[j][0] + dout[1] * v[j][1];
      const double ds_j = r(static_cast<float>(p_j * (dp_j - big_d)));
      const double p_mma = r(static_cast<float>(p_j));
      for (int d = 0; d < 2; ++d) {
        dq[d] += ds_j * k[j][d];
        dq_mag[d] += std::fabs(ds_j * k[j][d]);
        const double dk = scale * ds_j * q[d];
        const double dv = p_mma * dout[d];
        expect_near("dK", g.dk.at(0, j, 0, d), dk, std::fabs(dk));
        expect_near("dV", g.dv.at(0, j, 0, d), dv, std::fabs(dv));
      }
    }
    for (int d = 0; d < 2; ++d) expect_near("dQ", g.dq.at(0, 0, 0, d), scale * dq[d], scale * dq_mag[d]);
  }
  EXPECT_EQ(bad, 0);
}

// Argument checks ---------------------------------------------------------------------------------------------

TEST(RefBwd, RejectsBadShapesNamingTheArgument) {
  const Problem p = make_problem(shape(2, 2, 8, 8, {2, 2}, {2, 2}), false, Order::kSeqMajor, 61);
  Grads g = run_backward(p);
  auto expect_rejected = [&](const AttnShape& s, const std::vector<std::string>& needles) {
    try {
      fmha::ref::bwd(s, p.q.view(), p.k.view(), p.v.view(), p.o.view(), p.d_o.view(), p.lse.view(), g.dq.mut(),
                     g.dk.mut(), g.dv.mut());
      ADD_FAILURE() << "no std::invalid_argument thrown";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      for (const std::string& n : needles)
        EXPECT_NE(what.find(n), std::string::npos) << "message \"" << what << "\" lacks \"" << n << "\"";
    }
  };
  AttnShape s = p.s;
  s.heads_q = 3;
  expect_rejected(s, {"heads_q", "heads_kv", "3", "2"});
  s = p.s;
  s.heads_kv = 0;
  expect_rejected(s, {"heads_kv", "0"});
  s = p.s;
  s.seqlens_q = {2};
  expect_rejected(s, {"seqlens_q", "2", "1"});
  s = p.s;
  s.seqlens_k = {2, 2, 2};
  expect_rejected(s, {"seqlens_k", "2", "3"});
  s = p.s;
  s.seqlens_k[1] = -1;
  expect_rejected(s, {"seqlens_k[1]", "-1"});
}

}  // namespace
