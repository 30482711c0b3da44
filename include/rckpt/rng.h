// RNG records: the saved state of one random-number generator.
//
// RNG records are host objects. Their origin device is recorded (a CUDA
// generator belongs to a device) but they are always restored to host memory,
// under every load option, and never make a load fail with DeviceUnavailable.
#ifndef RCKPT_RNG_H_
#define RCKPT_RNG_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rckpt/device.h"
#include "rckpt/status.h"

namespace rckpt {

// Stored in files; frozen, append only.
enum class RngKind : uint8_t {
  kOpaque = 0,      // any bytes
  kTorchCpu = 1,    // torch.get_rng_state(): 5056 bytes, validated
  kTorchCuda = 2,   // torch.cuda.get_rng_state(): 16 bytes (seed, offset)
  kMt19937 = 3,     // std::mt19937, as captured by CaptureEngine
  kMt19937_64 = 4,  // std::mt19937_64, as captured by CaptureEngine
  kNumpy = 5,       // numpy legacy RandomState / Generator state, opaque
  kPython = 6,      // Python random.getstate(), opaque
};
inline constexpr int kNumRngKinds = 7;

// "opaque" "torch_cpu" "torch_cuda" "mt19937" "mt19937_64" "numpy" "python".
std::string_view RngKindName(RngKind kind);
bool ParseRngKind(std::string_view name, RngKind* out);
bool IsValidRngKind(uint8_t raw);

struct RngRecord {
  std::string name;
  RngKind kind = RngKind::kOpaque;
  Device origin;  // where the generator lived; restore is always to host
  std::vector<std::byte> bytes;
};

// Checks that `bytes` is a well-formed state of `kind`: torch_cpu is 5056
// bytes with seeded == 1, 0 < left <= 624 and next <= 624; torch_cuda is
// 16 bytes; mt19937(_64) is the binary layout of schema/FORMAT.md section 7.1
// (magic, index 0..n, n state words, a state the engine can hold) or the
// legacy textual form of files written before it. Other kinds accept any
// bytes. Returns Corruption naming the field, expected and actual value.
Status ValidateRngState(RngKind kind, std::span<const std::byte> bytes);

// Captures a standard engine's complete state in the binary layout of
// schema/FORMAT.md section 7.1 (2504 bytes: "MT32"/"MT64", index 0, then the
// next n state words, little-endian). Only the engine's standard interface is
// used, so the bytes are the same with every standard library.
std::vector<std::byte> CaptureEngine(const std::mt19937& engine);
std::vector<std::byte> CaptureEngine(const std::mt19937_64& engine);

// Restores a captured state, in the binary layout (from any writer: the
// index may be 0..n) or the legacy textual form; the engine then continues
// the same sequence as the captured one. (operator== may still tell the two
// apart where the library compares its representation rather than the
// sequence: libstdc++ compares a block of words and a position in it, and a
// restore from index 0 starts a block earlier.) Returns Corruption if the
// bytes are not a valid state; `engine` is left unchanged on failure.
Status RestoreEngine(std::span<const std::byte> bytes, std::mt19937* engine);
Status RestoreEngine(std::span<const std::byte> bytes, std::mt19937_64* engine);

}  // namespace rckpt

#endif  // RCKPT_RNG_H_
