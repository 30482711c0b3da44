// Writes the seed corpus of the rng fuzz target into a directory:
//   make_rng_corpus tests/data/corpus/rng
// One valid state per validated kind plus near misses. Deterministic.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "rckpt/rng.h"
#include "rng/engine_states.h"

namespace {

bool Write(const std::string& dir, const std::string& name, rckpt::RngKind kind,
           const std::vector<std::byte>& state) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.put(static_cast<char>(kind));
  out.write(reinterpret_cast<const char*>(state.data()),
            static_cast<std::streamsize>(state.size()));
  return static_cast<bool>(out);
}

std::vector<std::byte> WithIndex(std::vector<std::byte> state, uint32_t index) {
  std::memcpy(state.data() + 4, &index, 4);
  return state;
}

std::vector<std::byte> TorchCpu(int32_t left, int32_t seeded, uint64_t next) {
  std::vector<std::byte> s(5056);
  const uint64_t seed = 67280421310721ull;
  std::memcpy(s.data(), &seed, 8);
  std::memcpy(s.data() + 8, &left, 4);
  std::memcpy(s.data() + 12, &seeded, 4);
  std::memcpy(s.data() + 16, &next, 8);
  return s;
}

// The textual form (n words, then the index) of a binary-layout state's
// words with another index.
std::vector<std::byte> AsText(const std::vector<std::byte>& binary,
                              uint64_t index) {
  std::string text;
  for (size_t i = 8; i + 4 <= binary.size(); i += 4) {
    uint32_t word = 0;
    std::memcpy(&word, binary.data() + i, 4);
    text += std::to_string(word) + " ";
  }
  text += std::to_string(index);
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return std::vector<std::byte>(p, p + text.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  using rckpt::RngKind;
  using rckpt::testing::LegacyEngineText;
  const std::string dir = argv[1];
  std::mt19937 mt(5489u);
  mt.discard(700);
  std::mt19937_64 mt64(42);
  mt64.discard(100);
  std::vector<std::byte> mt_extra = LegacyEngineText(mt);
  for (char c : std::string(" 7\n")) mt_extra.push_back(std::byte(c));
  const std::vector<std::byte> binary = rckpt::CaptureEngine(mt);
  std::vector<std::byte> unreachable = binary;
  unreachable[8] ^= std::byte{1};  // word 0's low bits, at index 0
  bool ok = true;
  // The legacy textual form.
  ok &= Write(dir, "mt19937", RngKind::kMt19937, LegacyEngineText(mt));
  ok &= Write(dir, "mt19937-extra-word", RngKind::kMt19937, mt_extra);
  ok &= Write(dir, "mt19937_64", RngKind::kMt19937_64, LegacyEngineText(mt64));
  ok &= Write(dir, "mt19937_64-as-mt19937", RngKind::kMt19937, LegacyEngineText(mt64));
  // The textual form of states no engine prints: at index 0 with word 0's
  // low bits changed (unreachable), index n + 1, all zero.
  ok &= Write(dir, "mt19937-text-index-0", RngKind::kMt19937,
              AsText(binary, 0));
  ok &= Write(dir, "mt19937-text-index-0-unreachable", RngKind::kMt19937,
              AsText(unreachable, 0));
  ok &= Write(dir, "mt19937-text-index-625", RngKind::kMt19937,
              AsText(binary, 625));
  ok &= Write(dir, "mt19937-text-all-zero", RngKind::kMt19937,
              AsText(std::vector<std::byte>(binary.size()), 624));
  // The binary layout.
  ok &= Write(dir, "mt19937-binary", RngKind::kMt19937, binary);
  ok &= Write(dir, "mt19937-binary-index-300", RngKind::kMt19937,
              WithIndex(binary, 300));
  ok &= Write(dir, "mt19937-binary-index-624", RngKind::kMt19937,
              WithIndex(binary, 624));
  ok &= Write(dir, "mt19937-binary-index-625", RngKind::kMt19937,
              WithIndex(binary, 625));
  ok &= Write(dir, "mt19937-binary-unreachable", RngKind::kMt19937, unreachable);
  std::vector<std::byte> all_zero(binary.size());
  std::copy(binary.begin(), binary.begin() + 4, all_zero.begin());  // magic
  ok &= Write(dir, "mt19937-binary-all-zero", RngKind::kMt19937,
              WithIndex(all_zero, 624));
  ok &= Write(dir, "mt19937_64-binary", RngKind::kMt19937_64,
              rckpt::CaptureEngine(mt64));
  ok &= Write(dir, "mt19937_64-binary-index-17", RngKind::kMt19937_64,
              WithIndex(rckpt::CaptureEngine(mt64), 17));
  ok &= Write(dir, "mt19937_64-binary-as-mt19937", RngKind::kMt19937,
              rckpt::CaptureEngine(mt64));
  ok &= Write(dir, "torch_cpu", RngKind::kTorchCpu, TorchCpu(1, 1, 0));
  ok &= Write(dir, "torch_cpu-mid-block", RngKind::kTorchCpu,
              TorchCpu(200, 1, 425));
  ok &= Write(dir, "torch_cpu-unseeded", RngKind::kTorchCpu, TorchCpu(1, 0, 0));
  ok &=
      Write(dir, "torch_cuda", RngKind::kTorchCuda, std::vector<std::byte>(16));
  ok &= Write(dir, "opaque", RngKind::kOpaque, std::vector<std::byte>(3));
  if (!ok) {
    std::fprintf(stderr, "cannot write the corpus into %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
