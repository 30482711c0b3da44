// A save to S3: the bytes appended are cut into parts uploaded several at a
// time while the caller goes on appending (host memory: the parts in flight
// plus the one being filled), and the object appears only when
// CompleteMultipartUpload succeeds. An object smaller than one part is one
// PutObject, atomic too. A failed or abandoned write aborts its upload; a
// killed process leaves an incomplete upload, invisible to readers
// (FileSystem::ListIncomplete).
#ifndef RCKPT_SRC_S3_S3_WRITER_H_
#define RCKPT_SRC_S3_S3_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rckpt/file.h"
#include "s3/client.h"
#include "s3/url.h"

namespace rckpt::s3 {

// S3's limits on a multipart upload.
inline constexpr uint64_t kMinPartBytes = 5ull << 20;
inline constexpr uint64_t kMaxPartBytes = 5ull << 30;
inline constexpr uint64_t kMaxParts = 10000;
// The smallest part rckpt sizes (S3Options::part_bytes = 0).
inline constexpr uint64_t kDefaultPartBytes = 8ull << 20;

// The size of part `number` (1-based) of an upload expected to hold
// `expected_size` bytes (0: unknown) with S3Options::part_bytes `fixed`
// (0: sized here). Sized here, parts are at least 8 MiB and large enough to
// hold the expected size in 8,000 parts; past part 8,000 each 250 parts
// double in size, so an object larger than expected still fits the last
// 2,000 (to about 1 TiB past the expected size at the smallest).
uint64_t PartBytes(uint64_t number, uint64_t expected_size, uint64_t fixed);

// The writer of `url`. Nothing is sent before the first part is full. With
// `if_absent`, the object is completed (or put) with `If-None-Match: *`:
// Commit fails with AlreadyExists, and aborts, when the key exists then.
std::unique_ptr<AtomicWritableFile> NewS3Writer(std::shared_ptr<S3Client> client, S3Url url,
                                                uint64_t expected_size, bool if_absent = false);

// Every write's identity, sent as user metadata with its PutObject or
// CreateMultipartUpload: the object it makes carries it, so a write whose
// answer was lost is told by a HEAD (ETags are opaque: not an MD5 on GCS,
// with SSE-KMS or SSE-C, on MinIO with encryption).
inline constexpr char kMarkerHeader[] = "x-amz-meta-rckpt-upload";
// Every object's Content-Type: bytes of no other registered type (RFC 2046).
inline constexpr char kObjectContentType[] = "application/octet-stream";
// A new marker: 32 random hex digits.
std::string NewUploadMarker();

// The multipart upload's steps, for the writers above and for shared writes
// (rckpt/file.h). CreateUpload sends `marker`; CompleteParts takes the ETags
// of parts 1..N and, when the Complete fails in any way (a try completed it
// and its answer was lost: the retry finds no upload, the key taken, or
// errors to the end), succeeds all the same when the object carries
// `marker`; with `if_none_match` it is sent with `If-None-Match: *`
// (AlreadyExists when the key exists). AbortUpload is OK when the upload is
// gone already.
Result<std::string> CreateUpload(S3Client& client, const S3Url& url,
                                 const std::string& marker);
Status CompleteParts(S3Client& client, const S3Url& url,
                     const std::string& upload_id,
                     const std::vector<std::string>& etags,
                     const std::string& marker, bool if_none_match = false);
// Whether the object at `url` carries `marker` (false when there is none;
// the HEAD's error when it fails).
Result<bool> HasMarker(S3Client& client, const S3Url& url, const std::string& marker);
Status AbortUpload(S3Client& client, const S3Url& url,
                   const std::string& upload_id);

// Parts first_part, first_part + 1, ... of the upload `upload_id`, of the
// sizes given (SharedWriteRegion).
std::unique_ptr<SharedWriteRegion> NewS3RegionWriter(
    std::shared_ptr<S3Client> client, S3Url url, std::string upload_id,
    uint64_t first_part, std::vector<uint64_t> part_bytes);

// The headers asking for the server-side encryption of S3Options, if any.
KeyValues EncryptionHeaders(const S3Options& options);

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_S3_WRITER_H_
