// fmha: status type returned by every public function.
#pragma once

#include <string>
#include <utility>

namespace fmha {

/// Outcome category of a library call.
enum class StatusCode {
  kSuccess = 0,
  kInvalidArgument,  ///< an argument is out of range, inconsistent or misaligned; the message names it
  kNotSupported,     ///< a valid request this build or this device cannot run (head dim, dtype, architecture)
  kNotBuilt,         ///< the kernel exists in the manifest but was left out of this build's kernel set
  kCudaError,        ///< a CUDA runtime call failed; the message holds the call and cudaGetErrorString
  kInternalError,    ///< a broken invariant inside fmha (a bug: please report it)
};

/// Result of a library call: a code and, on failure, a message that names the offending argument
/// with the expected versus actual value, e.g. "h % h_k: expected 0, got 3 (h=9, h_k=6)".
/// The library never prints, throws across its API, or exits; it returns a Status instead.
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  static Status invalid(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
  static Status unsupported(std::string m) { return Status(StatusCode::kNotSupported, std::move(m)); }

  bool is_ok() const { return code_ == StatusCode::kSuccess; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kSuccess;
  std::string message_;
};

/// Human-readable name of a status code ("success", "invalid argument", ...).
const char* to_string(StatusCode code);

}  // namespace fmha
