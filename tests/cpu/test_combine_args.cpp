// The split-KV combine's argument checks, internal (check_combine_args, src/api/combine.h: the host part of
// combine_partials) and public (fmha::combine, include/fmha/combine.h), which need no GPU and no kernel: each names
// its argument with the expected and the actual value. Its values are tested on the GPU (tests/gpu/test_combine.cpp,
// tests/python/test_torch_gpu.py class Combine).
#include <gtest/gtest.h>

#include <string>

#include "api/combine.h"
#include "fmha/combine.h"
#include "test_util.h"

namespace {

TEST(CombineArgs, BadArgumentsAreNamed) {
  fmha::detail::CombineArgs a;
  a.splits = 0;
  EXPECT_NE(fmha::detail::check_combine_args(a).message().find("splits: expected >= 1, got 0"), std::string::npos);
  a.splits = 2, a.rows = 10, a.tokens = 1, a.heads = 4, a.head_dim = 64;
  EXPECT_NE(fmha::detail::check_combine_args(a).message().find("rows: expected a multiple of tokens * heads"),
            std::string::npos);
  a.rows = 8, a.head_dim = 513;
  EXPECT_NE(fmha::detail::check_combine_args(a).message().find("head_dim"), std::string::npos);
  a.head_dim = 64;
  a.o_dtype = fmha::DType::kFP8E4M3;
  EXPECT_NE(fmha::detail::check_combine_args(a).message().find("o_dtype: expected fp16, bf16 or fp32"),
            std::string::npos);
  a.o_dtype = fmha::DType::kBF16;
  EXPECT_NE(fmha::detail::check_combine_args(a).message().find("o_parts, lse_parts, o: expected non-null"),
            std::string::npos);
  a.rows = 0;  // nothing to merge: no pointer needed
  EXPECT_TRUE(fmha::detail::check_combine_args(a).is_ok());
}

/// fmha::combine: each bad argument named with the expected and the actual value; a valid call on host buffers is
/// refused as every call of the API is (kNotBuilt, no device, or the host pointer named).
TEST(CombineArgs, PublicCallNamesItsArguments) {
  alignas(16) static float parts[2 * 4 * 8], lse_parts[2 * 4], out[4 * 8];
  const auto valid = [] {
    fmha::CombineParams p;
    p.splits = 2, p.rows = 4, p.head_dim = 8, p.o_parts = parts, p.lse_parts = lse_parts, p.o = out;
    return p;
  };
  struct Case {
    void (*edit)(fmha::CombineParams&);
    const char* message;
  };
  const Case cases[] = {
      {[](fmha::CombineParams& p) { p.splits = 0; }, "splits: expected >= 1, got 0"},
      {[](fmha::CombineParams& p) { p.rows = -1; }, "rows: expected >= 0, got -1"},
      {[](fmha::CombineParams& p) { p.head_dim = 513; }, "head_dim: expected 1 ... 512, got 513"},
      {[](fmha::CombineParams& p) { p.o_row_stride = 7; }, "o_row_stride: expected 0 (= head_dim) or >= head_dim = 8, got 7"},
      {[](fmha::CombineParams& p) { p.o_dtype = fmha::DType::kFP8E4M3; }, "o_dtype: expected fp16, bf16 or fp32"},
      {[](fmha::CombineParams& p) { p.lse_parts = nullptr; }, "lse_parts: expected a device pointer, got null"},
      {[](fmha::CombineParams& p) { p.o_parts = reinterpret_cast<const float*>(reinterpret_cast<const char*>(parts) + 2); },
       "o_parts: expected an address aligned to its element (4 bytes), got an address ending in 0x2"},
      {[](fmha::CombineParams& p) { p.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(out) + 1); },
       "lse: expected an address aligned to its element (4 bytes), got an address ending in 0x1"},
      {[](fmha::CombineParams& p) { p.o_dtype = fmha::DType::kBF16, p.o = reinterpret_cast<char*>(out) + 1; },
       "o: expected an address aligned to its element (2 bytes), got an address ending in 0x1"},
      {[](fmha::CombineParams& p) { p.splits = 1, p.rows = INT32_MAX - 63; }, "splits × rows: expected <= 2^31 - 65"},
  };
  for (const Case& c : cases) {
    fmha::CombineParams p = valid();
    c.edit(p);
    const fmha::Status s = fmha::combine(p);
    EXPECT_EQ(s.code(), fmha::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message().rfind(c.message, 0), 0u) << s.message();
  }
  fmha::CombineParams none = valid();
  none.rows = 0;
  EXPECT_TRUE(fmha::combine(none).is_ok());  // nothing to merge: no device needed
  fmha::testutil::expect_host_buffers_refused(fmha::combine(valid()), "o_parts");
}

}  // namespace
