// DType: the element types a checkpoint can hold.
//
// The numeric values are stored in files (schema/checkpoint.fbs, enum DType)
// and are frozen: new types are only ever appended.
#ifndef RCKPT_DTYPE_H_
#define RCKPT_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rckpt {

enum class DType : uint8_t {
  kF64 = 0,
  kF32 = 1,
  kF16 = 2,
  kBF16 = 3,
  kF8E4M3FN = 4,
  kF8E5M2 = 5,
  kI8 = 6,
  kI16 = 7,
  kI32 = 8,
  kI64 = 9,
  kU8 = 10,
  kU16 = 11,
  kU32 = 12,
  kU64 = 13,
  kBool = 14,
  kC64 = 15,
  kC128 = 16,
};

inline constexpr int kNumDTypes = 17;

// Size of one element in bytes (c64 is 8, c128 is 16, bool is 1).
size_t DTypeSize(DType dtype);

// The format's spelling: "f64" "f32" "f16" "bf16" "f8_e4m3fn" "f8_e5m2" "i8"
// "i16" "i32" "i64" "u8" "u16" "u32" "u64" "bool" "c64" "c128".
std::string_view DTypeName(DType dtype);

// Parses DTypeName's spelling; nullopt for anything else.
std::optional<DType> ParseDType(std::string_view name);

// True for values the enum defines (used to validate bytes read from files).
bool IsValidDType(uint8_t raw);

// True for f64 f32 f16 bf16 f8_* c64 c128 (the types diff compares with
// tolerances).
bool IsFloatingDType(DType dtype);

}  // namespace rckpt

#endif  // RCKPT_DTYPE_H_
