// CPU tests of the host spine shared by every operation (src/api/host.h, src/api/registry.h), the workspace
// convention, the FwdParams fields for later kernels (head_dim_v, out_dtype) and the struct-based C entry point.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "api/c_params.h"
#include "api/host.h"
#include "api/registry.h"
#include "fmha/c_api.h"
#include "fmha/fwd.h"
#include "test_util.h"

namespace {

alignas(256) char g_buf[1024];

fmha::FwdParams valid() { return fmha::testutil::dense_fwd_params(g_buf, 2, 8, 2, 64, 512); }

TEST(ApiSpine, ArgumentErrorsHaveOneFormat) {
  const fmha::Status s = fmha::detail::invalid_arg("heads_q", "≥ 1", "0");
  EXPECT_EQ(s.code(), fmha::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "heads_q: expected ≥ 1, got 0");
  EXPECT_TRUE(fmha::detail::cuda_status(cudaSuccess, "x").is_ok());
  const fmha::Status e = fmha::detail::cuda_status(cudaErrorInvalidValue, "cudaMemcpy(x)");
  EXPECT_EQ(e.code(), fmha::StatusCode::kCudaError);
  EXPECT_EQ(e.message().rfind("cudaMemcpy(x): ", 0), 0u) << e.message();
}

TEST(ApiSpine, WorkspaceChecks) {
  using fmha::detail::check_workspace;
  EXPECT_TRUE(check_workspace({}, 0).is_ok());  // nothing needed: not looked at
  EXPECT_TRUE(check_workspace({g_buf + 3, 1}, 0).is_ok());
  EXPECT_TRUE(check_workspace({g_buf, 512}, 512).is_ok());
  fmha::Status s = check_workspace({}, 512);
  EXPECT_EQ(s.message(), "workspace: expected at least 512 bytes of device memory, got none");
  s = check_workspace({g_buf, 511}, 512);
  EXPECT_EQ(s.message(), "workspace: expected at least 512 bytes of device memory, got 511 bytes");
  s = check_workspace({g_buf + 16, 1000}, 512);
  EXPECT_EQ(s.code(), fmha::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "workspace: expected a 256-byte aligned address, got an address ending in 0x10");
  EXPECT_EQ(fmha::kWorkspaceAlignment, 256u);
}

TEST(ApiSpine, ForwardNeedsNoWorkspace) {
  fmha::FwdParams p = valid();
  EXPECT_EQ(fmha::fwd_workspace_size(p), 0u);
  p.mask = fmha::MaskType::kCausal, p.cu_seqlens_q = p.cu_seqlens_k = reinterpret_cast<const int*>(g_buf);
  EXPECT_EQ(fmha::fwd_workspace_size(p), 0u);
}

TEST(ApiSpine, HeadDimOfVAndOutputDtypeOnlyAsTheInputsForNow) {
  fmha::FwdParams p = valid();
  p.head_dim_v = 64;
  EXPECT_TRUE(fmha::fwd_validate(p).is_ok()) << fmha::fwd_validate(p).message();
  p.out_dtype = p.dtype;
  EXPECT_TRUE(fmha::fwd_validate(p).is_ok()) << fmha::fwd_validate(p).message();
  p.head_dim_v = 32;
  fmha::Status s = fmha::fwd_validate(p);
  EXPECT_EQ(s.code(), fmha::StatusCode::kNotSupported);
  EXPECT_EQ(s.message().rfind("head_dim_v: expected 0 or head_dim (64;", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("got 32"), std::string::npos) << s.message();
  p = valid(), p.out_dtype = fmha::DType::kFP16;  // input bf16
  s = fmha::fwd_validate(p);
  EXPECT_EQ(s.code(), fmha::StatusCode::kNotSupported);
  EXPECT_EQ(s.message().rfind("out_dtype: expected the input dtype (bf16;", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("got fp16"), std::string::npos) << s.message();
}

TEST(ApiSpine, RegistryIsKeyedByOpDtypesAndHeadDims) {
  using namespace fmha::detail;
  const auto& all = kernel_registry();
  ASSERT_EQ(all.size(), 16u);  // forward d 32, 64, 128, decode and backward d 64, 128, backward 192 / 128, each fp16 and bf16
  for (fmha::DType t : {fmha::DType::kFP16, fmha::DType::kBF16})
    for (int d : {32, 64, 128}) {
      const KernelEntry* e = find_kernel({Op::kFwd, t, t, d, d});
      ASSERT_NE(e, nullptr) << fmha::to_string(t) << " d" << d;
      EXPECT_TRUE(e->key == (KernelKey{Op::kFwd, t, t, d, d}));
      if (std::string(kernel_set()) != "none") EXPECT_NE(e->launch, nullptr);
    }
  for (fmha::DType t : {fmha::DType::kFP16, fmha::DType::kBF16})
    for (int d : {64, 128}) {
      const KernelEntry* e = find_kernel({Op::kDecode, t, t, d, d});
      ASSERT_NE(e, nullptr) << "decode " << fmha::to_string(t) << " d" << d;
      if (std::string(kernel_set()) != "none") EXPECT_NE(e->launch, nullptr);
    }
  EXPECT_EQ(find_kernel({Op::kDecode, fmha::DType::kBF16, fmha::DType::kBF16, 32, 32}), nullptr);
  EXPECT_STREQ(to_string(Op::kDecode), "decode");
  for (fmha::DType t : {fmha::DType::kFP16, fmha::DType::kBF16})
    for (int d : {64, 128}) {
      const KernelEntry* e = find_kernel({Op::kBwd, t, t, d, d});
      ASSERT_NE(e, nullptr) << "bwd " << fmha::to_string(t) << " d" << d;
      if (std::string(kernel_set()) != "none") EXPECT_NE(e->launch, nullptr);
    }
  for (fmha::DType t : {fmha::DType::kFP16, fmha::DType::kBF16}) {  // MLA prefill 192 / 128
    const KernelEntry* e = find_kernel({Op::kBwd, t, t, 192, 128});
    ASSERT_NE(e, nullptr) << "bwd " << fmha::to_string(t) << " d192 dv128";
    if (std::string(kernel_set()) != "none") EXPECT_NE(e->launch, nullptr);
  }
  EXPECT_EQ(find_kernel({Op::kBwd, fmha::DType::kBF16, fmha::DType::kBF16, 192, 192}), nullptr);
  EXPECT_STREQ(to_string(Op::kBwd), "bwd");
  // Keys that differ in one field find nothing.
  EXPECT_EQ(find_kernel({Op::kFwd, fmha::DType::kBF16, fmha::DType::kFP16, 64, 64}), nullptr);
  EXPECT_EQ(find_kernel({Op::kFwd, fmha::DType::kBF16, fmha::DType::kBF16, 64, 128}), nullptr);
  EXPECT_EQ(find_kernel({Op::kFwd, fmha::DType::kFP8E4M3, fmha::DType::kFP8E4M3, 64, 64}), nullptr);
  EXPECT_EQ(find_kernel({Op::kFwd, fmha::DType::kBF16, fmha::DType::kBF16, 96, 96}), nullptr);
  EXPECT_STREQ(to_string(Op::kFwd), "fwd");
}

TEST(CApi, ParamsInitSetsVersionAndTheCppDefaults) {
  fmha_fwd_params c;
  std::memset(&c, 0x7f, sizeof c);
  fmha_fwd_params_init(&c);
  const fmha::FwdParams d;
  EXPECT_EQ(c.struct_size, sizeof(fmha_fwd_params));
  EXPECT_EQ(c.version, uint32_t(FMHA_FWD_PARAMS_VERSION));
  EXPECT_EQ(c.dtype, 1);
  EXPECT_EQ(c.out_dtype, -1);
  EXPECT_EQ(c.batch, d.batch);
  EXPECT_EQ(c.head_dim, d.head_dim);
  EXPECT_EQ(c.head_dim_v, 0);
  EXPECT_EQ(c.q, nullptr);
  EXPECT_EQ(c.cu_seqlens_q, nullptr);
  EXPECT_EQ(c.o_batch_stride, 0);
  EXPECT_EQ(c.mask, 0);
  EXPECT_EQ(c.scheduler, 0);
  EXPECT_EQ(c.softmax_scale, 0.f);
}

void expect_same_strides(const fmha_fwd_params& c, const fmha::FwdParams& p) {
  EXPECT_EQ(c.q_row_stride, p.q_row_stride);
  EXPECT_EQ(c.q_head_stride, p.q_head_stride);
  EXPECT_EQ(c.q_batch_stride, p.q_batch_stride);
  EXPECT_EQ(c.k_row_stride, p.k_row_stride);
  EXPECT_EQ(c.k_head_stride, p.k_head_stride);
  EXPECT_EQ(c.k_batch_stride, p.k_batch_stride);
  EXPECT_EQ(c.v_row_stride, p.v_row_stride);
  EXPECT_EQ(c.v_head_stride, p.v_head_stride);
  EXPECT_EQ(c.v_batch_stride, p.v_batch_stride);
  EXPECT_EQ(c.o_row_stride, p.o_row_stride);
  EXPECT_EQ(c.o_head_stride, p.o_head_stride);
  EXPECT_EQ(c.o_batch_stride, p.o_batch_stride);
}

TEST(CApi, ContiguousStridesMatchTheCppOnes) {
  for (const bool varlen : {false, true})
    for (const int dv : {0, 64, 32}) {
      fmha_fwd_params c;
      fmha_fwd_params_init(&c);
      c.heads_q = 8, c.heads_kv = 2, c.head_dim = 64, c.head_dim_v = dv, c.seqlen_q = 300, c.seqlen_k = 500;
      c.cu_seqlens_q = varlen ? reinterpret_cast<const int32_t*>(g_buf) : nullptr;
      fmha_fwd_params_set_contiguous_strides(&c);
      fmha::FwdParams p;
      p.heads_q = 8, p.heads_kv = 2, p.head_dim = 64, p.head_dim_v = dv, p.seqlen_q = 300, p.seqlen_k = 500;
      p.cu_seqlens_q = c.cu_seqlens_q;
      fmha::set_contiguous_strides(p);
      expect_same_strides(c, p);
      const int64_t v = dv ? dv : 64;  // V and O follow head_dim_v, Q and K head_dim
      EXPECT_EQ(c.k_batch_stride, varlen ? 0 : int64_t(500) * 2 * 64);
      EXPECT_EQ(c.v_batch_stride, varlen ? 0 : int64_t(500) * 2 * v);
      EXPECT_EQ(c.o_row_stride, 8 * v);
      EXPECT_EQ(c.q_row_stride, 8 * 64);
    }
}

int call(const fmha_fwd_params& c, std::string* msg) {
  char err[512] = {0};
  const int rc = fmha_fwd(&c, nullptr, 0, nullptr, err, sizeof err);
  *msg = err;
  return rc;
}

TEST(CApi, EveryFieldReachesFwdParams) {
  // Distinct sentinels in every field: a swapped or dropped field shows as a mismatch.
  fmha_fwd_params c;
  fmha_fwd_params_init(&c);
  static char bufs[7][64];
  c.dtype = 0, c.out_dtype = 1, c.batch = 3, c.heads_q = 12, c.heads_kv = 4, c.head_dim = 96, c.head_dim_v = 88;
  c.seqlen_q = 501, c.seqlen_k = 702, c.total_q = 1503, c.total_k = 2106, c.sm_count = 77;
  c.cu_seqlens_q = reinterpret_cast<const int32_t*>(bufs[0]), c.cu_seqlens_k = reinterpret_cast<const int32_t*>(bufs[1]);
  c.q = bufs[2], c.k = bufs[3], c.v = bufs[4], c.o = bufs[5], c.lse = reinterpret_cast<float*>(bufs[6]);
  int64_t* strides[] = {&c.q_row_stride, &c.q_head_stride, &c.q_batch_stride, &c.k_row_stride, &c.k_head_stride,
                        &c.k_batch_stride, &c.v_row_stride, &c.v_head_stride, &c.v_batch_stride, &c.o_row_stride,
                        &c.o_head_stride, &c.o_batch_stride};
  for (int i = 0; i < 12; ++i) *strides[i] = 1000 + 8 * i;
  c.mask = 2, c.causal_align = 1, c.softmax_scale = 0.375f, c.scheduler = 2, c.pingpong = 1;
  fmha::FwdParams p;
  ASSERT_TRUE(fmha::detail::fwd_params_from_c(&c, &p).is_ok());
  EXPECT_EQ(p.dtype, fmha::DType::kFP16);
  ASSERT_TRUE(p.out_dtype.has_value());
  EXPECT_EQ(*p.out_dtype, fmha::DType::kBF16);
  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.heads_q, 12);
  EXPECT_EQ(p.heads_kv, 4);
  EXPECT_EQ(p.head_dim, 96);
  EXPECT_EQ(p.head_dim_v, 88);
  EXPECT_EQ(p.seqlen_q, 501);
  EXPECT_EQ(p.seqlen_k, 702);
  EXPECT_EQ(p.total_q, 1503);
  EXPECT_EQ(p.total_k, 2106);
  EXPECT_EQ(p.sm_count, 77);
  EXPECT_EQ(static_cast<const void*>(p.cu_seqlens_q), bufs[0]);
  EXPECT_EQ(static_cast<const void*>(p.cu_seqlens_k), bufs[1]);
  EXPECT_EQ(p.q, bufs[2]);
  EXPECT_EQ(p.k, bufs[3]);
  EXPECT_EQ(p.v, bufs[4]);
  EXPECT_EQ(p.o, bufs[5]);
  EXPECT_EQ(static_cast<void*>(p.lse), bufs[6]);
  const int64_t got[] = {p.q_row_stride, p.q_head_stride, p.q_batch_stride, p.k_row_stride, p.k_head_stride,
                         p.k_batch_stride, p.v_row_stride, p.v_head_stride, p.v_batch_stride, p.o_row_stride,
                         p.o_head_stride, p.o_batch_stride};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(got[i], 1000 + 8 * i) << "stride " << i;
  EXPECT_EQ(p.mask, fmha::MaskType::kCausal);
  EXPECT_EQ(p.causal_align, fmha::CausalAlign::kQEnd);
  EXPECT_EQ(p.softmax_scale, 0.375f);
  EXPECT_EQ(p.scheduler, fmha::TileScheduler::kPersistent);
  EXPECT_EQ(p.pingpong, fmha::Toggle::kOff);
  c.dtype = 1, c.out_dtype = -1, c.mask = 1, c.causal_align = 0, c.scheduler = 1, c.pingpong = 2;
  ASSERT_TRUE(fmha::detail::fwd_params_from_c(&c, &p).is_ok());
  EXPECT_EQ(p.dtype, fmha::DType::kBF16);
  EXPECT_FALSE(p.out_dtype.has_value());
  EXPECT_EQ(p.mask, fmha::MaskType::kResidual);
  EXPECT_EQ(p.causal_align, fmha::CausalAlign::kQBegin);
  EXPECT_EQ(p.scheduler, fmha::TileScheduler::kIndividual);
  EXPECT_EQ(p.pingpong, fmha::Toggle::kOn);
  fmha::FwdParams untouched;
  untouched.batch = 42;
  c.version = 7;
  EXPECT_FALSE(fmha::detail::fwd_params_from_c(&c, &untouched).is_ok());
  EXPECT_EQ(untouched.batch, 42) << "a refused struct must not be written";
}

TEST(CApi, FwdRefusesUnknownStructsAndCodes) {
  fmha_fwd_params c;
  fmha_fwd_params_init(&c);
  std::string m;
  EXPECT_EQ(fmha_fwd(nullptr, nullptr, 0, nullptr, nullptr, 0), int(fmha::StatusCode::kInvalidArgument));
  c.struct_size -= 8;
  EXPECT_EQ(call(c, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m.rfind("struct_size: expected " + std::to_string(sizeof(fmha_fwd_params)), 0), 0u) << m;
  fmha_fwd_params_init(&c);
  c.version = 2;
  EXPECT_EQ(call(c, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m, "version: expected 1, got 2");
  fmha_fwd_params_init(&c);
  c.out_dtype = 3;
  EXPECT_EQ(call(c, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m, "out_dtype: expected -1 (the input dtype), 0 (fp16) or 1 (bf16), got 3");
  fmha_fwd_params_init(&c);
  c.pingpong = -1;
  EXPECT_EQ(call(c, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m, "pingpong: expected 0 (auto), 1 (off) or 2 (on), got -1");
}

TEST(CApi, FwdPassesTheFieldsThrough) {
  // Fields reach fwd_validate: each bad value is reported by the C++ validation under its field name.
  fmha_fwd_params c;
  fmha_fwd_params_init(&c);
  c.batch = 2, c.heads_q = 8, c.heads_kv = 2, c.head_dim = 64, c.seqlen_q = c.seqlen_k = 512;
  c.q = c.k = c.v = g_buf;
  c.o = g_buf;
  fmha_fwd_params_set_contiguous_strides(&c);
  std::string m;
  fmha_fwd_params bad = c;
  bad.heads_kv = 3;
  EXPECT_EQ(call(bad, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m, "heads_q % heads_kv: expected 0, got 2 (heads_q=8, heads_kv=3)");
  bad = c, bad.head_dim_v = 32;
  EXPECT_EQ(call(bad, &m), int(fmha::StatusCode::kNotSupported));
  EXPECT_EQ(m.rfind("head_dim_v: ", 0), 0u) << m;
  bad = c, bad.out_dtype = 0;
  EXPECT_EQ(call(bad, &m), int(fmha::StatusCode::kNotSupported));
  EXPECT_EQ(m.rfind("out_dtype: ", 0), 0u) << m;
  bad = c, bad.k_row_stride = 4;
  EXPECT_EQ(call(bad, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m.rfind("k_row_stride: ", 0), 0u) << m;
  bad = c, bad.sm_count = -1;
  EXPECT_EQ(call(bad, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m.rfind("sm_count: ", 0), 0u) << m;
  // lse, cu_seqlens, the scale and the alignment code reach the validation too.
  bad = c, bad.lse = reinterpret_cast<float*>(g_buf + 2);
  EXPECT_EQ(call(bad, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m.rfind("lse: expected a 4-byte aligned address", 0), 0u) << m;
  bad = c, bad.cu_seqlens_q = reinterpret_cast<const int32_t*>(g_buf);
  EXPECT_EQ(call(bad, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m, "cu_seqlens_k: expected a device pointer (cu_seqlens_q is set), got null");
  bad = c, bad.softmax_scale = -1.f;
  EXPECT_EQ(call(bad, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m.rfind("softmax_scale: ", 0), 0u) << m;
  bad = c, bad.causal_align = 2;
  EXPECT_EQ(call(bad, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m, "causal_align: expected 0 (qbegin) or 1 (qend), got 2");
  bad = c, bad.reserved = 1;
  EXPECT_EQ(call(bad, &m), int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(m.rfind("reserved: expected 0", 0), 0u) << m;
  // The positional shim forwards the same fields.
  char err[256] = {0};
  int rc = fmha_fwd_contiguous(1, 2, 8, 2, 64, 512, 512, nullptr, nullptr, 0, 0, g_buf, g_buf, g_buf, g_buf,
                               reinterpret_cast<float*>(g_buf + 2), 0, 0, 0.f, 0, 0, nullptr, err, sizeof err);
  EXPECT_EQ(rc, int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(std::string(err).rfind("lse: expected a 4-byte aligned address", 0), 0u) << err;
  rc = fmha_fwd_contiguous(1, 2, 8, 2, 64, 512, 512, reinterpret_cast<const int*>(g_buf), nullptr, 0, 0, g_buf, g_buf,
                           g_buf, g_buf, nullptr, 0, 0, 0.f, 0, 0, nullptr, err, sizeof err);
  EXPECT_EQ(rc, int(fmha::StatusCode::kInvalidArgument));
  EXPECT_STREQ(err, "cu_seqlens_k: expected a device pointer (cu_seqlens_q is set), got null");
  rc = fmha_fwd_contiguous(1, 2, 8, 2, 64, 512, 512, nullptr, nullptr, 0, 0, g_buf, g_buf, g_buf, g_buf, nullptr, 0,
                           0, -2.f, 0, 0, nullptr, err, sizeof err);
  EXPECT_EQ(rc, int(fmha::StatusCode::kInvalidArgument));
  EXPECT_EQ(std::string(err).rfind("softmax_scale: ", 0), 0u) << err;
  // err: the message cut to err_len - 1 bytes and NUL-terminated.
  bad = c, bad.heads_kv = 3;
  char msg_small[8];
  std::memset(msg_small, 'x', sizeof msg_small);
  fmha_fwd(&bad, nullptr, 0, nullptr, msg_small, sizeof msg_small);
  EXPECT_STREQ(msg_small, "heads_q");
  EXPECT_EQ(fmha_fwd_workspace_size(&c), 0u);
  EXPECT_EQ(fmha_fwd_workspace_size(nullptr), 0u);
  // A valid problem on host memory: refused either way (no kernels built: not built; no GPU: not supported; a
  // GPU: a host pointer).
  rc = call(c, &m);
  if (std::string(fmha::detail::kernel_set()) == "none")
    EXPECT_EQ(rc, int(fmha::StatusCode::kNotBuilt)) << m;
  else
    EXPECT_TRUE(rc == int(fmha::StatusCode::kNotSupported) || rc == int(fmha::StatusCode::kInvalidArgument)) << m;
}

}  // namespace
