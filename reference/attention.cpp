// fmha CPU reference: forward, split-KV combine, generation and MLA decode (reference/attention.h).
// The backward (bwd) lives in reference/backward.cpp.
//
// Every family reduces to attend_row(): one query row against a list of key rows [lo, hi), with fp64 accumulation.
// Only the rows a caller names are ever dereferenced, so memory past a batch entry's length or a cache's length is
// never read (it may hold NaN).
#include "reference/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/dtype.h"

namespace fmha::ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Throws std::invalid_argument("<fn>: <what>: expected <expected>, got <got>") unless ok.
template <typename E, typename G>
void require(bool ok, const char* fn, const std::string& what, const E& expected, const G& got) {
  if (ok) return;
  std::ostringstream m;
  m << fn << ": " << what << ": expected " << expected << ", got " << got;
  throw std::invalid_argument(m.str());
}

/// Value as read by the emulated kernel: rounded to dtype under Rounding::kKernel, unchanged under kExact.
struct Reader {
  DType dtype;
  Rounding rounding;
  bool sum_rounded_p = false;  ///< under kKernel, the row sum adds the rounded P (AttnShape::row_sum_rounded_p)
  double operator()(float x) const {
    return rounding == Rounding::kKernel ? static_cast<double>(round_to(dtype, x)) : static_cast<double>(x);
  }
};

/// One query row q[0..d_qk) against keys j in [lo, hi): key_row(j) → d_qk floats, val_row(j) → d_v floats.
/// Writes o[0..d_v) and, if lse is non-null, *lse. An empty range gives O = 0, LSE = −inf.
/// Under kKernel, P_j = exp(t_j − max t) is taken to fp32 and rounded to dtype before P·V (as a kernel feeds its
/// second MMA); the row sum uses the unrounded P, as a kernel's fp32 row sum does, or with rd.sum_rounded_p the
/// rounded P, as a kernel that sums P on the tensor cores does.
template <typename KeyRow, typename ValRow>
void attend_row(const std::vector<double>& q, int d_v, int lo, int hi, KeyRow key_row, ValRow val_row, double scale,
                const Reader& rd, float* o, float* lse) {
  if (lo >= hi) {
    std::fill(o, o + d_v, 0.0f);
    if (lse) *lse = static_cast<float>(kNegInf);
    return;
  }
  const int d_qk = static_cast<int>(q.size());
  std::vector<double> t(static_cast<size_t>(hi - lo));
  double m = kNegInf;
  for (int j = lo; j < hi; ++j) {
    const float* k = key_row(j);
    double s = 0.0;
    for (int d = 0; d < d_qk; ++d) s += q[d] * rd(k[d]);
    t[j - lo] = scale * s;
    if (t[j - lo] > m) m = t[j - lo];  // NaN scores are skipped here but poison the sum below
  }
  double sum = 0.0;
  std::vector<double> acc(static_cast<size_t>(d_v), 0.0);
  for (int j = lo; j < hi; ++j) {
    const double p = std::exp(t[j - lo] - m);
    const double p_mma =
        rd.rounding == Rounding::kKernel ? static_cast<double>(round_to(rd.dtype, static_cast<float>(p))) : p;
    sum += rd.sum_rounded_p ? p_mma : p;  // p_mma is p under kExact
    const float* v = val_row(j);
    for (int d = 0; d < d_v; ++d) acc[d] += p_mma * rd(v[d]);
  }
  for (int d = 0; d < d_v; ++d) o[d] = static_cast<float>(acc[d] / sum);
  if (lse) *lse = static_cast<float>(m + std::log(sum));
}

void check_heads(const char* fn, int heads_q, int heads_kv) {
  require(heads_q >= 1, fn, "heads_q", ">= 1", heads_q);
  require(heads_kv >= 1, fn, "heads_kv", ">= 1", heads_kv);
  std::ostringstream got;
  got << heads_q % heads_kv << " (heads_q=" << heads_q << ", heads_kv=" << heads_kv << ")";
  require(heads_q % heads_kv == 0, fn, "heads_q % heads_kv", 0, got.str());
}

void check_lengths(const char* fn, const char* name, const std::vector<int>& lens, int batch) {
  require(static_cast<int64_t>(lens.size()) == batch, fn, std::string(name) + ".size()",
          "batch = " + std::to_string(batch), lens.size());
  for (size_t b = 0; b < lens.size(); ++b)
    require(lens[b] >= 0, fn, std::string(name) + "[" + std::to_string(b) + "]", ">= 0", lens[b]);
}

void check_key_window(const char* fn, int key_begin, int key_end) {
  require(key_begin >= 0, fn, "key_begin", ">= 0", key_begin);
  require(key_end >= key_begin, fn, "key_end", ">= key_begin = " + std::to_string(key_begin), key_end);
}

void check_scale(const char* fn, double scale) {
  require(std::isfinite(scale), fn, "scale", "a finite value (0 = default)", scale);
}

/// Token t of a cache slot/entry c: contiguous [slots][capacity][row] or paged [pages][page_size][row].
struct CacheAddr {
  int capacity, page_size, pages_per_seq;
  const std::vector<int>* page_table;
  int64_t row_elems;  ///< elements per token
  int64_t offset(int c, int t) const {
    if (page_size == 0) return (static_cast<int64_t>(c) * capacity + t) * row_elems;
    const int64_t page = (*page_table)[static_cast<size_t>(c) * pages_per_seq + t / page_size];
    return (page * page_size + t % page_size) * row_elems;
  }
};

/// Checks that tokens [0, n) of slot c are addressable (capacity, or page table size / entries).
void check_cache_tokens(const char* fn, const CacheAddr& a, int b, int c, int n) {
  const std::string who = "entry " + std::to_string(b) + " (slot " + std::to_string(c) + ")";
  if (a.page_size == 0) {
    require(n <= a.capacity, fn, "capacity", ">= " + std::to_string(n) + " tokens for " + who, a.capacity);
    return;
  }
  const int64_t limit = static_cast<int64_t>(a.pages_per_seq) * a.page_size;
  require(n <= limit, fn, "pages_per_seq * page_size", ">= " + std::to_string(n) + " tokens for " + who, limit);
  if (n == 0) return;
  const int64_t need = static_cast<int64_t>(c) * a.pages_per_seq + (n - 1) / a.page_size + 1;
  require(static_cast<int64_t>(a.page_table->size()) >= need, fn, "page_table.size()",
          ">= " + std::to_string(need) + " for " + who, a.page_table->size());
  for (int p = 0; p <= (n - 1) / a.page_size; ++p) {
    const int page = (*a.page_table)[static_cast<size_t>(c) * a.pages_per_seq + p];
    require(page >= 0, fn, "page_table[" + std::to_string(static_cast<int64_t>(c) * a.pages_per_seq + p) + "]",
            ">= 0", page);
  }
}

void check_paging(const char* fn, int capacity, int page_size, int pages_per_seq) {
  require(page_size >= 0, fn, "page_size", ">= 0 (0 = contiguous)", page_size);
  if (page_size == 0) {
    require(capacity >= 0, fn, "capacity", ">= 0", capacity);
  } else {
    require(pages_per_seq >= 1, fn, "pages_per_seq", ">= 1 when page_size > 0", pages_per_seq);
  }
}

}  // namespace

double AttnShape::softmax_scale() const { return scale != 0.0 ? scale : 1.0 / std::sqrt(double(head_dim_qk)); }

KeyRange visible_keys(MaskType mask, CausalAlign align, int sq, int sk, int i) {
  if (mask != MaskType::kCausal) return {0, sk};
  const int64_t last = align == CausalAlign::kQBegin ? int64_t(i) + 1 : int64_t(i) + 1 + sk - sq;
  return {0, static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(sk, last)))};
}

void fwd(const AttnShape& s, ConstView q, ConstView k, ConstView v, MutView o, MutView lse, int key_begin,
         int key_end) {
  const char* fn = "fwd";
  require(s.batch >= 0, fn, "batch", ">= 0", s.batch);
  check_heads(fn, s.heads_q, s.heads_kv);
  require(s.head_dim_qk >= 1, fn, "head_dim_qk", ">= 1", s.head_dim_qk);
  require(s.head_dim_v >= 1, fn, "head_dim_v", ">= 1", s.head_dim_v);
  check_lengths(fn, "seqlens_q", s.seqlens_q, s.batch);
  check_lengths(fn, "seqlens_k", s.seqlens_k, s.batch);
  check_key_window(fn, key_begin, key_end);
  check_scale(fn, s.scale);
  int64_t rows = 0, keys = 0;
  for (int b = 0; b < s.batch; ++b) rows += s.seqlens_q[b], keys += s.seqlens_k[b];
  if (rows > 0) {
    require(q.data != nullptr, fn, "q.data", "non-null", "null");
    require(o.data != nullptr, fn, "o.data", "non-null", "null");
    if (keys > 0) {
      require(k.data != nullptr, fn, "k.data", "non-null", "null");
      require(v.data != nullptr, fn, "v.data", "non-null", "null");
    }
  }

  const Reader rd{s.dtype, s.rounding, s.row_sum_rounded_p};
  const double scale = s.softmax_scale();
  const int group = s.heads_q / s.heads_kv;
  std::vector<double> qrow(static_cast<size_t>(s.head_dim_qk));
  for (int b = 0; b < s.batch; ++b) {
    const int sq = s.seqlens_q[b], sk = s.seqlens_k[b];
    for (int h = 0; h < s.heads_q; ++h) {
      const int hk = h / group;
      for (int i = 0; i < sq; ++i) {
        const KeyRange r = visible_keys(s.mask, s.align, sq, sk, i);
        const int lo = std::max(r.lo, key_begin), hi = std::min(r.hi, key_end);
        for (int d = 0; d < s.head_dim_qk; ++d) qrow[d] = rd(q.at(b, i, h, d));
        attend_row(
            qrow, s.head_dim_v, lo, hi, [&](int j) { return &k.at(b, j, hk, 0); },
            [&](int j) { return &v.at(b, j, hk, 0); }, scale, rd, &o.at(b, i, h, 0),
            lse.data ? &lse.at(b, i, h, 0) : nullptr);
      }
    }
  }
}

void combine_splits(int n_splits, int rows, int d, const float* o_parts, const float* lse_parts, float* o,
                    float* lse) {
  const char* fn = "combine_splits";
  require(n_splits >= 1, fn, "n_splits", ">= 1", n_splits);
  require(rows >= 0, fn, "rows", ">= 0", rows);
  require(d >= 0, fn, "d", ">= 0", d);
  if (rows > 0) {
    require(lse_parts != nullptr, fn, "lse_parts", "non-null", "null");
    require(d == 0 || (o_parts != nullptr && o != nullptr), fn, "o_parts and o", "non-null", "null");
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int r = 0; r < rows; ++r) {
    double m = kNegInf;
    bool any_nan = false;
    for (int sp = 0; sp < n_splits; ++sp) {
      const double l = lse_parts[static_cast<int64_t>(sp) * rows + r];
      if (std::isnan(l)) any_nan = true;
      else if (l > m) m = l;
    }
    float* orow = o ? o + static_cast<int64_t>(r) * d : nullptr;
    if (any_nan || m == kNegInf) {  // NaN propagates; a row no split saw a key for is O = 0, LSE = −inf
      for (int x = 0; x < d; ++x) orow[x] = any_nan ? float(nan) : 0.0f;
      if (lse) lse[r] = static_cast<float>(any_nan ? nan : kNegInf);
      continue;
    }
    double sum = 0.0;
    for (int sp = 0; sp < n_splits; ++sp) sum += std::exp(lse_parts[static_cast<int64_t>(sp) * rows + r] - m);
    const double total = m + std::log(sum);
    for (int x = 0; x < d; ++x) {
      double acc = 0.0;
      for (int sp = 0; sp < n_splits; ++sp) {
        const double l = lse_parts[static_cast<int64_t>(sp) * rows + r];
        if (l == kNegInf) continue;  // an empty split's O is never read
        acc += std::exp(l - total) * o_parts[(static_cast<int64_t>(sp) * rows + r) * d + x];
      }
      orow[x] = static_cast<float>(acc);
    }
    if (lse) lse[r] = static_cast<float>(total);
  }
}

void gen(const GenShape& s, const float* q, const float* new_k, const float* new_v, float* cache_k, float* cache_v,
         float* o, float* lse, int key_begin, int key_end) {
  const char* fn = "gen";
  require(s.new_tokens >= 1, fn, "new_tokens", ">= 1", s.new_tokens);
  check_key_window(fn, key_begin, key_end);
  require(s.batch >= 0, fn, "batch", ">= 0", s.batch);
  check_heads(fn, s.heads_q, s.heads_kv);
  require(s.head_dim >= 1, fn, "head_dim", ">= 1", s.head_dim);
  check_lengths(fn, "seqlens_kv", s.seqlens_kv, s.batch);
  require(s.cache_batch_idx.empty() || static_cast<int64_t>(s.cache_batch_idx.size()) == s.batch, fn,
          "cache_batch_idx.size()", "0 or batch = " + std::to_string(s.batch), s.cache_batch_idx.size());
  check_paging(fn, s.capacity, s.page_size, s.pages_per_seq);
  check_scale(fn, s.scale);

  const int n_new = s.new_tokens;
  const int append = s.append ? n_new : 0;  // rows appended per entry
  const int64_t row_elems = static_cast<int64_t>(s.heads_kv) * s.head_dim;
  const CacheAddr addr{s.capacity, s.page_size, s.pages_per_seq, &s.page_table, row_elems};
  auto slot = [&](int b) { return s.cache_batch_idx.empty() ? b : s.cache_batch_idx[b]; };
  std::vector<int> owner;  // owner[c] = entry that appends into slot c (slots must be distinct when appending)
  for (int b = 0; b < s.batch; ++b) {
    const int c = slot(b);
    require(c >= 0, fn, "cache_batch_idx[" + std::to_string(b) + "]", ">= 0", c);
    check_cache_tokens(fn, addr, b, c, s.seqlens_kv[b] + append);
    if (!append) continue;
    if (owner.size() <= static_cast<size_t>(c)) owner.resize(static_cast<size_t>(c) + 1, -1);
    require(owner[c] < 0, fn, "cache_batch_idx[" + std::to_string(b) + "]",
            "a slot not used by another entry when append (entry " + std::to_string(owner[c]) + " uses it)", c);
    owner[c] = b;
  }
  if (s.batch > 0) {
    require(q && o && cache_k && cache_v, fn, "q, o, cache_k, cache_v", "non-null", "a null pointer");
    require(!append || (new_k && new_v), fn, "new_k, new_v", "non-null when append", "null");
  }

  const Reader rd{s.dtype, s.rounding};
  // 1. Append: new token t goes to position seqlens_kv[b] + t of slot c, stored as the kernel would store it.
  for (int b = 0; b < s.batch && append; ++b)
    for (int t = 0; t < n_new; ++t) {
      const int64_t dst = addr.offset(slot(b), s.seqlens_kv[b] + t);
      const int64_t src = (static_cast<int64_t>(b) * n_new + t) * row_elems;
      for (int64_t x = 0; x < row_elems; ++x) {
        cache_k[dst + x] = static_cast<float>(rd(new_k[src + x]));
        cache_v[dst + x] = static_cast<float>(rd(new_v[src + x]));
      }
    }
  // 2. Attend: token t over the keys of the causal q-end mask (the cache's last n tokens are the queries' own).
  const double scale = s.scale != 0.0 ? s.scale : 1.0 / std::sqrt(double(s.head_dim));
  const int group = s.heads_q / s.heads_kv;
  std::vector<double> qrow(static_cast<size_t>(s.head_dim));
  for (int b = 0; b < s.batch; ++b) {
    const int c = slot(b), total = s.seqlens_kv[b] + append;  // keys in the slot after the append
    for (int t = 0; t < n_new; ++t) {
      const int hi = std::min(key_end, std::max(0, total - n_new + t + 1)), lo = std::min(key_begin, hi);
      for (int h = 0; h < s.heads_q; ++h) {
        const int64_t hk_off = static_cast<int64_t>(h / group) * s.head_dim;
        const int64_t row = (static_cast<int64_t>(b) * n_new + t) * s.heads_q + h;
        for (int d = 0; d < s.head_dim; ++d) qrow[d] = rd(q[row * s.head_dim + d]);
        attend_row(
            qrow, s.head_dim, lo, hi, [&](int j) { return cache_k + addr.offset(c, j) + hk_off; },
            [&](int j) { return cache_v + addr.offset(c, j) + hk_off; }, scale, rd, o + row * s.head_dim,
            lse ? lse + row : nullptr);
      }
    }
  }
}

void mla_decode(const MlaDecodeShape& s, const float* q, const float* cache, float* o, float* lse, int key_begin,
                int key_end) {
  const char* fn = "mla_decode";
  require(s.batch >= 0, fn, "batch", ">= 0", s.batch);
  require(s.heads >= 1, fn, "heads", ">= 1", s.heads);
  require(s.d_latent >= 1, fn, "d_latent", ">= 1", s.d_latent);
  require(s.d_rope >= 0, fn, "d_rope", ">= 0", s.d_rope);
  check_lengths(fn, "seqlens", s.seqlens, s.batch);
  check_paging(fn, s.capacity, s.page_size, s.pages_per_seq);
  check_key_window(fn, key_begin, key_end);
  check_scale(fn, s.scale);
  const int width = s.d_latent + s.d_rope;
  const CacheAddr addr{s.capacity, s.page_size, s.pages_per_seq, &s.page_table, width};
  for (int b = 0; b < s.batch; ++b) check_cache_tokens(fn, addr, b, b, s.seqlens[b]);
  if (s.batch > 0) require(q && o && cache, fn, "q, o, cache", "non-null", "a null pointer");

  const Reader rd{s.dtype, s.rounding};
  const double scale = s.scale != 0.0 ? s.scale : 1.0 / std::sqrt(double(width));
  std::vector<double> qrow(static_cast<size_t>(width));
  for (int b = 0; b < s.batch; ++b) {
    const int lo = key_begin, hi = std::min(s.seqlens[b], key_end);
    for (int h = 0; h < s.heads; ++h) {
      const int64_t row = static_cast<int64_t>(b) * s.heads + h;
      for (int d = 0; d < width; ++d) qrow[d] = rd(q[row * width + d]);
      // K = [latent | rope] is the whole 576-wide row; V = latent is its first d_latent columns.
      auto cache_row = [&](int j) { return cache + addr.offset(b, j); };
      attend_row(qrow, s.d_latent, lo, hi, cache_row, cache_row, scale, rd, o + row * s.d_latent,
                 lse ? lse + row : nullptr);
    }
  }
}

}  // namespace fmha::ref
