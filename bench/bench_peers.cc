#include "bench_peers.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace rckpt::bench {
namespace {

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The value of `key` in a flat JSON object line (strings unescaped only for
// \" and \\, which is all the peer scripts emit); empty when absent.
std::string Field(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\"";
  size_t p = line.find(k);
  if (p == std::string::npos) return "";
  p = line.find(':', p + k.size());
  if (p == std::string::npos) return "";
  while (++p < line.size() && line[p] == ' ') {
  }
  if (p >= line.size()) return "";
  if (line[p] != '"') {
    size_t e = line.find_first_of(",}", p);
    return line.substr(p, e == std::string::npos ? std::string::npos : e - p);
  }
  std::string v;
  for (++p; p < line.size() && line[p] != '"'; ++p) {
    if (line[p] == '\\' && p + 1 < line.size()) ++p;
    v += line[p];
  }
  return v;
}

}  // namespace

std::map<std::string, PeerResult> RunPeerScript(const std::string& python,
                                                const std::string& script,
                                                const std::vector<std::string>& args,
                                                const std::vector<std::string>& expected) {
  std::string cmd = Quote(python) + " " + Quote(script);
  for (const std::string& a : args) cmd.append(" ").append(Quote(a));
  cmd += " 2>&1";
  std::map<std::string, PeerResult> out;
  std::string tail;
  int status = -1;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p)) {
      std::string line(buf);
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      const std::string name = line.rfind("{", 0) == 0 ? Field(line, "name") : "";
      if (name.empty()) {
        tail = line;  // diagnostics: the last one explains a failure
        continue;
      }
      PeerResult r;
      r.skipped = Field(line, "skipped");
      if (r.skipped.empty()) {
        r.seconds = std::atof(Field(line, "seconds").c_str());
        r.bytes = std::atof(Field(line, "bytes").c_str());
        if (r.seconds <= 0) r.skipped = "no time reported: " + line;
      }
      out[name] = r;
    }
    status = ::pclose(p);
  }
  for (const std::string& name : expected) {
    if (out.count(name)) continue;
    PeerResult r;
    r.skipped = status == 0 ? "the script reported nothing for it"
                            : "peer script failed (status " + std::to_string(status) +
                                  (tail.empty() ? ")" : "): " + tail);
    out[name] = r;
  }
  return out;
}

}  // namespace rckpt::bench
