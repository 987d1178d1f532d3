// The public merge of partial attention results (include/fmha/combine.h): argument checks on the host, then the
// split-KV combine kernel shared with decode (api/combine.h, kernels/device/combine.cu).
#include "fmha/combine.h"

#include <cstdint>
#include <string>

#include "api/combine.h"
#include "api/host.h"

namespace fmha {

namespace detail {

Status check_combine_args(const CombineArgs& a) {
  const auto str = [](auto x) { return std::to_string(x); };
  if (a.splits < 1) return invalid_arg("splits", ">= 1", str(a.splits));
  if (a.rows < 0) return invalid_arg("rows", ">= 0", str(a.rows));
  if (a.tokens < 1 || a.heads < 1) return invalid_arg("tokens, heads", ">= 1", str(a.tokens) + ", " + str(a.heads));
  if (a.rows % (a.tokens * a.heads) != 0)
    return invalid_arg("rows", "a multiple of tokens * heads = " + str(a.tokens * a.heads), str(a.rows));
  if (a.head_dim < 1 || a.head_dim > kCombineMaxHeadDim)
    return invalid_arg("head_dim", "1 ... " + str(kCombineMaxHeadDim), str(a.head_dim));
  if (a.o_dtype != DType::kFP32 && a.o_dtype != DType::kFP16 && a.o_dtype != DType::kBF16)
    return invalid_arg("o_dtype", "fp16, bf16 or fp32", to_string(a.o_dtype));
  if (a.rows > 0 && (!a.o_parts || !a.lse_parts || !a.o))
    return invalid_arg("o_parts, lse_parts, o", "non-null", "a null pointer");
  return Status::ok();
}

#ifndef FMHA_WITH_KERNELS
// A build without kernels (kernel set `none`): the checks, then kNotBuilt for any work (the kernel is in
// kernels/device/combine.cu, compiled with the kernel units).
Status combine_partials(const CombineArgs& a, cudaStream_t) {
  if (Status s = check_combine_args(a); !s) return s;
  if (a.rows == 0) return Status::ok();
  return Status(StatusCode::kNotBuilt, "combine: this build has no kernels (FMHA_KERNEL_SET=none)");
}
#endif

}  // namespace detail

Status combine(const CombineParams& p, cudaStream_t stream) {
  const auto str = [](int64_t x) { return std::to_string(x); };
  if (p.splits < 1) return detail::invalid_arg("splits", ">= 1", str(p.splits));
  if (p.rows < 0) return detail::invalid_arg("rows", ">= 0", str(p.rows));
  if (p.head_dim < 1 || p.head_dim > detail::kCombineMaxHeadDim)
    return detail::invalid_arg("head_dim", "1 ... " + str(detail::kCombineMaxHeadDim), str(p.head_dim));
  const int64_t row_stride = p.o_row_stride != 0 ? p.o_row_stride : p.head_dim;
  if (row_stride < p.head_dim)
    return detail::invalid_arg("o_row_stride", "0 (= head_dim) or >= head_dim = " + str(p.head_dim), str(row_stride));
  if (p.o_dtype != DType::kFP32 && p.o_dtype != DType::kFP16 && p.o_dtype != DType::kBF16)
    return detail::invalid_arg("o_dtype", "fp16, bf16 or fp32", to_string(p.o_dtype));
  // The kernel indexes rows with 32-bit integers (a few warps past the last row included).
  if (int64_t(p.splits) * p.rows > INT32_MAX - 64)
    return detail::invalid_arg("splits × rows", "<= 2^31 - 65", str(int64_t(p.splits) * p.rows));
  if (p.rows == 0) return Status::ok();
  const std::pair<const char*, const void*> ptrs[] = {{"o_parts", p.o_parts}, {"lse_parts", p.lse_parts}, {"o", p.o}};
  for (const auto& [name, ptr] : ptrs)
    if (ptr == nullptr) return detail::invalid_arg(name, "a device pointer", "null");
  // Every element is loaded and stored on its own: each pointer aligned to its element.
  const unsigned o_mask = unsigned(dtype_size(p.o_dtype)) - 1u;
  const std::pair<const char*, std::pair<const void*, unsigned>> aligned[] = {
      {"o_parts", {p.o_parts, 3u}}, {"lse_parts", {p.lse_parts, 3u}}, {"o", {p.o, o_mask}}, {"lse", {p.lse, 3u}}};
  for (const auto& [name, pm] : aligned)
    if ((reinterpret_cast<uintptr_t>(pm.first) & pm.second) != 0)
      return detail::invalid_arg(name, "an address aligned to its element (" + str(pm.second + 1) + " bytes)",
                                 "an address ending in " + detail::low_hex(pm.first, pm.second));
#ifdef FMHA_WITH_KERNELS
  detail::DeviceInfo dev;
  if (Status s = detail::current_sm90_device(&dev); !s) return s;
  if (Status s = detail::check_device_pointers(
          {{"o_parts", p.o_parts}, {"lse_parts", p.lse_parts}, {"o", p.o}, {"lse", p.lse}});
      !s)
    return s;
  detail::CombineArgs a;
  a.splits = p.splits, a.rows = p.rows, a.tokens = 1, a.heads = 1, a.head_dim = p.head_dim;
  a.o_parts = p.o_parts, a.lse_parts = p.lse_parts, a.o = p.o, a.o_dtype = p.o_dtype;
  a.o_batch_stride = row_stride, a.o_token_stride = 0, a.o_head_stride = 0;
  a.lse = p.lse;
  return detail::combine_partials(a, stream);
#else
  (void)stream;
  return Status(StatusCode::kNotBuilt, "combine: this build has no kernels (FMHA_KERNEL_SET=none)");
#endif
}

}  // namespace fmha
