// HTTP transport for S3 over libcurl's multi interface. A client's requests
// are moved by a few threads, its lanes (one multi handle each, about four
// connections a lane, at most the node's share of CPUs and eight), so that
// TLS and the copying of bodies are not all on one core: at most
// max_connections transfers at once in all, on reused connections
// (keep-alive per lane, TLS sessions shared by the lanes). A request waits
// in one queue until any lane has room. When a store's name resolves to
// several addresses, each lane begins its connections at a different one
// (falling back to the others), so a client's connections spread over the
// store's front ends. Callers block in Perform, or start several requests
// and wait for each. HTTPS is verified against the system's CAs (or
// ca_file); curl honours HTTPS_PROXY, HTTP_PROXY and NO_PROXY.
#ifndef RCKPT_SRC_S3_HTTP_H_
#define RCKPT_SRC_S3_HTTP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rckpt/status.h"

namespace rckpt::s3 {

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST or DELETE
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  // Sent by PUT and POST; must stay valid until the request ends.
  std::span<const std::byte> body;
  // When not empty, a 2xx answer's body is written here (an answer longer
  // than it fails the request); every other answer's body goes to
  // HttpResponse::body.
  std::span<std::byte> into;
  bool no_proxy = false;  // never through a proxy (link-local endpoints)
  int connect_timeout_ms = 10000;
  int stall_timeout_s = 20;  // no byte moved for this long: kTimeout
};

// Why a request got no complete answer.
enum class TransportError {
  kNone,
  kConnect,  // refused, unreachable, or the name did not resolve
  kTimeout,  // connecting took too long, or the transfer stalled
  kBroken,   // reset, truncated, or otherwise cut short
  kTls,      // the server's certificate was not trusted: never retried
  kTooLong,  // the answer was longer than asked for: never retried
};

struct HttpResponse {
  int status = 0;                                            // 0 when no answer came
  std::vector<std::pair<std::string, std::string>> headers;  // lower-case names
  std::string body;         // the answer's body, unless it went to `into`
  uint64_t into_bytes = 0;  // bytes written to HttpRequest::into
  TransportError error = TransportError::kNone;
  std::string error_text;  // curl's account of the error

  // The header's value, or null.
  const std::string* Header(std::string_view name) const;
  bool ok() const { return error == TransportError::kNone && status >= 200 && status < 300; }
};

class HttpClient {
 public:
  // A request in progress; Wait returns its response once.
  class Call;

  // Starts the client's thread. IoError when libcurl cannot be set up.
  static Result<std::unique_ptr<HttpClient>> Create(int max_connections, std::string ca_file);
  // Fails the requests still in progress and stops the thread.
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts `request`, which must stay valid until the call is waited for.
  // Thread-safe.
  std::shared_ptr<Call> Start(const HttpRequest& request);
  // Start, then Wait.
  HttpResponse Perform(const HttpRequest& request);

  static HttpResponse Wait(Call& call);

  // The lanes a client of `max_connections` runs, and this client's.
  static int LanesFor(int max_connections);
  int lanes() const;

 private:
  struct Lane;
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_HTTP_H_
