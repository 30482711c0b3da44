// Dicts of tensors, and whole checkpoints loaded and saved with torch's
// devices.

#include <algorithm>
#include <set>
#include <unordered_map>

#include "bridge.h"
#include "dict_layout.h"
#include "rckpt/inspect.h"
#include "rckpt/io.h"

namespace rckpt::libtorch {
namespace {

// The metadata key by which Python's rckpt.load knows that the file holds
// what rckpt.save was given when that was not a dict of sections (a dict of
// tensors, saved as section "model"), and gives it back as it was.
constexpr char kPythonRootKey[] = "rckpt.python.root";

}  // namespace

Status CheckNewSection(const Checkpoint* ck, std::string_view section) {
  if (ck == nullptr) return Status::InvalidArgument("the checkpoint is null");
  const Value& tree = ck->Tree();
  if (!tree.is_null() && !tree.is_map()) {
    return Status::InvalidArgument("the checkpoint's tree is a " +
                                   std::string(ValueKindName(tree.kind())) +
                                   ", not a dict of sections, so section '" +
                                   std::string(section) + "' cannot be added to it");
  }
  bool has_tensors = false;
  for (const TensorEntry& e : ck->tensors()) has_tensors = has_tensors || e.section == section;
  if (tree.Find(section) != nullptr || has_tensors) {
    return Status::InvalidArgument("the checkpoint already has section '" +
                                   std::string(section) + "'");
  }
  return Status::Ok();
}

Status AddDict(Checkpoint* ck, std::string_view section,
               const std::vector<std::pair<std::string, at::Tensor>>& items) {
  RCKPT_RETURN_IF_ERROR(CheckNewSection(ck, section));
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<Value::Entry> entries;
  std::unordered_map<const c10::TensorImpl*, std::string> seen;
  std::set<std::string, std::less<>> keys;
  for (const auto& [key, t] : items) {
    if (!keys.insert(key).second) {
      return Status::InvalidArgument("section '" + std::string(section) + "': key '" + key +
                                     "' appears twice");
    }
    if (t.defined()) {
      if (auto it = seen.find(t.unsafeGetTensorImpl()); it != seen.end()) {
        entries.emplace_back(Value(key), Value::TensorRef(it->second));
        continue;
      }
    }
    std::string name = TensorName(section, key);
    if (ck->FindTensor(name) != nullptr || ck->FindRng(name) != nullptr) {
      return Status::InvalidArgument("section '" + std::string(section) + "': the tensor name '" +
                                     name + "' of key '" + key +
                                     "' is taken in the checkpoint");
    }
    RCKPT_ASSIGN_OR_RETURN(Tensor tensor, FromTorch(t, name));
    seen.emplace(t.unsafeGetTensorImpl(), name);
    entries.emplace_back(Value(key), Value::TensorRef(name));
    tensors.emplace_back(std::move(name), std::move(tensor));
  }
  RCKPT_RETURN_IF_ERROR(ck->AddSection(section, DefaultRoleForSection(section)));
  for (auto& [name, tensor] : tensors) {
    RCKPT_RETURN_IF_ERROR(ck->AddTensor(section, name, std::move(tensor)));
  }
  ck->Tree()[section] = Value::Map(std::move(entries));
  OrderAfterC10Stream(ck);
  return Status::Ok();
}

Status AddTensors(Checkpoint* ck, std::string_view section, const TensorDict& tensors) {
  return Guard("AddTensors", [&]() -> Status {
    std::vector<std::pair<std::string, at::Tensor>> items;
    for (const auto& item : tensors) items.emplace_back(item.key(), item.value());
    return AddDict(ck, section, items);
  });
}

Status SaveTensors(const std::string& path, const TensorDict& tensors,
                   const SaveOptions& options) {
  return Guard("SaveTensors '" + path + "'", [&]() -> Status {
    Checkpoint ck;
    RCKPT_RETURN_IF_ERROR(AddTensors(&ck, "model", tensors));
    ck.Metadata()[kPythonRootKey] = "model";
    return rckpt::Save(path, ck, WithC10Stream(options));
  });
}

Status Save(const std::string& path, const Checkpoint& ck, SaveOptions options) {
  return Guard("Save '" + path + "'", [&] {
    return rckpt::Save(path, ck, WithC10Stream(std::move(options)));
  });
}

Status SaveAsync(AsyncSaver& saver, const std::string& path, const Checkpoint& ck,
                 SaveOptions options, AsyncSaver::DoneCallback done) {
  return Guard("SaveAsync '" + path + "'", [&] {
    return saver.Save(path, ck, WithC10Stream(std::move(options)), std::move(done));
  });
}

Result<Loaded> Load(const std::string& path, LoadOptions options) {
  return Guard("Load '" + path + "'", [&]() -> Result<Loaded> {
    DeviceRuntime* runtime = options.runtime != nullptr ? options.runtime : &DefaultRuntime();
    const bool cuda = IsCudaRuntime(runtime);
    C10Allocator allocator;
    if (cuda) {
      if (options.device_allocator == nullptr) options.device_allocator = &allocator;
      if (!options.caller_stream) options.caller_stream = C10CallerStream();
      if (!options.auto_device) options.auto_device = C10AutoDevice(runtime);
    }
    RCKPT_ASSIGN_OR_RETURN(Checkpoint ck, rckpt::Load(path, options));
    Loaded out;
    for (const TensorEntry& e : ck.tensors()) {
      const bool on_device = cuda && e.tensor.device().is_cuda();
      at::Tensor t = on_device ? allocator.Take(e.tensor.data()) : at::Tensor();
      if (!t.defined()) {
        RCKPT_ASSIGN_OR_RETURN(t, ToTorch(e.tensor, on_device, e.name));
      }
      out.tensors.emplace(e.name, std::move(t));
    }
    out.checkpoint = std::move(ck);
    return out;
  });
}

Result<TensorDict> SectionTensors(const Loaded& ck, std::string_view section) {
  return Guard("SectionTensors", [&]() -> Result<TensorDict> {
    std::vector<std::string> names;
    for (const TensorEntry& e : ck.checkpoint.tensors()) {
      if (e.section == section) names.push_back(e.name);
    }
    Result<SectionDict> dict = ReadSectionDict(ck.checkpoint.Tree(), section, names);
    if (!dict.ok()) return dict.status();
    if (!dict->others.empty()) {
      std::string keys;
      for (const std::string& k : dict->others) keys += (keys.empty() ? "'" : ", '") + k + "'";
      return Status::InvalidArgument("section '" + std::string(section) + "' holds values that " +
                                     "are not tensors at " + keys);
    }
    TensorDict out;
    for (const auto& [key, name] : dict->tensors) {
      auto it = ck.tensors.find(name);
      if (it == ck.tensors.end()) {
        return Status::NotFound("section '" + std::string(section) + "', key '" + key +
                                "': tensor '" + name + "' was not loaded");
      }
      if (out.contains(key)) {
        return Status::InvalidArgument("section '" + std::string(section) + "': key '" + key +
                                       "' appears twice once nested dicts are joined with '.'");
      }
      out.insert(key, it->second);
    }
    return out;
  });
}

Result<TensorDict> LoadTensors(const std::string& path, std::string_view section,
                               const LoadOptions& options) {
  LoadOptions load = options;
  load.sections = {std::string(section)};
  load.skip_sections.clear();
  Result<Loaded> loaded = rckpt::libtorch::Load(path, std::move(load));
  if (!loaded.ok() && loaded.status().code() == StatusCode::kInvalidArgument) {
    // rckpt::Load refuses a section it does not know as an argument; here a
    // missing section is NotFound, as from LoadInto and SectionTensors.
    Result<InspectReport> report = InspectRckpt(path, options.fs);
    if (report.ok() &&
        std::none_of(report->sections.begin(), report->sections.end(),
                     [&](const SectionInfo& s) { return s.name == section; }) &&
        report->tree.Find(section) == nullptr) {
      return Status::NotFound("'" + path + "': no section '" + std::string(section) + "'");
    }
  }
  if (!loaded.ok()) return loaded.status();
  Loaded ck = std::move(loaded).value();
  Result<TensorDict> out = SectionTensors(ck, section);
  if (!out.ok()) return out.status().WithContext("'" + path + "'");
  return out;
}

}  // namespace rckpt::libtorch
