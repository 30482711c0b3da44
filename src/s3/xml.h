// The XML S3 speaks: error bodies, and the answers and requests of the
// multipart upload and listing operations (parsed with pugixml).
#ifndef RCKPT_SRC_S3_XML_H_
#define RCKPT_SRC_S3_XML_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rckpt/status.h"

namespace rckpt::s3 {

// <Error><Code/><Message/><Region/><RequestId/></Error>; all empty when the
// text is not such a document.
struct ErrorBody {
  std::string code;
  std::string message;
  std::string region;
  std::string request_id;
};
ErrorBody ParseErrorBody(std::string_view xml);

// <InitiateMultipartUploadResult>'s UploadId. IoError when absent.
Result<std::string> ParseUploadId(std::string_view xml);

// The body of CompleteMultipartUpload for parts 1..N with these ETags and,
// when given (an upload created with a checksum algorithm), the parts'
// CRC-32Cs as sent (base64), which the server then compares with its own.
std::string CompleteMultipartUploadBody(const std::vector<std::string>& etags,
                                        const std::vector<std::string>& crc32cs = {});

// A 200 answer to CompleteMultipartUpload: its ETag, or the <Error> the
// server sent instead (S3 may, after a long wait).
struct CompleteAnswer {
  bool failed = false;
  ErrorBody error;
  std::string etag;
};
Result<CompleteAnswer> ParseCompleteAnswer(std::string_view xml);

struct ListedObject {
  std::string key;
  uint64_t size = 0;
  int64_t modified_unix_ms = 0;
};
struct ObjectPage {
  std::vector<ListedObject> objects;
  std::vector<std::string> prefixes;  // CommonPrefixes, with a delimiter
  bool truncated = false;
  std::string next_token;  // NextContinuationToken
};
// ListObjectsV2's <ListBucketResult>. IoError for other text.
Result<ObjectPage> ParseObjectPage(std::string_view xml);

struct ListedUpload {
  std::string key;
  std::string upload_id;
  int64_t initiated_unix_ms = 0;
};
struct UploadPage {
  std::vector<ListedUpload> uploads;
  bool truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
};
// ListMultipartUploads' <ListMultipartUploadsResult>. IoError for other text.
Result<UploadPage> ParseUploadPage(std::string_view xml);

// Milliseconds since the epoch of "2024-05-01T12:00:00.000Z"; 0 when the
// text is not such a time.
int64_t ParseS3Time(std::string_view text);

// `s` with &, <, >, " and ' escaped for XML text.
std::string XmlEscape(std::string_view s);

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_XML_H_
