#include "rckpt/checkpoint.h"

#include "core/shard_geometry.h"
#include "util/utf8.h"

namespace rckpt {
namespace {

// Names in a file are UTF-8 (schema/FORMAT.md); refused here, early, with
// the name (Save checks the rest of what the reader requires).
Status CheckUtf8(const char* kind, std::string_view name) {
  if (IsValidUtf8(name)) return Status::Ok();
  return Status::InvalidArgument(std::string(kind) + " name '" + std::string(name) +
                                 "' is not valid UTF-8");
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kModel: return "model";
    case Role::kHost: return "host";
    case Role::kData: return "data";
  }
  return "unknown";
}

bool ParseRole(std::string_view name, Role* out) {
  for (Role r : {Role::kModel, Role::kHost, Role::kData}) {
    if (RoleName(r) == name) {
      *out = r;
      return true;
    }
  }
  return false;
}

bool IsValidRole(uint8_t raw) { return raw <= static_cast<uint8_t>(Role::kData); }

Role DefaultRoleForSection(std::string_view section) {
  if (section == "model" || section == "loss" || section == "optimizer") return Role::kModel;
  if (section == "scheduler" || section == "controller" || section == "metrics" ||
      section == "evaluator") {
    return Role::kHost;
  }
  return Role::kData;
}

Role DefaultRoleForTensor(std::string_view section, Role section_role,
                          std::string_view name, const Shape& shape) {
  if (section == "optimizer" && section_role == Role::kModel && shape.empty()) {
    std::string_view leaf = name.substr(name.rfind('.') == std::string_view::npos
                                            ? 0
                                            : name.rfind('.') + 1);
    if (leaf == "step") return Role::kHost;
  }
  return section_role;
}

Status Checkpoint::AddSection(std::string_view name, Role role) {
  if (name.empty()) return Status::InvalidArgument("section name is empty");
  RCKPT_RETURN_IF_ERROR(CheckUtf8("section", name));
  if (const SectionInfo* s = FindSection(name)) {
    if (s->role != role) {
      return Status::InvalidArgument(
          "section '" + std::string(name) + "' already exists with role " +
          std::string(RoleName(s->role)) + ", not " + std::string(RoleName(role)));
    }
    return Status::Ok();
  }
  sections_.push_back(SectionInfo{std::string(name), role});
  return Status::Ok();
}

Status Checkpoint::CheckNewName(std::string_view name) const {
  if (name.empty()) return Status::InvalidArgument("tensor name is empty");
  RCKPT_RETURN_IF_ERROR(CheckUtf8("tensor", name));
  if (tensor_index_.find(name) != tensor_index_.end() ||
      sharded_names_.find(name) != sharded_names_.end()) {
    return Status::InvalidArgument("tensor '" + std::string(name) + "' is already present");
  }
  return Status::Ok();
}

Status Checkpoint::AddTensor(std::string_view section, std::string_view name,
                             const TensorView& view, std::optional<Role> role) {
  auto bytes = ShapeBytes(view.shape, view.dtype);
  if (!bytes.ok()) return bytes.status().WithContext("tensor '" + std::string(name) + "'");
  if (*bytes > 0 && view.data == nullptr) {
    return Status::InvalidArgument("tensor '" + std::string(name) + "': data is null but " +
                                   std::to_string(*bytes) + " bytes are described");
  }
  return AddTensor(section, name, Tensor::Borrow(view), role);
}

Status Checkpoint::AddTensor(std::string_view section, std::string_view name,
                             Tensor tensor, std::optional<Role> role) {
  RCKPT_RETURN_IF_ERROR(CheckNewName(name));
  if (section.empty()) {
    return Status::InvalidArgument("tensor '" + std::string(name) + "': section name is empty");
  }
  auto bytes = ShapeBytes(tensor.shape(), tensor.dtype());
  if (!bytes.ok()) return bytes.status().WithContext("tensor '" + std::string(name) + "'");
  RCKPT_ASSIGN_OR_RETURN(Role r, SectionRoleFor(section, name, tensor.shape(), role));
  tensor_index_.emplace(std::string(name), tensors_.size());
  tensors_.push_back(TensorEntry{std::string(name), std::string(section), r, std::move(tensor), {}});
  return Status::Ok();
}

Result<Role> Checkpoint::SectionRoleFor(std::string_view section, std::string_view name,
                                        const Shape& shape, std::optional<Role> role) {
  const SectionInfo* s = FindSection(section);
  if (s == nullptr) {
    RCKPT_RETURN_IF_ERROR(AddSection(section, DefaultRoleForSection(section)));
    s = &sections_.back();
  }
  return role ? *role : DefaultRoleForTensor(section, s->role, name, shape);
}

Status Checkpoint::AddShardedTensor(std::string_view section, std::string_view name,
                                    DType dtype, Shape shape, std::vector<TensorShard> shards,
                                    std::optional<Role> role) {
  RCKPT_RETURN_IF_ERROR(CheckNewName(name));
  const std::string where = "sharded tensor '" + std::string(name) + "'";
  if (section.empty()) return Status::InvalidArgument(where + ": section name is empty");
  auto bytes = ShapeBytes(shape, dtype);
  if (!bytes.ok()) return bytes.status().WithContext(where);
  if (shards.empty()) {
    return Status::InvalidArgument(where + ": no shards (a tensor without elements is added "
                                   "with AddTensor)");
  }
  std::vector<Block> blocks(shards.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    const TensorShard& sh = shards[i];
    const std::string at = where + ": shard " + std::to_string(i);
    if (sh.block.dtype() != dtype) {
      return Status::InvalidArgument(at + ": block dtype " + std::string(DTypeName(sh.block.dtype())) +
                                     ", the tensor's is " + std::string(DTypeName(dtype)));
    }
    if (sh.block.nbytes() > 0 && sh.block.data() == nullptr) {
      return Status::InvalidArgument(at + ": block has no data");
    }
    if (sh.rank < 0) {
      return Status::InvalidArgument(at + ": rank " + std::to_string(sh.rank) + " is negative");
    }
    blocks[i].offsets = sh.offsets;
    blocks[i].sizes = sh.block.shape();
    Status st = CheckShardBlock(at, shape, blocks[i]);
    if (!st.ok()) return Status::InvalidArgument(st.message());
  }
  std::vector<const Block*> block_ptrs;
  for (const Block& b : blocks) block_ptrs.push_back(&b);
  Status st = CheckShardTiling(where, shape, block_ptrs);
  if (!st.ok()) return Status::InvalidArgument(st.message());
  RCKPT_ASSIGN_OR_RETURN(Role r, SectionRoleFor(section, name, shape, role));
  sharded_names_.emplace(name);
  sharded_.push_back(ShardedTensorEntry{std::string(name), std::string(section), r, dtype,
                                        std::move(shape), std::move(shards)});
  return Status::Ok();
}

Status Checkpoint::AddRng(std::string_view name, RngKind kind,
                          std::span<const std::byte> bytes, Device origin) {
  if (name.empty()) return Status::InvalidArgument("RNG record name is empty");
  RCKPT_RETURN_IF_ERROR(CheckUtf8("RNG record", name));
  if (FindRng(name) != nullptr) {
    return Status::InvalidArgument("RNG record '" + std::string(name) + "' is already present");
  }
  RCKPT_RETURN_IF_ERROR(ValidateRngState(kind, bytes).WithContext(
      "RNG record '" + std::string(name) + "'"));
  rng_.push_back(RngRecord{std::string(name), kind, origin,
                           std::vector<std::byte>(bytes.begin(), bytes.end())});
  return Status::Ok();
}

const TensorEntry* Checkpoint::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const RngRecord* Checkpoint::FindRng(std::string_view name) const {
  for (const auto& r : rng_) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

const SectionInfo* Checkpoint::FindSection(std::string_view name) const {
  for (const auto& s : sections_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

uint64_t Checkpoint::TensorBytes() const {
  uint64_t total = 0;
  for (const auto& t : tensors_) total += t.tensor.nbytes();
  for (const auto& t : sharded_) {
    for (const auto& s : t.shards) total += s.block.nbytes();
  }
  return total;
}

}  // namespace rckpt
