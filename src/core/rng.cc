#include "rckpt/rng.h"

#include <array>
#include <cstring>
#include <string>

#include "core/mt_state.h"
#include "core/rng_layout.h"

namespace rckpt {
namespace {

constexpr std::array<std::string_view, kNumRngKinds> kKindNames = {
    "opaque",     "torch_cpu", "torch_cuda", "mt19937",
    "mt19937_64", "numpy",     "python"};


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
  if (bytes.size() != kTorchCpuStateBytes) {
    return SizeMismatch(RngKind::kTorchCpu, kTorchCpuStateBytes, bytes.size());
  }
  const int32_t seeded = LoadI32(bytes, kTorchCpuSeededOffset);
  if (seeded != 1) {
    return Status::Corruption(
        "torch_cpu RNG state: field 'seeded' (i32 at offset 12): expected 1, "
        "got " +
        std::to_string(seeded));
  }
  const int32_t left = LoadI32(bytes, kTorchCpuLeftOffset);
  if (left < 1 || left > kMersenneStateWords) {
    return Status::Corruption(
        "torch_cpu RNG state: field 'left' (i32 at offset 8): expected 1..624, "
        "got " +
        std::to_string(left));
  }
  const uint64_t next = LoadLe(bytes, kTorchCpuNextOffset, 8);
  if (next > static_cast<uint64_t>(kMersenneStateWords)) {
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
      if (bytes.size() != kTorchCudaStateBytes) {
        return SizeMismatch(kind, kTorchCudaStateBytes, bytes.size());
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

std::string EncodePythonRng(const std::vector<uint32_t>& words, bool has_gauss, double gauss) {
  std::string out;
  auto append = [&out](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  append(3, 4);
  for (uint32_t w : words) append(w, 4);
  append(has_gauss ? 1 : 0, 4);
  uint64_t bits;
  std::memcpy(&bits, &gauss, 8);
  append(bits, 8);
  return out;
}

bool DecodePythonRng(std::span<const std::byte> b, std::vector<uint32_t>* words,
                     bool* has_gauss, double* gauss) {
  if (b.size() != kPythonRngBytes || LoadLe(b, 0, 4) != 3) return false;
  words->resize(625);
  for (size_t i = 0; i < 625; ++i) (*words)[i] = static_cast<uint32_t>(LoadLe(b, 4 + 4 * i, 4));
  const uint64_t flag = LoadLe(b, 2504, 4);
  if (flag > 1) return false;
  *has_gauss = flag == 1;
  const uint64_t bits = LoadLe(b, 2508, 8);
  std::memcpy(gauss, &bits, 8);
  return true;
}

namespace {

using F = NumpyFieldType;

// Offsets follow from the order and sizes; NumpyRngLayouts() is checked
// against them in rng_test.
constexpr NumpyRngField kNumpyLegacy[] = {
    {"1", F::kU32, 624, 4, 0},     {"2", F::kU32, 1, 2500, 624},
    {"3", F::kU32, 1, 2504, 1},    {"4", F::kF64, 1, 2508, 0}};
constexpr NumpyRngField kNumpyMt19937[] = {
    {"state.key", F::kU32, 624, 4, 0}, {"state.pos", F::kU32, 1, 2500, 624}};
constexpr NumpyRngField kNumpyPcg64[] = {
    {"state.state", F::kU128, 1, 4, 0}, {"state.inc", F::kU128, 1, 20, 0},
    {"has_uint32", F::kU32, 1, 36, 1},  {"uinteger", F::kU32, 1, 40, 0}};
constexpr NumpyRngField kNumpySfc64[] = {
    {"state.state", F::kU64, 4, 4, 0}, {"has_uint32", F::kU32, 1, 36, 1},
    {"uinteger", F::kU32, 1, 40, 0}};
constexpr NumpyRngField kNumpyPhilox[] = {
    {"state.counter", F::kU64, 4, 4, 0}, {"state.key", F::kU64, 2, 36, 0},
    {"buffer", F::kU64, 4, 52, 0},       {"buffer_pos", F::kU32, 1, 84, 4},
    {"has_uint32", F::kU32, 1, 88, 1},   {"uinteger", F::kU32, 1, 92, 0}};

constexpr NumpyRngLayout kNumpyLayouts[] = {
    {1, "MT19937", true, 2516, kNumpyLegacy},
    {2, "MT19937", false, 2504, kNumpyMt19937},
    {3, "PCG64", false, 44, kNumpyPcg64},
    {4, "PCG64DXSM", false, 44, kNumpyPcg64},
    {5, "SFC64", false, 44, kNumpySfc64},
    {6, "Philox", false, 96, kNumpyPhilox},
};

}  // namespace

std::span<const NumpyRngLayout> NumpyRngLayouts() { return kNumpyLayouts; }

const NumpyRngLayout* FindNumpyRngLayout(std::span<const std::byte> bytes) {
  if (bytes.size() < 4) return nullptr;
  const uint64_t tag = LoadLe(bytes, 0, 4);
  for (const NumpyRngLayout& l : kNumpyLayouts) {
    if (l.tag == tag) return &l;
  }
  return nullptr;
}

Status ValidateNumpyRng(std::span<const std::byte> bytes) {
  const NumpyRngLayout* layout = FindNumpyRngLayout(bytes);
  if (layout == nullptr) {
    return Status::Corruption(
        "numpy RNG state: layout tag (u32 at offset 0): expected 1.." +
        std::to_string(std::size(kNumpyLayouts)) + ", got " +
        (bytes.size() < 4 ? "a record of " + std::to_string(bytes.size()) + " bytes"
                          : std::to_string(LoadLe(bytes, 0, 4))));
  }
  const std::string what = "numpy RNG state (layout " + std::to_string(layout->tag) + ", " +
                           std::string(layout->bit_generator) +
                           (layout->legacy ? " get_state()" : "") + ")";
  if (bytes.size() != layout->bytes) {
    return Status::Corruption(what + ": size: expected " + std::to_string(layout->bytes) +
                              " bytes, got " + std::to_string(bytes.size()));
  }
  for (const NumpyRngField& f : layout->fields) {
    if (f.max == 0) continue;
    const uint64_t v = LoadLe(bytes, f.offset, 4);
    if (v > f.max) {
      return Status::Corruption(what + ": field '" + std::string(f.path) + "' (u32 at offset " +
                                std::to_string(f.offset) + "): expected 0.." +
                                std::to_string(f.max) + ", got " + std::to_string(v));
    }
  }
  return Status::Ok();
}

}  // namespace rckpt
