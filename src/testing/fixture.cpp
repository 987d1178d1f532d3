// See fixture.h.
#include "testing/fixture.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace fmha::testing {
namespace {

constexpr char kMagic[8] = {'F', 'M', 'H', 'A', 'F', 'I', 'X', '1'};
constexpr int64_t kHeaderFixed = 8 + 4 * 4;  // magic + layers, heads, head_dim, sentences
constexpr uint32_t kMaxDim = 1u << 16;       // sanity bound on every header field

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("attention fixture '" + path + "': " + what);
}

uint32_t read_u32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

float read_f32(const unsigned char* p) {
  const uint32_t bits = read_u32(p);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

int AttentionFixture::total_tokens() const {
  int n = 0;
  for (int t : tokens) n += t;
  return n;
}

std::vector<int> AttentionFixture::cu_seqlens() const {
  std::vector<int> cu(tokens.size() + 1, 0);
  for (size_t b = 0; b < tokens.size(); ++b) cu[b + 1] = cu[b] + tokens[b];
  return cu;
}

int64_t AttentionFixture::elements_per_tensor() const { return int64_t(total_tokens()) * heads * head_dim; }

int64_t attention_fixture_bytes(int layers, int heads, int head_dim, const std::vector<int>& tokens) {
  int64_t total = 0;
  for (int t : tokens) total += t;
  return kHeaderFixed + 4 * int64_t(tokens.size()) + int64_t(layers) * 4 * total * heads * head_dim * 4;
}

AttentionFixture load_attention_fixture(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the file (missing? run scripts/make_minilm_fixture.py)");
  const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, "read error");
  const int64_t size = int64_t(bytes.size());
  if (size < kHeaderFixed) fail(path, "too short for the header: " + std::to_string(size) + " bytes");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) fail(path, "bad magic: expected \"FMHAFIX1\"");

  const uint32_t layers = read_u32(&bytes[8]), heads = read_u32(&bytes[12]), head_dim = read_u32(&bytes[16]),
                 sentences = read_u32(&bytes[20]);
  auto check_dim = [&](const char* name, uint32_t x) {
    if (x == 0 || x > kMaxDim)
      fail(path, std::string("implausible ") + name + " in the header: " + std::to_string(x));
  };
  check_dim("layers", layers), check_dim("heads", heads), check_dim("head_dim", head_dim);
  check_dim("sentences", sentences);
  if (size < kHeaderFixed + 4 * int64_t(sentences))
    fail(path, "truncated in the token counts (" + std::to_string(sentences) + " sentences, " +
                   std::to_string(size) + " bytes)");

  AttentionFixture f;
  f.layers = int(layers), f.heads = int(heads), f.head_dim = int(head_dim);
  for (uint32_t b = 0; b < sentences; ++b) {
    const uint32_t t = read_u32(&bytes[size_t(kHeaderFixed + 4 * b)]);
    check_dim("token count", t);
    f.tokens.push_back(int(t));
  }
  // First in double (no overflow for any header), then exactly.
  double payload = 0.0;
  for (int t : f.tokens) payload += double(t);
  payload *= 4.0 * 4.0 * f.layers * f.heads * f.head_dim;  // 4 tensors of float32
  if (payload > double(size))
    fail(path, "truncated: the header describes more data than the file's " + std::to_string(size) + " bytes");
  const int64_t expected = attention_fixture_bytes(f.layers, f.heads, f.head_dim, f.tokens);
  if (size != expected)
    fail(path, "size mismatch: the header describes " + std::to_string(expected) + " bytes, the file has " +
                   std::to_string(size));

  const int64_t n = f.elements_per_tensor();
  const unsigned char* p = bytes.data() + kHeaderFixed + 4 * int64_t(sentences);
  for (auto* t : {&f.q, &f.k, &f.v, &f.o}) t->resize(size_t(layers));
  for (int l = 0; l < f.layers; ++l) {
    for (auto* t : {&f.q, &f.k, &f.v, &f.o}) {
      std::vector<float>& dst = (*t)[size_t(l)];
      dst.resize(size_t(n));
      for (int64_t i = 0; i < n; ++i, p += 4) {
        dst[size_t(i)] = read_f32(p);
        if (!std::isfinite(dst[size_t(i)]))
          fail(path, "non-finite value in layer " + std::to_string(l) + " at element " + std::to_string(i));
      }
    }
  }
  f.scale = 1.0 / std::sqrt(double(f.head_dim));
  return f;
}

const AttentionFixture& minilm_l6_fixture(const std::string& data_dir) {
  static const AttentionFixture f = load_attention_fixture(data_dir + "/minilm_l6_attention.bin");
  return f;
}

}  // namespace fmha::testing
