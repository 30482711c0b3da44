// Modules: a torch::nn::Module's state_dict in and out of checkpoints.

#include <map>
#include <set>

#include "bridge.h"
#include "dict_layout.h"
#include "rckpt/inspect.h"
#include "rckpt/io.h"

namespace rckpt::libtorch {
namespace {

// What a file (or a loaded checkpoint) holds of a tensor.
struct SourceTensor {
  DType dtype = DType::kF32;
  Shape shape;
};

// A parameter or buffer of the module and the file's tensor for its key.
struct ModuleMatch {
  std::string key;
  at::Tensor target;
  std::string source;
};

std::string JoinKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

// Matches the module's state with the section's dict: every name, dtype and
// shape, with load_state_dict's rules for missing and unexpected keys.
Status MatchModule(const std::vector<std::pair<std::string, at::Tensor>>& state,
                   const SectionDict& dict,
                   const std::map<std::string, SourceTensor, std::less<>>& sources,
                   const LoadIntoOptions& options, const std::string& where,
                   std::vector<ModuleMatch>* matches, IncompatibleKeys* keys) {
  std::map<std::string, const std::string*, std::less<>> by_key;
  for (const auto& [key, name] : dict.tensors) by_key.emplace(key, &name);
  IncompatibleKeys found;
  std::vector<std::string> mismatches;
  std::set<std::string, std::less<>> used;
  for (const auto& [key, target] : state) {
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      found.missing_keys.push_back(key);
      continue;
    }
    used.insert(key);
    const std::string& name = *it->second;
    auto source = sources.find(name);
    if (source == sources.end()) {
      mismatches.push_back(key + ": the tree names tensor '" + name + "', which was not loaded");
      continue;
    }
    Result<DType> dtype = FromScalarType(target.scalar_type(), key);
    if (!dtype.ok()) {
      mismatches.push_back(dtype.status().message());
      continue;
    }
    const Shape shape(target.sizes().begin(), target.sizes().end());
    if (*dtype != source->second.dtype) {
      mismatches.push_back(key + " ('" + name + "'): dtype " +
                           std::string(DTypeName(source->second.dtype)) + " in the file, " +
                           std::string(DTypeName(*dtype)) + " in the module");
    } else if (shape != source->second.shape) {
      mismatches.push_back(key + " ('" + name + "'): shape " +
                           ShapeToString(source->second.shape) + " in the file, " +
                           ShapeToString(shape) + " in the module");
    } else {
      matches->push_back(ModuleMatch{key, target, name});
    }
  }
  for (const auto& [key, name] : dict.tensors) {
    if (used.count(key) == 0) found.unexpected_keys.push_back(key);
  }
  for (const std::string& key : dict.others) found.unexpected_keys.push_back(key);
  std::vector<std::string> problems;
  if (options.strict && !found.missing_keys.empty()) {
    problems.push_back("missing keys (in the module, not in the file): " +
                       JoinKeys(found.missing_keys));
  }
  if (options.strict && !found.unexpected_keys.empty()) {
    problems.push_back("unexpected keys (in the file, not in the module): " +
                       JoinKeys(found.unexpected_keys));
  }
  problems.insert(problems.end(), mismatches.begin(), mismatches.end());
  if (!problems.empty()) {
    return Status::InvalidArgument(where + " does not match the module" +
                                   (options.strict ? "" : " (strict = false)") + ": " +
                                   JoinKeys(problems));
  }
  if (keys != nullptr) *keys = std::move(found);
  return Status::Ok();
}

// Takes options.strip_prefixes off the dict's keys, in turn.
Status StripPrefixes(const std::vector<std::string>& prefixes, const std::string& where,
                     SectionDict* dict) {
  if (prefixes.empty()) return Status::Ok();
  auto strip = [&](std::string key) {
    for (const std::string& prefix : prefixes) {
      if (!prefix.empty() && key.starts_with(prefix)) key.erase(0, prefix.size());
    }
    return key;
  };
  std::map<std::string, std::string, std::less<>> was;  // stripped key -> the file's
  auto add = [&](std::string& key) -> Status {
    std::string stripped = strip(key);
    auto [it, fresh] = was.emplace(stripped, key);
    if (!fresh) {
      return Status::InvalidArgument(where + ": keys '" + it->second + "' and '" + key +
                                     "' are both '" + stripped + "' once the prefixes are "
                                     "stripped");
    }
    key = std::move(stripped);
    return Status::Ok();
  };
  for (auto& [key, name] : dict->tensors) RCKPT_RETURN_IF_ERROR(add(key));
  for (std::string& key : dict->others) RCKPT_RETURN_IF_ERROR(add(key));
  return Status::Ok();
}

std::string SectionWhere(const std::string& file, std::string_view section) {
  return file + " section '" + std::string(section) + "'";
}

Status LoadIntoFile(const std::string& path, ::torch::nn::Module& module,
                    const LoadIntoOptions& options, IncompatibleKeys* keys) {
  const std::string file = "'" + path + "'";
  RCKPT_ASSIGN_OR_RETURN(InspectReport report, InspectRckpt(path, options.load.fs));
  std::map<std::string, SourceTensor, std::less<>> sources;
  std::vector<std::string> names;
  for (const InspectTensor& t : report.tensors) {
    sources[t.name] = SourceTensor{t.dtype, t.shape};
    if (t.section == options.section) names.push_back(t.name);
  }
  Result<SectionDict> dict = ReadSectionDict(report.tree, options.section, names);
  if (!dict.ok()) return dict.status().WithContext(file);
  RCKPT_RETURN_IF_ERROR(
      StripPrefixes(options.strip_prefixes, SectionWhere(file, options.section), &*dict));
  std::vector<ModuleMatch> matches;
  RCKPT_RETURN_IF_ERROR(MatchModule(ModuleState(module), *dict, sources, options,
                                    SectionWhere(file, options.section), &matches, keys));

  // One target per tensor of the file. A non-contiguous parameter is read
  // into a contiguous tensor and copied; a tensor that two keys name (tied
  // weights saved once) is read once and copied into the second parameter
  // when that is not the same memory.
  std::vector<LoadTarget> targets;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (destination, source)
  std::map<std::string, at::Tensor, std::less<>> read_into;
  for (ModuleMatch& m : matches) {
    if (auto it = read_into.find(m.source); it != read_into.end()) {
      if (!m.target.is_same(it->second) &&
          (m.target.numel() == 0 || m.target.data_ptr() != it->second.data_ptr())) {
        copies.emplace_back(m.target, it->second);
      }
      continue;
    }
    RCKPT_ASSIGN_OR_RETURN(Device device, DeviceOf(m.target, m.key));
    at::Tensor into = m.target;
    if (!into.is_contiguous() || into.is_conj() || into.is_neg()) {
      into = at::empty(into.sizes(), into.options().memory_format(at::MemoryFormat::Contiguous));
      copies.emplace_back(m.target, into);
    }
    const SourceTensor& source = sources.find(m.source)->second;
    targets.push_back(LoadTarget{m.source, into.numel() == 0 ? nullptr : into.data_ptr(),
                                 source.dtype, source.shape, device});
    read_into.emplace(m.source, into);
  }
  LoadOptions load = options.load;
  load.sections = {options.section};
  load.skip_sections.clear();
  load.map_location = MapLocation();
  load.model_device.reset();
  if (!load.caller_stream && IsCudaRuntime(load.runtime)) load.caller_stream = C10CallerStream();
  RCKPT_RETURN_IF_ERROR(rckpt::LoadInto(path, targets, load, /*strict=*/false));
  ::torch::NoGradGuard no_grad;
  for (auto& [destination, source] : copies) destination.copy_(source);
  return Status::Ok();
}

}  // namespace

Status LoadInto(const std::string& path, ::torch::nn::Module& module) {
  return LoadInto(path, module, LoadIntoOptions{});
}

Status LoadInto(const std::string& path, ::torch::nn::Module& module,
                const LoadIntoOptions& options, IncompatibleKeys* keys) {
  return Guard("LoadInto '" + path + "'",
               [&] { return LoadIntoFile(path, module, options, keys); });
}

Status RestoreModule(const Loaded& ck, ::torch::nn::Module& module,
                     const LoadIntoOptions& options, IncompatibleKeys* keys) {
  return Guard("RestoreModule", [&]() -> Status {
    std::map<std::string, SourceTensor, std::less<>> sources;
    std::vector<std::string> names;
    for (const TensorEntry& e : ck.checkpoint.tensors()) {
      sources[e.name] = SourceTensor{e.tensor.dtype(), e.tensor.shape()};
      if (e.section == options.section) names.push_back(e.name);
    }
    Result<SectionDict> dict = ReadSectionDict(ck.checkpoint.Tree(), options.section, names);
    if (!dict.ok()) return dict.status().WithContext("the loaded checkpoint");
    RCKPT_RETURN_IF_ERROR(StripPrefixes(
        options.strip_prefixes, SectionWhere("the loaded checkpoint's", options.section),
        &*dict));
    std::vector<ModuleMatch> matches;
    RCKPT_RETURN_IF_ERROR(MatchModule(ModuleState(module), *dict, sources, options,
                                      SectionWhere("the loaded checkpoint's", options.section),
                                      &matches, keys));
    std::vector<std::pair<at::Tensor, at::Tensor>> copies;
    for (const ModuleMatch& m : matches) {
      auto it = ck.tensors.find(m.source);
      if (it == ck.tensors.end()) {
        return Status::InvalidArgument("RestoreModule: tensor '" + m.source + "' (" + m.key +
                                       ") is in the checkpoint but not in Loaded::tensors");
      }
      copies.emplace_back(m.target, it->second);
    }
    ::torch::NoGradGuard no_grad;
    for (auto& [destination, source] : copies) destination.copy_(source);
    return Status::Ok();
  });
}

Status AddModule(Checkpoint* ck, const ::torch::nn::Module& module, std::string_view section) {
  return Guard("AddModule", [&] { return AddDict(ck, section, ModuleState(module)); });
}

Status SaveModule(const std::string& path, const ::torch::nn::Module& module,
                  const SaveOptions& options) {
  return Guard("SaveModule '" + path + "'", [&]() -> Status {
    Checkpoint ck;
    RCKPT_RETURN_IF_ERROR(AddDict(&ck, "model", ModuleState(module)));
    return rckpt::Save(path, ck, WithC10Stream(options));
  });
}

}  // namespace rckpt::libtorch
