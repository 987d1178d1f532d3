// Real-input tests of the CPU reference: tests/data/minilm_l6_attention.bin holds the Q, K, V and the attention
// output of every layer of all-MiniLM-L6-v2 on 5 English sentences (scripts/make_minilm_fixture.py). The reference
// forward must reproduce the model's own attention output from its Q, K, V to fp32 noise, and the fixture itself
// must be well formed (distinct sentence lengths, exact size). Also measures the error that kernel-style rounding
// (fp16/bf16 inputs and P, output rounded to the dtype) causes against the model, which is what the GPU test
// tests/gpu/test_real_input.cpp bounds (bounds in src/testing/fixture.h, checked here to keep a 3x margin).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/attention.h"
#include "reference/dtype.h"
#include "reference/tensor.h"
#include "testing/fixture.h"

#ifndef FMHA_TEST_DATA_DIR
#error "FMHA_TEST_DATA_DIR must be defined (tests/CMakeLists.txt)"
#endif

namespace {

using fmha::DType;
using fmha::MaskType;
using fmha::testing::AttentionFixture;
using fmha::testing::load_attention_fixture;

const std::string kPath = std::string(FMHA_TEST_DATA_DIR) + "/minilm_l6_attention.bin";

const AttentionFixture& fixture() { return fmha::testing::minilm_l6_fixture(FMHA_TEST_DATA_DIR); }

struct RefOptions {
  double scale = 0.0;  // 0: the fixture's
  MaskType mask = MaskType::kNone;
  fmha::ref::Rounding rounding = fmha::ref::Rounding::kExact;
  DType dtype = DType::kFP16;
};

/// The reference forward over the fixture's packed varlen batch for one layer; [total][heads][head_dim].
std::vector<float> reference_output(const AttentionFixture& f, int layer, const RefOptions& opt = {}) {
  fmha::ref::AttnShape s;
  s.batch = f.sentences();
  s.heads_q = s.heads_kv = f.heads;
  s.head_dim_qk = s.head_dim_v = f.head_dim;
  s.seqlens_q = s.seqlens_k = f.tokens;
  s.mask = opt.mask;
  s.scale = opt.scale != 0.0 ? opt.scale : f.scale;
  s.rounding = opt.rounding;
  s.dtype = opt.dtype;
  const std::vector<int> cu = f.cu_seqlens();
  std::vector<float> o(size_t(f.elements_per_tensor()), std::nanf(""));
  const size_t l = size_t(layer);
  fmha::ref::fwd(s, fmha::ref::packed(f.q[l].data(), f.heads, f.head_dim, cu.data()),
                 fmha::ref::packed(f.k[l].data(), f.heads, f.head_dim, cu.data()),
                 fmha::ref::packed(f.v[l].data(), f.heads, f.head_dim, cu.data()),
                 fmha::ref::packed(o.data(), f.heads, f.head_dim, cu.data()), fmha::ref::MutView{});
  return o;
}

/// max |a − b| / max |b|.
double max_err_rel_to_max(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0.0, mx = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(double(a[i]) - double(b[i])));  // NaN in a makes this comparison false: caught below
    if (!std::isfinite(a[i])) return INFINITY;
    mx = std::max(mx, std::abs(double(b[i])));
  }
  return err / mx;
}

/// ‖a − b‖₂ / ‖b‖₂ over all elements.
double rel_frobenius(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d, den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / den);
}

constexpr double kFp32Tolerance = 1e-5;  // max abs error relative to max |o|: fp32 noise (measured ≈ 1e-7)

// ---------------------------------------------------------------------------------------------------------------
// The fixture itself
// ---------------------------------------------------------------------------------------------------------------

TEST(RealInputFixture, WellFormed) {
  const AttentionFixture& f = fixture();
  EXPECT_EQ(f.layers, 6);
  EXPECT_EQ(f.heads, 12);
  EXPECT_EQ(f.head_dim, 32);
  EXPECT_DOUBLE_EQ(f.scale, 1.0 / std::sqrt(32.0));
  ASSERT_GE(f.sentences(), 5) << "the fixture should hold 5-6 sentences";
  ASSERT_LE(f.sentences(), 6);
  const std::set<int> distinct(f.tokens.begin(), f.tokens.end());
  EXPECT_EQ(distinct.size(), f.tokens.size()) << "sentence token counts must be distinct";
  for (int t : f.tokens) EXPECT_GE(t, 3) << "every sentence has [CLS], [SEP] and at least one word";
  for (const auto* t : {&f.q, &f.k, &f.v, &f.o}) {
    ASSERT_EQ(t->size(), size_t(f.layers));
    for (const auto& layer : *t) EXPECT_EQ(int64_t(layer.size()), f.elements_per_tensor());
  }
  const std::vector<int> cu = f.cu_seqlens();
  ASSERT_EQ(cu.size(), f.tokens.size() + 1);
  EXPECT_EQ(cu.front(), 0);
  EXPECT_EQ(cu.back(), f.total_tokens());
}

TEST(RealInputFixture, FileSize) {
  const AttentionFixture& f = fixture();
  const auto size = int64_t(std::filesystem::file_size(kPath));
  EXPECT_EQ(size, fmha::testing::attention_fixture_bytes(f.layers, f.heads, f.head_dim, f.tokens));
  // 24-byte header + 4 bytes per sentence + 6 layers × 4 tensors × total_tokens × 384 floats.
  EXPECT_EQ(size, 24 + 4 * f.sentences() + int64_t(6) * 4 * f.total_tokens() * 384 * 4);
  EXPECT_LE(size, 2 * 1024 * 1024) << "the fixture should stay under 2 MiB";
}

TEST(RealInputFixture, ValuesAreRealActivations) {
  // Guards against a fixture of zeros or noise: attention outputs are convex combinations of V rows, so every O row
  // of a head lies within the range of that head's V values, and the activations have a real spread.
  const AttentionFixture& f = fixture();
  const std::vector<int> cu = f.cu_seqlens();
  const int hd = f.heads * f.head_dim;
  for (int l = 0; l < f.layers; ++l) {
    double max_q = 0.0;
    for (float x : f.q[size_t(l)]) max_q = std::max(max_q, std::abs(double(x)));
    EXPECT_GT(max_q, 0.5) << "layer " << l;
    for (int b = 0; b < f.sentences(); ++b)
      for (int h = 0; h < f.heads; ++h)
        for (int d = 0; d < f.head_dim; ++d) {
          double lo = INFINITY, hi = -INFINITY;
          for (int j = cu[size_t(b)]; j < cu[size_t(b) + 1]; ++j) {
            const double x = f.v[size_t(l)][size_t(j * hd + h * f.head_dim + d)];
            lo = std::min(lo, x), hi = std::max(hi, x);
          }
          for (int i = cu[size_t(b)]; i < cu[size_t(b) + 1]; ++i) {
            const double o = f.o[size_t(l)][size_t(i * hd + h * f.head_dim + d)];
            ASSERT_GE(o, lo - 1e-5) << "layer " << l << " sentence " << b << " head " << h;
            ASSERT_LE(o, hi + 1e-5) << "layer " << l << " sentence " << b << " head " << h;
          }
        }
  }
}

std::string write_temp(const std::string& name, const std::vector<char>& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  return path;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void expect_load_error(const std::string& path, const std::string& needle) {
  try {
    load_attention_fixture(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "' in: " << msg;
  }
}

TEST(RealInputFixture, RejectsBadFiles) {
  expect_load_error(::testing::TempDir() + "/does_not_exist.bin", "cannot open");
  const std::vector<char> good = read_all(kPath);
  ASSERT_GT(good.size(), 64u);

  std::vector<char> b = good;
  b[7] = '2';
  expect_load_error(write_temp("fixture_magic.bin", b), "bad magic");

  b = good;
  b.pop_back();
  expect_load_error(write_temp("fixture_short.bin", b), "size mismatch");

  b = good;
  b.push_back(0);
  expect_load_error(write_temp("fixture_long.bin", b), "size mismatch");

  b = good;
  b[12] = 0;  // heads = 0
  expect_load_error(write_temp("fixture_zero_heads.bin", b), "heads");

  b = good;
  b[16] = 64;  // head_dim 64: the header now describes twice the data
  expect_load_error(write_temp("fixture_head_dim.bin", b), "truncated");

  b.assign(good.begin(), good.begin() + 10);
  expect_load_error(write_temp("fixture_header.bin", b), "too short");

  b = good;
  const size_t first_float = 24 + 4 * size_t(fixture().sentences());
  b[first_float + 3] = char(0x7F), b[first_float + 2] = char(0xC0);  // a NaN
  expect_load_error(write_temp("fixture_nan.bin", b), "non-finite");
}

// ---------------------------------------------------------------------------------------------------------------
// The reference against the model
// ---------------------------------------------------------------------------------------------------------------

TEST(RealInputReference, ReproducesModelAttentionEveryLayer) {
  const AttentionFixture& f = fixture();
  for (int l = 0; l < f.layers; ++l) {
    const std::vector<float> o = reference_output(f, l);
    const double err = max_err_rel_to_max(o, f.o[size_t(l)]);
    std::printf("layer %d: max |ref - model| / max |model| = %.3g\n", l, err);
    EXPECT_LE(err, kFp32Tolerance) << "layer " << l;
  }
}

// Negative controls: the comparison above must be able to fail. A 1% wrong softmax scale or a causal mask (the
// model attends bidirectionally) must each miss the model's output by far more than the tolerance.
TEST(RealInputReference, DetectsWrongScaleAndMask) {
  const AttentionFixture& f = fixture();
  for (int l = 0; l < f.layers; ++l) {
    RefOptions wrong_scale;
    wrong_scale.scale = f.scale * 1.01;
    const double e_scale = max_err_rel_to_max(reference_output(f, l, wrong_scale), f.o[size_t(l)]);
    RefOptions causal;
    causal.mask = MaskType::kCausal;
    const double e_causal = max_err_rel_to_max(reference_output(f, l, causal), f.o[size_t(l)]);
    std::printf("layer %d: error with scale x1.01 %.3g, with a causal mask %.3g\n", l, e_scale, e_causal);
    EXPECT_GT(e_scale, 10 * kFp32Tolerance) << "layer " << l;
    EXPECT_GT(e_causal, 1000 * kFp32Tolerance) << "layer " << l;
  }
}

/// What a correct kernel should show against the model: the reference with kernel rounding (inputs and P in the
/// dtype, fp64 accumulation), its output then rounded to the dtype as the kernel's O is.
double kernel_model_error(const AttentionFixture& f, int layer, DType dtype) {
  RefOptions opt;
  opt.rounding = fmha::ref::Rounding::kKernel;
  opt.dtype = dtype;
  std::vector<float> o = reference_output(f, layer, opt);
  fmha::ref::round_all(dtype, o.data(), o.size());
  return rel_frobenius(o, f.o[size_t(layer)]);
}

// The GPU test bounds ‖fmha − model‖/‖model‖ by kRelFrobBound{FP16,BF16}; they must keep a 3x margin over what the
// kernel-rounding model gives, and must not be loose enough to pass garbage.
TEST(RealInputReference, KernelRoundingErrorWithinGpuBounds) {
  const AttentionFixture& f = fixture();
  for (DType t : {DType::kFP16, DType::kBF16}) {
    const double bound = t == DType::kFP16 ? fmha::testing::minilm::kRelFrobBoundFP16
                                           : fmha::testing::minilm::kRelFrobBoundBF16;
    double worst = 0.0;
    for (int l = 0; l < f.layers; ++l) {
      const double e = kernel_model_error(f, l, t);
      std::printf("%s layer %d: kernel-rounding reference vs model, relative Frobenius error %.3g\n",
                  t == DType::kFP16 ? "fp16" : "bf16", l, e);
      worst = std::max(worst, e);
    }
    std::printf("%s: worst %.3g, GPU bound %.3g (%.1fx)\n", t == DType::kFP16 ? "fp16" : "bf16", worst, bound,
                bound / worst);
    EXPECT_LE(3 * worst, bound);
    EXPECT_LE(bound, 0.05) << "a bound this loose would not catch a wrong kernel";
    // A kernel with a 5% wrong softmax scale must exceed the bound in every layer, so the GPU test would catch it
    // (fp16 catches 1% too; bf16's own rounding error is about as large as a 1% scale error's effect).
    for (double factor : {1.01, 1.05}) {
      RefOptions wrong;
      wrong.scale = f.scale * factor;
      wrong.rounding = fmha::ref::Rounding::kKernel;
      wrong.dtype = t;
      double least = INFINITY;
      for (int l = 0; l < f.layers; ++l)
        least = std::min(least, rel_frobenius(reference_output(f, l, wrong), f.o[size_t(l)]));
      std::printf("%s: least error over layers with scale x%.2f: %.3g\n", t == DType::kFP16 ? "fp16" : "bf16",
                  factor, least);
      if (factor == 1.05 || t == DType::kFP16) {
        EXPECT_GT(least, bound) << "scale x" << factor;
      }
    }
  }
}

}  // namespace
