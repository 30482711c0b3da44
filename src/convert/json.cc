#include "convert/json.h"

#include <cerrno>
#include <cstdlib>

#include "convert/bytes.h"
#include "util/utf8.h"

namespace rckpt::convert {

Json::Json() = default;
Json::Json(const Json&) = default;
Json::Json(Json&&) noexcept = default;
Json& Json::operator=(const Json&) = default;
Json& Json::operator=(Json&&) noexcept = default;
Json::~Json() = default;

namespace {

class Parser {
 public:
  Parser(std::string_view s, int max_depth) : s_(s), max_depth_(max_depth) {}

  Result<Json> Document() {
    SkipWs();
    Json v;
    RCKPT_RETURN_IF_ERROR(Parse(&v, 0));
    SkipWs();
    if (pos_ != s_.size()) return Err("trailing characters after the JSON value");
    return v;
  }

 private:
  Status Err(const std::string& what) {
    return Status::Corruption("json: " + what + " at byte " + std::to_string(pos_));
  }
  void SkipWs() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Lit(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  Status Parse(Json* v, int depth) {
    if (depth > max_depth_) return Err("nesting deeper than " + std::to_string(max_depth_));
    if (pos_ >= s_.size()) return Err("unexpected end");
    char c = s_[pos_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v->kind = Json::Kind::kString;
      return String(&v->text);
    }
    if (Lit("null")) return Status::Ok();
    if (Lit("true")) {
      v->kind = Json::Kind::kBool;
      v->b = true;
      return Status::Ok();
    }
    if (Lit("false")) {
      v->kind = Json::Kind::kBool;
      return Status::Ok();
    }
    if (c == '-' || (c >= '0' && c <= '9')) return Number(v);
    return Err("unexpected character '" + Printable(std::string(1, c)) + "'");
  }
  Status Number(Json* v) {
    size_t start = pos_;
    auto digits = [&] {
      size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - d;
    };
    if (s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Err("malformed number");
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Err("malformed number fraction");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Err("malformed number exponent");
    }
    v->kind = Json::Kind::kNumber;
    v->text = std::string(s_.substr(start, pos_ - start));
    return Status::Ok();
  }
  Status Hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return Err("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return Err("bad hex digit in \\u escape");
    }
    *out = v;
    return Status::Ok();
  }
  static void PutUtf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  Status String(std::string* out) {
    ++pos_;  // opening quote
    size_t run = pos_;
    while (true) {
      if (pos_ >= s_.size()) return Err("unterminated string");
      char c = s_[pos_];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) return Err("control character in string");
      if (c != '\\') {
        ++pos_;
        continue;
      }
      out->append(s_.substr(run, pos_ - run));
      ++pos_;
      if (pos_ >= s_.size()) return Err("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          RCKPT_RETURN_IF_ERROR(Hex4(&cp));
          if (cp >= 0xd800 && cp < 0xdc00) {
            uint32_t lo = 0;
            if (!Lit("\\u")) return Err("unpaired surrogate");
            RCKPT_RETURN_IF_ERROR(Hex4(&lo));
            if (lo < 0xdc00 || lo >= 0xe000) return Err("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            return Err("unpaired surrogate");
          }
          PutUtf8(out, cp);
          break;
        }
        default:
          return Err("bad escape '\\" + Printable(std::string(1, e)) + "'");
      }
      run = pos_;
    }
    out->append(s_.substr(run, pos_ - run));
    ++pos_;
    return Status::Ok();
  }
  Status Array(Json* v, int depth) {
    v->kind = Json::Kind::kArray;
    ++pos_;
    SkipWs();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return Status::Ok();
    }
    while (true) {
      SkipWs();
      v->items.emplace_back();
      RCKPT_RETURN_IF_ERROR(Parse(&v->items.back(), depth + 1));
      SkipWs();
      if (pos_ >= s_.size()) return Err("unterminated array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return Status::Ok();
      }
      return Err("expected ',' or ']'");
    }
  }
  Status Object(Json* v, int depth) {
    v->kind = Json::Kind::kObject;
    ++pos_;
    SkipWs();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return Status::Ok();
    }
    while (true) {
      SkipWs();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Err("expected a member name");
      std::string key;
      RCKPT_RETURN_IF_ERROR(String(&key));
      for (const auto& m : v->members) {
        if (m.first == key) return Err("duplicate member name '" + Printable(key.substr(0, 80)) + "'");
      }
      SkipWs();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Err("expected ':'");
      ++pos_;
      SkipWs();
      v->members.emplace_back(std::move(key), Json());
      RCKPT_RETURN_IF_ERROR(Parse(&v->members.back().second, depth + 1));
      SkipWs();
      if (pos_ >= s_.size()) return Err("unterminated object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return Status::Ok();
      }
      return Err("expected ',' or '}'");
    }
  }

  std::string_view s_;
  int max_depth_;
  size_t pos_ = 0;
};

}  // namespace

bool Json::IsInteger() const {
  return kind == Kind::kNumber && text.find_first_of(".eE") == std::string::npos;
}

std::optional<int64_t> Json::AsInt() const {
  if (!IsInteger()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || *end) return std::nullopt;
  return v;
}

std::optional<uint64_t> Json::AsUint() const {
  if (!IsInteger() || text[0] == '-') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE || *end) return std::nullopt;
  return v;
}

double Json::AsDouble() const { return std::strtod(text.c_str(), nullptr); }

const Json* Json::Find(std::string_view key) const {
  for (const auto& m : members) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

Result<Json> ParseJson(std::string_view text, int max_depth) {
  if (!IsValidUtf8(text)) return Status::Corruption("json: text is not valid UTF-8");
  Parser p(text, max_depth);
  return p.Document();
}

}  // namespace rckpt::convert
