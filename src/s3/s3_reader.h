// An S3 object opened for reading: one suffix-range GET finds its size and
// ETag and brings its tail (a checkpoint's footer and, mostly, manifest);
// every later read is a ranged GET carrying If-Match with that ETag, large
// ones cut into pieces fetched in parallel. An object replaced while it is
// read is an error, never a mix of two objects.
#ifndef RCKPT_SRC_S3_S3_READER_H_
#define RCKPT_SRC_S3_S3_READER_H_

#include <memory>

#include "rckpt/file.h"
#include "s3/client.h"
#include "s3/url.h"

namespace rckpt::s3 {

// Bytes the first GET asks for from the end of the object.
inline constexpr uint64_t kTailBytes = 256ull << 10;
// Reads larger than this are cut into parallel GETs of this size.
inline constexpr uint64_t kReadPieceBytes = 8ull << 20;

// NotFound for a missing key or bucket; InvalidArgument when the key is a
// prefix of other objects (a "directory"); the client's errors otherwise.
Result<std::unique_ptr<RandomAccessFile>> OpenS3Object(std::shared_ptr<S3Client> client,
                                                       const S3Url& url);

// Whether any object's key starts with `prefix` in `bucket`.
Result<bool> PrefixHasObjects(S3Client& client, const std::string& bucket,
                              const std::string& prefix);

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_S3_READER_H_
