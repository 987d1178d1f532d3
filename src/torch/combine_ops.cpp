// The merge of partial attention results (torch.ops.fmha.combine), registered beside ops.cpp's operators:
//   fmha::combine(Tensor out_parts, Tensor lse_parts, ScalarType? out_dtype=None) -> (Tensor, Tensor)
//     out_parts fp32 [n, *rows, d] and lse_parts fp32 [n, *rows] (contiguous, one CUDA device): n partial results
//     of the same rows (any leading shape `rows`, e.g. [b, s, h]), each normalised by its own softmax sum, and
//     their natural-log LSE. Returns out [*rows, d] (out_dtype: fp32 by default, or fp16 / bf16) and lse [*rows]
//     (fp32): LSE = ln Σ exp(LSE_s), O = Σ exp(LSE_s − LSE) · O_s (fmha::combine, include/fmha/combine.h). A part
//     with LSE_s = −inf contributes exactly 0 (its O_s is never read); a row with no non-empty part gets O = 0 and
//     LSE = −inf. No backward (the ring attention of python/fmha/distributed.py differentiates around it).
// Errors: ValueError naming the argument (dtype, shapes, head dim 1 … 512, contiguity, device; the Meta kernel checks
// the same); NotImplementedError without an sm_90 GPU; RuntimeError for a CUDA failure.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <string>

#include "fmha/combine.h"
#include "torch_status.h"

namespace {

using at::Tensor;

/// The checks of both kernels (the Meta one with symbolic sizes where torch.compile traces them): dtypes, ranks,
/// shapes, contiguity, device, the head dim (1 … 512), at least one part, parts × rows below 2^31 − 64.
void check_parts(const Tensor& out_parts, const Tensor& lse_parts, const std::optional<at::ScalarType>& out_dtype,
                 bool meta) {
  TORCH_CHECK_VALUE(out_parts.scalar_type() == at::kFloat && lse_parts.scalar_type() == at::kFloat,
                    "fmha.combine: out_parts.dtype, lse_parts.dtype: expected torch.float32, got ",
                    out_parts.scalar_type(), ", ", lse_parts.scalar_type());
  TORCH_CHECK_VALUE(out_parts.dim() >= 2 && lse_parts.dim() == out_parts.dim() - 1,
                    "fmha.combine: out_parts [n, *rows, d], lse_parts [n, *rows]: expected dims k + 1 and k (k >= 1), "
                    "got ", out_parts.dim(), " and ", lse_parts.dim());
  for (int64_t i = 0; i < lse_parts.dim(); ++i)
    TORCH_CHECK_VALUE(lse_parts.sym_size(i) == out_parts.sym_size(i), "fmha.combine: lse_parts.shape: expected ",
                      "out_parts.shape[:-1] = ", out_parts.sym_sizes().slice(0, out_parts.dim() - 1), ", got ",
                      lse_parts.sym_sizes());
  TORCH_CHECK_VALUE(out_parts.sym_size(0) >= 1, "fmha.combine: out_parts.shape[0] (parts): expected >= 1, got ",
                    out_parts.sym_size(0));
  const c10::SymInt d = out_parts.sym_size(-1);
  TORCH_CHECK_VALUE(d >= 1 && d <= 512, "fmha.combine: out_parts.shape[-1] (head dim): expected 1 ... 512, got ", d);
  TORCH_CHECK_VALUE(lse_parts.sym_numel() <= INT32_MAX - 64,
                    "fmha.combine: parts × rows (lse_parts.numel()): expected <= 2^31 - 65, got ", lse_parts.sym_numel());
  TORCH_CHECK_VALUE(out_parts.is_contiguous() && lse_parts.is_contiguous(),
                    "fmha.combine: out_parts, lse_parts: expected contiguous tensors");
  TORCH_CHECK_VALUE(lse_parts.device() == out_parts.device(), "fmha.combine: lse_parts.device: expected ",
                    out_parts.device(), ", got ", lse_parts.device());
  if (!meta)
    TORCH_CHECK_VALUE(out_parts.is_cuda(), "fmha.combine: out_parts.device: expected a CUDA device, got ",
                      out_parts.device());
  if (out_dtype)
    TORCH_CHECK_VALUE(*out_dtype == at::kFloat || *out_dtype == at::kHalf || *out_dtype == at::kBFloat16,
                      "fmha.combine: out_dtype: expected torch.float32, torch.float16 or torch.bfloat16, got ",
                      *out_dtype);
}

std::tuple<Tensor, Tensor> outputs(const Tensor& out_parts, const Tensor& lse_parts,
                                   const std::optional<at::ScalarType>& out_dtype) {
  auto rows = lse_parts.sym_sizes().slice(1);
  Tensor out = at::empty_symint(out_parts.sym_sizes().slice(1), out_parts.options().dtype(out_dtype.value_or(at::kFloat)));
  Tensor lse = at::empty_symint(rows, lse_parts.options());
  return {out, lse};
}

std::tuple<Tensor, Tensor> combine_cuda(const Tensor& out_parts, const Tensor& lse_parts,
                                        std::optional<at::ScalarType> out_dtype) {
  check_parts(out_parts, lse_parts, out_dtype, false);
  const c10::cuda::CUDAGuard guard(out_parts.device());
  auto [out, lse] = outputs(out_parts, lse_parts, out_dtype);
  const int64_t n = out_parts.size(0), d = out_parts.size(-1), rows = lse_parts.numel() / n;
  fmha::CombineParams p;
  p.splits = int(n), p.rows = int(rows), p.head_dim = int(d);
  p.o_parts = out_parts.data_ptr<float>(), p.lse_parts = lse_parts.data_ptr<float>();
  p.o = out.data_ptr(), p.lse = lse.data_ptr<float>();
  p.o_dtype = out.scalar_type() == at::kHalf     ? fmha::DType::kFP16
              : out.scalar_type() == at::kBFloat16 ? fmha::DType::kBF16
                                                   : fmha::DType::kFP32;
  fmha::torch_ops::raise_if_error(
      fmha::combine(p, c10::cuda::getCurrentCUDAStream(out_parts.device().index()).stream()), "fmha.combine: ");
  return {out, lse};
}

std::tuple<Tensor, Tensor> combine_meta(const Tensor& out_parts, const Tensor& lse_parts,
                                        std::optional<at::ScalarType> out_dtype) {
  check_parts(out_parts, lse_parts, out_dtype, true);
  return outputs(out_parts, lse_parts, out_dtype);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fmha, m) {
  m.def("combine(Tensor out_parts, Tensor lse_parts, ScalarType? out_dtype=None) -> (Tensor, Tensor)");
}
TORCH_LIBRARY_IMPL(fmha, CUDA, m) { m.impl("combine", &combine_cuda); }
TORCH_LIBRARY_IMPL(fmha, CPU, m) { m.impl("combine", &combine_cuda); }
TORCH_LIBRARY_IMPL(fmha, Meta, m) { m.impl("combine", &combine_meta); }
