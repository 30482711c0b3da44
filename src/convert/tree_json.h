// A lossless JSON encoding of state-tree Values (used in safetensors
// __metadata__). Lists are JSON arrays; null, bools, ints and finite floats
// are JSON literals (floats always carry a '.' or exponent, printed with 17
// significant digits so they round-trip bit for bit); strings are JSON
// strings. Everything else is a one-member object tagged with '$':
//   {"$float": "<16 hex digits of the IEEE bits>"}  (NaN and infinities)
//   {"$str": "<hex>"}      strings that are not valid UTF-8
//   {"$bytes": "<hex>"}    {"$bigint": "<hex, little-endian two's complement>"}
//   {"$tensor": name}      {"$rng": name}
//   {"$tuple": [...]}      {"$set": [...]}
//   {"$map": [[key, value], ...]}   (any key type, order kept)
//   {"$object": "class.path", "fields": value}
#ifndef RCKPT_SRC_CONVERT_TREE_JSON_H_
#define RCKPT_SRC_CONVERT_TREE_JSON_H_

#include <string>

#include "convert/json.h"
#include "rckpt/status.h"
#include "rckpt/tree.h"

namespace rckpt::convert {

void AppendTreeJson(std::string* out, const Value& v);
Result<Value> TreeFromJson(const Json& j);

Result<std::string> HexDecode(std::string_view hex);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_TREE_JSON_H_
