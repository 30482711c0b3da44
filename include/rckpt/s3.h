// Checkpoints in object storage: s3://BUCKET/KEY wherever a checkpoint path
// goes. S3 itself and the servers that speak its API (GCS's XML API, Ceph
// RGW, MinIO, SeaweedFS, R2, ...), through libcurl with SigV4 signing.
//
// Without options, an s3:// path uses DefaultFileSystem() (file.h), set up
// from the environment and the AWS configuration files as the AWS CLI is
// (docs/OBJECT_STORAGE.md). NewS3FileSystem gives a file system with an
// explicit endpoint, region and credentials instead, to pass as
// SaveOptions::fs, LoadOptions::fs, ImportOptions::fs or ExportOptions::fs:
//
//   rckpt::S3Options o;
//   o.endpoint = "http://127.0.0.1:8333";
//   o.credentials = rckpt::S3Credentials{"KEY", "SECRET"};
//   RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<rckpt::FileSystem> fs, rckpt::NewS3FileSystem(o));
//   RCKPT_RETURN_IF_ERROR(rckpt::Save("s3://ckpts/run/last.rckpt", ck, {.fs = fs.get()}));
//
// What a save to S3 does: the object appears only when its multipart upload
// completes (readers see the old object or the new one, never a mix); a
// failed save aborts its upload; a killed process leaves an incomplete
// upload, invisible to readers, which FileSystem::ListIncomplete finds and
// AbortIncomplete removes (`rckpt incomplete`). Every part and whole object
// is sent with its CRC-32C (x-amz-checksum-crc32c): a body damaged on the
// way is refused by the server and sent again. Every part but the last is
// one size (as Cloudflare R2 and Garage require). A load reads the footer with
// a suffix-range GET, then chunks by parallel ranged GETs that carry the
// first answer's ETag in If-Match: an object replaced during a load is an
// error, never a mix. Each chunk is checked against its checksum.
//
// Errors name the URL, the S3 operation and the last HTTP status: NotFound
// (a missing key or bucket), IoError (access denied, a refused signature or
// an expired token, a network failure after the retries), InvalidArgument
// (a malformed URL or option). Secret keys and session tokens never appear
// in a message.
//
// Thread-safety: an S3 file system may be used from any number of threads.
#ifndef RCKPT_S3_H_
#define RCKPT_S3_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "rckpt/file.h"
#include "rckpt/status.h"

namespace rckpt {

// AWS credentials given explicitly. The secret and the token are never
// printed by rckpt.
struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty for long-term keys
  // When temporary credentials expire, in seconds since the epoch; 0 for
  // never. Only a credentials_source's answers are renewed by it.
  int64_t expires_unix = 0;
};

// How a bucket is named in a request: in the path
// (http://host:port/BUCKET/KEY) or in the host name
// (https://BUCKET.s3.REGION.amazonaws.com/KEY).
enum class S3Addressing {
  // Virtual-hosted on AWS's own endpoints (for buckets whose names allow
  // it), path-style on any other endpoint (an IP address, localhost, a
  // company's server), or as the profile's `s3 = addressing_style = ...`
  // says.
  kAuto,
  kPath,
  kVirtualHosted,
};

// Server-side encryption asked for on every object written.
enum class S3Encryption {
  kBucketDefault,  // no header: the bucket's own setting
  kS3,             // x-amz-server-side-encryption: AES256 (SSE-S3)
  kKms,            // aws:kms (SSE-KMS), with kms_key_id when given
};

struct S3Options {
  // "https://host[:port]" or "http://host:port" (plain HTTP only when it
  // says http). Empty: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
  // endpoint_url, else AWS's endpoint for the region.
  std::string endpoint;
  // Empty: AWS_REGION, AWS_DEFAULT_REGION, the profile's region, else
  // us-east-1. An answer naming the bucket's region (a redirect, or an
  // error with a region hint) is followed once.
  std::string region;
  // Unset: the AWS chain: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
  // (/ AWS_SESSION_TOKEN), the profile in the shared credentials and config
  // files, the container endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI or
  // _RELATIVE_URI), then EC2 instance metadata (IMDSv2), whose temporary
  // credentials are renewed before they expire.
  std::optional<S3Credentials> credentials;
  // A caller's own source of credentials, used instead of the AWS chain
  // when `credentials` is unset (rckpt's Python package hands over what
  // botocore resolves: web identity, SSO, credential_process, assumed
  // roles). Called at the first request, again five minutes before the
  // credentials it gave expire (S3Credentials::expires_unix), and when the
  // server says a token has expired; while a renewal fails, unexpired
  // credentials are still used. It may be called from any thread, never
  // from two at once. An error it returns is the request's error.
  std::function<Result<S3Credentials>()> credentials_source;
  // How messages name that source ("botocore (sso)"); empty:
  // "credentials_source".
  std::string credentials_source_name;
  // The profile of ~/.aws/credentials and ~/.aws/config
  // (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE). Empty: AWS_PROFILE,
  // else "default".
  std::string profile;
  S3Addressing addressing = S3Addressing::kAuto;
  S3Encryption encryption = S3Encryption::kBucketDefault;
  std::string kms_key_id;  // with kKms; empty: the account's AWS managed key

  // Requests in flight at once (and so connections): what a load keeps
  // waiting on the network, whatever the number of cores.
  int max_requests = 16;
  // Size of a save's multipart parts, all but the last one size. 0: from
  // the object's expected size (at least 8 MiB, large enough for 8,000
  // parts; 128 MiB when the size is not known). 5 MiB to 5 GiB otherwise.
  uint64_t part_bytes = 0;
  // Parts uploaded at once by a save (by each rank of a collective one);
  // its host memory is (parts in flight + 1) parts, at most
  // upload_buffer_bytes: fewer parts go at once when they are larger, at
  // least one (then two parts' memory).
  int upload_parts_in_flight = 8;
  uint64_t upload_buffer_bytes = 512ull << 20;

  // Retries of a request that failed in a way worth retrying (503 SlowDown,
  // 500, a connection reset or refused, a truncated answer, a stall): at
  // most max_attempts tries in all, sleeping a random time up to
  // min(retry_max_delay_ms, retry_base_delay_ms * 2^n) before try n + 1.
  // Only idempotent requests are retried after the server may have acted
  // on them (GET, HEAD, PUT, DELETE, CompleteMultipartUpload); a request
  // refused before it was acted on (503, a refused connection) always is.
  int max_attempts = 10;
  int retry_base_delay_ms = 100;
  int retry_max_delay_ms = 5000;
  // A connection not made within this is a failed try.
  int connect_timeout_ms = 10000;
  // A request that moves no byte for this many seconds is a failed try.
  int stall_timeout_s = 20;

  // CA certificates for HTTPS (a PEM file). Empty: AWS_CA_BUNDLE, else the
  // system's. Certificates are always verified.
  std::string ca_file;
  // false: the environment and the AWS configuration files are not read at
  // all; everything comes from these options (credentials then required).
  bool read_environment = true;
};

// A file system serving s3:// URLs with `options`, and every other path
// from the local (POSIX) file system, so one file system serves a
// conversion between the two. Nothing is sent until the first request;
// credentials are looked up then. InvalidArgument for a malformed endpoint
// or option values out of range; Unsupported in a build without S3 support
// (RCKPT_ENABLE_S3=OFF, or libcurl, OpenSSL or pugixml missing).
Result<std::unique_ptr<FileSystem>> NewS3FileSystem(const S3Options& options);

// Where requests made with `options` would get their credentials, found
// without sending a request: "S3Options::credentials", "credentials_source",
// "environment", "profile 'NAME'", "container endpoint" or "instance
// metadata" (which is asked only at the first request). Unsupported,
// naming the setting, for a source the library does not resolve (a
// profile's credential_process, role_arn or SSO settings, web identity);
// InvalidArgument for a configuration that is wrong (one of the key
// variables without the other, a profile named but absent, a malformed
// file); Unsupported in a build without S3 support. The secret is never
// read into the answer.
Result<std::string> S3CredentialSource(const S3Options& options);

// Whether this build of rckpt has S3 support.
bool S3Supported();

}  // namespace rckpt

#endif  // RCKPT_S3_H_
