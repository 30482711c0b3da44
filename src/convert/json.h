// A minimal JSON reader and writer for safetensors headers and the state
// tree's JSON encoding. The reader is strict RFC 8259 (UTF-8 input, no
// trailing commas, no comments), bounds nesting depth, keeps object members
// in file order and refuses duplicate keys. Numbers keep their text so
// integers are read exactly.
#ifndef RCKPT_SRC_CONVERT_JSON_H_
#define RCKPT_SRC_CONVERT_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rckpt/status.h"

namespace rckpt::convert {

struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  // Defined in json.cc, where Json is complete: clang with libstdc++ refuses
  // to instantiate the members' vector<pair<string, Json>> in the class body.
  Json();
  Json(const Json&);
  Json(Json&&) noexcept;
  Json& operator=(const Json&);
  Json& operator=(Json&&) noexcept;
  ~Json();

  Kind kind = Kind::kNull;
  bool b = false;
  std::string text;  // kString: decoded UTF-8; kNumber: the literal
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  bool is_string() const { return kind == Kind::kString; }
  bool is_array() const { return kind == Kind::kArray; }
  bool is_object() const { return kind == Kind::kObject; }
  // A number written without fraction or exponent that fits.
  std::optional<int64_t> AsInt() const;
  std::optional<uint64_t> AsUint() const;
  bool IsInteger() const;  // kNumber without '.', 'e', 'E'
  double AsDouble() const;
  const Json* Find(std::string_view key) const;
};

// Parses one JSON document (surrounding whitespace allowed). Corruption with
// the byte offset on any error.
Result<Json> ParseJson(std::string_view text, int max_depth = 256);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_JSON_H_
