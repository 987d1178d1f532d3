// Decode (include/fmha/decode.h) against the CPU reference's gen (reference/attention.h), under the library's
// comparison rule (k = 2 against the kernel-emulating reference) on every (entry, token, head) row:
//   GQA ratios 1, 4, 5, 8, 32; new tokens 1, 2, 4, 16; append and cache-only; remap (cache_batch_idx); split counts
//   1, 2, 3, 17 and the heuristic, with splits past a sequence's end (empty) and sequences of length 0; head dims
//   64, 128 and 80 (predicated); strided caches; NaN in every cache row past each sequence's length and in every
//   slot no entry uses, which must never reach a result; O and LSE poisoned with NaN before the call.
// After the call the caches hold the appended rows (bitwise the new K/V) and nothing else changed. A bad argument
// gives a named error. (CUDA-graph replay with new lengths: tests/python/test_torch_gpu.py, class Decode; argument
// errors without a GPU: tests/cpu/test_api_decode.cpp.)
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fmha/decode.h"
#include "gpu/gpu_env.h"
#include "reference/attention.h"
#include "reference/compare.h"
#include "reference/dtype.h"

namespace {

using fmha::DType;

uint16_t to_bits(DType t, float x) {
  return t == DType::kFP16 ? fmha::ref::float_to_half_bits(x) : fmha::ref::float_to_bf16_bits(x);
}
float from_bits(DType t, uint16_t b) {
  return t == DType::kFP16 ? fmha::ref::half_bits_to_float(b) : fmha::ref::bf16_bits_to_float(b);
}

struct DecodeCase {
  std::string name;
  DType dtype = DType::kBF16;
  int batch = 2, heads_q = 8, heads_kv = 2, head_dim = 128, new_tokens = 1;
  int capacity = 1024;
  int extra_slots = 0;          ///< slots beyond batch (NaN-filled; with remap, entries spread over them)
  std::vector<int> seqlens;     ///< cached tokens per entry, before the call
  bool append = true;
  bool remap = false;
  int splits = 0;               ///< 0: the heuristic
  int sm_count = 0;             ///< 0: all
  int64_t row_pad = 0;          ///< extra elements per cache row (strided caches)
  int page_size = 0;            ///< > 0: a paged cache (pages shuffled over a pool with spare pages)
  /// Device values out of range, uploaded instead of seqlens / the slots (with remap) to test the clamps: the
  /// expected result is the reference's with the clamped values (seqlens and the remap's slots).
  std::vector<int> device_seqlens, device_slots;
  uint32_t seed = 1;
};

/// Device buffer freed on scope exit.
struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) {
    if (cudaMalloc(&p, std::max<size_t>(bytes, 16)) != cudaSuccess) p = nullptr;
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};

struct Outputs {
  std::vector<uint16_t> o, k_cache, v_cache;
  std::vector<float> lse;
};

/// Builds the case's inputs, runs decode once (or through `runs` calls of the same plan), returns the outputs.
struct Problem {
  DecodeCase c;
  int slots, g;
  int64_t row_stride, head_stride, slot_stride;  // paged: slot_stride is the page stride
  int num_pages = 0, pages_per_seq = 0;
  int64_t table_stride = 0;
  std::vector<int> table;  // paged: [slots][table_stride], pages_per_seq used per row (the rest −1)

  /// Element offset of (slot or table row c, sequence position j, K/V head h, column x) in the caches.
  size_t at(int slot, int j, int h, int x) const {
    if (c_paged()) {
      const int page = table[size_t(slot) * table_stride + j / c.page_size];
      return size_t(page) * slot_stride + size_t(j % c.page_size) * row_stride + size_t(h) * head_stride + x;
    }
    return size_t(slot) * slot_stride + size_t(j) * row_stride + size_t(h) * head_stride + x;
  }
  bool c_paged() const { return c.page_size > 0; }
  std::vector<uint16_t> q, k_new, v_new, k_cache, v_cache;  // bits
  std::vector<int> slot_of;
  std::vector<int> seqlens;

  explicit Problem(const DecodeCase& cc) : c(cc) {
    slots = c.batch + c.extra_slots;
    g = c.heads_q / c.heads_kv;
    head_stride = c.head_dim + 0;
    row_stride = int64_t(c.heads_kv) * c.head_dim + c.row_pad;
    slot_stride = row_stride * (c.page_size > 0 ? c.page_size : c.capacity);
    size_t cache_elems = size_t(slots) * slot_stride;
    if (c.page_size > 0) {  // every slot's pages, shuffled over a pool with 5 spare pages, in a padded table
      pages_per_seq = (c.capacity + c.page_size - 1) / c.page_size;
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
    auto fill = [&](std::vector<uint16_t>& v, size_t n) {
      v.resize(n);
      for (auto& x : v) x = to_bits(c.dtype, normal(gen));
    };
    const int d = c.head_dim;
    fill(q, size_t(c.batch) * c.new_tokens * c.heads_q * d);
    fill(k_new, size_t(c.batch) * c.new_tokens * c.heads_kv * d);
    fill(v_new, size_t(c.batch) * c.new_tokens * c.heads_kv * d);
    const uint16_t nan = c.dtype == DType::kFP16 ? 0x7E00 : 0x7FC0;
    k_cache.assign(cache_elems, nan);
    v_cache.assign(cache_elems, nan);
    seqlens = c.seqlens;
    slot_of.resize(c.batch);
    for (int b = 0; b < c.batch; ++b) slot_of[b] = c.remap ? slots - 1 - b : b;  // distinct slots, reversed
    if (!c.device_slots.empty())  // the slots the kernel reads: the device values, clamped
      for (int b = 0; b < c.batch; ++b) slot_of[b] = std::min(std::max(c.device_slots[b], 0), slots - 1);
    for (int b = 0; b < c.batch; ++b)
      for (int j = 0; j < seqlens[b]; ++j)
        for (int h = 0; h < c.heads_kv; ++h)
          for (int x = 0; x < d; ++x) {
            const size_t i = at(slot_of[b], j, h, x);
            k_cache[i] = to_bits(c.dtype, normal(gen));
            v_cache[i] = to_bits(c.dtype, normal(gen));
          }
  }

  fmha::DecodeParams params(void* dq, void* dknew, void* dvnew, void* dk, void* dv, void* dout, float* dlse,
                            const int* dlens, const int* dslots, const int* dtable) const {
    fmha::DecodeParams p;
    p.dtype = c.dtype;
    p.batch = c.batch, p.heads_q = c.heads_q, p.heads_kv = c.heads_kv, p.head_dim = c.head_dim;
    p.new_tokens = c.new_tokens;
    p.slots = slots, p.capacity = c.capacity;
    if (c_paged()) {
      p.page_table = dtable, p.page_size = c.page_size, p.pages_per_seq = pages_per_seq;
      p.page_table_rows = slots, p.slots = num_pages, p.capacity = 0;
    }
    fmha::set_decode_contiguous_strides(p);
    p.page_table_stride = table_stride;
    p.k_row_stride = p.v_row_stride = row_stride;
    p.k_slot_stride = p.v_slot_stride = slot_stride;
    p.q = dq, p.o = dout, p.lse = dlse;
    p.k_cache = dk, p.v_cache = dv;
    if (c.append) p.k_new = dknew, p.v_new = dvnew;
    p.seqlens_k = dlens;
    p.cache_batch_idx = c.remap ? dslots : nullptr;
    p.splits = c.splits;
    p.sm_count = c.sm_count;
    return p;
  }
};

/// The reference's outputs (exact and kernel-rounded) and caches after the append.
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
    std::vector<float> f(size_t(pr.slots) * c.capacity * c.heads_kv * d);
    for (int s = 0; s < pr.slots; ++s)
      for (int j = 0; j < c.capacity; ++j)
        for (int h = 0; h < c.heads_kv; ++h)
          for (int x = 0; x < d; ++x)
            f[((size_t(s) * c.capacity + j) * c.heads_kv + h) * d + x] = from_bits(c.dtype, v[pr.at(s, j, h, x)]);
    return f;
  };
  const std::vector<float> q = floats(pr.q), kn = floats(pr.k_new), vn = floats(pr.v_new);
  RefOut r;
  for (fmha::ref::Rounding rounding : {fmha::ref::Rounding::kExact, fmha::ref::Rounding::kKernel}) {
    fmha::ref::GenShape s;
    s.batch = c.batch, s.heads_q = c.heads_q, s.heads_kv = c.heads_kv, s.head_dim = d;
    s.new_tokens = c.new_tokens;
    s.seqlens_kv = pr.seqlens;
    s.cache_batch_idx = pr.slot_of;
    s.append = c.append;
    s.capacity = c.capacity;
    s.dtype = c.dtype;
    s.rounding = rounding;
    std::vector<float> kc = dense(pr.k_cache), vc = dense(pr.v_cache);
    std::vector<float> o(size_t(c.batch) * c.new_tokens * c.heads_q * d), lse(size_t(c.batch) * c.new_tokens * c.heads_q);
    fmha::ref::gen(s, q.data(), kn.data(), vn.data(), kc.data(), vc.data(), o.data(), lse.data());
    if (rounding == fmha::ref::Rounding::kExact) r.o_exact = o, r.lse_exact = lse;
    else r.o_kernel = o, r.lse_kernel = lse;
  }
  return r;
}

/// Runs decode once on the problem's inputs (outputs and workspace NaN-poisoned first) and returns the outputs and
/// the caches after the call; the plan through plan_out.
Outputs run_device(const Problem& pr, fmha::DecodePlan* plan_out = nullptr) {
  const DecodeCase& c = pr.c;
  Outputs out;
  const size_t o_elems = size_t(c.batch) * c.new_tokens * c.heads_q * c.head_dim;
  const size_t lse_elems = size_t(c.batch) * c.new_tokens * c.heads_q;
  Dev dq(pr.q.size() * 2), dkn(pr.k_new.size() * 2), dvn(pr.v_new.size() * 2), dk(pr.k_cache.size() * 2),
      dv(pr.v_cache.size() * 2), dout(o_elems * 2), dlse(lse_elems * 4), dlens(c.batch * 4), dslots(c.batch * 4),
      dtable(pr.table.size() * 4);
  EXPECT_TRUE(dq.p && dkn.p && dvn.p && dk.p && dv.p && dout.p && dlse.p && dlens.p && dslots.p && dtable.p);
  if (!pr.table.empty())
    EXPECT_EQ(cudaMemcpy(dtable.p, pr.table.data(), pr.table.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dq.p, pr.q.data(), pr.q.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dkn.p, pr.k_new.data(), pr.k_new.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dvn.p, pr.v_new.data(), pr.v_new.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dk.p, pr.k_cache.data(), pr.k_cache.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dv.p, pr.v_cache.data(), pr.v_cache.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  const std::vector<int>& lens_up = c.device_seqlens.empty() ? pr.seqlens : c.device_seqlens;
  const std::vector<int>& slots_up = c.device_slots.empty() ? pr.slot_of : c.device_slots;
  EXPECT_EQ(cudaMemcpy(dlens.p, lens_up.data(), c.batch * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dslots.p, slots_up.data(), c.batch * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemset(dout.p, 0xFF, o_elems * 2), cudaSuccess);  // NaN poison
  EXPECT_EQ(cudaMemset(dlse.p, 0xFF, lse_elems * 4), cudaSuccess);
  const fmha::DecodeParams p = pr.params(dq.p, dkn.p, dvn.p, dk.p, dv.p, dout.p, static_cast<float*>(dlse.p),
                                         static_cast<const int*>(dlens.p), static_cast<const int*>(dslots.p),
                                         static_cast<const int*>(dtable.p));
  fmha::DecodePlan plan;
  fmha::Status st = fmha::decode_plan(p, &plan);
  EXPECT_TRUE(st.is_ok()) << st.message();
  if (!st) return out;
  Dev ws(plan.workspace_bytes);
  // The workspace is poisoned too: the library must initialise what it reads.
  EXPECT_EQ(cudaMemset(ws.p, 0xFF, std::max<size_t>(plan.workspace_bytes, 16)), cudaSuccess);
  st = fmha::decode(p, plan, fmha::Workspace{ws.p, plan.workspace_bytes}, nullptr);
  EXPECT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.o.resize(o_elems);
  out.lse.resize(lse_elems);
  out.k_cache.resize(pr.k_cache.size());
  out.v_cache.resize(pr.v_cache.size());
  EXPECT_EQ(cudaMemcpy(out.o.data(), dout.p, o_elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(out.lse.data(), dlse.p, lse_elems * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(out.k_cache.data(), dk.p, pr.k_cache.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(out.v_cache.data(), dv.p, pr.v_cache.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  if (plan_out) *plan_out = plan;
  return out;
}

void check_case(const DecodeCase& c) {
  FMHA_REQUIRE_GPU();
  const Problem pr(c);
  fmha::DecodePlan plan;
  const Outputs got = run_device(pr, &plan);
  ASSERT_EQ(got.o.size(), size_t(c.batch) * c.new_tokens * c.heads_q * c.head_dim);
  const RefOut ref = reference(pr);
  std::vector<float> o(got.o.size());
  for (size_t i = 0; i < o.size(); ++i) o[i] = from_bits(c.dtype, got.o[i]);
  double mag = 0;
  for (float x : ref.o_exact)
    if (std::isfinite(x)) mag = std::max(mag, double(std::fabs(x)));
  const auto co = fmha::ref::compare_scaled(o.data(), ref.o_kernel.data(), ref.o_exact.data(), int64_t(o.size()), 2.0,
                                            fmha::ref::default_floor(c.dtype, mag));
  EXPECT_TRUE(co.ok) << c.name << " (splits " << plan.splits << "): O " << co.message;
  double lmag = 1;
  for (float x : ref.lse_exact)
    if (std::isfinite(x)) lmag = std::max(lmag, double(std::fabs(x)));
  const auto cl = fmha::ref::compare_scaled(got.lse.data(), ref.lse_kernel.data(), ref.lse_exact.data(),
                                            int64_t(got.lse.size()), 2.0, 2e-5 * lmag + 1e-5);
  EXPECT_TRUE(cl.ok) << c.name << " (splits " << plan.splits << "): LSE " << cl.message;
  // The caches: the appended rows are the new K/V bit for bit; every other element is unchanged.
  std::vector<uint16_t> want_k = pr.k_cache, want_v = pr.v_cache;
  if (c.append)
    for (int b = 0; b < c.batch; ++b)
      for (int t = 0; t < c.new_tokens; ++t) {
        const int pos = pr.seqlens[b] + t;
        if (pos >= c.capacity) continue;
        for (int h = 0; h < c.heads_kv; ++h)
          for (int x = 0; x < c.head_dim; ++x) {
            const size_t dst = pr.at(pr.slot_of[b], pos, h, x);
            const size_t src = ((size_t(b) * c.new_tokens + t) * c.heads_kv + h) * c.head_dim + x;
            want_k[dst] = pr.k_new[src];
            want_v[dst] = pr.v_new[src];
          }
      }
  size_t bad_k = 0, bad_v = 0;
  for (size_t i = 0; i < want_k.size(); ++i) bad_k += got.k_cache[i] != want_k[i], bad_v += got.v_cache[i] != want_v[i];
  EXPECT_EQ(bad_k, 0u) << c.name << ": K cache elements that differ from the expected append";
  EXPECT_EQ(bad_v, 0u) << c.name << ": V cache elements that differ from the expected append";
}

DecodeCase make(std::string name, DType t, int b, int hq, int hk, int d, int n, std::vector<int> lens, int cap,
                bool append = true, bool remap = false, int splits = 0) {
  DecodeCase c;
  c.name = std::move(name);
  c.dtype = t, c.batch = b, c.heads_q = hq, c.heads_kv = hk, c.head_dim = d, c.new_tokens = n;
  c.seqlens = std::move(lens), c.capacity = cap, c.append = append, c.remap = remap, c.splits = splits;
  c.seed = uint32_t(std::hash<std::string>{}(c.name));
  return c;
}

class DecodeCaseTest : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeCaseTest, MatchesReference) { check_case(GetParam()); }

std::vector<DecodeCase> cases() {
  const DType bf = DType::kBF16, fp = DType::kFP16;
  std::vector<DecodeCase> v;
  v.push_back(make("mha_bf16_d128", bf, 3, 4, 4, 128, 1, {100, 0, 517}, 640));
  v.push_back(make("gqa4_fp16_d128", fp, 2, 32, 8, 128, 1, {1000, 129}, 1152));
  v.push_back(make("gqa5_bf16_d64", bf, 2, 10, 2, 64, 2, {300, 64}, 512));
  v.push_back(make("gqa8_n4_fp16_d128", fp, 2, 16, 2, 128, 4, {255, 256}, 512));
  v.push_back(make("gqa32_bf16_d128", bf, 1, 32, 1, 128, 1, {777}, 1024));
  v.push_back(make("gqa8_n16_bf16_d64", bf, 2, 8, 1, 64, 16, {40, 3}, 256));  // 128 packed rows: two row blocks
  v.push_back(make("cache_only_n4_bf16", bf, 3, 8, 2, 128, 4, {2, 130, 0}, 256, false));  // token t sees L−n+t
  v.push_back(make("remap_fp16_d128", fp, 3, 8, 8, 128, 1, {33, 500, 1}, 512, true, true));
  v.push_back(make("d80_bf16", bf, 2, 6, 3, 80, 2, {200, 17}, 256));
  for (int splits : {1, 2, 3, 17})
    v.push_back(make("splits" + std::to_string(splits) + "_bf16", bf, 2, 8, 2, 128, 2, {2100, 300}, 2304, true, false,
                     splits));
  v.push_back(make("splits133_bf16", bf, 1, 4, 1, 128, 1, {17000}, 17024, true, false, 133));
  v.push_back(make("splits_heuristic_long_fp16", fp, 1, 8, 1, 128, 1, {20000}, 20480));
  v.push_back(make("splits_empty_entries_bf16", bf, 4, 4, 2, 64, 1, {0, 5000, 0, 127}, 5120, true, true, 9));
  v.push_back(make("cache_only_empty_bf16", bf, 2, 4, 4, 128, 1, {0, 1}, 128, false, false, 2));
  {
    DecodeCase c = make("strided_extra_slots_fp16", fp, 2, 8, 2, 128, 3, {90, 400}, 512, true, true, 3);
    c.extra_slots = 3, c.row_pad = 24;
    v.push_back(c);
  }
  // Paged caches: page sizes 16 (eight pages per key block), 64, 128, 256 (a block inside a page), with remap,
  // splits, cache-only, GQA and several tokens.
  for (int ps : {16, 64, 128, 256}) {
    DecodeCase c = make("paged" + std::to_string(ps) + "_bf16", bf, 3, 16, 4, 128, 2, {700, 0, 1200}, 1280, true,
                        ps == 64, ps == 16 ? 3 : 0);
    c.page_size = ps;
    v.push_back(c);
  }
  {
    DecodeCase c = make("paged16_cache_only_fp16_d64", fp, 2, 8, 1, 64, 4, {37, 300}, 320, false, true);
    c.page_size = 16, c.extra_slots = 2;
    v.push_back(c);
  }
  {
    // Out-of-range device values are clamped: lengths past the capacity to it, negative ones to 0, slots to
    // [0, slots) (cache-only; slots 3): the result is the reference's with the clamped values.
    DecodeCase c = make("clamped_device_values_bf16", bf, 3, 8, 2, 128, 2, {384, 0, 10}, 384, false, true);
    c.device_seqlens = {384 + 50, -3, 10};
    c.device_slots = {7, -1, 1};  // clamped to 2, 0, 1
    v.push_back(c);
  }
  {
    DecodeCase c = make("few_sms_bf16", bf, 5, 8, 2, 128, 1, {700, 1, 0, 300, 1023}, 1024);
    c.sm_count = 3;  // a persistent grid of 3 CTAs walking many tiles
    v.push_back(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Decode, DecodeCaseTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& i) { return i.param.name; });

TEST(DecodeGpu, ArgumentErrorsNameTheArgument) {
  fmha::DecodeParams p;
  p.batch = 1, p.heads_q = 4, p.heads_kv = 3, p.head_dim = 128, p.capacity = 16, p.slots = 1, p.sm_count = 4;
  fmha::DecodePlan plan;
  fmha::Status s = fmha::decode_plan(p, &plan);
  EXPECT_EQ(s.code(), fmha::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("heads_q % heads_kv"), std::string::npos) << s.message();
}

}  // namespace
