// A build without S3 support (RCKPT_ENABLE_S3=OFF, or libcurl, OpenSSL or
// pugixml not found): s3:// URLs are refused, saying why.
#include "io/url_file_system.h"
#include "rckpt/s3.h"

namespace rckpt {
namespace {

Status NotBuilt() {
  return Status::Unsupported(
      "this rckpt was built without S3 support, so s3:// URLs cannot be used: rebuild it with "
      "libcurl, OpenSSL and pugixml installed (scripts/install-deps.sh) and RCKPT_ENABLE_S3 "
      "AUTO or ON");
}

}  // namespace

Result<std::unique_ptr<FileSystem>> NewEnvironmentS3FileSystem() { return NotBuilt(); }

Result<std::unique_ptr<FileSystem>> NewS3FileSystem(const S3Options& /*options*/) {
  return NotBuilt();
}

Result<std::string> S3CredentialSource(const S3Options& /*options*/) { return NotBuilt(); }

bool S3Supported() { return false; }

}  // namespace rckpt
