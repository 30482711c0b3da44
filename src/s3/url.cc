#include "s3/url.h"

#include "io/url_file_system.h"
#include "util/hex.h"

namespace rckpt::s3 {
namespace {

constexpr size_t kMaxKeyBytes = 1024;

bool Unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<S3Url> ParseS3Url(std::string_view url, UrlKind kind) {
  const std::string shown(url.substr(0, 200));
  const char* expected = kind == UrlKind::kObject
                             ? "expected s3://BUCKET/KEY, a bucket and an object key"
                             : "expected s3://BUCKET/ or s3://BUCKET/PREFIX";
  RCKPT_RETURN_IF_ERROR(CheckSchemeCase(url));
  if (!IsObjectStoreUrl(url)) {
    return Status::InvalidArgument("'" + shown + "' is not an s3:// URL: " + expected);
  }
  const std::string_view rest = url.substr(5);
  const size_t slash = rest.find('/');
  S3Url out;
  out.bucket = std::string(rest.substr(0, slash));
  if (out.bucket.empty()) {
    return Status::InvalidArgument("'" + shown + "' names no bucket: " + expected);
  }
  for (const unsigned char c : out.bucket) {
    if (!Unreserved(c) || c == '~') {
      return Status::InvalidArgument("'" + shown + "': bucket name '" + out.bucket +
                                     "' may hold only letters, digits, '.', '-' and '_'");
    }
  }
  if (out.bucket.size() > 255) {
    return Status::InvalidArgument("'" + shown + "': bucket name longer than 255 characters");
  }
  if (slash != std::string_view::npos) out.key = std::string(rest.substr(slash + 1));
  if (kind == UrlKind::kObject && out.key.empty()) {
    return Status::InvalidArgument("'" + shown + "' names no object key: " + expected +
                                   " such as s3://" + out.bucket + "/checkpoint.rckpt");
  }
  if (out.key.size() > kMaxKeyBytes) {
    return Status::InvalidArgument("'" + shown + "...': the key has " +
                                   std::to_string(out.key.size()) +
                                   " bytes, more than S3's limit of 1024");
  }
  return out;
}

std::string UriEncode(std::string_view s, bool encode_slash) {
  std::string out;
  out.reserve(s.size() * 3);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (Unreserved(c) || (c == '/' && !encode_slash)) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      AppendHexByte(out, c, HexCase::kUpper);
    }
  }
  return out;
}

std::string UriDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = HexValue(s[i + 1]);
      const int lo = HexValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

}  // namespace rckpt::s3
