// MapLocation (options.h): torch.load's map_location as an explicit value.
#include <algorithm>
#include <string>

#include "rckpt/options.h"

namespace rckpt {

MapLocation MapLocation::To(Device d) {
  MapLocation m;
  m.kind_ = Kind::kDevice;
  m.device_ = d;
  return m;
}

MapLocation MapLocation::Map(std::map<Device, Device> tags) {
  MapLocation m;
  m.kind_ = Kind::kMap;
  m.tags_ = std::move(tags);
  return m;
}

MapLocation MapLocation::Fn(Callback cb) {
  MapLocation m;
  if (!cb) return m;  // an empty callback maps nothing: as stored
  m.kind_ = Kind::kCallback;
  m.callback_ = std::move(cb);
  return m;
}

Result<MapLocation> MapLocation::Parse(std::string_view spec, std::string_view option) {
  const std::string name(option);
  if (spec.empty()) {
    return Status::InvalidArgument(
        name + ": empty; expected a device (\"cpu\", \"cuda:0\") or a "
        "tag map (\"cuda:1=cuda:0,cuda:2=cuda:0\")");
  }
  if (spec.find('=') == std::string_view::npos) {
    Result<Device> d = ParseDevice(spec);
    if (!d.ok()) return d.status().WithContext(name);
    return To(*d);
  }
  std::map<Device, Device> tags;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view pair = spec.substr(pos, comma - pos);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument(name + ": entry '" +
                                     std::string(pair) +
                                     "' is not of the form FROM=TO");
    }
    Result<Device> from = ParseDevice(pair.substr(0, eq));
    if (!from.ok()) return from.status().WithContext(name);
    Result<Device> to = ParseDevice(pair.substr(eq + 1));
    if (!to.ok()) return to.status().WithContext(name);
    if (!tags.emplace(*from, *to).second) {
      return Status::InvalidArgument(name + ": device " + from->ToString() +
                                     " is mapped twice");
    }
    pos = comma + 1;
  }
  return Map(std::move(tags));
}

bool MapLocation::NamesCurrentCuda() const {
  if (kind_ == Kind::kDevice) return device_.is_current_cuda();
  if (kind_ != Kind::kMap) return false;
  return std::any_of(tags_.begin(), tags_.end(), [](const auto& tag) {
    return tag.first.is_current_cuda() || tag.second.is_current_cuda();
  });
}

Result<MapLocation> MapLocation::WithCurrentCuda(Device current) const {
  auto resolve = [&](Device d) { return d.is_current_cuda() ? current : d; };
  MapLocation m = *this;
  m.device_ = resolve(device_);
  m.tags_.clear();
  for (const auto& [from, to] : tags_) {
    if (!m.tags_.emplace(resolve(from), resolve(to)).second) {
      return Status::InvalidArgument("map_location: device " + current.ToString() +
                                     " is mapped twice: as \"cuda\" (the current device) and as " +
                                     current.ToString());
    }
  }
  return m;
}

std::optional<Device> MapLocation::Lookup(const TensorInfo& info) const {
  switch (kind_) {
    case Kind::kNone:
      return std::nullopt;
    case Kind::kDevice:
      return device_;
    case Kind::kMap: {
      auto it = tags_.find(info.origin);
      if (it == tags_.end()) return std::nullopt;
      return it->second;
    }
    case Kind::kCallback:
      return callback_(info);
  }
  return std::nullopt;
}

std::string MapLocation::ToString() const {
  switch (kind_) {
    case Kind::kNone:
      return "none";
    case Kind::kDevice:
      return device_.ToString();
    case Kind::kMap: {
      std::string out;
      for (const auto& [from, to] : tags_) {
        if (!out.empty()) out += ',';
        out += from.ToString() + "=" + to.ToString();
      }
      return out.empty() ? "{}" : out;
    }
    case Kind::kCallback:
      return "<callback>";
  }
  return "none";
}

}  // namespace rckpt
