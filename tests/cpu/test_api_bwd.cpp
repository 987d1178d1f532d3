// The backward API without a GPU (include/fmha/bwd.h): argument errors name the argument with expected and actual
// values, the supported head dims, the workspace size's parts and alignment, and bwd() refusing a short workspace,
// the algorithm kAuto resolves to and, on this machine, a launch without a Hopper GPU.
#include <gtest/gtest.h>

#include <string>

#include <cuda_runtime_api.h>

#include <random>
#include <vector>

#include "api/bwd_workspace.h"
#include "api/registry.h"
#include "fmha/bwd.h"
#include "test_util.h"

namespace {

alignas(256) char buf[256];

/// A valid dense problem on placeholder (aligned, never dereferenced) pointers.
fmha::BwdParams base() {
  fmha::BwdParams p;
  p.batch = 2, p.heads_q = 8, p.heads_kv = 2, p.head_dim = 128, p.seqlen_q = 300, p.seqlen_k = 500;
  p.q = p.k = p.v = p.o = p.d_o = buf;
  p.dq = p.dk = p.dv = buf;
  p.lse = reinterpret_cast<const float*>(buf);
  fmha::set_bwd_contiguous_strides(p);
  return p;
}

void expect_status(const fmha::BwdParams& p, fmha::StatusCode code, const std::string& arg) {
  const fmha::Status s = fmha::bwd_validate(p);
  EXPECT_EQ(s.code(), code) << arg << ": " << s.message();
  EXPECT_EQ(s.message().rfind(arg + ":", 0), 0u) << "expected the message to start with '" << arg << ":', got '"
                                                 << s.message() << "'";
}
void expect_error(const fmha::BwdParams& p, const std::string& arg) {
  expect_status(p, fmha::StatusCode::kInvalidArgument, arg);
}

TEST(ApiBwd, ValidProblems) {
  EXPECT_TRUE(fmha::bwd_validate(base()).is_ok()) << fmha::bwd_validate(base()).message();
  auto p = base();
  p.head_dim = 64;
  fmha::set_bwd_contiguous_strides(p);
  EXPECT_TRUE(fmha::bwd_validate(p).is_ok());
  p = base(), p.head_dim = 192, p.head_dim_v = 128, p.heads_kv = 8;  // MLA prefill
  fmha::set_bwd_contiguous_strides(p);
  EXPECT_TRUE(fmha::bwd_validate(p).is_ok()) << fmha::bwd_validate(p).message();
  p = base(), p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int*>(buf), p.total_q = 900, p.total_k = 1000;
  p.mask = fmha::MaskType::kCausal, p.causal_align = fmha::CausalAlign::kQEnd;
  fmha::set_bwd_contiguous_strides(p);
  EXPECT_TRUE(fmha::bwd_validate(p).is_ok()) << fmha::bwd_validate(p).message();
  p = base(), p.seqlen_q = 0, p.seqlen_k = 0;  // empty problems are valid
  EXPECT_TRUE(fmha::bwd_validate(p).is_ok());
}

TEST(ApiBwd, ArgumentErrorsNameTheArgument) {
  auto p = base();
  p.heads_kv = 3;
  expect_error(p, "heads_q % heads_kv");
  p = base(), p.head_dim = 100;
  expect_error(p, "head_dim");
  p = base(), p.head_dim_v = 12;
  expect_error(p, "head_dim_v");
  p = base(), p.seqlen_q = -1;
  expect_error(p, "seqlen_q");
  p = base(), p.cu_seqlens_q = reinterpret_cast<const int*>(buf);
  expect_error(p, "cu_seqlens_k");
  p = base(), p.softmax_scale = -1.f;
  expect_error(p, "softmax_scale");
  p = base(), p.lse = nullptr;
  expect_error(p, "lse");
  p = base(), p.lse = reinterpret_cast<const float*>(buf + 2);
  expect_error(p, "lse");
  p = base(), p.d_o = nullptr;
  expect_error(p, "do");
  p = base(), p.dk = buf + 8;
  expect_error(p, "dk");
  p = base(), p.dv_row_stride = 100;
  expect_error(p, "dv_row_stride");
  p = base(), p.dq_head_stride = 64;  // heads 64 elements apart, each 128 wide: dQ's elements would overlap
  expect_error(p, "dq_head_stride");
  p = base(), p.dk_batch_stride = 8;
  expect_error(p, "dk_batch_stride");
  p = base(), p.sm_count = -2;
  expect_error(p, "sm_count");
  p = base(), p.algorithm = static_cast<fmha::BwdAlgorithm>(7);
  expect_error(p, "algorithm");
  p = base(), p.batch = 1, p.heads_q = 1 << 16, p.heads_kv = 1, p.seqlen_q = 1 << 21;  // 2^31 row blocks per key block
  fmha::set_bwd_contiguous_strides(p);
  expect_error(p, "heads_q / heads_kv × ceil(seqlen_q / 64)");
}

TEST(ApiBwd, UnsupportedShapesAreNotSupported) {
  auto p = base();
  p.dtype = fmha::DType::kFP32;
  EXPECT_EQ(fmha::bwd_validate(p).code(), fmha::StatusCode::kNotSupported);
  p = base(), p.head_dim = 256;
  fmha::set_bwd_contiguous_strides(p);
  expect_status(p, fmha::StatusCode::kNotSupported, "head_dim");
  p = base(), p.head_dim = 64, p.head_dim_v = 128;
  fmha::set_bwd_contiguous_strides(p);
  expect_status(p, fmha::StatusCode::kNotSupported, "head_dim_v");
  p = base(), p.head_dim = 192;  // 192 needs head_dim_v 128
  fmha::set_bwd_contiguous_strides(p);
  expect_status(p, fmha::StatusCode::kNotSupported, "head_dim");
  p = base(), p.head_dim = 192, p.head_dim_v = 128, p.algorithm = fmha::BwdAlgorithm::kOnePass;  // two passes only
  fmha::set_bwd_contiguous_strides(p);
  expect_status(p, fmha::StatusCode::kNotSupported, "algorithm");
  p.algorithm = fmha::BwdAlgorithm::kTwoPass;
  EXPECT_TRUE(fmha::bwd_validate(p).is_ok()) << fmha::bwd_validate(p).message();
}

TEST(ApiBwd, WorkspaceSize) {
  auto p = base();
  p.algorithm = fmha::BwdAlgorithm::kOnePass;  // dense: 2 entries × ceil(300 / 64) · 64 = 640 rows (a multiple of 128), 8 heads, head dim 128
  const size_t rows = 2 * 320, heads = 8;
  const size_t one_pass = 2 * 4 * heads * rows + 4 * heads * rows * 128;
  EXPECT_EQ(fmha::bwd_workspace_size(p), one_pass);
  EXPECT_EQ(fmha::bwd_workspace_size(p) % fmha::kWorkspaceAlignment, 0u);
  p.deterministic = true, p.algorithm = fmha::BwdAlgorithm::kOnePass;
  EXPECT_EQ(fmha::bwd_workspace_size(p), one_pass + 512);  // 4 · 8 · 640 / 64 = 320 bytes, padded to 512
  p.algorithm = fmha::BwdAlgorithm::kTwoPass;  // no dQ accumulator (nor counters)
  EXPECT_EQ(fmha::bwd_workspace_size(p), 2 * 4 * heads * rows);
  p.algorithm = fmha::BwdAlgorithm::kAuto;  // deterministic: two passes
  EXPECT_EQ(fmha::bwd_workspace_size(p), 2 * 4 * heads * rows);
  p.deterministic = false, p.mask = fmha::MaskType::kCausal;  // causal: two passes too
  EXPECT_EQ(fmha::bwd_workspace_size(p), 2 * 4 * heads * rows);
  p = base(), p.algorithm = fmha::BwdAlgorithm::kOnePass, p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int*>(buf), p.total_q = 900, p.total_k = 1000;
  // varlen: 900 + 64 · 2 = 1028 rows, rounded up to 1152
  EXPECT_EQ(fmha::bwd_workspace_size(p), 2 * 4 * heads * 1152 + 4 * heads * 1152 * 128);
  p = base(), p.seqlen_q = 0;
  EXPECT_EQ(fmha::bwd_workspace_size(p), 0u);
  p = base(), p.head_dim = 192, p.head_dim_v = 128, p.mask = fmha::MaskType::kCausal;  // two passes: no accumulator
  EXPECT_EQ(fmha::bwd_workspace_size(p), 2 * 4 * heads * rows);
}

/// The main kernel's 32-row steps at 192 / 128: heads_q / heads_kv × ceil(seqlen_q / 32) ≤ 2^30 (64-row steps
/// would take this problem).
TEST(ApiBwd, StepBoundCountsThirtyTwoRowStepsAtHeadDim192) {
  auto p = base();
  p.batch = 1, p.heads_q = 1 << 16, p.heads_kv = 1, p.seqlen_q = 1 << 20, p.seqlen_k = 128;
  p.head_dim = 192, p.head_dim_v = 128;
  fmha::set_bwd_contiguous_strides(p);
  expect_error(p, "heads_q / heads_kv × ceil(seqlen_q / 32)");
  p.head_dim = 128, p.head_dim_v = 0;  // 2^30 steps of 64 rows: at the bound
  fmha::set_bwd_contiguous_strides(p);
  EXPECT_NE(fmha::bwd_validate(p).message().rfind("heads_q / heads_kv", 0), 0u) << fmha::bwd_validate(p).message();
}

TEST(ApiBwd, RunChecksTheWorkspaceThenTheDevice) {
  const auto p = base();
  const fmha::Status small = fmha::bwd(p, fmha::Workspace{buf, 16});
  EXPECT_EQ(small.code(), fmha::StatusCode::kInvalidArgument);
  EXPECT_EQ(small.message().rfind("workspace:", 0), 0u) << small.message();
  alignas(256) static char ws[1 << 20];
  fmha::BwdParams q = p;
  q.seqlen_q = 100, q.batch = 1;  // a workspace that fits the static buffer
  fmha::set_bwd_contiguous_strides(q);
  ASSERT_LE(fmha::bwd_workspace_size(q), sizeof(ws));
  // Either algorithm on host buffers: without kernels kNotBuilt; without a Hopper GPU "not supported" naming the
  // device; with one the host pointer is refused before any launch.
  for (fmha::BwdAlgorithm algo : {fmha::BwdAlgorithm::kOnePass, fmha::BwdAlgorithm::kTwoPass}) {
    fmha::BwdParams r = q;
    r.algorithm = algo;
    SCOPED_TRACE(algo == fmha::BwdAlgorithm::kTwoPass ? "two-pass" : "one-pass");
    fmha::testutil::expect_host_buffers_refused(fmha::bwd(r, fmha::Workspace{ws, sizeof(ws)}));
  }
}

/// What kAuto (the default) runs: two passes for every mask and option, one pass past the two-pass grid bound
/// (unless the head dims have two passes only); an explicit choice is kept.
TEST(ApiBwd, AutoResolvesFromTheOptions) {
  auto p = base();
  EXPECT_EQ(p.algorithm, fmha::BwdAlgorithm::kAuto);
  EXPECT_EQ(fmha::bwd_resolve_algorithm(p), fmha::BwdAlgorithm::kTwoPass);  // no mask
  p.mask = fmha::MaskType::kResidual;
  EXPECT_EQ(fmha::bwd_resolve_algorithm(p), fmha::BwdAlgorithm::kTwoPass);
  p.mask = fmha::MaskType::kCausal;
  EXPECT_EQ(fmha::bwd_resolve_algorithm(p), fmha::BwdAlgorithm::kTwoPass);
  p.deterministic = true;
  EXPECT_EQ(fmha::bwd_resolve_algorithm(p), fmha::BwdAlgorithm::kTwoPass);
  p.algorithm = fmha::BwdAlgorithm::kOnePass;
  EXPECT_EQ(fmha::bwd_resolve_algorithm(p), fmha::BwdAlgorithm::kOnePass);
  p.algorithm = fmha::BwdAlgorithm::kAuto;
  p.head_dim = 192, p.head_dim_v = 128;  // MLA prefill: two passes only, deterministic or not, any mask
  EXPECT_EQ(fmha::bwd_resolve_algorithm(p), fmha::BwdAlgorithm::kTwoPass);
  p.deterministic = false;
  EXPECT_EQ(fmha::bwd_resolve_algorithm(p), fmha::BwdAlgorithm::kTwoPass);
  p.batch = 1 << 10, p.heads_q = p.heads_kv = 1 << 10, p.seqlen_q = 128 * 1024 + 1;  // past 2^30 row blocks
  EXPECT_EQ(fmha::bwd_resolve_algorithm(p), fmha::BwdAlgorithm::kTwoPass);  // 192 / 128: two passes, so invalid
  fmha::set_bwd_contiguous_strides(p);
  EXPECT_EQ(fmha::bwd_validate(p).message().rfind("batch × heads_q × ceil(seqlen_q / 128)", 0), 0u)
      << fmha::bwd_validate(p).message();
  p.head_dim = 128, p.head_dim_v = 0;
  EXPECT_EQ(fmha::bwd_resolve_algorithm(p), fmha::BwdAlgorithm::kOnePass);
  EXPECT_NE(fmha::bwd_validate(p).message().rfind("batch × heads_q", 0), 0u);
}

/// The two-pass dQ kernel's grid bound: batch × heads_q × ceil(seqlen_q / 128) row blocks at most 2^30 (one pass
/// has no such grid and takes the same problem).
TEST(ApiBwd, TwoPassBoundsItsRowBlockGrid) {
  auto p = base();
  p.batch = 1 << 10, p.heads_q = p.heads_kv = 1 << 10, p.seqlen_q = 128 * 1024 + 1;  // 2^20 · 1025 row blocks
  fmha::set_bwd_contiguous_strides(p);
  p.algorithm = fmha::BwdAlgorithm::kTwoPass;
  const fmha::Status s = fmha::bwd_validate(p);
  EXPECT_EQ(s.code(), fmha::StatusCode::kInvalidArgument) << s.message();
  EXPECT_EQ(s.message().rfind("batch × heads_q × ceil(seqlen_q / 128): expected ≤ 2^30 row blocks (two-pass)", 0), 0u)
      << s.message();
  p.seqlen_q = 128 * 1024;  // exactly 2^30 row blocks
  fmha::set_bwd_contiguous_strides(p);
  const fmha::Status ok = fmha::bwd_validate(p);
  EXPECT_NE(ok.message().rfind("batch × heads_q", 0), 0u) << ok.message();
}

TEST(ApiBwd, ManifestListsTheBackwardUnits) {
  for (int d : {64, 128})
    for (fmha::DType t : {fmha::DType::kFP16, fmha::DType::kBF16})
      EXPECT_NE(fmha::detail::find_kernel({fmha::detail::Op::kBwd, t, t, d, d}), nullptr) << "bwd d" << d;
}

/// Every entry's 64-row blocks (what the kernels read and write in the workspace's per-row arrays) lie inside the
/// layout's rows and never overlap another entry's, for dense and varlen batches, also with lengths outside the
/// varlen contract (clamped by bwd_entry).
TEST(ApiBwd, WorkspaceLayoutHoldsEveryEntrysBlocks) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const bool varlen = trial % 4 != 0, broken = trial % 8 == 7;  // broken: lengths past the contract
    const int batch = 1 + int(rng() % 70), max_len = int(rng() % 700);
    std::vector<int> cu(batch + 1, 0);
    for (int b = 0; b < batch; ++b) cu[b + 1] = cu[b] + (max_len ? int(rng() % (max_len + 1)) : 0);
    if (broken) cu[1 + rng() % batch] += 500;  // one entry longer than max_len, the later ones shifted
    fmha::BwdParams p;
    p.batch = batch, p.heads_q = 2, p.heads_kv = 1, p.head_dim = 64, p.seqlen_q = max_len, p.deterministic = true;
    p.algorithm = fmha::BwdAlgorithm::kOnePass;  // the layout with the accumulator and the counters
    int total = 0;
    if (varlen) {
      p.cu_seqlens_q = cu.data();
      total = broken ? cu[batch] / 2 : cu[batch] + int(rng() % 100);  // broken: cu[batch] past total_q
      p.total_q = total;
    }
    const fmha::detail::BwdWorkspaceLayout l = fmha::detail::bwd_workspace_layout(p);
    ASSERT_EQ(l.rows % 128, 0);
    int64_t prev_end = 0;
    for (int b = 0; b < batch; ++b) {
      const fmha::detail::BwdEntry e = fmha::detail::bwd_entry(varlen ? cu.data() : nullptr, b, max_len, total);
      ASSERT_GE(e.len, 0);
      ASSERT_LE(e.len, max_len);
      if (varlen) ASSERT_LE(int64_t(e.off) + e.len, total);
      const int64_t r0 = fmha::detail::bwd_workspace_row0(b, varlen, e.off, max_len);
      ASSERT_EQ(r0 % 64, 0) << "entry " << b;
      const int64_t end = r0 + (e.len + 63) / 64 * 64;  // the entry's blocks, with the padding rows
      ASSERT_LE(end, l.rows) << "trial " << trial << " entry " << b;
      if (e.len > 0 && !broken) ASSERT_GE(r0, prev_end) << "trial " << trial << " entry " << b << " overlaps";
      if (e.len > 0) prev_end = end;
    }
    // The order counters: one per 64-row block of each head.
    ASSERT_EQ(l.order - l.dq_acc, (4 * 2 * std::size_t(l.rows) * 64 + 255) / 256 * 256);
  }
}

}  // namespace
