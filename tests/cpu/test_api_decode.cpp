// The decode API without a GPU (include/fmha/decode.h): argument errors name the argument with expected and actual
// values, the plan's numbers for known shapes, and decode() refusing a plan made for other shapes.
#include <gtest/gtest.h>

#include <string>

#include "fmha/decode.h"

namespace {

alignas(256) char buf[256];

/// A valid contiguous problem on placeholder (aligned, never dereferenced) pointers; sm_count set, so no device.
fmha::DecodeParams base() {
  fmha::DecodeParams p;
  p.batch = 4, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128, p.new_tokens = 1;
  p.slots = 4, p.capacity = 4096, p.sm_count = 132;
  p.q = p.o = p.k_cache = p.v_cache = buf;
  p.seqlens_k = reinterpret_cast<const int*>(buf);
  fmha::set_decode_contiguous_strides(p);
  return p;
}

void expect_error(const fmha::DecodeParams& p, const std::string& arg) {
  fmha::DecodePlan plan;
  const fmha::Status s = fmha::decode_plan(p, &plan);
  EXPECT_EQ(s.code(), fmha::StatusCode::kInvalidArgument) << arg << ": " << s.message();
  EXPECT_EQ(s.message().rfind(arg + ":", 0), 0u) << "expected the message to start with '" << arg << ":', got '"
                                                 << s.message() << "'";
}

TEST(ApiDecode, ArgumentErrorsNameTheArgument) {
  auto p = base();
  p.heads_kv = 5;
  expect_error(p, "heads_q % heads_kv");
  p = base(), p.new_tokens = 17;
  expect_error(p, "new_tokens");
  p = base(), p.slots = 3;  // entry 3 would use slot 3
  expect_error(p, "slots");
  p = base(), p.max_seqlen_k = 4097;
  expect_error(p, "max_seqlen_k");
  p = base(), p.seqlens_k = nullptr;
  expect_error(p, "seqlens_k");
  p = base(), p.k_new = buf;  // without v_new
  expect_error(p, "v_new");
  p = base(), p.capacity = 1, p.max_seqlen_k = 0, p.new_tokens = 2, p.k_new = p.v_new = buf;
  fmha::set_decode_contiguous_strides(p);
  expect_error(p, "new_tokens");  // more new tokens than the cache holds
  p = base(), p.k_row_stride = 100;
  expect_error(p, "k_cache_row_stride");
  p = base(), p.splits = -1;
  expect_error(p, "splits");
  // Paged caches.
  p = base();
  p.page_table = reinterpret_cast<const int*>(buf), p.page_size = 0, p.pages_per_seq = 8, p.slots = 64;
  fmha::set_decode_contiguous_strides(p);
  expect_error(p, "page_size");
  p.page_size = -16;
  expect_error(p, "page_size");
  p.page_size = 24;  // not a multiple of 16: valid (boxes of one key)
  fmha::set_decode_contiguous_strides(p);
  fmha::DecodePlan plan24;
  EXPECT_TRUE(fmha::decode_plan(p, &plan24).is_ok());
  p.page_size = 32;
  fmha::set_decode_contiguous_strides(p);
  p.page_table_stride = 4;
  expect_error(p, "page_table_stride");
  p.page_table_stride = 8, p.page_table_rows = 2;  // fewer rows than entries, without cache_batch_idx
  expect_error(p, "page_table_rows");
  p.page_table_rows = 0;
  fmha::DecodePlan plan;
  EXPECT_TRUE(fmha::decode_plan(p, &plan).is_ok());
  EXPECT_EQ(plan.max_seqlen_k, 256);  // pages_per_seq × page_size
}

TEST(ApiDecode, PlanForKnownShapes) {
  fmha::DecodePlan plan;
  auto p = base();  // 4 × 8 K/V heads = 32 tiles on 132 SMs: split
  ASSERT_TRUE(fmha::decode_plan(p, &plan).is_ok());
  EXPECT_EQ(plan.m_blocks, 1);
  EXPECT_GT(plan.splits, 1);
  EXPECT_EQ(plan.num_tiles, 4 * 8 * plan.splits);
  EXPECT_LE(plan.grid, 132 * 2);  // two CTAs per SM
  EXPECT_EQ(plan.block_n, 64);     // head dim 128: 64-key blocks
  EXPECT_GE(int64_t(plan.splits) * plan.keys_per_split, 4096);
  EXPECT_EQ(plan.keys_per_split % plan.block_n, 0);
  EXPECT_GT(plan.workspace_bytes, 0u);
  EXPECT_EQ(fmha::decode_workspace_size(plan), plan.workspace_bytes);
  p.batch = 128, p.slots = 128;  // 1024 tiles fill the 264 CTA slots: one split, no workspace
  ASSERT_TRUE(fmha::decode_plan(p, &plan).is_ok());
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  p = base(), p.splits = 3;  // the caller's count
  ASSERT_TRUE(fmha::decode_plan(p, &plan).is_ok());
  EXPECT_EQ(plan.splits, 3);
  p = base(), p.heads_kv = 1, p.new_tokens = 4;  // 32 · 4 = 128 packed rows: two row blocks per K/V head
  ASSERT_TRUE(fmha::decode_plan(p, &plan).is_ok());
  EXPECT_EQ(plan.m_blocks, 2);
  EXPECT_EQ(fmha::decode_kernel_name(p, plan).rfind("decode bf16 d128 64x64 split ", 0), 0u)
      << fmha::decode_kernel_name(p, plan);
}

TEST(ApiDecode, DecodeRefusesAPlanForOtherShapes) {
  auto p = base();
  fmha::DecodePlan plan;
  ASSERT_TRUE(fmha::decode_plan(p, &plan).is_ok());
  p.batch = 3;
  fmha::Status s = fmha::decode(p, plan, fmha::Workspace{buf, 0});
  EXPECT_EQ(s.code(), fmha::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("plan.batch:", 0), 0u) << s.message();
  p = base();
  plan.grid = plan.num_tiles + 1;
  s = fmha::decode(p, plan, fmha::Workspace{buf, 0});
  EXPECT_EQ(s.message().rfind("plan.grid:", 0), 0u) << s.message();
  ASSERT_TRUE(fmha::decode_plan(p, &plan).is_ok());
  s = fmha::decode(p, plan, fmha::Workspace{buf, plan.workspace_bytes - 1});  // too small
  EXPECT_EQ(s.message().rfind("workspace", 0), 0u) << s.message();
}

}  // namespace
