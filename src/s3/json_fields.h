// The top-level fields of a small JSON object, as the credential endpoints
// (the container endpoint, EC2 instance metadata) answer:
// {"AccessKeyId": "...", "SecretAccessKey": "...", "Token": "...",
//  "Expiration": "2024-01-01T00:00:00Z"}.
#ifndef RCKPT_SRC_S3_JSON_FIELDS_H_
#define RCKPT_SRC_S3_JSON_FIELDS_H_

#include <map>
#include <string>
#include <string_view>

#include "rckpt/status.h"

namespace rckpt::s3 {

// The object's members whose values are strings (unescaped) or numbers,
// booleans and null (as written); nested objects and arrays are checked and
// left out. InvalidArgument for text that is not one JSON object.
Result<std::map<std::string, std::string>> ParseJsonFields(std::string_view text);

// Seconds since the epoch of an ISO 8601 UTC time "YYYY-MM-DDTHH:MM:SS[.f]Z"
// (the form AWS uses for credential expirations); InvalidArgument otherwise.
Result<int64_t> ParseIso8601Utc(std::string_view text);

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_JSON_FIELDS_H_
