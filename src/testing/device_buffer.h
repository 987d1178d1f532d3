// Device buffers for the test harnesses of every operation (forward now; decode and backward next): outputs and
// workspaces are poisoned with NaN before a launch and framed by guard bands, and after it the harness checks that
// every element the operation must write was written (no poison left), that every other element still holds the
// poison, and that neither guard band was touched. Independent of the operation and of the element size (2 or 4
// bytes). Host code only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fmha/status.h"

namespace fmha::testing {

/// A device allocation of `count` elements of `elem_bytes` (2 or 4) bytes, 256-byte aligned, with a guard band of
/// kGuardBytes before and after it holding a fixed byte pattern. Owns the memory (freed by the destructor).
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 4096;
  static constexpr uint8_t kGuardByte = 0xA5;
  /// The poison: a quiet NaN in fp16, bf16 (0x7FFF) and fp32 (0x7FFF7FFF, read as one 4-byte word).
  static constexpr uint16_t kPoison16 = 0x7FFF;

  GuardedBuffer() = default;
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer();

  /// Allocates and fills: the guard bands with kGuardByte, the body with `init` (count × elem_bytes bytes) or, when
  /// `init` is null, with the poison.
  Status allocate(size_t count, size_t elem_bytes, const void* init = nullptr);
  /// The body: count() elements (a valid device address between the guard bands also when count is 0).
  void* data() const { return base_ ? base_ + kGuardBytes : nullptr; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * elem_; }
  /// Copies the body to `host` (bytes() bytes) and checks both guard bands; `guards_ok` false when any guard byte
  /// changed.
  Status download(void* host, bool& guards_ok) const;

 private:
  uint8_t* base_ = nullptr;
  size_t count_ = 0, elem_ = 0;
};

/// The written / untouched verdict of one output buffer.
struct WriteCheck {
  bool all_written = true;  ///< every element marked `must_write` lost its poison
  bool untouched = true;    ///< every other element kept it
  bool guards_ok = true;    ///< neither guard band changed
  std::string first_problem;  ///< "<name>: element i …" for the first failure, empty when all is well
  bool ok() const { return all_written && untouched && guards_ok; }
};

/// Checks a downloaded 2-byte (elem_bytes 2) or 4-byte buffer against `must_write` (one flag per element; elements
/// past its size count as must-not-write): poison where not written, none where written. `name` prefixes the
/// message.
WriteCheck check_writes(const std::string& name, const void* host, size_t count, size_t elem_bytes,
                        const std::vector<char>& must_write, bool guards_ok);

}  // namespace fmha::testing
