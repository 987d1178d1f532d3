// Decode (include/fmha/decode.h) against the CPU reference's gen (reference/attention.h), under the library's
// comparison rule (k = 2 against the kernel-emulating reference) on every (entry, token, head) row, through the
// harness of src/testing/decode_runner.h (shared with fmha_gen):
//   GQA ratios 1, 4, 5, 8, 32; new tokens 1, 2, 4, 16; append and cache-only; remap (cache_batch_idx); split counts
//   1, 2, 3, 17 and the heuristic, with splits past a sequence's end (empty) and sequences of length 0; head dims
//   64, 128 and 80 (predicated); strided caches; paged caches with pages of 1, 5, 16, 24, 64, 128 and 256 keys;
//   clamped device values; NaN in every cache row past each sequence's length and in every slot no entry uses,
//   which must never reach a result; O, LSE and the workspace poisoned with NaN before the call.
// After the call the caches hold the appended rows (bitwise the new K/V) and nothing else changed. A bad argument
// gives a named error. (CUDA-graph replay with new lengths: tests/python/test_torch_gpu.py, class Decode; argument
// errors without a GPU: tests/cpu/test_api_decode.cpp.)
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "fmha/decode.h"
#include "gpu/gpu_env.h"
#include "testing/decode_runner.h"

namespace {

using fmha::DType;

using fmha::testing::DecodeCase;

void check_case(const DecodeCase& c) {
  FMHA_REQUIRE_GPU();
  const fmha::testing::DecodeOutcome r = fmha::testing::run_decode_case(c);
  ASSERT_TRUE(r.status.is_ok()) << c.name << ": " << r.status.message();
  ASSERT_TRUE(r.checked);
  EXPECT_TRUE(r.o.ok) << c.name << " (splits " << r.plan.splits << "): O " << r.o.message;
  EXPECT_TRUE(r.lse.ok) << c.name << " (splits " << r.plan.splits << "): LSE " << r.lse.message;
  EXPECT_EQ(r.k_cache_diffs, 0u) << c.name << ": K cache elements that differ from the expected append";
  EXPECT_EQ(r.v_cache_diffs, 0u) << c.name << ": V cache elements that differ from the expected append";
  EXPECT_EQ(r.repeat_mismatches, 0) << c.name << ": repeated calls whose O, LSE or caches differ from the first";
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
  // Paged caches: page sizes 16 (four pages per 64-key block), 64, 128, 256 (a block inside a page), with remap,
  // splits, cache-only, GQA and several tokens.
  for (int ps : {16, 64, 128, 256}) {
    DecodeCase c = make("paged" + std::to_string(ps) + "_bf16", bf, 3, 16, 4, 128, 2, {700, 0, 1200}, 1280, true,
                        ps == 64, ps == 16 ? 3 : 0);
    c.page_size = ps;
    v.push_back(c);
  }
  // Pages that are not a whole number of 16-key boxes (gathered by the producer warp's lanes with cp.async): 1 key
  // (a page per key), 5 (pages straddle every block and every lane's rows), 24 with splits and remap, 5 at head dim
  // 80 (the chunks past the head dim zero-filled).
  {
    DecodeCase c = make("paged1_bf16", bf, 2, 8, 2, 128, 2, {300, 45}, 384);
    c.page_size = 1;
    v.push_back(c);
  }
  {
    DecodeCase c = make("paged5_fp16_d64", fp, 3, 16, 4, 64, 4, {517, 0, 260}, 640, true, false, 3);
    c.page_size = 5;
    v.push_back(c);
  }
  {
    DecodeCase c = make("paged24_cache_only_bf16", bf, 2, 8, 1, 128, 1, {1000, 23}, 1200, false, true, 2);
    c.page_size = 24, c.extra_slots = 1;
    v.push_back(c);
  }
  {
    DecodeCase c = make("paged5_d80_bf16", bf, 2, 6, 3, 80, 2, {200, 17}, 260, true, true, 2);
    c.page_size = 5, c.extra_slots = 3;
    v.push_back(c);
  }
  {
    DecodeCase c = make("paged16_cache_only_fp16_d64", fp, 2, 8, 1, 64, 4, {37, 300}, 320, false, true);
    c.page_size = 16, c.extra_slots = 2;
    v.push_back(c);
  }
  {
    // Pages of 64 keys at head dim 64 (two 64-key boxes per key block), with remap, splits and an append.
    DecodeCase c = make("paged64_fp16_d64", fp, 3, 16, 2, 64, 3, {650, 1, 130}, 704, true, true, 3);
    c.page_size = 64, c.extra_slots = 1;
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
    c.sm_count = 3;  // a persistent grid of 6 CTAs (two per SM) walking many tiles
    v.push_back(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Decode, DecodeCaseTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& i) { return i.param.name; });

// The append under repetition: 4 new tokens per sequence appended (into rows that hold NaN before every call) and
// then read by 17 splits per K/V head (contiguous, 16-key pages through TMA, 5-key pages gathered; remap), 40 calls
// on fresh inputs: every call gives the first call's O, LSE and caches bit for bit (runner: DecodeCase::repeats).
TEST(DecodeGpu, AppendRepeatedIsRaceFree) {
  for (int page : {0, 16, 5}) {
    const std::string name = page ? "append_repeat_paged" + std::to_string(page) : std::string("append_repeat");
    DecodeCase c = make(name, DType::kBF16, 4, 16, 4, 128, 4, {3000, 17, 1500, 2900}, 3072, true, true, 17);
    c.page_size = page, c.extra_slots = 2, c.repeats = 40;
    check_case(c);
  }
}

TEST(DecodeGpu, ArgumentErrorsNameTheArgument) {
  fmha::DecodeParams p;
  p.batch = 1, p.heads_q = 4, p.heads_kv = 3, p.head_dim = 128, p.capacity = 16, p.slots = 1, p.sm_count = 4;
  fmha::DecodePlan plan;
  fmha::Status s = fmha::decode_plan(p, &plan);
  EXPECT_EQ(s.code(), fmha::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("heads_q % heads_kv"), std::string::npos) << s.message();
}

}  // namespace
