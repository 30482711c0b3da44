#include "s3/json_fields.h"

#include <cstdio>
#include <ctime>
#include <optional>

namespace rckpt::s3 {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Status Fail(const std::string& what) const {
    return Status::InvalidArgument("JSON at byte " + std::to_string(i_) + ": " + what);
  }
  void Space() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  bool Eat(char c) {
    Space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    Space();
    return i_ == s_.size();
  }

  Result<std::string> String() {
    if (!Eat('"')) return Fail("expected a string");
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ == s_.size()) break;
      c = s_[i_++];
      switch (c) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) return Fail("short \\u escape");
          unsigned v = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = s_[i_++];
            v = v * 16 + (h >= '0' && h <= '9'   ? h - '0'
                          : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                 : 99);
            if (v > 0xffff) return Fail("bad \\u escape");
          }
          // Credentials are ASCII; other code points are kept as UTF-8.
          if (v < 0x80) {
            out.push_back(static_cast<char>(v));
          } else if (v < 0x800) {
            out.push_back(static_cast<char>(0xc0 | (v >> 6)));
            out.push_back(static_cast<char>(0x80 | (v & 0x3f)));
          } else {
            out.push_back(static_cast<char>(0xe0 | (v >> 12)));
            out.push_back(static_cast<char>(0x80 | ((v >> 6) & 0x3f)));
            out.push_back(static_cast<char>(0x80 | (v & 0x3f)));
          }
          break;
        }
        default:
          out.push_back(c);
      }
    }
    if (i_ == s_.size()) return Fail("unterminated string");
    ++i_;
    return out;
  }

  // A value: strings and scalars are returned as text, containers skipped
  // (nullopt).
  Result<std::optional<std::string>> Value(int depth) {
    if (depth > 32) return Fail("nested too deeply");
    Space();
    if (i_ == s_.size()) return Fail("expected a value");
    const char c = s_[i_];
    if (c == '"') {
      RCKPT_ASSIGN_OR_RETURN(std::string v, String());
      return std::optional<std::string>(std::move(v));
    }
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++i_;
      if (Eat(close)) return std::optional<std::string>();
      do {
        if (c == '{') {
          RCKPT_RETURN_IF_ERROR(String().status());
          if (!Eat(':')) return Fail("expected ':'");
        }
        RCKPT_RETURN_IF_ERROR(Value(depth + 1).status());
      } while (Eat(','));
      if (!Eat(close)) return Fail(std::string("expected '") + close + "'");
      return std::optional<std::string>();
    }
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && s_[i_] != ' ' &&
           s_[i_] != '\n' && s_[i_] != '\r' && s_[i_] != '\t') {
      ++i_;
    }
    if (i_ == start) return Fail("expected a value");
    return std::optional<std::string>(std::string(s_.substr(start, i_ - start)));
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

Result<std::map<std::string, std::string>> ParseJsonFields(std::string_view text) {
  Parser p(text);
  std::map<std::string, std::string> out;
  if (!p.Eat('{')) return p.Fail("expected an object");
  if (!p.Eat('}')) {
    do {
      RCKPT_ASSIGN_OR_RETURN(std::string key, p.String());
      if (!p.Eat(':')) return p.Fail("expected ':'");
      RCKPT_ASSIGN_OR_RETURN(std::optional<std::string> value, p.Value(0));
      if (value) out[key] = std::move(*value);
    } while (p.Eat(','));
    if (!p.Eat('}')) return p.Fail("expected '}'");
  }
  if (!p.AtEnd()) return p.Fail("text after the object");
  return out;
}

Result<int64_t> ParseIso8601Utc(std::string_view text) {
  std::tm tm{};
  int consumed = 0;
  const std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return Status::InvalidArgument(std::string("'").append(s, 0, 40).append(
        "' is not a time of the form YYYY-MM-DDTHH:MM:SSZ"));
  }
  std::string_view rest = std::string_view(s).substr(static_cast<size_t>(consumed));
  if (rest.starts_with(".")) {
    rest.remove_prefix(1);
    while (!rest.empty() && rest[0] >= '0' && rest[0] <= '9') rest.remove_prefix(1);
  }
  if (rest != "Z" && rest != "+00:00") {
    return Status::InvalidArgument(
        std::string("'").append(s, 0, 40).append("' is not a UTC time (ending in Z)"));
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(::timegm(&tm));
}

}  // namespace rckpt::s3
