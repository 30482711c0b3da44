// s3://BUCKET/KEY URLs, and the URI encoding SigV4 and S3 paths use.
#ifndef RCKPT_SRC_S3_URL_H_
#define RCKPT_SRC_S3_URL_H_

#include <string>
#include <string_view>

#include "rckpt/status.h"

namespace rckpt::s3 {

struct S3Url {
  std::string bucket;
  std::string key;  // empty only for a prefix

  // "s3://BUCKET/KEY".
  std::string ToString() const { return "s3://" + bucket + "/" + key; }
};

// What a URL must name: an object (a key is required) or a prefix (the key
// may be empty: "s3://bucket/" is every object of the bucket).
enum class UrlKind { kObject, kPrefix };

// Parses "s3://BUCKET/KEY". InvalidArgument naming the URL and the expected
// form for "s3://", "s3://bucket", "s3://bucket/" (for an object), a bucket
// name with characters no S3 server accepts, a key over 1024 bytes, and
// the scheme in another case ("S3://", CheckSchemeCase).
Result<S3Url> ParseS3Url(std::string_view url, UrlKind kind = UrlKind::kObject);

// SigV4's URI encoding: every byte but the unreserved A-Z a-z 0-9 - . _ ~
// as %XX (upper-case hex), '/' too when `encode_slash`.
std::string UriEncode(std::string_view s, bool encode_slash);

// Reverses UriEncode (and any other %XX); '+' stays '+'.
std::string UriDecode(std::string_view s);

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_URL_H_
