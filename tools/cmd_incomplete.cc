// rckpt incomplete: the saves begun under a prefix and never finished, and
// their removal.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "rckpt/file.h"
#include "util/json_writer.h"

namespace rckpt::cli {
namespace {

// "0", "90s", "15m", "2h", "7d" (a bare number is seconds).
Result<int64_t> ParseDuration(const std::string& text) {
  auto bad = [&] {
    return Status::InvalidArgument("--older-than '" + text +
                                   "': expected a duration such as 0, 90s, 15m, 2h or 7d");
  };
  if (text.empty()) return bad();
  int64_t unit = 1;
  std::string digits = text;
  switch (text.back()) {
    case 's':
      unit = 1;
      digits.pop_back();
      break;
    case 'm':
      unit = 60;
      digits.pop_back();
      break;
    case 'h':
      unit = 3600;
      digits.pop_back();
      break;
    case 'd':
      unit = 86400;
      digits.pop_back();
      break;
    default:
      break;
  }
  Result<uint64_t> n = ParseCount("older-than", digits, uint64_t{1} << 40);
  if (!n.ok()) return bad();
  return static_cast<int64_t>(*n) * unit;
}

std::string Age(int64_t seconds) {
  if (seconds < 0) return "?";
  if (seconds < 120) return std::to_string(seconds) + " s";
  if (seconds < 2 * 3600) return std::to_string(seconds / 60) + " min";
  if (seconds < 2 * 86400) return std::to_string(seconds / 3600) + " h";
  return std::to_string(seconds / 86400) + " days";
}

int RunIncomplete(std::vector<std::string> words) {
  Args args(std::move(words));
  const bool abort = args.Flag("abort");
  const bool json = args.Flag("json");
  const std::optional<std::string> older = args.Value("older-than");
  auto pos = args.Positional();
  if (!pos.ok()) return Usage("incomplete", pos.status().message());
  if (pos->size() != 1) return Usage("incomplete", "expected exactly one PREFIX");
  if (older && !abort) return Usage("incomplete", "--older-than goes with --abort");
  int64_t min_age = 3600;
  if (older) {
    Result<int64_t> d = ParseDuration(*older);
    if (!d.ok()) return Usage("incomplete", d.status().message());
    min_age = *d;
  }
  const std::string& prefix = (*pos)[0];
  FileSystem& fs = DefaultFileSystem();
  Result<std::vector<IncompleteWrite>> found = fs.ListIncomplete(prefix);
  if (!found.ok()) return Fail("incomplete", found.status());
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  JsonWriter j;
  j.BeginObject().Key("schema_version").Int(1).Key("prefix").String(prefix);
  j.Key("incomplete").BeginArray();
  Status first_error;
  size_t aborted = 0;
  for (const IncompleteWrite& w : *found) {
    const int64_t age = w.started_unix_ms > 0 ? (now_ms - w.started_unix_ms) / 1000 : -1;
    std::string outcome;
    bool removed = false;
    if (abort) {
      if (w.writer_alive) {
        outcome = "kept: its writer still runs";
      } else if (age >= 0 && age < min_age) {
        outcome = "kept: younger than --older-than";
      } else {
        Status s = fs.AbortIncomplete(w);
        if (s.ok() || s.code() == StatusCode::kNotFound) {
          outcome = "aborted";
          removed = true;
          ++aborted;
        } else {
          outcome = "failed: " + s.message();
          if (first_error.ok()) first_error = s;
        }
      }
    }
    j.BeginObject().Key("path").String(w.path).Key("id").String(w.id);
    j.Key("started_unix_ms").Int(w.started_unix_ms).Key("writer_alive").Bool(w.writer_alive);
    if (abort) j.Key("aborted").Bool(removed).Key("outcome").String(outcome);
    j.EndObject();
    if (!json) {
      std::printf("%s  (%s, started %s ago%s)%s%s\n", w.path.c_str(), w.id.c_str(),
                  Age(age).c_str(), w.writer_alive ? ", its process still runs" : "",
                  outcome.empty() ? "" : ": ", outcome.c_str());
    }
  }
  j.EndArray().EndObject();
  if (json) {
    std::printf("%s\n", j.str().c_str());
  } else if (found->empty()) {
    std::printf("no incomplete saves under %s\n", prefix.c_str());
  } else if (abort) {
    std::printf("%zu of %zu incomplete saves aborted\n", aborted, found->size());
  }
  if (!first_error.ok()) return Fail("incomplete", first_error);
  return 0;
}

}  // namespace

const CommandInfo kIncomplete = {
    "incomplete", "list (and abort) saves that never finished, in S3 or on disk",
    R"(usage: rckpt incomplete PREFIX [--abort [--older-than DURATION]] [--json]

Lists the saves begun under PREFIX and never finished. In object storage
(PREFIX s3://BUCKET/ or s3://BUCKET/KEY-PREFIX) these are the multipart
uploads of saves that were killed or lost their connection: readers never
see them, but S3 stores (and bills) their parts until they are aborted. On a
local disk (PREFIX a path prefix such as run/ or run/last) they are the
temporaries "<file>.tmp-<pid>-<hex>" of saves whose process died; the next
save to the same file removes those by itself.

  --abort                 abort each one listed (a local temporary whose
                          process still runs is kept)
  --older-than DURATION   with --abort, only those started at least this long
                          ago (default 1h, so a save in progress elsewhere is
                          left alone); 0 aborts all. 90s, 15m, 2h, 7d
  --json                  one JSON object (schema_version 1, docs/CLI.md)

S3 is reached as the AWS CLI reaches it (AWS_ENDPOINT_URL, AWS_PROFILE,
AWS_REGION, ...: docs/OBJECT_STORAGE.md). A save in progress can only be
told from an abandoned one by its age: aborting it makes that save fail.

Examples:
  rckpt incomplete s3://ckpts/run1/
  rckpt incomplete s3://ckpts/run1/ --abort --older-than 1d

Exit codes: 0 listed (and aborted), 2 usage, 3 bucket not found, 7 I/O error
(access denied, the network), 5 unsupported (a build without S3).
)",
    RunIncomplete};

}  // namespace rckpt::cli
