// String names of the public enums (include/fmha/types.h, include/fmha/status.h).
#include "fmha/status.h"
#include "fmha/types.h"

namespace fmha {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kSuccess: return "success";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotSupported: return "not supported";
    case StatusCode::kNotBuilt: return "not built";
    case StatusCode::kCudaError: return "CUDA error";
    case StatusCode::kInternalError: return "internal error";
  }
  return "unknown";
}

const char* to_string(DType t) {
  switch (t) {
    case DType::kFP16: return "fp16";
    case DType::kBF16: return "bf16";
    case DType::kFP8E4M3: return "e4m3";
    case DType::kFP8E5M2: return "e5m2";
    case DType::kFP32: return "fp32";
  }
  return "unknown";
}

const char* to_string(MaskType m) {
  switch (m) {
    case MaskType::kNone: return "none";
    case MaskType::kResidual: return "residual";
    case MaskType::kCausal: return "causal";
  }
  return "unknown";
}

const char* to_string(CausalAlign a) {
  switch (a) {
    case CausalAlign::kQBegin: return "qbegin";
    case CausalAlign::kQEnd: return "qend";
  }
  return "unknown";
}

}  // namespace fmha
