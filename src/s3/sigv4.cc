#include "s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "s3/url.h"
#include "util/hex.h"

namespace rckpt::s3 {
namespace {

using Digest = std::array<unsigned char, 32>;

Digest Hmac(std::span<const unsigned char> key, std::string_view data) {
  Digest out{};
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(), &n);
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A header value in canonical form: trimmed, runs of spaces as one.
std::string TrimValue(std::string_view v) {
  std::string out;
  bool space = false;
  for (const char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::span<const std::byte> data) {
  Digest d{};
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d.data());
  return HexEncode(std::span<const unsigned char>(d));
}

std::string Sha256Hex(std::string_view data) {
  return Sha256Hex(std::as_bytes(std::span<const char>(data.data(), data.size())));
}

std::string CanonicalQueryString(const KeyValues& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) {
    encoded.emplace_back(UriEncode(name, true), UriEncode(value, true));
  }
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    out += name + "=" + value;
  }
  return out;
}

std::string CanonicalRequest(const SigningRequest& request, std::string* signed_headers) {
  // Headers of the same name are one, their values joined by ','.
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& [name, value] : request.headers) {
    headers.emplace_back(Lower(name), TrimValue(value));
  }
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string canonical_headers, names;
  for (size_t i = 0; i < headers.size(); ++i) {
    if (i > 0 && headers[i].first == headers[i - 1].first) {
      canonical_headers.back() = ',';  // the previous line's '\n'
      canonical_headers += headers[i].second + "\n";
      continue;
    }
    canonical_headers += headers[i].first + ":" + headers[i].second + "\n";
    if (!names.empty()) names.push_back(';');
    names += headers[i].first;
  }
  if (signed_headers != nullptr) *signed_headers = names;
  return request.method + "\n" + request.canonical_uri + "\n" +
         CanonicalQueryString(request.query) + "\n" + canonical_headers + "\n" + names + "\n" +
         request.payload_hash;
}

std::string StringToSign(std::string_view amz_date, std::string_view region,
                         std::string_view service, std::string_view canonical_request) {
  std::string out = "AWS4-HMAC-SHA256\n";
  out += amz_date;
  out += "\n";
  out += amz_date.substr(0, 8);
  out += "/";
  out += region;
  out += "/";
  out += service;
  out += "/aws4_request\n";
  out += Sha256Hex(canonical_request);
  return out;
}

std::string Signature(std::string_view secret, std::string_view amz_date, std::string_view region,
                      std::string_view service, std::string_view string_to_sign) {
  const std::string k_secret = "AWS4" + std::string(secret);
  const Digest k_date =
      Hmac({reinterpret_cast<const unsigned char*>(k_secret.data()), k_secret.size()},
           amz_date.substr(0, 8));
  const Digest k_region = Hmac(k_date, region);
  const Digest k_service = Hmac(k_region, service);
  const Digest k_signing = Hmac(k_service, "aws4_request");
  const Digest sig = Hmac(k_signing, string_to_sign);
  return HexEncode(std::span<const unsigned char>(sig));
}

std::string Authorization(std::string_view access_key_id, std::string_view secret,
                          std::string_view amz_date, std::string_view region,
                          std::string_view service, const SigningRequest& request) {
  std::string signed_headers;
  const std::string canonical = CanonicalRequest(request, &signed_headers);
  const std::string to_sign = StringToSign(amz_date, region, service, canonical);
  std::string out = "AWS4-HMAC-SHA256 Credential=";
  out += access_key_id;
  out += "/";
  out += amz_date.substr(0, 8);
  out += "/";
  out += region;
  out += "/";
  out += service;
  out += "/aws4_request, SignedHeaders=" + signed_headers + ", Signature=";
  out += Signature(secret, amz_date, region, service, to_sign);
  return out;
}

}  // namespace rckpt::s3
