// Rendering of `rckpt diff` results (render.h).
#include <string>

#include "render.h"
#include "util/json_writer.h"

namespace rckpt::cli {
namespace {

std::string NotComparedText(const DiffReport& r, const std::string& a, const std::string& b) {
  if (r.not_compared.empty()) return "";
  std::string out = "not compared (A = " + a + ", B = " + b + "):\n";
  for (const auto& n : r.not_compared) out += "  " + n.what + ": " + n.why + "\n";
  return out;
}

}  // namespace

std::string RenderDiffText(const DiffReport& r, const std::string& a, const std::string& b) {
  const std::string what = r.mode == DiffMode::kTensors ? "tensors" : "state";
  if (r.identical) {
    return "identical: " + a + " and " + b + " hold the same " + what +
           (r.mode == DiffMode::kStrict ? " (strict)" : "") + "\n" + NotComparedText(r, a, b);
  }
  std::string out = "A = " + a + "\nB = " + b + "\n";
  for (const auto& d : r.differences) out += d.kind + " " + d.name + ": " + d.detail + "\n";
  if (r.count > r.differences.size()) {
    out += "... and " + std::to_string(r.count - r.differences.size()) + " more\n";
  }
  out += std::to_string(r.count) + (r.count == 1 ? " difference\n" : " differences\n");
  return out + NotComparedText(r, a, b);
}

std::string RenderDiffJson(const DiffReport& r, const std::string& a, const std::string& b) {
  JsonWriter w;
  w.BeginObject().Key("schema_version").Int(2).Key("mode").String(DiffModeName(r.mode));
  w.Key("a").String(a).Key("b").String(b);
  w.Key("identical").Bool(r.identical).Key("count").Uint(r.count);
  w.Key("differences").BeginArray();
  for (const auto& d : r.differences) {
    w.BeginObject().Key("kind").String(d.kind).Key("name").String(d.name);
    w.Key("detail").String(d.detail).EndObject();
  }
  w.EndArray();
  w.Key("not_compared").BeginArray();
  for (const auto& n : r.not_compared) {
    w.BeginObject().Key("what").String(n.what).Key("why").String(n.why).EndObject();
  }
  w.EndArray().EndObject();
  return w.str() + "\n";
}

}  // namespace rckpt::cli
