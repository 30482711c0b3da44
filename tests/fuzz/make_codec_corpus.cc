// Writes the seed corpus of the codec fuzz target into a directory:
//   make_codec_corpus tests/data/corpus/codec
// Seeds cover valid frames for each element-size path and each way a frame
// can disagree with its destination. Deterministic: rerunning rewrites the
// same bytes (for a given zstd version).
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "codec_fuzz_input.h"

namespace {

// Mostly a pattern, with a random byte every `noise_every` bytes.
std::vector<std::byte> Sample(size_t n, uint32_t seed, size_t noise_every = 5) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<std::byte>(i % noise_every == 0 ? rng() : (i / 32) % 11);
  }
  return v;
}

std::vector<std::byte> Frame(const std::vector<std::byte>& raw, int level) {
  std::vector<std::byte> out(rckpt::ZstdBound(raw.size()));
  rckpt::Result<size_t> n = rckpt::ZstdCompress(raw, out, level);
  out.resize(n.ok() ? *n : 0);
  return out;
}

bool Write(const std::string& dir, const std::string& name, uint8_t elem,
           uint32_t dst_size, const std::vector<std::byte>& frame) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  const char header[4] = {static_cast<char>(elem),
                          static_cast<char>(dst_size & 0xFF),
                          static_cast<char>((dst_size >> 8) & 0xFF),
                          static_cast<char>((dst_size >> 16) & 0xFF)};
  out.write(header, sizeof header);
  out.write(reinterpret_cast<const char*>(frame.data()),
            static_cast<std::streamsize>(frame.size()));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  for (uint8_t elem : {0, 2, 3, 4, 8, 16}) {
    const auto raw = Sample(1000 + 37 * elem, elem);
    ok &= Write(dir, "valid-e" + std::to_string(elem), elem,
                static_cast<uint32_t>(raw.size()), Frame(raw, 3));
  }
  const auto big = Sample(300000, 99, 997);  // > 2 blocks of 128 KiB
  ok &= Write(dir, "valid-multiblock", 4, static_cast<uint32_t>(big.size()),
              Frame(big, 1));
  ok &= Write(dir, "valid-empty", 2, 0, Frame({}, 3));
  const auto raw = Sample(5000, 7);
  const auto frame = Frame(raw, 5);
  ok &= Write(dir, "declares-more", 4, 4000, frame);
  ok &= Write(dir, "declares-less", 4, 6000, frame);
  ok &= Write(dir, "truncated", 4, 5000,
              std::vector<std::byte>(frame.begin(), frame.end() - 3));
  auto trailing = frame;
  trailing.push_back(std::byte{0});
  ok &= Write(dir, "trailing-byte", 4, 5000, trailing);
  auto flipped = frame;
  flipped[flipped.size() / 2] ^= std::byte{0x20};
  ok &= Write(dir, "flipped-byte", 4, 5000, flipped);
  ok &= Write(dir, "no-frame", 8, 100, {});
  ok &= Write(dir, "garbage", 8, 100, Sample(100, 3));
  if (!ok) {
    std::fprintf(stderr, "cannot write the corpus into %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
