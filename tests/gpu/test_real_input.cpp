// GPU real-input tests: fmha's forward on the real attention activations of all-MiniLM-L6-v2
// (tests/data/minilm_l6_attention.bin, see scripts/make_minilm_fixture.py and src/testing/fixture.h).
//
// For every layer and for fp16 and bf16, the 5 sentences run as ONE varlen batch (heads 12/12, head_dim 32, no
// mask, scale 1/sqrt(32)) through the harness, which rounds Q, K, V to the dtype, runs fmha::fwd and checks O/LSE
// against the CPU reference under the library's policy. On top of that fmha's O must match the MODEL's own
// attention output (fp32, from unrounded inputs) within a relative Frobenius error bound
// (fmha::testing::minilm::kRelFrobBound*, ≈3.6x what the kernel-rounding CPU reference measures; the CPU test
// tests/cpu/test_real_input_reference.cpp keeps that margin checked).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu/gpu_env.h"
#include "reference/dtype.h"
#include "testing/fixture.h"
#include "testing/fwd_runner.h"

#ifndef FMHA_TEST_DATA_DIR
#error "FMHA_TEST_DATA_DIR must be defined (tests/CMakeLists.txt)"
#endif

namespace {

using fmha::DType;
using fmha::MaskType;
using fmha::testing::AttentionFixture;
using fmha::testing::FwdCase;

const AttentionFixture& fixture() { return fmha::testing::minilm_l6_fixture(FMHA_TEST_DATA_DIR); }

/// The varlen case of one layer: all sentences in one batch, the fixture's values as inputs.
FwdCase layer_case(const AttentionFixture& f, int layer, DType dtype) {
  FwdCase c;
  c.dtype = dtype;
  c.batch = f.sentences();
  c.heads_q = c.heads_kv = f.heads;
  c.head_dim = f.head_dim;
  c.seqlens_q = c.seqlens_k = f.tokens;
  c.varlen = true;
  c.mask = MaskType::kNone;
  c.scale = float(f.scale);
  // The harness asks for each tensor's valid elements in (entry, row, head, dim) order, which for the packed
  // layout is the fixture's flat [total][heads][head_dim] order.
  c.fill = [&f, layer](const std::string& name, std::vector<float>& values) {
    const std::vector<float>& src = name == "q" ? f.q[size_t(layer)] : name == "k" ? f.k[size_t(layer)]
                                                                                   : f.v[size_t(layer)];
    if (values.size() != src.size()) {
      ADD_FAILURE() << "fill(" << name << "): harness asks for " << values.size() << " values, the fixture has "
                    << src.size();
      return;
    }
    values = src;
  };
  return c;
}

/// ‖got − want‖₂ / ‖want‖₂.
double rel_frobenius(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    num += d * d, den += double(want[i]) * double(want[i]);
  }
  return std::sqrt(num / den);
}

/// Runs every layer in `dtype` and checks (a) the harness's own comparison with the CPU reference and (b) fmha's O
/// against the model's attention output.
void run_every_layer(DType dtype) {
  const AttentionFixture& f = fixture();
  ASSERT_DOUBLE_EQ(f.scale, 1.0 / std::sqrt(double(f.head_dim)));
  const double bound = dtype == DType::kFP16 ? fmha::testing::minilm::kRelFrobBoundFP16
                                             : fmha::testing::minilm::kRelFrobBoundBF16;
  const size_t n = size_t(f.elements_per_tensor());
  for (int l = 0; l < f.layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const fmha::testing::FwdOutcome r = fmha::testing::run_fwd_case(layer_case(f, l, dtype));
    ASSERT_TRUE(r.ok()) << r.summary();
    ASSERT_TRUE(r.checked);
    // No row padding and no extra rows: the O buffer is exactly [total][heads][head_dim].
    ASSERT_EQ(r.o_bits.size(), n);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i)
      out[i] = dtype == DType::kFP16 ? fmha::ref::half_bits_to_float(r.o_bits[i])
                                     : fmha::ref::bf16_bits_to_float(r.o_bits[i]);
    for (size_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(out[i])) << "O element " << i << " is not finite";
    const double err = rel_frobenius(out, f.o[size_t(l)]);
    std::printf("%s layer %d: ||fmha - model|| / ||model|| = %.3g (bound %.3g); %s\n", fmha::to_string(dtype), l, err,
                bound, r.o.message.c_str());
    EXPECT_LE(err, bound) << "fmha's output departs from the model's own attention output";
  }
}

TEST(RealInputFwd, MiniLML6EveryLayerVarlenFP16) {
  FMHA_REQUIRE_GPU();
  run_every_layer(DType::kFP16);
}

TEST(RealInputFwd, MiniLML6EveryLayerVarlenBF16) {
  FMHA_REQUIRE_GPU();
  run_every_layer(DType::kBF16);
}

}  // namespace
