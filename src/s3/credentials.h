// Where S3 requests get their credentials: the caller's, or the AWS chain
// in the SDKs' order (environment, profile, container endpoint, EC2
// instance metadata). Temporary credentials are cached and renewed five
// minutes before they expire. Secrets never appear in a message.
#ifndef RCKPT_SRC_S3_CREDENTIALS_H_
#define RCKPT_SRC_S3_CREDENTIALS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "rckpt/s3.h"
#include "rckpt/status.h"
#include "s3/aws_config.h"
#include "s3/clock_skew.h"
#include "s3/http.h"

namespace rckpt::s3 {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  int64_t expires_unix = 0;  // 0: never
  std::string source;        // where they came from, for messages
};

// Thread-safe.
class CredentialsProvider {
 public:
  virtual ~CredentialsProvider() = default;
  // Current credentials; `refresh` asks for new ones even if the cached
  // ones have not expired (the server said the token had). IoError naming
  // every place looked at when none gives credentials.
  virtual Result<Credentials> Get(bool refresh = false) = 0;
  // Where credentials come from ("environment", "profile 'NAME'", ...),
  // without asking; the chain's error when it found none it can use.
  virtual Result<std::string> Source() const = 0;
};

// The provider for `options`: its explicit credentials, its
// credentials_source, else the chain over `env` and `profile`. The container
// and instance-metadata endpoints are asked through `http` when the chain
// reaches them (`http` may be null for a provider only asked its Source()).
std::unique_ptr<CredentialsProvider> MakeCredentialsProvider(const S3Options& options,
                                                             const Environment& env,
                                                             const Profile& profile,
                                                             HttpClient* http,
                                                             Clock clock = SystemClock);

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_CREDENTIALS_H_
