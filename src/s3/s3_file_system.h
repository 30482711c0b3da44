// The S3 file system: s3://BUCKET/KEY URLs as files (s3_reader.h,
// s3_writer.h), prefixes as directories, incomplete multipart uploads as
// incomplete writes. No rename: a write becomes its object atomically by
// itself (OpenForAtomicWrite).
#ifndef RCKPT_SRC_S3_S3_FILE_SYSTEM_H_
#define RCKPT_SRC_S3_S3_FILE_SYSTEM_H_

#include <memory>

#include "rckpt/file.h"
#include "s3/client.h"

namespace rckpt::s3 {

// Serves s3:// URLs only (InvalidArgument for other paths).
std::unique_ptr<FileSystem> NewS3OnlyFileSystem(std::shared_ptr<S3Client> client);

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_S3_FILE_SYSTEM_H_
