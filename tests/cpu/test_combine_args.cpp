// The split-KV combine's argument checks (src/api/combine.h), which need no GPU: each names its argument with the
// expected and the actual value. Its values are tested on the GPU (tests/gpu/test_combine.cpp).
#include <gtest/gtest.h>

#include <string>

#include "api/combine.h"

namespace {

TEST(CombineArgs, BadArgumentsAreNamed) {
  fmha::detail::CombineArgs a;
  a.splits = 0;
  EXPECT_NE(fmha::detail::combine_partials(a, nullptr).message().find("splits: expected >= 1, got 0"), std::string::npos);
  a.splits = 2, a.rows = 10, a.tokens = 1, a.heads = 4, a.head_dim = 64;
  EXPECT_NE(fmha::detail::combine_partials(a, nullptr).message().find("rows: expected a multiple of tokens * heads"),
            std::string::npos);
  a.rows = 8, a.head_dim = 513;
  EXPECT_NE(fmha::detail::combine_partials(a, nullptr).message().find("head_dim"), std::string::npos);
  a.head_dim = 64;
  EXPECT_NE(fmha::detail::combine_partials(a, nullptr).message().find("o_parts, lse_parts, o: expected non-null"),
            std::string::npos);
}

}  // namespace
