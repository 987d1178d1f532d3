// See decode_runner.h.
#include "testing/decode_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>

#include "reference/attention.h"
#include "reference/dtype.h"
#include "testing/harness.h"

namespace fmha::testing {
namespace {

uint16_t to_bits(DType t, float x) { return t == DType::kFP16 ? ref::float_to_half_bits(x) : ref::float_to_bf16_bits(x); }
float from_bits(DType t, uint16_t b) { return t == DType::kFP16 ? ref::half_bits_to_float(b) : ref::bf16_bits_to_float(b); }

/// Device buffer freed on scope exit (at least 16 bytes, so that empty tensors still have an address).
struct Dev {
  void* p = nullptr;
  cudaError_t err = cudaSuccess;
  explicit Dev(size_t bytes) { err = cudaMalloc(&p, std::max<size_t>(bytes, 16)); if (err != cudaSuccess) p = nullptr; }
  ~Dev() { if (p) cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};

#define FMHA_DECODE_TRY(call)                                                                                      \
  do {                                                                                                             \
    const cudaError_t e_ = (call);                                                                                 \
    if (e_ != cudaSuccess) {                                                                                       \
      out.status = Status(StatusCode::kCudaError, std::string(#call) + ": " + cudaGetErrorString(e_));             \
      return out;                                                                                                  \
    }                                                                                                              \
  } while (0)

/// The host side of a case: inputs as dtype bits, cache geometry, page table, slots.
struct Problem {
  DecodeCase c;
  int slots = 0, capacity = 0;
  int64_t row_stride = 0, head_stride = 0, slot_stride = 0;  // paged: slot_stride is the page stride
  int num_pages = 0, pages_per_seq = 0;
  int64_t table_stride = 0;
  std::vector<int> table;  // paged: [slots][table_stride], pages_per_seq used per row (the rest −1)
  std::vector<uint16_t> q, k_new, v_new, k_cache, v_cache;
  std::vector<int> slot_of, seqlens;

  bool paged() const { return c.page_size > 0; }
  /// Element offset of (slot or table row s, sequence position j, K/V head h, column x) in the caches.
  size_t at(int s, int j, int h, int x) const {
    if (paged()) {
      const int page = table[size_t(s) * table_stride + j / c.page_size];
      return size_t(page) * slot_stride + size_t(j % c.page_size) * row_stride + size_t(h) * head_stride + x;
    }
    return size_t(s) * slot_stride + size_t(j) * row_stride + size_t(h) * head_stride + x;
  }

  explicit Problem(const DecodeCase& cc) : c(cc) {
    if (int(c.seqlens.size()) != c.batch)
      throw std::invalid_argument("decode case " + c.name + ": seqlens has " + std::to_string(c.seqlens.size()) +
                                  " entries, expected batch = " + std::to_string(c.batch));
    slots = c.batch + c.extra_slots;
    capacity = c.page_size > 0 ? (c.capacity + c.page_size - 1) / c.page_size * c.page_size : c.capacity;
    for (int b = 0; b < c.batch; ++b)
      if (c.seqlens[b] < 0 || c.seqlens[b] + (c.append ? c.new_tokens : 0) > capacity)
        throw std::invalid_argument("decode case " + c.name + ": seqlens[" + std::to_string(b) + "] = " +
                                    std::to_string(c.seqlens[b]) + " (plus the append) exceeds the capacity " +
                                    std::to_string(capacity));
    head_stride = c.head_dim;
    row_stride = int64_t(c.heads_kv) * c.head_dim + c.row_pad;
    slot_stride = row_stride * (paged() ? c.page_size : capacity);
    size_t cache_elems = size_t(slots) * slot_stride;
    if (paged()) {  // every slot's pages, shuffled over a pool with 5 spare pages, in a padded table
      pages_per_seq = capacity / c.page_size;
      num_pages = slots * pages_per_seq + 5;
      table_stride = pages_per_seq + 3;
      std::vector<int> perm(num_pages);
      for (int i = 0; i < num_pages; ++i) perm[i] = i;
      std::shuffle(perm.begin(), perm.end(), std::mt19937(c.seed + 7));
      table.assign(size_t(slots) * table_stride, -1);
      for (int r = 0; r < slots; ++r)
        for (int i = 0; i < pages_per_seq; ++i) table[size_t(r) * table_stride + i] = perm[size_t(r) * pages_per_seq + i];
      cache_elems = size_t(num_pages) * slot_stride;
    }
    std::mt19937 gen(c.seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    auto values = [&](const std::string& name, size_t n) {
      std::vector<float> v(n);
      if (c.fill) c.fill(name, v);
      else for (auto& x : v) x = normal(gen);
      return v;
    };
    auto bits = [&](const std::vector<float>& v) {
      std::vector<uint16_t> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = to_bits(c.dtype, v[i]);
      return b;
    };
    const int d = c.head_dim, n = c.new_tokens;
    q = bits(values("q", size_t(c.batch) * n * c.heads_q * d));
    k_new = bits(values("new-k", size_t(c.batch) * n * c.heads_kv * d));
    v_new = bits(values("new-v", size_t(c.batch) * n * c.heads_kv * d));
    const uint16_t nan = c.dtype == DType::kFP16 ? 0x7E00 : 0x7FC0;
    k_cache.assign(cache_elems, nan);
    v_cache.assign(cache_elems, nan);
    seqlens = c.seqlens;
    slot_of.resize(c.batch);
    for (int b = 0; b < c.batch; ++b) slot_of[b] = c.remap ? slots - 1 - b : b;  // distinct slots, reversed
    if (c.remap && !c.slot_of.empty()) {
      if (int(c.slot_of.size()) != c.batch)
        throw std::invalid_argument("decode case " + c.name + ": slot_of has " + std::to_string(c.slot_of.size()) +
                                    " entries, expected batch = " + std::to_string(c.batch));
      std::vector<char> used(slots, 0);
      for (int s : c.slot_of) {
        if (s < 0 || s >= slots || used[s])
          throw std::invalid_argument("decode case " + c.name + ": slot_of holds " + std::to_string(s) +
                                      ", expected distinct slots in [0, " + std::to_string(slots) + ")");
        used[s] = 1;
      }
      slot_of = c.slot_of;
    }
    for (const std::vector<int>* dv : {&c.device_seqlens, &c.device_slots})
      if (!dv->empty() && int(dv->size()) != c.batch)
        throw std::invalid_argument("decode case " + c.name + ": device_seqlens / device_slots have " +
                                    std::to_string(dv->size()) + " entries, expected batch = " + std::to_string(c.batch));
    if (!c.device_slots.empty())  // the slots the kernel reads: the device values, clamped
      for (int b = 0; b < c.batch; ++b) slot_of[b] = std::min(std::max(c.device_slots[b], 0), slots - 1);
    size_t valid = 0;
    for (int b = 0; b < c.batch; ++b) valid += size_t(seqlens[b]) * c.heads_kv * d;
    const std::vector<float> kc = values("cache-k", valid), vc = values("cache-v", valid);
    size_t i = 0;
    for (int b = 0; b < c.batch; ++b)
      for (int j = 0; j < seqlens[b]; ++j)
        for (int h = 0; h < c.heads_kv; ++h)
          for (int x = 0; x < d; ++x, ++i) {
            const size_t e = at(slot_of[b], j, h, x);
            k_cache[e] = to_bits(c.dtype, kc[i]);
            v_cache[e] = to_bits(c.dtype, vc[i]);
          }
  }

  DecodeParams params(void* dq, void* dknew, void* dvnew, void* dk, void* dv, void* dout, float* dlse,
                      const int* dlens, const int* dslots, const int* dtable) const {
    DecodeParams p;
    p.dtype = c.dtype;
    p.batch = c.batch, p.heads_q = c.heads_q, p.heads_kv = c.heads_kv, p.head_dim = c.head_dim;
    p.new_tokens = c.new_tokens;
    p.slots = slots, p.capacity = capacity;
    if (paged()) {
      p.page_table = dtable, p.page_size = c.page_size, p.pages_per_seq = pages_per_seq;
      p.page_table_rows = slots, p.slots = num_pages, p.capacity = 0;
    }
    set_decode_contiguous_strides(p);
    p.page_table_stride = table_stride;
    p.k_row_stride = p.v_row_stride = row_stride;
    p.k_slot_stride = p.v_slot_stride = slot_stride;
    p.q = dq, p.o = dout, p.lse = dlse;
    p.k_cache = dk, p.v_cache = dv;
    if (c.append) p.k_new = dknew, p.v_new = dvnew;
    p.seqlens_k = dlens;
    p.cache_batch_idx = c.remap ? dslots : nullptr;
    p.softmax_scale = c.scale;
    p.splits = c.splits;
    p.sm_count = c.sm_count;
    return p;
  }
};

/// The reference's O and LSE, exact and kernel-rounded.
struct RefOut {
  std::vector<float> o_exact, o_kernel, lse_exact, lse_kernel;
};

RefOut reference(const Problem& pr) {
  const DecodeCase& c = pr.c;
  const int d = c.head_dim;
  auto floats = [&](const std::vector<uint16_t>& v) {
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); ++i) f[i] = from_bits(c.dtype, v[i]);
    return f;
  };
  // The reference takes dense [slots][capacity][heads_kv][d] caches: gather the strided or paged ones.
  auto dense = [&](const std::vector<uint16_t>& v) {
    std::vector<float> f(size_t(pr.slots) * pr.capacity * c.heads_kv * d);
    for (int s = 0; s < pr.slots; ++s)
      for (int j = 0; j < pr.capacity; ++j)
        for (int h = 0; h < c.heads_kv; ++h)
          for (int x = 0; x < d; ++x)
            f[((size_t(s) * pr.capacity + j) * c.heads_kv + h) * d + x] = from_bits(c.dtype, v[pr.at(s, j, h, x)]);
    return f;
  };
  const std::vector<float> q = floats(pr.q), kn = floats(pr.k_new), vn = floats(pr.v_new);
  RefOut r;
  for (ref::Rounding rounding : {ref::Rounding::kExact, ref::Rounding::kKernel}) {
    ref::GenShape s;
    s.batch = c.batch, s.heads_q = c.heads_q, s.heads_kv = c.heads_kv, s.head_dim = d;
    s.new_tokens = c.new_tokens;
    s.seqlens_kv = pr.seqlens;
    s.cache_batch_idx = pr.slot_of;
    s.append = c.append;
    s.capacity = pr.capacity;
    s.scale = c.scale;
    s.dtype = c.dtype;
    s.rounding = rounding;
    std::vector<float> kc = dense(pr.k_cache), vc = dense(pr.v_cache);
    std::vector<float> o(size_t(c.batch) * c.new_tokens * c.heads_q * d), lse(size_t(c.batch) * c.new_tokens * c.heads_q);
    ref::gen(s, q.data(), kn.data(), vn.data(), kc.data(), vc.data(), o.data(), lse.data());
    if (rounding == ref::Rounding::kExact) r.o_exact = o, r.lse_exact = lse;
    else r.o_kernel = o, r.lse_kernel = lse;
  }
  return r;
}

/// Bytes of the seed's bandwidth formula (docs/numerics.md, gen_bytes), with n new tokens: Q and O (n rows per
/// entry and query head), the new K/V (kept in cache-only mode, as the seed does) and the cache's K and V rows
/// 0 … seqlens_k[b] + n − 1. With n = 1 this is the seed's formula.
double decode_bytes(const DecodeCase& c) {
  const double s = 2.0, n = c.new_tokens;
  double keys = 0;
  for (int L : c.seqlens) keys += L + n;
  return c.head_dim * s * (2.0 * n * c.heads_q * c.batch + 2.0 * n * c.heads_kv * c.batch + 2.0 * c.heads_kv * keys);
}

}  // namespace

std::string DecodeOutcome::summary() const {
  bool more = false;
  std::ostringstream s;
  s << outcome_summary_head(status, checked, o, lse, &more);
  if (!more) return s.str();
  if (k_cache_diffs || v_cache_diffs)
    s << " | cache elements that differ from the expected append: K " << k_cache_diffs << ", V " << v_cache_diffs;
  if (repeat_mismatches) s << " | " << repeat_mismatches << " repeated calls differed from the first";
  return s.str();
}

DecodeOutcome run_decode_case(const DecodeCase& c, bool check, cudaStream_t stream) {
  const Problem pr(c);
  DecodeOutcome out;
  out.bytes = decode_bytes(c);
  const size_t o_elems = size_t(c.batch) * c.new_tokens * c.heads_q * c.head_dim;
  const size_t lse_elems = size_t(c.batch) * c.new_tokens * c.heads_q;
  Dev dq(pr.q.size() * 2), dkn(pr.k_new.size() * 2), dvn(pr.v_new.size() * 2), dk(pr.k_cache.size() * 2),
      dv(pr.v_cache.size() * 2), dout(o_elems * 2), dlse(lse_elems * 4), dlens(c.batch * 4), dslots(c.batch * 4),
      dtable(pr.table.size() * 4);
  for (const Dev* b : {&dq, &dkn, &dvn, &dk, &dv, &dout, &dlse, &dlens, &dslots, &dtable}) FMHA_DECODE_TRY(b->err);
  if (!pr.table.empty())
    FMHA_DECODE_TRY(cudaMemcpy(dtable.p, pr.table.data(), pr.table.size() * 4, cudaMemcpyHostToDevice));
  FMHA_DECODE_TRY(cudaMemcpy(dq.p, pr.q.data(), pr.q.size() * 2, cudaMemcpyHostToDevice));
  FMHA_DECODE_TRY(cudaMemcpy(dkn.p, pr.k_new.data(), pr.k_new.size() * 2, cudaMemcpyHostToDevice));
  FMHA_DECODE_TRY(cudaMemcpy(dvn.p, pr.v_new.data(), pr.v_new.size() * 2, cudaMemcpyHostToDevice));
  FMHA_DECODE_TRY(cudaMemcpy(dk.p, pr.k_cache.data(), pr.k_cache.size() * 2, cudaMemcpyHostToDevice));
  FMHA_DECODE_TRY(cudaMemcpy(dv.p, pr.v_cache.data(), pr.v_cache.size() * 2, cudaMemcpyHostToDevice));
  const std::vector<int>& lens_up = c.device_seqlens.empty() ? pr.seqlens : c.device_seqlens;
  const std::vector<int>& slots_up = c.device_slots.empty() ? pr.slot_of : c.device_slots;
  FMHA_DECODE_TRY(cudaMemcpy(dlens.p, lens_up.data(), c.batch * 4, cudaMemcpyHostToDevice));
  FMHA_DECODE_TRY(cudaMemcpy(dslots.p, slots_up.data(), c.batch * 4, cudaMemcpyHostToDevice));
  FMHA_DECODE_TRY(cudaMemset(dout.p, 0xFF, o_elems * 2));  // NaN poison
  FMHA_DECODE_TRY(cudaMemset(dlse.p, 0xFF, lse_elems * 4));
  const DecodeParams p = pr.params(dq.p, dkn.p, dvn.p, dk.p, dv.p, dout.p, static_cast<float*>(dlse.p),
                                   static_cast<const int*>(dlens.p), static_cast<const int*>(dslots.p),
                                   static_cast<const int*>(dtable.p));
  out.status = decode_plan(p, &out.plan);
  if (!out.status) return out;
  out.kernel = decode_kernel_name(p, out.plan);
  Dev ws(out.plan.workspace_bytes);
  FMHA_DECODE_TRY(ws.err);
  // The workspace is poisoned too: the library must initialise what it reads.
  FMHA_DECODE_TRY(cudaMemset(ws.p, 0xFF, std::max<size_t>(out.plan.workspace_bytes, 16)));
  const Workspace w{ws.p, out.plan.workspace_bytes};
  out.status = decode(p, out.plan, w, stream);
  if (!out.status) return out;
  FMHA_DECODE_TRY(cudaStreamSynchronize(stream));
  FMHA_DECODE_TRY(cudaGetLastError());
  if (check) {
    std::vector<uint16_t> o_bits(o_elems), k_after(pr.k_cache.size()), v_after(pr.v_cache.size());
    std::vector<float> lse(lse_elems);
    FMHA_DECODE_TRY(cudaMemcpy(o_bits.data(), dout.p, o_elems * 2, cudaMemcpyDeviceToHost));
    FMHA_DECODE_TRY(cudaMemcpy(lse.data(), dlse.p, lse_elems * 4, cudaMemcpyDeviceToHost));
    FMHA_DECODE_TRY(cudaMemcpy(k_after.data(), dk.p, k_after.size() * 2, cudaMemcpyDeviceToHost));
    FMHA_DECODE_TRY(cudaMemcpy(v_after.data(), dv.p, v_after.size() * 2, cudaMemcpyDeviceToHost));
    const RefOut r = reference(pr);
    std::vector<float> o(o_elems);
    for (size_t i = 0; i < o_elems; ++i) o[i] = from_bits(c.dtype, o_bits[i]);
    double mag = 0;
    for (float x : r.o_exact)
      if (std::isfinite(x)) mag = std::max(mag, double(std::fabs(x)));
    out.o = ref::compare_scaled(o.data(), r.o_kernel.data(), r.o_exact.data(), int64_t(o_elems), 2.0,
                                ref::default_floor(c.dtype, mag));
    double lmag = 1;
    for (float x : r.lse_exact)
      if (std::isfinite(x)) lmag = std::max(lmag, double(std::fabs(x)));
    out.lse = ref::compare_scaled(lse.data(), r.lse_kernel.data(), r.lse_exact.data(), int64_t(lse_elems), 2.0,
                                  2e-5 * lmag + 1e-5);
    // The caches: the appended rows are the new K/V bit for bit; every other element is unchanged.
    std::vector<uint16_t> want_k = pr.k_cache, want_v = pr.v_cache;
    if (c.append)
      for (int b = 0; b < c.batch; ++b)
        for (int t = 0; t < c.new_tokens; ++t) {
          const int pos = pr.seqlens[b] + t;
          if (pos >= pr.capacity) continue;
          for (int h = 0; h < c.heads_kv; ++h)
            for (int x = 0; x < c.head_dim; ++x) {
              const size_t dst = pr.at(pr.slot_of[b], pos, h, x);
              const size_t src = ((size_t(b) * c.new_tokens + t) * c.heads_kv + h) * c.head_dim + x;
              want_k[dst] = pr.k_new[src];
              want_v[dst] = pr.v_new[src];
            }
        }
    for (size_t i = 0; i < want_k.size(); ++i)
      out.k_cache_diffs += k_after[i] != want_k[i], out.v_cache_diffs += v_after[i] != want_v[i];
    out.checked = true;
    // The same call again on fresh inputs: the caches as before the first call (the appended rows NaN again, so an
    // attention CTA that read one before the append wrote it would show), O, LSE and the workspace poisoned anew.
    for (int it = 0; it < c.repeats; ++it) {
      FMHA_DECODE_TRY(cudaMemcpy(dk.p, pr.k_cache.data(), pr.k_cache.size() * 2, cudaMemcpyHostToDevice));
      FMHA_DECODE_TRY(cudaMemcpy(dv.p, pr.v_cache.data(), pr.v_cache.size() * 2, cudaMemcpyHostToDevice));
      FMHA_DECODE_TRY(cudaMemset(ws.p, 0xFF, std::max<size_t>(out.plan.workspace_bytes, 16)));
      FMHA_DECODE_TRY(cudaMemset(dout.p, 0xFF, o_elems * 2));
      FMHA_DECODE_TRY(cudaMemset(dlse.p, 0xFF, lse_elems * 4));
      if (out.status = decode(p, out.plan, w, stream); !out.status) return out;
      FMHA_DECODE_TRY(cudaStreamSynchronize(stream));
      std::vector<uint16_t> o2(o_elems), k2(k_after.size()), v2(v_after.size());
      std::vector<float> lse2(lse_elems);
      FMHA_DECODE_TRY(cudaMemcpy(o2.data(), dout.p, o_elems * 2, cudaMemcpyDeviceToHost));
      FMHA_DECODE_TRY(cudaMemcpy(lse2.data(), dlse.p, lse_elems * 4, cudaMemcpyDeviceToHost));
      FMHA_DECODE_TRY(cudaMemcpy(k2.data(), dk.p, k2.size() * 2, cudaMemcpyDeviceToHost));
      FMHA_DECODE_TRY(cudaMemcpy(v2.data(), dv.p, v2.size() * 2, cudaMemcpyDeviceToHost));
      const bool same = o2 == o_bits && k2 == k_after && v2 == v_after &&
                        std::memcmp(lse2.data(), lse.data(), lse_elems * 4) == 0;
      out.repeat_mismatches += !same;
    }
  }
  for (int it = 0; it < c.warmup; ++it)
    if (out.status = decode(p, out.plan, w, stream); !out.status) return out;
  out.status = time_calls(c.iterations, [&](int) { return decode(p, out.plan, w, stream); }, c.before_timed, stream,
                          out.times_ms);
  return out;
}

}  // namespace fmha::testing
