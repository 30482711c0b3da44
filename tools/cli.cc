#include "cli.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <regex>
#include <utility>

#include "rckpt/human_bytes.h"
#include "render.h"

namespace rckpt::cli {
namespace {

bool Matches(const std::string& word, std::string_view name, std::string* inline_value) {
  if (word.size() < 2 || word.compare(0, 2, "--") != 0) return false;
  std::string_view w(word);
  w.remove_prefix(2);
  if (w == name) return true;
  if (w.size() > name.size() && w.substr(0, name.size()) == name && w[name.size()] == '=') {
    *inline_value = std::string(w.substr(name.size() + 1));
    return true;
  }
  return false;
}

}  // namespace

bool Args::Flag(std::string_view name) {
  bool found = false;
  for (size_t i = 0; i < words_.size(); ++i) {
    std::string v;
    if (!used_[i] && Matches(words_[i], name, &v)) {
      used_[i] = true;
      found = true;
    }
  }
  return found;
}

std::vector<std::string> Args::Values(std::string_view name) {
  std::vector<std::string> out;
  for (size_t i = 0; i < words_.size(); ++i) {
    std::string v;
    if (used_[i] || !Matches(words_[i], name, &v)) continue;
    used_[i] = true;
    if (words_[i].find('=') != std::string::npos) {
      out.push_back(v);
    } else if (i + 1 < words_.size()) {
      used_[i + 1] = true;
      out.push_back(words_[++i]);
    } else if (error_.ok()) {
      error_ = Status::InvalidArgument("--" + std::string(name) + " needs a value");
    }
  }
  return out;
}

std::optional<std::string> Args::Value(std::string_view name) {
  auto all = Values(name);
  if (all.empty()) return std::nullopt;
  if (all.size() > 1 && error_.ok()) {
    error_ = Status::InvalidArgument("--" + std::string(name) + " is given more than once");
  }
  return all.back();
}

Result<std::vector<std::string>> Args::Positional() {
  if (!error_.ok()) return error_;
  std::vector<std::string> out;
  bool only_positional = false;
  for (size_t i = 0; i < words_.size(); ++i) {
    if (used_[i]) continue;
    if (!only_positional && words_[i] == "--") {
      only_positional = true;
      continue;
    }
    if (!only_positional && words_[i].size() > 1 && words_[i][0] == '-') {
      return Status::InvalidArgument("unknown option '" + words_[i] + "'");
    }
    out.push_back(words_[i]);
  }
  return out;
}

Result<uint64_t> ParseCount(const std::string& flag, const std::string& text, uint64_t max) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v > max) {
    return Status::InvalidArgument("--" + flag + " '" + text + "': expected an integer from 0 to " +
                                   std::to_string(max));
  }
  return v;
}

Result<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t min,
                         int64_t max) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < min || v > max) {
    return Status::InvalidArgument("--" + flag + " '" + text + "': expected an integer from " +
                                   std::to_string(min) + " to " + std::to_string(max));
  }
  return v;
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return 2;
    case StatusCode::kNotFound: return 3;
    case StatusCode::kCorruption: return 4;
    case StatusCode::kUnsupported: return 5;
    case StatusCode::kDeviceUnavailable:
    case StatusCode::kDeviceError: return 6;
    case StatusCode::kIoError: return 7;
    case StatusCode::kOutOfMemory: return 8;
    case StatusCode::kAlreadyExists: return 9;
  }
  return 2;
}

int Fail(std::string_view cmd, const Status& status) {
  std::string_view code = StatusCodeName(status.code());
  std::fprintf(stderr, "rckpt %.*s: %.*s: %s\n", int(cmd.size()), cmd.data(), int(code.size()),
               code.data(), InFlagTerms(status.message()).c_str());
  return ExitCodeFor(status);
}

int Usage(std::string_view cmd, std::string_view message) {
  std::fprintf(stderr, "rckpt %.*s: %.*s (see 'rckpt %.*s --help')\n", int(cmd.size()),
               cmd.data(), int(message.size()), message.data(), int(cmd.size()), cmd.data());
  return 2;
}

namespace {
bool g_bar_shown = false;
}

ProgressCallback ProgressBar(std::string label) {
  if (!isatty(STDERR_FILENO)) return {};
  auto start = std::chrono::steady_clock::now();
  auto last = start - std::chrono::seconds(1);
  return [label, start, last](uint64_t done, uint64_t total) mutable {
    auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::milliseconds(100) && done != total) return true;
    last = now;
    double secs = std::chrono::duration<double>(now - start).count();
    double frac = total ? double(done) / double(total) : 1.0;
    int filled = static_cast<int>(frac * 30);
    std::string bar(filled, '#');
    bar.resize(30, '.');
    std::fprintf(stderr, "\r%s [%s] %5.1f%% %s of %s %s   ", label.c_str(), bar.c_str(),
                 frac * 100, HumanBytes(done).c_str(), HumanBytes(total).c_str(),
                 RenderRate(done, secs).c_str());
    g_bar_shown = true;
    return true;
  };
}

void EndProgress() {
  if (g_bar_shown) std::fputs("\r\033[K", stderr);
  g_bar_shown = false;
}

}  // namespace rckpt::cli
