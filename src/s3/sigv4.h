// AWS Signature Version 4, built in-house: the canonical request, the
// string to sign and the HMAC-SHA256 chain (OpenSSL), as
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html
// describes for S3 (the path is encoded once, never normalised). libcurl's
// own CURLOPT_AWS_SIGV4 is not used: its versions have mis-signed value-less
// queries (?uploads), unsorted queries and special characters in keys.
// Tested against AWS's published examples and botocore's signer
// (tests/s3/sigv4_test.cc, tests/s3/data/).
#ifndef RCKPT_SRC_S3_SIGV4_H_
#define RCKPT_SRC_S3_SIGV4_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rckpt::s3 {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

struct SigningRequest {
  std::string method;         // "GET", "PUT", ...
  std::string canonical_uri;  // the path exactly as sent: "/bucket/a%20b"
  KeyValues query;            // decoded names and values ("uploads", "")
  KeyValues headers;          // every header to sign, "host" included
  std::string payload_hash;   // hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

// The query string in canonical form: names and values encoded (every byte
// but the unreserved), sorted by name then value, "name=value" joined by
// '&' (a value-less name is "name="). Also the query string sent.
std::string CanonicalQueryString(const KeyValues& query);

// The canonical request, and in `signed_headers` (when not null) the
// ';'-joined lower-case names of the headers signed.
std::string CanonicalRequest(const SigningRequest& request, std::string* signed_headers);

// "AWS4-HMAC-SHA256\n<amz_date>\n<date>/<region>/<service>/aws4_request\n<hex
// SHA-256 of the canonical request>".
std::string StringToSign(std::string_view amz_date, std::string_view region,
                         std::string_view service, std::string_view canonical_request);

// The hex signature of `string_to_sign` with the key derived from `secret`
// for the date of `amz_date` ("YYYYMMDDTHHMMSSZ"), `region` and `service`.
std::string Signature(std::string_view secret, std::string_view amz_date, std::string_view region,
                      std::string_view service, std::string_view string_to_sign);

// The Authorization header's value for `request` signed at `amz_date`.
std::string Authorization(std::string_view access_key_id, std::string_view secret,
                          std::string_view amz_date, std::string_view region,
                          std::string_view service, const SigningRequest& request);

// Hex SHA-256 of `data`.
std::string Sha256Hex(std::span<const std::byte> data);
std::string Sha256Hex(std::string_view data);

// The SHA-256 of the empty string, in hex.
inline constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_SIGV4_H_
