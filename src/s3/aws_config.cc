#include "s3/aws_config.h"

#include <arpa/inet.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

namespace rckpt::s3 {
namespace {

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class ProcessEnv final : public Environment {
 public:
  std::optional<std::string> Get(std::string_view name) const override {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  }
};

// `path` with a leading "~/" made the home directory.
std::string ExpandHome(const std::string& path, const Environment& env) {
  if (!path.starts_with("~/")) return path;
  const std::optional<std::string> home = env.Get("HOME");
  return home ? *home + path.substr(1) : path;
}

// The file's text; nullopt when it does not exist.
Result<std::optional<std::string>> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
    return Status::IoError("read the AWS configuration file '" + path +
                           "': " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return std::optional<std::string>(text.str());
}

std::string DefaultFile(const Environment& env, const char* variable, const char* name) {
  if (std::optional<std::string> v = env.Get(variable)) return ExpandHome(*v, env);
  const std::optional<std::string> home = env.Get("HOME");
  return (home ? *home : std::string(".")) + "/.aws/" + name;
}

bool IsDnsCompatibleBucket(const std::string& bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (const char c : bucket) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;  // dots too: they break the TLS certificate's wildcard
    }
  }
  return bucket.front() != '-' && bucket.back() != '-';
}

}  // namespace

const Environment& ProcessEnvironment() {
  static const ProcessEnv env;
  return env;
}

std::optional<std::string> MapEnvironment::Get(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

Result<IniFile> ParseIni(std::string_view text, const std::string& path) {
  IniFile out;
  IniSection* section = nullptr;
  std::string nested;  // the key of an open nested block
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view raw = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++line_no;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    const std::string line = Trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument("AWS configuration file '" + path + "', line " +
                                     std::to_string(line_no) + ": " + why);
    };
    const bool indented = std::isspace(static_cast<unsigned char>(raw[0]));
    if (line[0] == '[') {
      if (line.back() != ']') return bad("a section must end with ']'");
      section = &out[Trim(std::string_view(line).substr(1, line.size() - 2))];
      nested.clear();
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return bad("expected 'name = value' or '[section]'");
    if (section == nullptr) return bad("a setting before the first [section]");
    const std::string key = Lower(Trim(std::string_view(line).substr(0, eq)));
    const std::string value = Trim(std::string_view(line).substr(eq + 1));
    if (indented && !nested.empty()) {
      (*section)[nested + "." + key] = value;
      continue;
    }
    nested = value.empty() ? key : "";
    if (!value.empty()) (*section)[key] = value;
  }
  return out;
}

Result<Profile> LoadProfile(const S3Options& options, const Environment& env) {
  Profile p;
  if (!options.profile.empty()) {
    p.name = options.profile;
    p.named_by_user = true;
  } else if (std::optional<std::string> v = env.Get("AWS_PROFILE")) {
    p.name = *v;
    p.named_by_user = true;
  } else {
    p.name = "default";
  }
  p.config_path = DefaultFile(env, "AWS_CONFIG_FILE", "config");
  p.credentials_path = DefaultFile(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
  auto merge = [&](const std::string& path, const std::string& section) -> Status {
    RCKPT_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadTextFile(path));
    if (!text) return Status::Ok();
    RCKPT_ASSIGN_OR_RETURN(IniFile ini, ParseIni(*text, path));
    auto it = ini.find(section);
    if (it == ini.end()) return Status::Ok();
    p.found = true;
    for (const auto& [k, v] : it->second) p.settings[k] = v;
    return Status::Ok();
  };
  // The config file names profiles "[profile NAME]", except "[default]".
  RCKPT_RETURN_IF_ERROR(
      merge(p.config_path, p.name == "default" ? "default" : "profile " + p.name));
  if (p.name == "default") RCKPT_RETURN_IF_ERROR(merge(p.config_path, "profile default"));
  RCKPT_RETURN_IF_ERROR(merge(p.credentials_path, p.name));
  return p;
}

std::string Endpoint::Authority() const {
  const bool default_port =
      port == 0 || (scheme == "https" && port == 443) || (scheme == "http" && port == 80);
  return default_port ? host : host + ":" + std::to_string(port);
}

bool Endpoint::IsIpOrLocalhost() const {
  if (host == "localhost" || host.ends_with(".localhost")) return true;
  if (!host.empty() && host.front() == '[') return true;  // IPv6
  in_addr v4;
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1;
}

std::string RedactedUrl(std::string_view url) {
  const size_t scheme = url.find("://");
  const size_t from = scheme == std::string_view::npos ? 0 : scheme + 3;
  const size_t end = url.find_first_of("/?#", from);
  const size_t at = url.substr(0, end).rfind('@');
  if (at == std::string_view::npos || at < from) return std::string(url);
  return std::string(url.substr(0, from)) + "***" + std::string(url.substr(at));
}

Result<Endpoint> ParseEndpoint(std::string_view url, std::string_view what) {
  const std::string shown = RedactedUrl(url.substr(0, 200));
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(what) + " '" + shown + "': " + why +
                                   " (expected http(s)://HOST[:PORT])");
  };
  Endpoint e;
  e.custom = true;
  std::string_view rest;
  if (url.starts_with("https://")) {
    e.scheme = "https";
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    e.scheme = "http";
    rest = url.substr(7);
  } else {
    return bad("the scheme must be http or https");
  }
  if (rest.ends_with("/")) rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos) {
    return bad("an endpoint has no path, query or user part");
  }
  std::string_view port_text;
  if (rest.starts_with("[")) {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in an IPv6 address");
    e.host = std::string(rest.substr(0, close + 1));
    rest = rest.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return bad("expected ':PORT' after the IPv6 address");
      port_text = rest.substr(1);
    }
  } else {
    const size_t colon = rest.find(':');
    e.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (e.host.empty() || e.host == "[]") return bad("no host");
  if (!port_text.empty() || rest.ends_with(":")) {
    int port = 0;
    for (const char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) return bad("the port must be a number");
      port = port * 10 + (c - '0');
    }
    if (port_text.empty() || port == 0 || port > 65535) return bad("the port must be 1 to 65535");
    e.port = port;
  }
  return e;
}

AwsPartition PartitionOf(std::string_view region) {
  struct Entry {
    AwsPartition partition;
    const char* regions;  // the partition's regionRegex in the SDKs' table
  };
  static const Entry kPartitions[] = {
      {{"aws", "amazonaws.com"}, R"(^(us|eu|ap|sa|ca|me|af|il|mx)-\w+-\d+$)"},
      {{"aws-cn", "amazonaws.com.cn"}, R"(^cn-\w+-\d+$)"},
      {{"aws-us-gov", "amazonaws.com"}, R"(^us-gov-\w+-\d+$)"},
      {{"aws-iso", "c2s.ic.gov"}, R"(^us-iso-\w+-\d+$)"},
      {{"aws-iso-b", "sc2s.sgov.gov"}, R"(^us-isob-\w+-\d+$)"},
      {{"aws-iso-e", "cloud.adc-e.uk"}, R"(^eu-isoe-\w+-\d+$)"},
      {{"aws-iso-f", "csp.hci.ic.gov"}, R"(^us-isof-\w+-\d+$)"},
      {{"aws-eusc", "amazonaws.eu"}, R"(^eusc-(de)-\w+-\d+$)"},
  };
  static const std::vector<std::regex> kPatterns = [] {
    std::vector<std::regex> out;
    for (const Entry& e : kPartitions) out.emplace_back(e.regions);
    return out;
  }();
  const std::string r(region);
  for (size_t i = 0; i < kPatterns.size(); ++i) {
    if (std::regex_search(r, kPatterns[i])) return kPartitions[i].partition;
  }
  return kPartitions[0].partition;
}

Result<Endpoint> AwsEndpoint(const std::string& region, EndpointVariant variant) {
  // The S3 endpoint rules' isValidHostLabel: the region becomes a DNS label.
  bool label = !region.empty() && region.size() <= 63 && region.front() != '-';
  for (const char c : region) {
    label = label && (std::isalnum(static_cast<unsigned char>(c)) || c == '-');
  }
  if (!label) {
    return Status::InvalidArgument("S3 region '" + region.substr(0, 80) +
                                   "': a region is letters, digits and '-' (such as us-east-1)");
  }
  const AwsPartition p = PartitionOf(region);
  if (variant.fips && std::string_view(p.name) == "aws-cn") {
    return Status::InvalidArgument("S3 region '" + region +
                                   "': FIPS endpoints were asked for (AWS_USE_FIPS_ENDPOINT or "
                                   "use_fips_endpoint), but partition aws-cn has none");
  }
  Endpoint e;
  e.scheme = "https";
  e.host = std::string(variant.fips ? "s3-fips" : "s3") + (variant.dualstack ? ".dualstack." : ".") +
           region + "." + p.dns_suffix;
  return e;
}

Result<S3Config> ResolveConfig(const S3Options& options, const Environment& env,
                               const Profile& profile) {
  S3Config c;
  auto first = [&](std::initializer_list<const char*> variables,
                   std::initializer_list<const char*> settings) -> std::optional<std::string> {
    for (const char* v : variables) {
      if (std::optional<std::string> value = env.Get(v)) return value;
    }
    for (const char* s : settings) {
      if (const std::string* value = profile.Find(s); value != nullptr && !value->empty()) {
        return *value;
      }
    }
    return std::nullopt;
  };
  if (!options.region.empty()) {
    c.region = options.region;
  } else {
    c.region = first({"AWS_REGION", "AWS_DEFAULT_REGION"}, {"region"}).value_or("us-east-1");
  }
  // AWS_USE_FIPS_ENDPOINT, then the profile's use_fips_endpoint; the same
  // for dual-stack.
  auto flag = [&](const char* variable, const char* setting, bool* out) -> Status {
    std::optional<std::string> value = env.Get(variable);
    std::string where = variable;
    if (!value) {
      const std::string* v = profile.Find(setting);
      if (v == nullptr || v->empty()) return Status::Ok();
      value = *v;
      where = "profile '" + profile.name + "' " + setting;
    }
    const std::string v = Lower(*value);
    if (v != "true" && v != "false") {
      return Status::InvalidArgument(where + " is '" + value->substr(0, 40) +
                                     "': expected true or false");
    }
    *out = v == "true";
    return Status::Ok();
  };
  RCKPT_RETURN_IF_ERROR(flag("AWS_USE_FIPS_ENDPOINT", "use_fips_endpoint", &c.variant.fips));
  RCKPT_RETURN_IF_ERROR(
      flag("AWS_USE_DUALSTACK_ENDPOINT", "use_dualstack_endpoint", &c.variant.dualstack));
  // The S3 block's older setting turns it on whatever else says, as in botocore.
  if (const std::string* s3_block = profile.Find("s3.use_dualstack_endpoint");
      s3_block != nullptr && Lower(*s3_block) == "true") {
    c.variant.dualstack = true;
  }
  if (!options.endpoint.empty()) {
    RCKPT_ASSIGN_OR_RETURN(c.endpoint, ParseEndpoint(options.endpoint, "S3 endpoint"));
  } else {
    const bool ignore_configured =
        Lower(env.Get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS").value_or("")) == "true";
    std::optional<std::string> url;
    std::string what;
    if (!ignore_configured) {
      for (const char* v : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
        if ((url = env.Get(v))) {
          what = v;
          break;
        }
      }
      for (const char* s : {"s3.endpoint_url", "endpoint_url"}) {
        if (url) break;
        if (const std::string* value = profile.Find(s); value != nullptr && !value->empty()) {
          url = *value;
          what = "profile '" + profile.name + "' " + s;
        }
      }
    }
    if (url) {
      RCKPT_ASSIGN_OR_RETURN(c.endpoint, ParseEndpoint(*url, what));
    } else {
      RCKPT_ASSIGN_OR_RETURN(c.endpoint, AwsEndpoint(c.region, c.variant));
    }
  }
  // The SDKs' S3 endpoint rules refuse both with an endpoint of one's own.
  if (c.endpoint.custom && (c.variant.fips || c.variant.dualstack)) {
    return Status::InvalidArgument(
        std::string(c.variant.fips ? "FIPS" : "dual-stack") +
        " endpoints were asked for (" +
        (c.variant.fips ? "AWS_USE_FIPS_ENDPOINT or use_fips_endpoint"
                        : "AWS_USE_DUALSTACK_ENDPOINT or use_dualstack_endpoint") +
        "), but the endpoint is given (" + c.endpoint.scheme + "://" + c.endpoint.Authority() +
        "): a custom endpoint cannot be combined with them; unset one");
  }
  c.addressing = options.addressing;
  if (c.addressing == S3Addressing::kAuto) {
    if (const std::string* style = profile.Find("s3.addressing_style")) {
      const std::string s = Lower(*style);
      if (s == "path") {
        c.addressing = S3Addressing::kPath;
      } else if (s == "virtual") {
        c.addressing = S3Addressing::kVirtualHosted;
      } else if (s != "auto") {
        return Status::InvalidArgument("profile '" + profile.name + "': s3 addressing_style '" +
                                       *style + "': expected path, virtual or auto");
      }
    }
  }
  c.ca_file = !options.ca_file.empty() ? options.ca_file
                                       : first({"AWS_CA_BUNDLE"}, {"ca_bundle"}).value_or("");
  return c;
}

bool UsesPathStyle(const S3Config& config, const std::string& bucket) {
  switch (config.addressing) {
    case S3Addressing::kPath:
      return true;
    case S3Addressing::kVirtualHosted:
      return false;
    case S3Addressing::kAuto:
      break;
  }
  if (config.endpoint.custom) return true;
  return !IsDnsCompatibleBucket(bucket);
}

}  // namespace rckpt::s3
