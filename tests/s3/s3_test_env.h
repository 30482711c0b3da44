// The S3 test server as the C++ tests see it: the environment
// tests/s3/s3_server.sh writes (DIR/s3.env: RCKPT_TEST_S3_ENDPOINT,
// _ACCESS_KEY, _SECRET_KEY, _REGION, _BUCKET, _SERVER_DIR, _PROXY,
// _HTTPS_ENDPOINT, _CA_BUNDLE), the
// fault-injecting proxy in front of it (tests/s3/fault_proxy.py) and the
// server's restart. Tests skip, saying why, when RCKPT_TEST_S3_ENDPOINT is
// not set. Header-only.
#ifndef RCKPT_TESTS_S3_S3_TEST_ENV_H_
#define RCKPT_TESTS_S3_S3_TEST_ENV_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rckpt/file.h"
#include "rckpt/s3.h"
#include "s3/http.h"
#include "s3/json_fields.h"
#include "test_util.h"

extern char** environ;

namespace rckpt::testing {

struct S3TestServer {
  std::string endpoint;  // http://127.0.0.1:PORT
  std::string access_key;
  std::string secret_key;
  std::string region;
  std::string bucket;
  std::string server_dir;  // the server's directory (s3_server.sh restart DIR)
  std::string proxy;       // tests/s3/fault_proxy.py
  // The same server over TLS (https://127.0.0.1:PORT) and the private CA
  // its certificate is signed by; empty when the server has no https port.
  std::string https_endpoint;
  std::string ca_bundle;

  // From RCKPT_TEST_S3_*; nullopt when RCKPT_TEST_S3_ENDPOINT is unset.
  static std::optional<S3TestServer> FromEnvironment() {
    auto get = [](const char* name, const char* fallback = "") {
      const char* v = std::getenv(name);
      return std::string(v != nullptr && *v != '\0' ? v : fallback);
    };
    S3TestServer s;
    s.endpoint = get("RCKPT_TEST_S3_ENDPOINT");
    if (s.endpoint.empty()) return std::nullopt;
    s.access_key = get("RCKPT_TEST_S3_ACCESS_KEY");
    s.secret_key = get("RCKPT_TEST_S3_SECRET_KEY");
    s.region = get("RCKPT_TEST_S3_REGION", "us-east-1");
    s.bucket = get("RCKPT_TEST_S3_BUCKET", "rckpt-test");
    s.server_dir = get("RCKPT_TEST_S3_SERVER_DIR");
    s.proxy = get("RCKPT_TEST_S3_PROXY", RCKPT_SOURCE_DIR "/tests/s3/fault_proxy.py");
    s.https_endpoint = get("RCKPT_TEST_S3_HTTPS_ENDPOINT");
    s.ca_bundle = get("RCKPT_TEST_S3_CA_BUNDLE");
    return s;
  }

  // Options reaching the server at `at` (the server itself by default, or
  // a proxy in front of it) with the test identity and nothing from the
  // environment; retries quick, so fault tests stay short.
  S3Options Options(const std::string& at = "") const {
    S3Options o;
    o.endpoint = at.empty() ? endpoint : at;
    o.region = region;
    o.credentials = S3Credentials{access_key, secret_key, ""};
    o.read_environment = false;
    o.retry_base_delay_ms = 20;
    o.retry_max_delay_ms = 200;
    o.max_attempts = 5;
    o.stall_timeout_s = 3;
    o.connect_timeout_ms = 2000;
    return o;
  }

  // "s3://BUCKET/t/<test>-<pid>-<n>/": a prefix no other test or run uses.
  std::string UniquePrefix() const {
    static std::atomic<int> n{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "test";
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    return "s3://" + bucket + "/t/" + name + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(n++) + "/";
  }

  // The environment a child process (the CLI, the helper) needs to reach the
  // server at `at` as the AWS CLI would: AWS_ENDPOINT_URL and the keys.
  std::vector<std::string> AwsEnvironment(const std::string& at = "") const {
    return {"AWS_ENDPOINT_URL=" + (at.empty() ? endpoint : at),
            "AWS_ACCESS_KEY_ID=" + access_key,
            "AWS_SECRET_ACCESS_KEY=" + secret_key,
            "AWS_REGION=" + region,
            "AWS_EC2_METADATA_DISABLED=true",
            "AWS_CONFIG_FILE=/nonexistent",
            "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"};
  }
};

// The server, or a skip naming what is missing.
#define RCKPT_REQUIRE_S3_SERVER(var)                                                        \
  std::optional<::rckpt::testing::S3TestServer> var##_found =                               \
      ::rckpt::testing::S3TestServer::FromEnvironment();                                    \
  if (!var##_found) {                                                                       \
    GTEST_SKIP() << "no S3 test server: RCKPT_TEST_S3_ENDPOINT is not set (start one with " \
                    "`bash tests/s3/s3_server.sh start DIR` and `set -a; . DIR/s3.env`)";   \
  }                                                                                         \
  const ::rckpt::testing::S3TestServer& var = *var##_found

// Runs `argv` with `extra_env` added to this process's environment; returns
// its exit status (-signal when killed) and its stdout and stderr.
struct ProcessResult {
  int status = -1;
  std::string out;
  std::string err;
};

inline pid_t SpawnWithEnv(const std::vector<std::string>& argv,
                          const std::vector<std::string>& extra_env, const std::string& out_path,
                          const std::string& err_path) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    bool replaced = false;
    for (const std::string& x : extra_env) {
      if (kv.substr(0, kv.find('=') + 1) == x.substr(0, x.find('=') + 1)) replaced = true;
    }
    if (!replaced) env_strings.push_back(kv);
  }
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> env_ptrs, arg_ptrs;
  for (std::string& s : env_strings) env_ptrs.push_back(s.data());
  env_ptrs.push_back(nullptr);
  std::vector<std::string> args = argv;
  for (std::string& s : args) arg_ptrs.push_back(s.data());
  arg_ptrs.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, arg_ptrs[0], &fa, nullptr, arg_ptrs.data(), env_ptrs.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

inline int WaitExit(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1000;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1000;
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline ProcessResult RunProcess(const std::vector<std::string>& argv,
                                const std::vector<std::string>& extra_env) {
  const std::string dir = NewTempDir("proc");
  ProcessResult r;
  const pid_t pid = SpawnWithEnv(argv, extra_env, dir + "/out", dir + "/err");
  if (pid < 0) {
    r.err = "cannot start " + argv[0];
    return r;
  }
  r.status = WaitExit(pid);
  r.out = ReadAll(dir + "/out");
  r.err = ReadAll(dir + "/err");
  return r;
}

// tests/s3/fault_proxy.py in front of the server, for one test.
class FaultProxy {
 public:
  // Empty with a reason in `why` when it cannot start.
  static std::unique_ptr<FaultProxy> Start(const S3TestServer& server, std::string* why) {
    if (!std::filesystem::exists(server.proxy)) {
      *why = "the fault proxy " + server.proxy + " is missing";
      return nullptr;
    }
    auto p = std::unique_ptr<FaultProxy>(new FaultProxy());
    p->dir_ = NewTempDir("fault-proxy");
    const std::string ready = p->dir_ + "/ready.json";
    p->pid_ = SpawnWithEnv({"/usr/bin/env", "python3", server.proxy, "--upstream", server.endpoint,
                            "--ready-file", ready},
                           {}, p->dir_ + "/out", p->dir_ + "/log");
    if (p->pid_ < 0) {
      *why = "cannot run python3";
      return nullptr;
    }
    for (int i = 0; i < 200 && !std::filesystem::exists(ready); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the file written whole
    Result<std::map<std::string, std::string>> f = s3::ParseJsonFields(ReadAll(ready));
    if (!f.ok() || f->count("port") == 0 || f->count("control_port") == 0) {
      *why = "the fault proxy did not start: " + ReadAll(p->dir_ + "/log");
      return nullptr;
    }
    p->endpoint_ = "http://127.0.0.1:" + (*f)["port"];
    p->control_ = "http://127.0.0.1:" + (*f)["control_port"];
    Result<std::unique_ptr<s3::HttpClient>> http = s3::HttpClient::Create(2, "");
    if (!http.ok()) {
      *why = http.status().ToString();
      return nullptr;
    }
    p->http_ = std::move(*http);
    return p;
  }

  ~FaultProxy() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  const std::string& endpoint() const { return endpoint_; }

  // POST /rules: a JSON list of rules, appended.
  Status AddRules(const std::string& json) { return Control("POST", "/rules", json).status(); }
  // DELETE /rules.
  Status ClearRules() { return Control("DELETE", "/rules", "").status(); }
  // GET /stats.
  Result<std::string> Stats() { return Control("GET", "/stats", ""); }
  // DELETE /stats: the counts back to zero.
  Status ResetStats() { return Control("DELETE", "/stats", "").status(); }
  // GET /parts: the sizes of the parts each object was uploaded in.
  Result<std::string> Parts() { return Control("GET", "/parts", ""); }
  // POST /delay: `ms` added to every request.
  Status Delay(int ms) {
    return Control("POST", "/delay", "{\"ms\": " + std::to_string(ms) + "}").status();
  }

 private:
  FaultProxy() = default;

  Result<std::string> Control(const std::string& method, const std::string& path,
                              const std::string& body) {
    s3::HttpRequest r;
    r.method = method;
    r.url = control_ + path;
    r.body = std::as_bytes(std::span<const char>(body.data(), body.size()));
    if (method == "POST") r.headers.emplace_back("Content-Type", "application/json");
    s3::HttpResponse resp = http_->Perform(r);
    if (!resp.ok()) {
      return Status::IoError("fault proxy " + method + " " + path + ": HTTP " +
                             std::to_string(resp.status) + " " + resp.error_text + " " + resp.body);
    }
    return resp.body;
  }

  std::string dir_;
  pid_t pid_ = -1;
  std::string endpoint_;
  std::string control_;
  std::unique_ptr<s3::HttpClient> http_;
};

#define RCKPT_REQUIRE_FAULT_PROXY(var, server)                 \
  std::string var##_why;                                       \
  std::unique_ptr<::rckpt::testing::FaultProxy> var =          \
      ::rckpt::testing::FaultProxy::Start(server, &var##_why); \
  if (var == nullptr) GTEST_SKIP() << "no fault proxy: " << var##_why

// tests/s3/s3_server.sh ACTION (restart, kill) on the test server (the
// script beside the fault proxy); its exit status.
inline int ServerControl(const S3TestServer& server, const std::string& action) {
  if (server.server_dir.empty()) return -1;
  const std::string script =
      (std::filesystem::path(server.proxy).parent_path() / "s3_server.sh").string();
  return RunProcess({"/bin/bash", script, action, server.server_dir}, {}).status;
}

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_S3_S3_TEST_ENV_H_
