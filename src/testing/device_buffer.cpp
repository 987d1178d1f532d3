// See device_buffer.h.
#include "testing/device_buffer.h"

#include <cstring>

#include "api/host.h"

namespace fmha::testing {

GuardedBuffer::~GuardedBuffer() {
  if (base_) cudaFree(base_);
}

Status GuardedBuffer::allocate(size_t count, size_t elem_bytes, const void* init) {
  if (elem_bytes != 2 && elem_bytes != 4)
    return detail::invalid_arg("elem_bytes", "2 or 4", std::to_string(elem_bytes));
  if (base_) cudaFree(base_), base_ = nullptr;
  count_ = count, elem_ = elem_bytes;
  const size_t total = 2 * kGuardBytes + count * elem_bytes;
  void* p = nullptr;
  if (Status s = detail::cuda_status(cudaMalloc(&p, total), "GuardedBuffer: cudaMalloc"); !s) return count_ = 0, s;
  base_ = static_cast<uint8_t*>(p);
  std::vector<uint8_t> host(total, kGuardByte);
  if (init) {
    std::memcpy(host.data() + kGuardBytes, init, count * elem_bytes);
  } else {
    for (size_t i = 0; i < count * elem_bytes / 2; ++i)
      std::memcpy(host.data() + kGuardBytes + 2 * i, &kPoison16, 2);
  }
  return detail::cuda_status(cudaMemcpy(base_, host.data(), total, cudaMemcpyHostToDevice), "GuardedBuffer: upload");
}

Status GuardedBuffer::download(void* host, bool& guards_ok) const {
  guards_ok = true;
  if (!base_) return Status::ok();
  // The body straight into `host`, the two guard bands on their own (no second copy of a large body).
  std::vector<uint8_t> front(kGuardBytes), back(kGuardBytes);
  Status s = detail::cuda_status(cudaMemcpy(host, base_ + kGuardBytes, bytes(), cudaMemcpyDeviceToHost),
                                 "GuardedBuffer: download");
  if (s) s = detail::cuda_status(cudaMemcpy(front.data(), base_, kGuardBytes, cudaMemcpyDeviceToHost),
                                 "GuardedBuffer: download the guard bands");
  if (s) s = detail::cuda_status(cudaMemcpy(back.data(), base_ + kGuardBytes + bytes(), kGuardBytes,
                                            cudaMemcpyDeviceToHost), "GuardedBuffer: download the guard bands");
  if (!s) return s;
  for (size_t i = 0; i < kGuardBytes; ++i)
    if (front[i] != kGuardByte || back[i] != kGuardByte) guards_ok = false;
  return Status::ok();
}

WriteCheck check_writes(const std::string& name, const void* host, size_t count, size_t elem_bytes,
                        const std::vector<char>& must_write, bool guards_ok) {
  WriteCheck w;
  w.guards_ok = guards_ok;
  if (!guards_ok) w.first_problem = name + ": a guard band around the buffer was overwritten";
  const auto* b = static_cast<const uint8_t*>(host);
  for (size_t i = 0; i < count; ++i) {
    bool poison = true;
    for (size_t k = 0; k < elem_bytes; k += 2) {
      uint16_t x;
      std::memcpy(&x, b + i * elem_bytes + k, 2);
      poison = poison && x == GuardedBuffer::kPoison16;
    }
    const bool must = i < must_write.size() && must_write[i];
    if (must && poison && w.all_written) {
      w.all_written = false;
      if (w.first_problem.empty()) w.first_problem = name + ": element " + std::to_string(i) + " was never written";
    }
    if (!must && !poison && w.untouched) {
      w.untouched = false;
      if (w.first_problem.empty())
        w.first_problem = name + ": element " + std::to_string(i) + " is outside the output but was written";
    }
  }
  return w;
}

}  // namespace fmha::testing
