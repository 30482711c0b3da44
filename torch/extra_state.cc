// State outside a module's and an optimizer's tensors: libtorch's LR
// schedulers, and whatever a libtorch object writes to an archive (a
// sampler's position, an optimizer or module this adapter has no layout for).

#include <torch/optim/schedulers/lr_scheduler.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstdint>
#include <limits>

#include "bridge.h"

namespace rckpt::libtorch {
namespace {

// libtorch keeps a scheduler's step count protected and offers no save or
// load; a pointer to the member taken through a derived class reaches it on
// any scheduler without changing its class.
struct SchedulerAccess : ::torch::optim::LRScheduler {
  static unsigned& StepCount(::torch::optim::LRScheduler& s) {
    return s.*(&SchedulerAccess::step_count_);
  }
};

// The tree entry of `section`, or NotFound naming it.
Result<const Value*> SectionEntry(const Checkpoint& ck, std::string_view section) {
  const Value* entry = ck.Tree().Find(section);
  if (entry == nullptr) return Status::NotFound("no section '" + std::string(section) + "'");
  return entry;
}

}  // namespace

Status AddLRScheduler(Checkpoint* ck, const ::torch::optim::LRScheduler& scheduler,
                      std::string_view section) {
  return Guard("AddLRScheduler", [&]() -> Status {
    RCKPT_RETURN_IF_ERROR(CheckNewSection(ck, section));
    const unsigned steps =
        SchedulerAccess::StepCount(const_cast<::torch::optim::LRScheduler&>(scheduler));
    // Python's scheduler counts the step its constructor takes: after n
    // calls of step() its last_epoch is n and its _step_count n + 1, where
    // libtorch's step_count_ is n.
    ck->Tree()[section] = Value::Map({{"last_epoch", static_cast<int64_t>(steps)},
                                      {"_step_count", static_cast<int64_t>(steps) + 1}});
    return Status::Ok();
  });
}

Status RestoreLRScheduler(const Loaded& ck, ::torch::optim::LRScheduler& scheduler,
                          std::string_view section) {
  return Guard("RestoreLRScheduler", [&]() -> Status {
    RCKPT_ASSIGN_OR_RETURN(const Value* entry, SectionEntry(ck.checkpoint, section));
    const Value* last_epoch = entry->is_map() ? entry->Find("last_epoch") : nullptr;
    if (last_epoch == nullptr || last_epoch->kind() != ValueKind::kInt ||
        last_epoch->as_int() < 0 ||
        last_epoch->as_int() > static_cast<int64_t>(std::numeric_limits<unsigned>::max())) {
      return Status::InvalidArgument("section '" + std::string(section) +
                                     "' is not an LR scheduler's state: it has no last_epoch "
                                     "that is an int from 0 to 2^32 - 1");
    }
    SchedulerAccess::StepCount(scheduler) = static_cast<unsigned>(last_epoch->as_int());
    return Status::Ok();
  });
}

Status AddArchive(Checkpoint* ck, std::string_view section,
                  ::torch::serialize::OutputArchive& archive) {
  return Guard("AddArchive", [&]() -> Status {
    RCKPT_RETURN_IF_ERROR(CheckNewSection(ck, section));
    std::string bytes;
    archive.save_to([&](const void* data, size_t n) {
      bytes.append(static_cast<const char*>(data), n);
      return n;
    });
    ck->Tree()[section] = Value::Bytes(std::move(bytes));
    return Status::Ok();
  });
}

Status ReadArchive(const Loaded& ck, std::string_view section,
                   ::torch::serialize::InputArchive* archive) {
  return Guard("ReadArchive", [&]() -> Status {
    if (archive == nullptr) return Status::InvalidArgument("ReadArchive: the archive is null");
    RCKPT_ASSIGN_OR_RETURN(const Value* entry, SectionEntry(ck.checkpoint, section));
    if (entry->kind() != ValueKind::kBytes) {
      return Status::InvalidArgument("section '" + std::string(section) + "' holds a " +
                                     std::string(ValueKindName(entry->kind())) +
                                     ", not the bytes of a libtorch archive (AddArchive)");
    }
    const std::string& bytes = entry->as_string();
    archive->load_from(bytes.data(), bytes.size());
    return Status::Ok();
  });
}

}  // namespace rckpt::libtorch
