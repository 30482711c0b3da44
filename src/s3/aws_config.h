// The AWS conventions S3 users bring: environment variables, the shared
// config and credentials files (~/.aws/config, ~/.aws/credentials) and
// their profiles, and how an endpoint, a region and the addressing style
// are chosen from them and the caller's S3Options.
#ifndef RCKPT_SRC_S3_AWS_CONFIG_H_
#define RCKPT_SRC_S3_AWS_CONFIG_H_

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "rckpt/s3.h"
#include "rckpt/status.h"

namespace rckpt::s3 {

// Where environment variables come from: the process, or a map in tests.
class Environment {
 public:
  virtual ~Environment() = default;
  // The variable's value; nullopt when unset (an empty value counts as
  // unset, as the AWS SDKs treat it).
  virtual std::optional<std::string> Get(std::string_view name) const = 0;
};

// The process's environment (getenv).
const Environment& ProcessEnvironment();

// An environment of fixed values, for tests and for S3Options with
// read_environment = false (an empty one).
class MapEnvironment final : public Environment {
 public:
  MapEnvironment() = default;
  MapEnvironment(std::initializer_list<std::pair<const std::string, std::string>> values)
      : values_(values) {}
  std::optional<std::string> Get(std::string_view name) const override;

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

// Sections of "key = value" lines, as the AWS files hold them. A key with
// no value opens a nested block of indented lines ("s3 =\n  addressing_style
// = path"), stored as "s3.addressing_style". Keys are lower-case.
using IniSection = std::map<std::string, std::string>;
using IniFile = std::map<std::string, IniSection>;

// Parses AWS config file text. InvalidArgument naming `path` and the line
// for a line that is neither a section, a setting nor a comment.
Result<IniFile> ParseIni(std::string_view text, const std::string& path);

// A profile's settings: from the config file's [profile NAME] ([default]
// for "default") and the credentials file's [NAME], the latter winning.
struct Profile {
  std::string name;
  bool named_by_user = false;  // S3Options::profile or AWS_PROFILE
  bool found = false;          // some file has a section for it
  IniSection settings;
  std::string config_path;  // the files read, for messages
  std::string credentials_path;

  const std::string* Find(const std::string& key) const {
    auto it = settings.find(key);
    return it == settings.end() ? nullptr : &it->second;
  }
};

// Reads the profile S3Options::profile, AWS_PROFILE or "default" names from
// AWS_CONFIG_FILE (~/.aws/config) and AWS_SHARED_CREDENTIALS_FILE
// (~/.aws/credentials). Missing files are no error; unreadable or
// malformed ones are.
Result<Profile> LoadProfile(const S3Options& options, const Environment& env);

// An endpoint URL, split.
struct Endpoint {
  std::string scheme;   // "http" or "https"
  std::string host;     // an IPv6 address keeps its brackets
  int port = 0;         // 0: the scheme's
  bool custom = false;  // given by the user (else AWS's own)

  // "host" or "host:port", as the Host header and the URL carry it.
  std::string Authority() const;
  // Whether the host is an IP address or "localhost" (path-style only).
  bool IsIpOrLocalhost() const;
};

// Parses "http(s)://host[:port][/]". InvalidArgument naming `what` (where
// the URL came from) for anything else; the message shows the URL without
// a "user:password@" part.
Result<Endpoint> ParseEndpoint(std::string_view url, std::string_view what);

// `url` as messages may show it: a "user:password@" after the scheme
// becomes "***@", whatever else the text holds.
std::string RedactedUrl(std::string_view url);

// Which of AWS's S3 endpoints requests go to (AWS_USE_FIPS_ENDPOINT,
// AWS_USE_DUALSTACK_ENDPOINT, or the profile's use_fips_endpoint and
// use_dualstack_endpoint).
struct EndpointVariant {
  bool fips = false;
  bool dualstack = false;
};

// The AWS partition of `region`, by the AWS SDKs' partition table: its name
// ("aws", "aws-cn", "aws-us-gov", the ISO partitions) and DNS suffix.
// Regions no partition claims are "aws"'s, as in the SDKs.
struct AwsPartition {
  const char* name;
  const char* dns_suffix;
};
AwsPartition PartitionOf(std::string_view region);

// AWS's S3 endpoint for `region`, as the SDKs' S3 endpoint rules make it:
// https://s3[-fips][.dualstack].REGION.SUFFIX. InvalidArgument for a region
// that is not a DNS label, and for FIPS in aws-cn (no FIPS endpoint there).
Result<Endpoint> AwsEndpoint(const std::string& region, EndpointVariant variant = {});

// Everything about where requests go, decided once per file system.
struct S3Config {
  Endpoint endpoint;  // custom, or AWS's for `region`
  EndpointVariant variant;  // of AWS's endpoints (never with a custom one)
  std::string region;
  S3Addressing addressing = S3Addressing::kAuto;  // kAuto resolved per bucket
  std::string ca_file;                            // empty: the system's
};

// S3Options, then the environment, then the profile, then the defaults, as
// S3Options documents field by field.
Result<S3Config> ResolveConfig(const S3Options& options, const Environment& env,
                               const Profile& profile);

// Whether a request for `bucket` names it in the path under `config`.
bool UsesPathStyle(const S3Config& config, const std::string& bucket);

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_AWS_CONFIG_H_
