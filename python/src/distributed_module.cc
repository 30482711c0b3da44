// rckpt._distributed: collective saves and loads (rckpt/distributed.h) over
// a communicator written in Python, the bindings rckpt.distributed is
// written over. The Python object gives `rank`, `size`, `allgather(bytes)
// -> list[bytes]`, `broadcast(bytes, root) -> bytes` and `barrier()`;
// rckpt.distributed fills them with torch.distributed or mpi4py calls. No
// MPI is linked here.
//
// Each call comes in two steps: converting this rank's arguments (prepare_*)
// and the collective call itself. The Python layer agrees across the ranks
// on the first step's outcome before any rank enters the second, so that a
// rank whose arguments fail to convert does not leave the others waiting
// in a collective. The GIL is released during the collective calls and
// taken by each collective's call into Python.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string_view>
#include <optional>
#include <string>
#include <vector>

#include "call_args.h"
#include "errors.h"
#include "from_checkpoint.h"
#include "rckpt/distributed.h"
#include "to_checkpoint.h"
#include "torch_api.h"
#include "torch_device.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rckpt::python {
namespace {

// A Communicator whose collectives are the Python object's methods. A
// method that raises fails the collective: IoError "rank <r>: <collective>
// failed: <the exception>" (the Python object keeps the exception itself).
class PyCommunicator : public Communicator {
 public:
  explicit PyCommunicator(nb::object comm) : comm_(std::move(comm)) {
    rank_ = nb::cast<int>(comm_.attr("rank"));
    size_ = nb::cast<int>(comm_.attr("size"));
    if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
      throw nb::value_error(("communicator: rank " + std::to_string(rank_) + " of size " +
                             std::to_string(size_))
                                .c_str());
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Result<std::vector<std::string>> AllGather(std::string_view bytes) override {
    return Call<std::vector<std::string>>("allgather", [&] {
      nb::list all = nb::cast<nb::list>(comm_.attr("allgather")(nb::bytes(bytes.data(), bytes.size())));
      if (static_cast<int>(all.size()) != size_) {
        throw nb::value_error("allgather returned a list of the wrong length");
      }
      std::vector<std::string> out;
      for (nb::handle h : all) {
        nb::bytes b = nb::cast<nb::bytes>(h);
        out.emplace_back(b.c_str(), b.size());
      }
      return out;
    });
  }

  Result<std::string> Broadcast(int root, std::string_view bytes) override {
    return Call<std::string>("broadcast", [&] {
      nb::bytes b = nb::cast<nb::bytes>(
          comm_.attr("broadcast")(nb::bytes(bytes.data(), bytes.size()), root));
      return std::string(b.c_str(), b.size());
    });
  }

  Status Barrier() override {
    return Call<bool>("barrier", [&] {
      comm_.attr("barrier")();
      return true;
    }).status();
  }

 private:
  template <typename T, typename F>
  Result<T> Call(const char* what, F&& f) {
    nb::gil_scoped_acquire gil;
    try {
      return f();
    } catch (nb::python_error& e) {
      return Status::IoError("rank " + std::to_string(rank_) + ": " + what + " failed: " +
                             PythonErrorText(e));
    } catch (const std::exception& e) {
      return Status::IoError("rank " + std::to_string(rank_) + ": " + what + " failed: " + e.what());
    }
  }

  nb::object comm_;
  int rank_ = 0;
  int size_ = 1;
};

// One rank's part of a collective save, converted and waiting for the
// collective call. Its tensors borrow the memory of `state`'s tensors.
struct SavePlan {
  std::unique_ptr<PyCommunicator> comm;
  std::string path;
  nb::object state;  // the tree whose tensors the blocks borrow
  std::vector<nb::object> keep_alive;
  RankState rank_state;
  std::shared_ptr<DeviceRuntime> runtime;
  std::unique_ptr<Progress> progress;
  SaveOptions options;
};

std::unique_ptr<SavePlan> PrepareSave(nb::handle comm, std::string path, nb::object state,
                                      nb::handle shard_type, nb::handle rank_state, nb::list rng,
                                      const SaveOptions& options, nb::dict metadata,
                                      nb::handle origin, nb::object progress,
                                      int emulate_devices) {
  auto plan = std::make_unique<SavePlan>();
  plan->comm = std::make_unique<PyCommunicator>(nb::borrow(comm));
  plan->path = std::move(path);
  plan->state = state;
  RankState& rs = plan->rank_state;
  ShardLeaves shards{shard_type, {}};
  BuildCheckpoint(state, origin, &rs.local, &plan->keep_alive, &shards);
  // The state's structure and values (tensors as references) are what
  // rank 0 contributes as the common tree; the rank's own tree is
  // rank_state.
  rs.common_tree = std::move(rs.local.Tree());
  rs.local.Tree() = rank_state.is_none() ? Value() : PlainTree(rank_state, "rank_state");
  for (ShardLeaf& leaf : shards.leaves) {
    rs.shards.push_back(ShardPart{std::move(leaf.section), std::move(leaf.name),
                                  std::move(leaf.shape), std::move(leaf.offsets),
                                  Tensor::Borrow(leaf.block), std::nullopt, leaf.origin});
  }
  AddRngRecords(rng, &rs.local);
  AddMetadata(metadata, &rs.local);
  plan->runtime = RuntimeFor(emulate_devices);
  plan->progress = std::make_unique<Progress>(std::move(progress));
  plan->options = SaveOptionsOf(options, plan->runtime.get(), plan->progress.get());
  UseTorchForDevices(plan->runtime.get(), &plan->options);
  return plan;
}

void Save(SavePlan& plan) {
  Status s;
  {
    nb::gil_scoped_release release;
    s = SaveDistributed(*plan.comm, plan.path, plan.rank_state, plan.options);
  }
  plan.progress->RaiseIfPending();
  ThrowIfError(s);
}

// One rank's requests and load options, waiting for the collective call.
struct LoadPlan {
  std::unique_ptr<PyCommunicator> comm;
  std::string path;
  std::vector<BlockRequest> wants;
  std::shared_ptr<DeviceRuntime> runtime;
  std::unique_ptr<Progress> progress;
  std::optional<nb::python_error> callback_error;  // of a map_location callable
  std::vector<nb::object> keep_alive;                // the `into` tensors
  TorchDeviceAllocator torch_memory;                 // the CUDA blocks it returns
  LoadOptions options;
};

std::unique_ptr<LoadPlan> PrepareLoad(nb::handle comm, std::string path, nb::list wants,
                                      nb::handle map_location,
                                      std::optional<std::string> model_device, bool verify,
                                      int threads, nb::object progress, int emulate_devices) {
  auto plan = std::make_unique<LoadPlan>();
  plan->comm = std::make_unique<PyCommunicator>(nb::borrow(comm));
  plan->path = std::move(path);
  // (name, offsets, sizes[, into]): offsets and sizes None for the whole
  // tensor; `into` a contiguous torch tensor the block is read into.
  for (nb::handle w : wants) {
    nb::tuple t = nb::cast<nb::tuple>(w);
    BlockRequest& r = plan->wants.emplace_back();
    r.name = nb::cast<std::string>(t[0]);
    if (!t[1].is_none()) {
      r.offsets = nb::cast<Shape>(t[1]);
      r.sizes = nb::cast<Shape>(t[2]);
    }
    if (t.size() > 3 && !t[3].is_none()) {
      if (!nb::cast<bool>(t[3].attr("is_contiguous")())) {
        throw nb::value_error((r.name + ": the tensor to read the block into must be "
                               "contiguous").c_str());
      }
      plan->keep_alive.push_back(nb::borrow(t[3]));
      r.into = TorchTensorView(t[3], r.name, &plan->keep_alive);
    }
  }
  plan->runtime = RuntimeFor(emulate_devices);
  plan->progress = std::make_unique<Progress>(std::move(progress));
  plan->options = LoadOptionsOf(verify, threads, plan->runtime.get(), plan->progress.get());
  UseTorchForDevices(plan->runtime.get(), &plan->torch_memory, &plan->options);
  SetPlacement(map_location, std::move(model_device), &plan->options, &plan->callback_error);
  return plan;
}

nb::dict Load(LoadPlan& plan) {
  std::optional<Result<RankLoad>> loaded;
  {
    nb::gil_scoped_release release;
    loaded.emplace(LoadDistributed(*plan.comm, plan.path, plan.wants, plan.options));
  }
  RaiseCallbackError(&plan.callback_error);
  plan.progress->RaiseIfPending();
  RankLoad r = ValueOrThrow(std::move(*loaded));

  nb::dict out;
  // The blocks read into a request's own tensor are in it already.
  std::vector<TensorEntry> fresh;
  for (size_t k = 0; k < r.blocks.size(); ++k) {
    if (!plan.wants[k].into) fresh.push_back(std::move(r.blocks[k]));
  }
  TorchTensors t = TensorsToTorch(fresh, plan.runtime, plan.runtime != nullptr, &plan.torch_memory);
  out["blocks"] = t.tensors;
  out["placement"] = t.placement;
  out["origin"] = t.origin;
  const Checkpoint no_rng;  // RNG records are returned by rank, not in trees
  out["common"] = TreeToPython(r.common_tree, no_rng, t.tensors);
  nb::list rank_states;
  for (const Value& tree : r.rank_trees) rank_states.append(TreeToPython(tree, no_rng, nb::dict()));
  out["rank_states"] = rank_states;
  out["saved_world_size"] = r.saved_world_size;
  out["rng"] = RngTuples(r.rng);
  nb::dict saved_rng;
  for (const auto& [rank, records] : r.saved_rng) saved_rng[nb::int_(rank)] = RngTuples(records);
  out["saved_rng"] = saved_rng;
  out["bytes_read"] = r.bytes_read;
  out["bytes_needed"] = r.bytes_needed;
  return out;
}

}  // namespace
}  // namespace rckpt::python

NB_MODULE(_distributed, m) {
  using namespace rckpt::python;
  RegisterErrorTranslator();
  nb::class_<SavePlan>(m, "SavePlan");
  nb::class_<LoadPlan>(m, "LoadPlan");
  m.def("prepare_save", &PrepareSave, "comm"_a, "path"_a, "state"_a, "shard_type"_a,
        "rank_state"_a.none(), "rng"_a, "options"_a, "metadata"_a, "origin"_a.none(),
        "progress"_a.none(), "emulate_devices"_a);
  m.def("save", &Save, "plan"_a);
  m.def("prepare_load", &PrepareLoad, "comm"_a, "path"_a, "wants"_a, "map_location"_a.none(),
        "model_device"_a.none(), "verify"_a, "threads"_a, "progress"_a.none(), "emulate_devices"_a);
  m.def("load", &Load, "plan"_a);
  // Looks torch up once, at `import rckpt.distributed`, while one thread runs.
  m.def("init_torch", [] { Torch(); });
}
