// A minimal streaming JSON writer for the CLI's --json outputs.
#ifndef RCKPT_SRC_UTIL_JSON_WRITER_H_
#define RCKPT_SRC_UTIL_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rckpt {

// Appends `s` to `out` as a JSON string literal (quotes included); bytes
// that are not valid UTF-8 are written as U+FFFD.
void AppendJsonString(std::string& out, std::string_view s);

// Builds compact JSON; the caller pairs Begin/End calls. Keys and values are
// separated automatically.
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view s);
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  JsonWriter& Double(double v);  // nan/inf are written as strings
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // Inserts already-serialised JSON as one value.
  JsonWriter& Raw(std::string_view json);

  const std::string& str() const { return out_; }

 private:
  void Separate();
  std::string out_;
  std::vector<bool> first_{true};
  bool after_key_ = false;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_JSON_WRITER_H_
