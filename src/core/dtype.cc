#include "rckpt/dtype.h"

#include <array>

namespace rckpt {
namespace {

struct DTypeInfo {
  std::string_view name;
  size_t size;
  bool floating;
};

constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"f64", 8, true},   {"f32", 4, true},       {"f16", 2, true},
    {"bf16", 2, true},  {"f8_e4m3fn", 1, true}, {"f8_e5m2", 1, true},
    {"i8", 1, false},   {"i16", 2, false},      {"i32", 4, false},
    {"i64", 8, false},  {"u8", 1, false},       {"u16", 2, false},
    {"u32", 4, false},  {"u64", 8, false},      {"bool", 1, false},
    {"c64", 8, true},   {"c128", 16, true},
}};

}  // namespace

size_t DTypeSize(DType dtype) { return kInfo[static_cast<size_t>(dtype)].size; }

std::string_view DTypeName(DType dtype) {
  return kInfo[static_cast<size_t>(dtype)].name;
}

std::optional<DType> ParseDType(std::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i) {
    if (kInfo[i].name == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

bool IsValidDType(uint8_t raw) { return raw < kNumDTypes; }

bool IsFloatingDType(DType dtype) {
  return kInfo[static_cast<size_t>(dtype)].floating;
}

}  // namespace rckpt
