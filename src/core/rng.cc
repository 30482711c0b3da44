#include "rckpt/rng.h"

#include <array>
#include <string>

#include "core/mt_state.h"

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
    case RngKind::kMt19937_64:
      return ValidateMtState(kind, bytes);
    case RngKind::kOpaque:
    case RngKind::kNumpy:
    case RngKind::kPython:
      return Status::Ok();
  }
  return Status::Corruption("RNG kind: expected 0.." +
                            std::to_string(kNumRngKinds - 1) + ", got " +
                            std::to_string(static_cast<int>(kind)));
}

}  // namespace rckpt
