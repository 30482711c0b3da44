#include "rckpt/rng.h"

#include <array>
#include <cstring>
#include <locale>
#include <sstream>
#include <string>

namespace rckpt {
namespace {

constexpr std::array<std::string_view, kNumRngKinds> kKindNames = {
    "opaque",     "torch_cpu", "torch_cuda", "mt19937",
    "mt19937_64", "numpy",     "python"};

// torch.get_rng_state(): a memcpy of CPUGeneratorImplState (LP64,
// little-endian). The fields checked are those torch's set_state checks.
constexpr size_t kTorchCpuStateSize = 5056;
constexpr size_t kTorchCpuLeftOffset = 8;     // i32, 1..624
constexpr size_t kTorchCpuSeededOffset = 12;  // i32, must be 1
constexpr size_t kTorchCpuNextOffset = 16;    // u64, <= 624
constexpr int64_t kMersenneStateN = 624;
constexpr size_t kTorchCudaStateSize = 16;  // u64 seed, i64 offset

// Generous for a textual engine state (mt19937: 624 words of at most 10
// digits plus an index), small enough that parsing a hostile record is cheap.
constexpr size_t kMaxEngineTextBytes = 64 * 1024;

uint64_t LoadLe(std::span<const std::byte> bytes, size_t offset, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    v |= static_cast<uint64_t>(bytes[offset + i]) << (8 * i);
  }
  return v;
}

int32_t LoadI32(std::span<const std::byte> bytes, size_t offset) {
  return static_cast<int32_t>(static_cast<uint32_t>(LoadLe(bytes, offset, 4)));
}

Status SizeMismatch(RngKind kind, size_t expected, size_t actual) {
  return Status::Corruption(
      std::string(RngKindName(kind)) + " RNG state: size: expected " +
      std::to_string(expected) + " bytes, got " + std::to_string(actual));
}

Status ValidateTorchCpu(std::span<const std::byte> bytes) {
  if (bytes.size() != kTorchCpuStateSize) {
    return SizeMismatch(RngKind::kTorchCpu, kTorchCpuStateSize, bytes.size());
  }
  const int32_t seeded = LoadI32(bytes, kTorchCpuSeededOffset);
  if (seeded != 1) {
    return Status::Corruption(
        "torch_cpu RNG state: field 'seeded' (i32 at offset 12): expected 1, "
        "got " +
        std::to_string(seeded));
  }
  const int32_t left = LoadI32(bytes, kTorchCpuLeftOffset);
  if (left < 1 || left > kMersenneStateN) {
    return Status::Corruption(
        "torch_cpu RNG state: field 'left' (i32 at offset 8): expected 1..624, "
        "got " +
        std::to_string(left));
  }
  const uint64_t next = LoadLe(bytes, kTorchCpuNextOffset, 8);
  if (next > static_cast<uint64_t>(kMersenneStateN)) {
    return Status::Corruption(
        "torch_cpu RNG state: field 'next' (u64 at offset 16): expected at "
        "most 624, got " +
        std::to_string(next));
  }
  return Status::Ok();
}

// The textual state is whitespace-separated decimal words, each below
// 2^word_bits (libstdc++ appends the position index, which is too). Checking
// this first keeps out-of-range words, which operator>> would store as they
// are, out of an engine.
Status CheckEngineText(RngKind kind, std::string_view text, int word_bits) {
  const std::string name(RngKindName(kind));
  if (text.size() > kMaxEngineTextBytes) {
    return Status::Corruption(name + " RNG state: size: expected at most " +
                              std::to_string(kMaxEngineTextBytes) +
                              " bytes, got " + std::to_string(text.size()));
  }
  const uint64_t max_word =
      word_bits >= 64 ? UINT64_MAX : (uint64_t{1} << word_bits) - 1;
  size_t i = 0;
  size_t words = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    const size_t start = i;
    uint64_t value = 0;
    bool overflow = false;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
      if (value > (max_word - digit) / 10) overflow = true;
      value = value * 10 + digit;
      ++i;
    }
    if (i == start) {
      return Status::Corruption(name + " RNG state: byte " + std::to_string(i) +
                                ": expected a digit or whitespace, got code " +
                                std::to_string(static_cast<unsigned char>(c)));
    }
    if (overflow) {
      return Status::Corruption(
          name + " RNG state: word " + std::to_string(words) +
          ": expected a value below 2^" + std::to_string(word_bits) +
          ", got '" + std::string(text.substr(start, i - start)) + "'");
    }
    ++words;
  }
  return Status::Ok();
}

template <typename Engine>
Status ParseEngine(RngKind kind, std::span<const std::byte> bytes,
                   Engine* out) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()),
                              bytes.size());
  RCKPT_RETURN_IF_ERROR(CheckEngineText(kind, text, Engine::word_size));
  std::istringstream in{std::string(text)};
  in.imbue(std::locale::classic());
  Engine engine;
  in >> engine;
  if (in.fail()) {
    return Status::Corruption(
        std::string(RngKindName(kind)) + " RNG state: expected the engine's " +
        std::to_string(Engine::state_size) + "-word textual state, got " +
        std::to_string(bytes.size()) + " bytes that do not parse as one");
  }
  in >> std::ws;
  if (!in.eof()) {
    return Status::Corruption(
        std::string(RngKindName(kind)) +
        " RNG state: expected the end of the " + "state at byte " +
        std::to_string(static_cast<long long>(in.tellg())) + " of " +
        std::to_string(bytes.size()) + ", found more words");
  }
  if (out != nullptr) *out = engine;
  return Status::Ok();
}

template <typename Engine>
std::vector<std::byte> Capture(const Engine& engine) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << engine;
  const std::string text = out.str();
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return std::vector<std::byte>(p, p + text.size());
}

}  // namespace

std::string_view RngKindName(RngKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kKindNames.size() ? kKindNames[i] : "unknown";
}

bool ParseRngKind(std::string_view name, RngKind* out) {
  for (size_t i = 0; i < kKindNames.size(); ++i) {
    if (kKindNames[i] == name) {
      *out = static_cast<RngKind>(i);
      return true;
    }
  }
  return false;
}

bool IsValidRngKind(uint8_t raw) { return raw < kNumRngKinds; }

Status ValidateRngState(RngKind kind, std::span<const std::byte> bytes) {
  switch (kind) {
    case RngKind::kTorchCpu:
      return ValidateTorchCpu(bytes);
    case RngKind::kTorchCuda:
      if (bytes.size() != kTorchCudaStateSize) {
        return SizeMismatch(kind, kTorchCudaStateSize, bytes.size());
      }
      return Status::Ok();
    case RngKind::kMt19937:
      return ParseEngine<std::mt19937>(kind, bytes, nullptr);
    case RngKind::kMt19937_64:
      return ParseEngine<std::mt19937_64>(kind, bytes, nullptr);
    case RngKind::kOpaque:
    case RngKind::kNumpy:
    case RngKind::kPython:
      return Status::Ok();
  }
  return Status::Corruption("RNG kind: expected 0.." +
                            std::to_string(kNumRngKinds - 1) + ", got " +
                            std::to_string(static_cast<int>(kind)));
}

std::vector<std::byte> CaptureEngine(const std::mt19937& engine) {
  return Capture(engine);
}

std::vector<std::byte> CaptureEngine(const std::mt19937_64& engine) {
  return Capture(engine);
}

Status RestoreEngine(std::span<const std::byte> bytes, std::mt19937* engine) {
  return ParseEngine(RngKind::kMt19937, bytes, engine);
}

Status RestoreEngine(std::span<const std::byte> bytes,
                     std::mt19937_64* engine) {
  return ParseEngine(RngKind::kMt19937_64, bytes, engine);
}

}  // namespace rckpt
