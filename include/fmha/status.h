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
/// with the expected versus actual value, e.g. "heads_q % heads_kv: expected 0, got 2 (heads_q=32, heads_kv=5)".
/// The library never prints, throws across its API, or exits; it returns a Status instead.
/// Library calls make and return Status values; a user normally only reads one (is_ok or bool, code, message).
class Status {
 public:
  /// Success: code kSuccess, empty message.
  Status() = default;
  /// A status of `code` with `message` (for a failure: what went wrong, as the library words it).
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  /// Success (the same as Status()).
  static Status ok() { return Status(); }
  /// kInvalidArgument with message `m` (the argument, the expected and the actual value).
  static Status invalid(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
  /// kNotSupported with message `m` (a valid request no kernel of this build or device takes).
  static Status unsupported(std::string m) { return Status(StatusCode::kNotSupported, std::move(m)); }

  /// Whether the code is kSuccess.
  bool is_ok() const { return code_ == StatusCode::kSuccess; }
  /// is_ok(), so that `if (!s) return s;` propagates a failure.
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  /// Empty on the library's successes; on a failure it names the argument, the failing call or the broken invariant.
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kSuccess;
  std::string message_;
};

/// Human-readable name of a status code ("success", "invalid argument", ...).
const char* to_string(StatusCode code);

}  // namespace fmha
