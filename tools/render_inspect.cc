// Text and JSON renderings of inspect reports and state trees (docs/CLI.md).
#include <cstdio>
#include <ctime>

#include "render.h"
#include "rckpt/human_bytes.h"
#include "util/hex.h"
#include "util/json_writer.h"

namespace rckpt::cli {

namespace {

std::string TimeString(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

void TreeJson(JsonWriter& w, const Value& v) {
  auto tagged = [&](const char* tag, auto&& body) {
    w.BeginObject().Key(tag);
    body();
    w.EndObject();
  };
  auto items = [&](const std::vector<Value>& xs) {
    w.BeginArray();
    for (const auto& x : xs) TreeJson(w, x);
    w.EndArray();
  };
  switch (v.kind()) {
    case ValueKind::kNull: w.Null(); break;
    case ValueKind::kBool: w.Bool(v.as_bool()); break;
    case ValueKind::kInt: w.Int(v.as_int()); break;
    case ValueKind::kFloat: w.Double(v.as_float()); break;
    case ValueKind::kString: w.String(v.as_string()); break;
    case ValueKind::kBytes: tagged("$bytes", [&] { w.String(HexEncode(v.as_string())); }); break;
    case ValueKind::kBigInt: tagged("$bigint_le", [&] { w.String(HexEncode(v.as_string())); }); break;
    case ValueKind::kTensorRef: tagged("$tensor", [&] { w.String(v.as_string()); }); break;
    case ValueKind::kRngRef: tagged("$rng", [&] { w.String(v.as_string()); }); break;
    case ValueKind::kList: items(v.items()); break;
    case ValueKind::kTuple: tagged("$tuple", [&] { items(v.items()); }); break;
    case ValueKind::kSet: tagged("$set", [&] { items(v.items()); }); break;
    case ValueKind::kMap: {
      bool string_keys = true;
      for (const auto& [k, val] : v.entries()) string_keys &= k.kind() == ValueKind::kString;
      if (string_keys) {
        w.BeginObject();
        for (const auto& [k, val] : v.entries()) {
          w.Key(k.as_string());
          TreeJson(w, val);
        }
        w.EndObject();
      } else {
        tagged("$map", [&] {
          w.BeginArray();
          for (const auto& [k, val] : v.entries()) {
            w.BeginArray();
            TreeJson(w, k);
            TreeJson(w, val);
            w.EndArray();
          }
          w.EndArray();
        });
      }
      break;
    }
    case ValueKind::kObject:
      w.BeginObject().Key("$object").String(v.as_string()).Key("fields");
      TreeJson(w, v.fields());
      w.EndObject();
      break;
  }
}

}  // namespace

std::string TreeToJson(const Value& tree) {
  JsonWriter w;
  TreeJson(w, tree);
  return w.str();
}

namespace {

// "    shard 1  rank 1  cuda:1  offsets [0, 4]  sizes [8, 4]  128 bytes, 64 stored"
void RenderShardsText(const InspectTensor& t, std::string& out) {
  for (size_t i = 0; i < t.shards.size(); ++i) {
    const InspectShard& s = t.shards[i];
    out += "      shard " + std::to_string(i) + "  rank " + std::to_string(s.rank) + "  " +
           s.device.ToString() + "  offsets " + ShapeToString(s.offsets) + "  sizes " +
           ShapeToString(s.sizes) + "  " + std::to_string(s.nbytes) + " bytes, " +
           std::to_string(s.stored_nbytes) + " stored\n";
  }
}

void RenderShardsJson(const InspectTensor& t, JsonWriter& w) {
  if (t.shards.empty()) return;
  w.Key("shards").BeginArray();
  for (const InspectShard& s : t.shards) {
    w.BeginObject();
    w.Key("rank").Int(s.rank);
    w.Key("device").String(s.device.ToString());
    w.Key("offsets").BeginArray();
    for (int64_t d : s.offsets) w.Int(d);
    w.EndArray();
    w.Key("sizes").BeginArray();
    for (int64_t d : s.sizes) w.Int(d);
    w.EndArray();
    w.Key("nbytes").Uint(s.nbytes);
    w.Key("stored_nbytes").Uint(s.stored_nbytes);
    w.Key("chunks").Uint(s.chunks);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

std::string RenderInspectText(const InspectReport& r) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  uint64_t raw = 0, stored = 0;
  for (const auto& t : r.tensors) {
    raw += t.nbytes;
    stored += t.stored_nbytes;
  }
  line(r.path);
  line("  format     " + r.format + (r.format_version.empty() ? "" : " " + r.format_version));
  if (!r.writer.empty()) line("  writer     " + r.writer);
  if (r.created_unix_ms) line("  created    " + TimeString(r.created_unix_ms));
  if (r.file_size) line("  file size  " + HumanBytes(r.file_size));
  char ratio[32] = "";
  if (stored) std::snprintf(ratio, sizeof ratio, " (ratio %.2f)", double(raw) / double(stored));
  line("  tensors    " + std::to_string(r.tensors.size()) + ", " + HumanBytes(raw) + " raw, " +
       HumanBytes(stored) + " stored" + ratio);
  for (const auto& w : r.warnings) line("  warning    " + w);
  if (!r.metadata.empty()) {
    line("\nmetadata");
    for (const auto& [k, v] : r.metadata) line("  " + k + " = " + v);
  }
  line("\nsections");
  for (const auto& s : r.sections) {
    uint64_t n = 0, bytes = 0;
    for (const auto& t : r.tensors) {
      if (t.section == s.name) {
        ++n;
        bytes += t.nbytes;
      }
    }
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-16s role %-6s %6llu tensors %12s", s.name.c_str(),
                  std::string(RoleName(s.role)).c_str(), static_cast<unsigned long long>(n),
                  HumanBytes(bytes).c_str());
    line(buf);
  }
  line("\ntensors");
  size_t w = 4;
  for (const auto& t : r.tensors) w = std::max(w, t.name.size());
  w = std::min<size_t>(w, 60);
  char buf[512];
  std::snprintf(buf, sizeof buf, "  %-*s %-12s %-9s %-18s %-8s %12s %12s %s", int(w), "name",
                "section", "dtype", "shape", "device", "bytes", "stored", "codec");
  line(buf);
  for (const auto& t : r.tensors) {
    std::string role = t.role == Role::kHost && t.section != "" ? " (host)" : "";
    std::snprintf(buf, sizeof buf, "  %-*s %-12s %-9s %-18s %-8s %12llu %12llu %s%s", int(w),
                  t.name.c_str(), t.section.c_str(), std::string(DTypeName(t.dtype)).c_str(),
                  ShapeToString(t.shape).c_str(), t.origin.ToString().c_str(),
                  static_cast<unsigned long long>(t.nbytes),
                  static_cast<unsigned long long>(t.stored_nbytes), t.codec.c_str(),
                  role.c_str());
    line(buf);
    RenderShardsText(t, out);
  }
  line("\nrng");
  if (r.rng.empty()) line("  (none)");
  for (const auto& g : r.rng) {
    std::snprintf(buf, sizeof buf, "  %-30s %-12s %-8s %llu bytes (restored to cpu)",
                  g.name.c_str(), std::string(RngKindName(g.kind)).c_str(),
                  g.device.ToString().c_str(), static_cast<unsigned long long>(g.nbytes));
    line(buf);
  }
  line("\ntree");
  line("  " + r.tree.DebugString(2000));
  return out;
}

std::string RenderInspectJson(const InspectReport& r) {
  JsonWriter w;
  w.BeginObject();
  w.Key("schema_version").Int(1);
  w.Key("path").String(r.path);
  w.Key("format").String(r.format);
  w.Key("format_version").String(r.format_version);
  w.Key("writer").String(r.writer);
  w.Key("created_unix_ms").Int(r.created_unix_ms);
  w.Key("file_size").Uint(r.file_size);
  w.Key("metadata").BeginObject();
  for (const auto& [k, v] : r.metadata) w.Key(k).String(v);
  w.EndObject();
  w.Key("sections").BeginArray();
  for (const auto& s : r.sections) {
    w.BeginObject().Key("name").String(s.name).Key("role").String(RoleName(s.role)).EndObject();
  }
  w.EndArray();
  w.Key("tensors").BeginArray();
  for (const auto& t : r.tensors) {
    w.BeginObject();
    w.Key("name").String(t.name);
    w.Key("section").String(t.section);
    w.Key("role").String(RoleName(t.role));
    w.Key("dtype").String(DTypeName(t.dtype));
    w.Key("shape").BeginArray();
    for (int64_t d : t.shape) w.Int(d);
    w.EndArray();
    w.Key("device").String(t.origin.ToString());
    w.Key("nbytes").Uint(t.nbytes);
    w.Key("stored_nbytes").Uint(t.stored_nbytes);
    w.Key("codec").String(t.codec);
    w.Key("chunks").Uint(t.chunks);
    RenderShardsJson(t, w);
    w.EndObject();
  }
  w.EndArray();
  w.Key("rng").BeginArray();
  for (const auto& g : r.rng) {
    w.BeginObject()
        .Key("name").String(g.name)
        .Key("kind").String(RngKindName(g.kind))
        .Key("device").String(g.device.ToString())
        .Key("nbytes").Uint(g.nbytes)
        .EndObject();
  }
  w.EndArray();
  w.Key("warnings").BeginArray();
  for (const auto& s : r.warnings) w.String(s);
  w.EndArray();
  w.Key("tree").Raw(TreeToJson(r.tree));
  w.EndObject();
  return w.str() + "\n";
}

}  // namespace rckpt::cli
