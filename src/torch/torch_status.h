// The PyTorch operators' mapping of fmha::Status onto Python exceptions, shared by ops.cpp, decode_ops.cpp and
// combine_ops.cpp.
#pragma once

#include <c10/util/Exception.h>

#include <string>

#include "fmha/status.h"

namespace fmha::torch_ops {

/// Raises the Python exception that matches `s` (nothing on success), its message prefixed by `prefix` ("fmha: ",
/// "fmha.decode: " …): kInvalidArgument → ValueError; kNotSupported and kNotBuilt (a valid request no kernel takes)
/// → NotImplementedError, except in a Meta kernel (`meta`), where fake tensors would take NotImplementedError for a
/// missing Meta kernel (UnsupportedOperatorException, without the message), so RuntimeError there; anything else
/// (a CUDA failure) → RuntimeError.
inline void raise_if_error(const Status& s, const char* prefix, bool meta = false) {
  if (s.is_ok()) return;
  const std::string msg = prefix + s.message();
  if (s.code() == StatusCode::kInvalidArgument) TORCH_CHECK_VALUE(false, msg);
  if (!meta && (s.code() == StatusCode::kNotSupported || s.code() == StatusCode::kNotBuilt))
    TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
  TORCH_CHECK(false, msg);
}

}  // namespace fmha::torch_ops
