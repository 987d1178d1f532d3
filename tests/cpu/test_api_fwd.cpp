// CPU tests of the forward API: argument validation (every message names the argument with expected versus
// actual value), schedule heuristics, kernel names, the manifest listing and the C entry point. No GPU needed.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "api/registry.h"
#include "fmha/c_api.h"
#include "fmha/fwd.h"
#include "test_util.h"
#include "fmha/version.h"
#include "kernels/fwd_tiles.h"

namespace {

alignas(16) char g_buf[64];

fmha::FwdParams valid() { return fmha::testutil::dense_fwd_params(g_buf, 2, 8, 2, 128, 4096); }

void expect_invalid(const fmha::FwdParams& p, const std::string& fragment,
                    fmha::StatusCode code = fmha::StatusCode::kInvalidArgument) {
  fmha::Status s = fmha::fwd_validate(p);
  EXPECT_EQ(s.code(), code) << s.message();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "message: " << s.message() << "\nwanted: " << fragment;
}

TEST(ApiFwd, ValidParamsPass) { EXPECT_TRUE(fmha::fwd_validate(valid()).is_ok()) << fmha::fwd_validate(valid()).message(); }

TEST(ApiFwd, ContiguousStrides) {
  fmha::FwdParams p = valid();
  EXPECT_EQ(p.q_row_stride, 8 * 128);
  EXPECT_EQ(p.k_row_stride, 2 * 128);
  EXPECT_EQ(p.q_head_stride, 128);
  EXPECT_EQ(p.q_batch_stride, int64_t(4096) * 8 * 128);
  EXPECT_EQ(p.k_batch_stride, int64_t(4096) * 2 * 128);
  p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int*>(g_buf);
  fmha::set_contiguous_strides(p);
  EXPECT_EQ(p.q_batch_stride, 0);
}

TEST(ApiFwd, MessagesNameArgumentExpectedAndActual) {
  fmha::FwdParams p = valid();
  p.dtype = fmha::DType::kFP8E4M3;
  expect_invalid(p, "dtype: expected fp16 or bf16, got e4m3", fmha::StatusCode::kNotSupported);
  p = valid(), p.batch = 0;
  expect_invalid(p, "batch: expected ≥ 1, got 0");
  p = valid(), p.heads_q = 9, p.heads_kv = 6;
  expect_invalid(p, "heads_q % heads_kv: expected 0, got 3 (heads_q=9, heads_kv=6)");
  p = valid(), p.heads_kv = 0;
  expect_invalid(p, "heads_kv: expected ≥ 1, got 0");
  p = valid(), p.head_dim = 12;
  expect_invalid(p, "head_dim: expected a positive multiple of 8, got 12");
  p = valid(), p.head_dim = 136;
  fmha::set_contiguous_strides(p);
  expect_invalid(p, "head_dim: expected ≤ 128, got 136", fmha::StatusCode::kNotSupported);
  p = valid(), p.seqlen_k = -1;
  expect_invalid(p, "seqlen_k: expected ≥ 0, got -1");
  p = valid(), p.cu_seqlens_q = reinterpret_cast<const int*>(g_buf);
  expect_invalid(p, "cu_seqlens_k: expected a device pointer (cu_seqlens_q is set), got null");
  p = valid(), p.q = nullptr;
  expect_invalid(p, "q: expected a device pointer, got null");
  p = valid(), p.v = g_buf + 4;
  expect_invalid(p, "v: expected a 16-byte aligned address, got an address ending in 0x4");
  p = valid(), p.k_row_stride = 260;
  expect_invalid(p, "k_row_stride: expected a positive multiple of 8 elements below 2^39, got 260");
  p = valid(), p.q_batch_stride = -8;
  expect_invalid(p, "q_batch_stride: expected a positive multiple of 8 elements below 2^39, got -8");
  p = valid(), p.k_batch_stride = int64_t(1) << 45;  // TMA strides must stay below 2^40 bytes
  expect_invalid(p, "k_batch_stride: expected a positive multiple of 8 elements below 2^39, got 35184372088832");
  p = valid(), p.v_head_stride = 0;  // heads_kv = 2: a zero stride would alias them
  expect_invalid(p, "v_head_stride: expected a positive multiple of 8 elements below 2^39, got 0");
  p = valid(), p.heads_q = p.heads_kv = 1;
  fmha::set_contiguous_strides(p);
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = 0;  // one head: the stride is unused
  EXPECT_TRUE(fmha::fwd_validate(p).is_ok()) << fmha::fwd_validate(p).message();
  p = valid(), p.lse = reinterpret_cast<float*>(g_buf + 2);
  expect_invalid(p, "lse: expected a 4-byte aligned address or null, got an address ending in 0x2");
  p = valid(), p.softmax_scale = -1.f;
  expect_invalid(p, "softmax_scale: expected a finite value ≥ 0");
  p = valid(), p.sm_count = -2;
  expect_invalid(p, "sm_count: expected ≥ 0 (0 = all SMs), got -2");
  p = valid(), p.scheduler = static_cast<fmha::TileScheduler>(7);
  expect_invalid(p, "scheduler: expected auto, individual or persistent, got 7");
  p = valid(), p.pingpong = static_cast<fmha::Toggle>(-1);
  expect_invalid(p, "pingpong: expected auto, off or on, got -1");
  p = valid(), p.batch = 70000, p.heads_q = 70000, p.heads_kv = 1;
  fmha::set_contiguous_strides(p);
  expect_invalid(p, "batch × heads_q × ceil(seqlen_q / 128): expected ≤ 2^30 work tiles");
  p = valid(), p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int*>(g_buf), p.total_q = -1;
  expect_invalid(p, "total_q: expected in [0, 2147482623], got -1");
  p = valid(), p.seqlen_q = 2147483000;
  expect_invalid(p, "seqlen_q: expected ≤ 2147482623, got 2147483000");
}

TEST(ApiFwd, OutputLayoutMustNotOverlap) {
  fmha::FwdParams p = valid();
  p.o_batch_stride = 0;  // both entries would write one region
  expect_invalid(p, "o_batch_stride: expected a positive multiple of 8 elements below 2^39, got 0");
  p.o_batch_stride = 8;  // entries shifted by 8 elements overlap
  expect_invalid(p, "o_batch_stride: expected ≥ 128 (O's head_dim × extent 128), so that no two elements of O overlap, got 8");
  p = valid(), p.o_row_stride = p.o_head_stride = 128;  // rows land on the next head
  expect_invalid(p, "o_head_stride: expected ≥ 524288 (O's o_row_stride × extent 4096)");
  p = valid(), p.o_head_stride = 64;  // heads overlap within a row
  expect_invalid(p, "o_head_stride: expected ≥ 128 (O's head_dim × extent 128)");
  // BHSD (heads outside rows) and padded rows are fine.
  p = valid();
  p.o_row_stride = 128, p.o_head_stride = int64_t(4096) * 128, p.o_batch_stride = int64_t(8) * 4096 * 128;
  EXPECT_TRUE(fmha::fwd_validate(p).is_ok()) << fmha::fwd_validate(p).message();
  p = valid();
  p.o_row_stride += 64, p.o_batch_stride = int64_t(4096) * p.o_row_stride;
  EXPECT_TRUE(fmha::fwd_validate(p).is_ok()) << fmha::fwd_validate(p).message();
}

TEST(ApiFwd, TensorsWithoutRowsAreValid) {
  // Contiguous strides of an empty tensor are 0 in the batch mode; such problems are legal (nothing to do, or
  // every row sees no key).
  for (auto [sq, sk] : {std::pair<int, int>{0, 64}, {64, 0}, {0, 0}}) {
    fmha::FwdParams p = valid();
    p.seqlen_q = sq, p.seqlen_k = sk;
    fmha::set_contiguous_strides(p);
    EXPECT_TRUE(fmha::fwd_validate(p).is_ok()) << sq << "x" << sk << ": " << fmha::fwd_validate(p).message();
  }
}

TEST(ApiFwd, ScheduleHeuristics) {
  fmha::FwdParams p = valid();
  p.mask = fmha::MaskType::kCausal;
  fmha::FwdParams r = fmha::fwd_resolve_schedule(p);
  EXPECT_EQ(r.scheduler, fmha::TileScheduler::kPersistent);  // dense causal up to 4096 keys
  EXPECT_EQ(r.pingpong, fmha::Toggle::kOn);                  // head-dim tile 128, causal
  p.seqlen_k = 4097;
  r = fmha::fwd_resolve_schedule(p);
  EXPECT_EQ(r.scheduler, fmha::TileScheduler::kIndividual);  // long causal rows
  EXPECT_EQ(r.pingpong, fmha::Toggle::kOn);
  p.seqlen_k = 4096;
  p.mask = fmha::MaskType::kNone;
  r = fmha::fwd_resolve_schedule(p);
  EXPECT_EQ(r.scheduler, fmha::TileScheduler::kPersistent);  // dense non-causal: persistent at every length
  EXPECT_EQ(r.pingpong, fmha::Toggle::kOff);                 // and no ping-pong
  p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int*>(g_buf);
  EXPECT_EQ(fmha::fwd_resolve_schedule(p).scheduler, fmha::TileScheduler::kIndividual);  // varlen, long rows
  p.seqlen_k = 2048;
  EXPECT_EQ(fmha::fwd_resolve_schedule(p).scheduler, fmha::TileScheduler::kPersistent);  // varlen, short rows
  p.mask = fmha::MaskType::kCausal, p.seqlen_k = 2049;
  EXPECT_EQ(fmha::fwd_resolve_schedule(p).scheduler, fmha::TileScheduler::kIndividual);  // varlen causal: 2048 limit
  p.mask = fmha::MaskType::kNone, p.seqlen_k = 4096;
  p.cu_seqlens_q = p.cu_seqlens_k = nullptr;
  p.mask = fmha::MaskType::kCausal, p.seqlen_k = 2048, p.head_dim = 64;
  r = fmha::fwd_resolve_schedule(p);
  EXPECT_EQ(r.scheduler, fmha::TileScheduler::kPersistent);  // short causal rows
  EXPECT_EQ(r.pingpong, fmha::Toggle::kOff);                 // head-dim tile 64
  p.scheduler = fmha::TileScheduler::kIndividual, p.pingpong = fmha::Toggle::kOn;  // explicit choices are kept
  r = fmha::fwd_resolve_schedule(p);
  EXPECT_EQ(r.scheduler, fmha::TileScheduler::kIndividual);
  EXPECT_EQ(r.pingpong, fmha::Toggle::kOn);
}

TEST(ApiFwd, KernelNames) {
  fmha::FwdParams p = valid();
  p.mask = fmha::MaskType::kCausal, p.causal_align = fmha::CausalAlign::kQEnd;
  EXPECT_EQ(fmha::fwd_kernel_name(p), "fwd bf16 d128 tma ws 128x128 causal-qend persistent pingpong");
  p.head_dim = 40, p.seqlen_k = 100, p.dtype = fmha::DType::kFP16, p.mask = fmha::MaskType::kNone;
  fmha::set_contiguous_strides(p);
  // Short non-causal rows at head-dim tile 64: two consumer warpgroups; past the limit three.
  EXPECT_EQ(fmha::fwd_kernel_name(p), std::string("fwd fp16 d64 tma ws ") +
                                          (fmha::tiles::kFwdShortNonCausalMaxKeys >= 100 ? "128" : "192") +
                                          "x128 none persistent");
  p.seqlen_k = fmha::tiles::kFwdShortNonCausalMaxKeys + 1;
  fmha::set_contiguous_strides(p);
  EXPECT_EQ(fmha::fwd_kernel_name(p), "fwd fp16 d64 tma ws 192x128 none persistent");
  p.seqlen_k = 100;
  fmha::set_contiguous_strides(p);
  p.mask = fmha::MaskType::kCausal;  // short causal rows at head-dim tile 64: two consumer warpgroups
  EXPECT_EQ(fmha::fwd_kernel_name(p), "fwd fp16 d64 tma ws 128x128 causal-qend persistent");
  // Past the short causal limit: 192-row tiles; dense causal rows over 4096 keys run one CTA per tile.
  p.seqlen_k = fmha::tiles::kFwdShortCausalMaxKeys + 1;
  fmha::set_contiguous_strides(p);
  EXPECT_EQ(fmha::fwd_kernel_name(p), std::string("fwd fp16 d64 tma ws 192x128 causal-qend ") +
                                          (p.seqlen_k > 4096 ? "individual" : "persistent"));
  p.mask = fmha::MaskType::kNone;
  p.heads_kv = 3;
  EXPECT_EQ(fmha::fwd_kernel_name(p), "");
}

TEST(ApiFwd, RowSumsOnTensorCoresByTileAndMask) {
  // tiles::fwd_mma_row_sum decides both the kernel's row-sum path and the LSE model of the GPU tests: the 192-row
  // (three-warpgroup) kernels sum on the tensor cores, under both masks; the 128-row kernels add the fp32 P.
  namespace t = fmha::tiles;
  EXPECT_TRUE(t::fwd_mma_row_sum(192, false));
  EXPECT_TRUE(t::fwd_mma_row_sum(192, true));
  EXPECT_FALSE(t::fwd_mma_row_sum(128, false));
  EXPECT_FALSE(t::fwd_mma_row_sum(128, true));
  // Which problems get 192-row tiles: non-causal past the short limit at head-dim tiles up to 64, never at 128.
  const int past_short = t::kFwdShortNonCausalMaxKeys + 1;
  EXPECT_TRUE(t::fwd_mma_row_sum(t::fwd_rows_per_tile(64, false, past_short), false));
  EXPECT_TRUE(t::fwd_mma_row_sum(t::fwd_rows_per_tile(40, false, past_short), false));  // head-dim tile 64
  EXPECT_FALSE(t::fwd_mma_row_sum(t::fwd_rows_per_tile(64, false, t::kFwdShortNonCausalMaxKeys), false));
  EXPECT_FALSE(t::fwd_mma_row_sum(t::fwd_rows_per_tile(128, false, 16384), false));
  // Causal past the short causal limit at head-dim tiles up to 64: 192-row tiles too; at or below it 128-row ones.
  EXPECT_TRUE(t::fwd_mma_row_sum(t::fwd_rows_per_tile(64, true, t::kFwdShortCausalMaxKeys + 1), true));
  EXPECT_FALSE(t::fwd_mma_row_sum(t::fwd_rows_per_tile(64, true, t::kFwdShortCausalMaxKeys), true));
}

TEST(ApiFwd, ManifestListsEveryForwardUnit) {
  auto v = fmha::fwd_kernel_variants();
  ASSERT_EQ(v.size(), 6u);
  for (const char* want : {"fwd fp16 d32", "fwd fp16 d64", "fwd fp16 d128", "fwd bf16 d32", "fwd bf16 d64", "fwd bf16 d128"}) {
    bool found = false;
    for (const auto& s : v) found = found || s.rfind(want, 0) == 0;
    EXPECT_TRUE(found) << want;
  }
}

TEST(ApiFwd, LaunchWithoutGpuFailsCleanly) {
  fmha::FwdParams p = valid();
  p.heads_kv = 3;  // invalid: must be rejected before any CUDA call, GPU or not
  fmha::Status s = fmha::fwd(p);
  EXPECT_EQ(s.code(), fmha::StatusCode::kInvalidArgument);
  EXPECT_FALSE(s.message().empty());
  // A valid problem on host buffers: refused by device (none, or not Hopper) or by pointer (a Hopper GPU).
  fmha::testutil::expect_host_buffers_refused(fmha::fwd(valid()));
}

TEST(ApiFwd, VersionMatchesTheHeader) {
  const std::string header = std::to_string(FMHA_VERSION_MAJOR) + "." + std::to_string(FMHA_VERSION_MINOR) + "." +
                             std::to_string(FMHA_VERSION_PATCH);
  EXPECT_EQ(fmha::version(), header);
  EXPECT_STREQ(fmha_version(), fmha::version());
  EXPECT_EQ(fmha::version_number(), FMHA_VERSION);
  EXPECT_EQ(FMHA_VERSION, FMHA_VERSION_MAJOR * 10000 + FMHA_VERSION_MINOR * 100 + FMHA_VERSION_PATCH);
}

TEST(ApiFwd, CEntryPointReportsErrors) {
  char err[256] = {0};
  int rc = fmha_fwd_contiguous(5, 1, 1, 1, 64, 16, 16, nullptr, nullptr, 0, 0, g_buf, g_buf, g_buf, g_buf, nullptr, 0, 0,
                               0.f, 0, 0, nullptr, err, sizeof err);
  EXPECT_EQ(rc, int(fmha::StatusCode::kInvalidArgument));
  EXPECT_STREQ(err, "dtype: expected 0 (fp16) or 1 (bf16), got 5");
  rc = fmha_fwd_contiguous(1, 1, 4, 3, 64, 16, 16, nullptr, nullptr, 0, 0, g_buf, g_buf, g_buf, g_buf, nullptr, 0, 0,
                           0.f, 0, 0, nullptr, err, sizeof err);
  EXPECT_EQ(rc, int(fmha::StatusCode::kInvalidArgument));
  EXPECT_NE(std::string(err).find("heads_q % heads_kv"), std::string::npos) << err;
  rc = fmha_fwd_contiguous(1, 1, 1, 1, 64, 16, 16, nullptr, nullptr, 0, 0, g_buf, g_buf, g_buf, g_buf, nullptr, 0, 0,
                           0.f, 9, 0, nullptr, err, sizeof err);
  EXPECT_STREQ(err, "scheduler: expected 0 (auto), 1 (individual) or 2 (persistent), got 9");
}

}  // namespace
