// Decode API: argument validation, the split-KV plan, kernel selection and dispatch (host only, g++).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "api/host.h"
#include "api/registry.h"
#include "fmha/decode.h"
#include "kernels/fwd_tiles.h"
#include "kernels/kernel/decode_plan.hpp"

namespace fmha {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

Status bad(const std::string& arg, const std::string& expected, const std::string& actual) {
  return detail::invalid_arg(arg, expected, actual);
}

using tiles::kDecodeBlockM;
constexpr int kMaxNewTokens = 16;
constexpr int kMaxHeadDim = 128;
constexpr int64_t kMaxStride = detail::kMaxTmaStride;  // TMA strides are < 2^40 bytes
constexpr int kMaxKeys = std::numeric_limits<int32_t>::max() - 1024;

int decode_tile(int head_dim) { return tiles::decode_head_dim_tile(head_dim); }
/// Keys per key block of the kernel that runs head dim `head_dim`.
int decode_block_n(int head_dim) { return tiles::decode_block_n(decode_tile(head_dim)); }

/// An sm_count up to this plans without a device query (no sm_90 part has more SMs); above it, the device's count.
constexpr int kMaxSmsWithoutQuery = 132;

/// Keys one sequence's cache holds: the capacity, or pages_per_seq · page_size.
int seq_capacity(const DecodeParams& p) {
  return p.page_table ? int(std::min<int64_t>(int64_t(p.pages_per_seq) * p.page_size, kMaxKeys)) : p.capacity;
}

bool aligned(const void* p, unsigned mask) { return (reinterpret_cast<uintptr_t>(p) & mask) == 0; }

/// A [outer][tokens or rows][heads][head_dim] tensor: pointer 16-byte aligned, strides multiples of 8 elements below
/// 2^39, positive where their mode has more than one entry (else any multiple of 8, 0 included).
Status check_tensor(const std::string& n, const void* ptr, const char* outer_name, int64_t outer, int outer_extent,
                    const char* mid_name, int64_t mid, int mid_extent, int64_t head, int heads) {
  if (ptr == nullptr) return bad(n, "a device pointer", "null");
  if (!aligned(ptr, 15u)) return bad(n, "a 16-byte aligned address", "an address ending in " + detail::low_hex(ptr, 15u));
  struct Mode {
    const char* name;
    int64_t stride;
    int extent;
  };
  for (const Mode& m : {Mode{outer_name, outer, outer_extent}, Mode{mid_name, mid, mid_extent}, Mode{"head_stride", head, heads}}) {
    const bool need_positive = m.extent > 1;
    if (m.stride < (need_positive ? 8 : 0) || m.stride % 8 != 0 || m.stride > kMaxStride)
      return bad(n + "_" + m.name, std::string(need_positive ? "a positive" : "a non-negative") +
                                       " multiple of 8 elements below 2^39", str(m.stride));
  }
  return Status::ok();
}

/// The registry key of the unit that runs `p` (validated).
detail::KernelKey decode_key(const DecodeParams& p) {
  const int tile = decode_tile(p.head_dim);
  return {detail::Op::kDecode, p.dtype, p.dtype, tile, tile};
}

Status validate(const DecodeParams& p) {
  if (Status s = detail::check_attention_shape(p.dtype, p.batch, p.heads_q, p.heads_kv, p.head_dim, kMaxHeadDim); !s)
    return s;
  if (p.new_tokens < 1 || p.new_tokens > kMaxNewTokens)
    return bad("new_tokens", "in [1, " + str(kMaxNewTokens) + "]", str(p.new_tokens));
  const int64_t rows_total = int64_t(p.batch) * p.new_tokens * p.heads_q;
  if (rows_total > std::numeric_limits<int32_t>::max())
    return bad("batch × new_tokens × heads_q", "< 2^31 query rows", str(rows_total));
  const bool paged = p.page_table != nullptr;
  if (p.slots < 1) return bad("slots", paged ? "≥ 1 (paged: the pages of the pool)" : "≥ 1", str(p.slots));
  if (paged) {
    if (!aligned(p.page_table, 3u))
      return bad("page_table", "a 4-byte aligned address", "an address ending in " + detail::low_hex(p.page_table, 3u));
    if (p.page_size < 1 || p.page_size > kMaxKeys)
      return bad("page_size", "in [1, " + str(kMaxKeys) + "]", str(p.page_size));
    if (p.pages_per_seq < 1 || int64_t(p.pages_per_seq) * p.page_size > kMaxKeys)
      return bad("pages_per_seq", "≥ 1 with pages_per_seq × page_size ≤ " + str(kMaxKeys), str(p.pages_per_seq));
    if (p.page_table_stride < p.pages_per_seq)
      return bad("page_table_stride", "≥ pages_per_seq (" + str(p.pages_per_seq) + ")", str(p.page_table_stride));
    if (p.page_table_rows < 0) return bad("page_table_rows", "≥ 0 (0 = batch)", str(p.page_table_rows));
    if (p.cache_batch_idx == nullptr && p.page_table_rows != 0 && p.page_table_rows < p.batch)
      return bad("page_table_rows", "≥ batch (" + str(p.batch) + ") or 0: entry b reads row b",
                 str(p.page_table_rows));
  } else {
    if (p.capacity < 1 || p.capacity > kMaxKeys) return bad("capacity", "in [1, " + str(kMaxKeys) + "]", str(p.capacity));
    if (p.cache_batch_idx == nullptr && p.slots < p.batch)
      return bad("slots", "≥ batch (" + str(p.batch) + "): without cache_batch_idx entry b uses slot b", str(p.slots));
  }
  const int seq_keys = seq_capacity(p);
  if (p.k_new != nullptr && p.new_tokens > seq_keys)
    return bad("new_tokens", "≤ the keys a sequence's cache holds (" + str(seq_keys) + ") with an append",
               str(p.new_tokens));
  if (p.max_seqlen_k < 0 || p.max_seqlen_k > seq_keys)
    return bad("max_seqlen_k", std::string("in [0, ") + (paged ? "pages_per_seq × page_size" : "capacity") + " = " +
                                   str(seq_keys) + "] (0 = that bound)",
               str(p.max_seqlen_k));
  if (Status s = check_tensor("q", p.q, "batch_stride", p.q_batch_stride, p.batch, "token_stride", p.q_token_stride,
                              p.new_tokens, p.q_head_stride, p.heads_q);
      !s)
    return s;
  if (Status s = check_tensor("o", p.o, "batch_stride", p.o_batch_stride, p.batch, "token_stride", p.o_token_stride,
                              p.new_tokens, p.o_head_stride, p.heads_q);
      !s)
    return s;
  if (Status s = check_tensor("k_cache", p.k_cache, "slot_stride", p.k_slot_stride, p.slots, "row_stride",
                              p.k_row_stride, 2, p.k_head_stride, p.heads_kv);
      !s)
    return s;
  if (Status s = check_tensor("v_cache", p.v_cache, "slot_stride", p.v_slot_stride, p.slots, "row_stride",
                              p.v_row_stride, 2, p.v_head_stride, p.heads_kv);
      !s)
    return s;
  if ((p.k_new == nullptr) != (p.v_new == nullptr))
    return bad(p.k_new ? "v_new" : "k_new", "set together with the other (the append) or both null",
               p.k_new ? "null (k_new is set)" : "null (v_new is set)");
  if (p.k_new != nullptr) {
    if (Status s = check_tensor("k_new", p.k_new, "batch_stride", p.k_new_batch_stride, p.batch, "token_stride",
                                p.k_new_token_stride, p.new_tokens, p.k_new_head_stride, p.heads_kv);
        !s)
      return s;
    if (Status s = check_tensor("v_new", p.v_new, "batch_stride", p.v_new_batch_stride, p.batch, "token_stride",
                                p.v_new_token_stride, p.new_tokens, p.v_new_head_stride, p.heads_kv);
        !s)
      return s;
  }
  if (p.seqlens_k == nullptr) return bad("seqlens_k", "a device int[batch]", "null");
  if (!aligned(p.seqlens_k, 3u)) return bad("seqlens_k", "a 4-byte aligned address", "an address ending in " + detail::low_hex(p.seqlens_k, 3u));
  if (p.cache_batch_idx != nullptr && !aligned(p.cache_batch_idx, 3u))
    return bad("cache_batch_idx", "a 4-byte aligned address or null",
               "an address ending in " + detail::low_hex(p.cache_batch_idx, 3u));
  if (p.lse != nullptr && !aligned(p.lse, 3u))
    return bad("lse", "a 4-byte aligned address or null", "an address ending in " + detail::low_hex(p.lse, 3u));
  if (!(p.softmax_scale >= 0.f) || !std::isfinite(p.softmax_scale))
    return bad("softmax_scale", "a finite value ≥ 0 (0 = 1/sqrt(head_dim))", std::to_string(p.softmax_scale));
  if (p.splits < 0) return bad("splits", "≥ 0 (0 = the heuristic)", str(p.splits));
  if (p.sm_count < 0) return bad("sm_count", "≥ 0 (0 = all SMs)", str(p.sm_count));
  return Status::ok();
}

/// kInvalidArgument "plan: …" unless `plan` was made for p's shape.
Status check_plan(const DecodeParams& p, const DecodePlan& plan) {
  const int max_keys = p.max_seqlen_k == 0 ? seq_capacity(p) : p.max_seqlen_k;
  auto field = [](const char* name, int64_t want, int64_t got) {
    return bad(std::string("plan.") + name, str(want) + " (the params'; make the plan with decode_plan)", str(got));
  };
  if (plan.batch != p.batch) return field("batch", p.batch, plan.batch);
  if (plan.heads_q != p.heads_q) return field("heads_q", p.heads_q, plan.heads_q);
  if (plan.heads_kv != p.heads_kv) return field("heads_kv", p.heads_kv, plan.heads_kv);
  if (plan.head_dim != p.head_dim) return field("head_dim", p.head_dim, plan.head_dim);
  if (plan.new_tokens != p.new_tokens) return field("new_tokens", p.new_tokens, plan.new_tokens);
  if (plan.max_seqlen_k != max_keys) return field("max_seqlen_k", max_keys, plan.max_seqlen_k);
  // The rest must be consistent with the shape (a plan edited by hand could make the kernel read past its grid or
  // its workspace).
  if (plan.block_m != kDecodeBlockM) return field("block_m", kDecodeBlockM, plan.block_m);
  const int block_n = decode_block_n(p.head_dim);
  if (plan.block_n != block_n) return field("block_n", block_n, plan.block_n);
  const int m_blocks = (p.heads_q / p.heads_kv * p.new_tokens + kDecodeBlockM - 1) / kDecodeBlockM;
  if (plan.m_blocks != m_blocks) return field("m_blocks", m_blocks, plan.m_blocks);
  const int key_blocks = std::max(1, (max_keys + block_n - 1) / block_n);
  if (plan.splits < 1 || plan.splits > key_blocks)
    return bad("plan.splits", "in [1, " + str(key_blocks) + "]", str(plan.splits));
  if (plan.keys_per_split < block_n || plan.keys_per_split % block_n != 0 ||
      int64_t(plan.keys_per_split) * plan.splits < max_keys ||
      int64_t(plan.keys_per_split) * (plan.splits - 1) >= std::max(max_keys, 1))
    return bad("plan.keys_per_split", "whole key blocks of " + str(block_n) + " covering max_seqlen_k " +
                                          str(max_keys) + " in plan.splits " + str(plan.splits) + " ranges",
               str(plan.keys_per_split));
  const int64_t tiles = int64_t(p.batch) * p.heads_kv * m_blocks * plan.splits;
  if (plan.num_tiles != tiles) return field("num_tiles", tiles, plan.num_tiles);
  if (plan.grid < 1 || plan.grid > plan.num_tiles)
    return bad("plan.grid", "in [1, num_tiles = " + str(plan.num_tiles) + "]", str(plan.grid));
  const std::size_t rows = std::size_t(p.batch) * p.new_tokens * p.heads_q;
  auto up = [](std::size_t x) { return (x + 255) / 256 * 256; };
  const std::size_t ws = plan.splits > 1 ? up(plan.splits * rows * p.head_dim * sizeof(float)) +
                                               up(plan.splits * rows * sizeof(float))
                                         : 0;
  if (plan.workspace_bytes != ws) return field("workspace_bytes", int64_t(ws), int64_t(plan.workspace_bytes));
  return Status::ok();
}

}  // namespace

void set_decode_contiguous_strides(DecodeParams& p) {
  const int64_t d = p.head_dim;
  p.q_head_stride = p.o_head_stride = d;
  p.q_token_stride = p.o_token_stride = int64_t(p.heads_q) * d;
  p.q_batch_stride = p.o_batch_stride = int64_t(p.new_tokens) * p.heads_q * d;
  p.k_new_head_stride = p.v_new_head_stride = d;
  p.k_new_token_stride = p.v_new_token_stride = int64_t(p.heads_kv) * d;
  p.k_new_batch_stride = p.v_new_batch_stride = int64_t(p.new_tokens) * p.heads_kv * d;
  const int64_t rows = p.page_table ? p.page_size : p.capacity;
  p.k_head_stride = p.v_head_stride = d;
  p.k_row_stride = p.v_row_stride = int64_t(p.heads_kv) * d;
  p.k_slot_stride = p.v_slot_stride = rows * p.heads_kv * d;
  p.page_table_stride = p.pages_per_seq;
}

Status decode_plan(const DecodeParams& p, DecodePlan* plan) {
  if (plan == nullptr) return bad("plan", "a DecodePlan to fill", "null");
  if (Status s = validate(p); !s) return s;
  int sms = p.sm_count;
  if (sms == 0 || sms > kMaxSmsWithoutQuery) {  // 0 = all; more than the device has = all (queried)
    detail::DeviceInfo dev;
    if (Status s = detail::current_sm90_device(&dev); !s) return s;
    sms = sms == 0 ? dev.sm_count : std::min(sms, dev.sm_count);
  }
  kernel::DecodeShape s;
  s.batch = p.batch, s.heads_q = p.heads_q, s.heads_kv = p.heads_kv, s.head_dim = p.head_dim;
  s.new_tokens = p.new_tokens;
  s.max_seqlen_k = p.max_seqlen_k == 0 ? seq_capacity(p) : p.max_seqlen_k;
  const int block_n = decode_block_n(p.head_dim);
  const int slots = sms * tiles::kDecodeCtasPerSm;  // CTAs resident at once
  s.cta_slots = slots, s.block_m = kDecodeBlockM, s.block_n = block_n, s.splits = p.splits;
  const int64_t base = int64_t(p.batch) * p.heads_kv * ((p.heads_q / p.heads_kv * p.new_tokens + kDecodeBlockM - 1) / kDecodeBlockM);
  const int64_t key_blocks = std::max(1, (s.max_seqlen_k + block_n - 1) / block_n);
  const int64_t most_splits = p.splits > 0 ? std::min<int64_t>(p.splits, key_blocks) : std::min<int64_t>(kernel::kMaxSplits, key_blocks);
  if (base * most_splits > (int64_t(1) << 30))  // tile indices are int32, stepped by the grid
    return bad("batch × heads_kv × row blocks × splits", "≤ 2^30 tiles", str(base * most_splits));
  const kernel::DecodePlanInfo info = kernel::make_decode_plan(s);
  DecodePlan out;
  out.batch = p.batch, out.heads_q = p.heads_q, out.heads_kv = p.heads_kv, out.head_dim = p.head_dim;
  out.new_tokens = p.new_tokens, out.max_seqlen_k = s.max_seqlen_k;
  out.block_m = kDecodeBlockM, out.block_n = block_n;
  out.m_blocks = info.m_blocks, out.splits = info.splits, out.keys_per_split = info.keys_per_split;
  out.num_tiles = info.num_tiles;
  out.grid = std::min(info.num_tiles, slots);
  out.workspace_bytes = info.workspace_bytes();
  *plan = out;
  return Status::ok();
}

std::size_t decode_workspace_size(const DecodePlan& plan) { return plan.workspace_bytes; }

std::string decode_kernel_name(const DecodeParams& p, const DecodePlan& plan) {
  if (!validate(p) || !check_plan(p, plan)) return "";
  return std::string("decode ") + to_string(p.dtype) + " d" + str(decode_tile(p.head_dim)) + " " +
         str(plan.block_m) + "x" + str(plan.block_n) + " split " + str(plan.splits);
}

Status decode(const DecodeParams& params, const DecodePlan& plan, Workspace workspace, cudaStream_t stream) {
  if (Status s = validate(params); !s) return s;
  if (Status s = check_plan(params, plan); !s) return s;
  if (Status s = detail::check_workspace(workspace, plan.workspace_bytes); !s) return s;
  const detail::KernelEntry* e = nullptr;
  if (Status s = detail::find_built_kernel(decode_key(params), &e); !s) return s;
  detail::DeviceInfo dev;
  if (Status s = detail::current_sm90_device(&dev); !s) return s;
  if (Status s = detail::check_device_pointers({{"q", params.q}, {"o", params.o}, {"lse", params.lse},
                                                {"k_cache", params.k_cache}, {"v_cache", params.v_cache},
                                                {"k_new", params.k_new}, {"v_new", params.v_new},
                                                {"seqlens_k", params.seqlens_k},
                                                {"cache_batch_idx", params.cache_batch_idx},
                                                {"page_table", params.page_table}});
      !s)
    return s;
  DecodeParams p = params;
  if (p.softmax_scale == 0.f) p.softmax_scale = 1.f / std::sqrt(float(p.head_dim));
  return reinterpret_cast<detail::decode_launch_fn*>(e->launch)(p, plan, workspace.ptr, stream);
}

}  // namespace fmha
