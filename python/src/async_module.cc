// The bindings of rckpt::AsyncSaver. A save converts the Python state to a
// Checkpoint of views (as rckpt.save does), lets the AsyncSaver snapshot it
// with the GIL released, and hands back a ticket; the persist then runs on
// the saver's thread without ever taking the GIL, unless the caller gave a
// progress callback.
#include "async_module.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "call_args.h"
#include "errors.h"
#include "rckpt/async_save.h"
#include "s3_binding.h"
#include "to_checkpoint.h"
#include "torch_device.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rckpt::python {
namespace {

// One save's outcome, set on the saver's thread (no GIL), read by Python.
struct Outcome {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
};

class SaveTicket {
 public:
  SaveTicket(std::shared_ptr<Outcome> outcome, std::shared_ptr<Progress> progress)
      : outcome_(std::move(outcome)), progress_(std::move(progress)) {}

  // Blocks with the GIL released until the save is done or `timeout`
  // seconds passed (None: no limit); whether it is done.
  bool Wait(std::optional<double> timeout) {
    nb::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(outcome_->mu);
    auto done = [&] { return outcome_->done; };
    if (!timeout) {
      outcome_->cv.wait(lock, done);
      return true;
    }
    return outcome_->cv.wait_for(lock, std::chrono::duration<double>(std::max(0.0, *timeout)),
                                 done);
  }

  bool Done() {
    std::lock_guard<std::mutex> lock(outcome_->mu);
    return outcome_->done;
  }

  // REQUIRES: Done(). Raises the save's error: the progress callback's
  // exception first (what made it cancel), else the library's.
  void Check() {
    if (progress_) progress_->RaiseIfPending();
    Status s;
    {
      std::lock_guard<std::mutex> lock(outcome_->mu);
      s = outcome_->status;
    }
    ThrowIfError(s);
  }

 private:
  std::shared_ptr<Outcome> outcome_;
  std::shared_ptr<Progress> progress_;
};

class PyAsyncSaver {
 public:
  ~PyAsyncSaver() {
    // A persist with a Python progress callback needs the GIL to finish.
    nb::gil_scoped_release release;
    saver_.reset();
  }

  SaveTicket Save(const std::string& path, nb::handle state, nb::list rng,
                  const SaveOptions& options, nb::dict metadata, nb::handle origin,
                  nb::object progress, int emulate_devices, nb::handle fs) {
    std::shared_ptr<FileSystem> files = FileSystemOf(fs);
    std::vector<nb::object> keep_alive;
    std::vector<nb::object> cuda_tensors;
    Checkpoint ck = CheckpointToSave(state, rng, metadata, origin, &keep_alive, &cuda_tensors);

    std::shared_ptr<DeviceRuntime> runtime = RuntimeFor(emulate_devices);
    // Without a Python callback the persist never takes the GIL.
    std::shared_ptr<Progress> p;
    if (!progress.is_none()) p = std::make_shared<Progress>(std::move(progress));
    Progress none{nb::none()};
    SaveOptions o = SaveOptionsOf(options, runtime.get(), &none);
    o.progress = p ? p->Callback() : ProgressCallback();
    // The snapshot's device copies start after torch's work on each device
    // (the contiguous copies made above included), and torch's stream waits
    // for them: the call returns without waiting for the device, and the
    // next step's writes to the state come after the copies.
    UseTorchForDevices(runtime.get(), &o);
    // The same, keeping each torch stream the copies were ordered against, to
    // record the saved tensors on (RecordForSnapshot). Called only within
    // saver_->Save on this thread (the persist writes a host snapshot).
    std::map<int, nb::object> caller_streams;
    if (o.caller_stream) o.caller_stream = TorchCallerStream(&caller_streams);
    o.fs = files.get();

    auto outcome = std::make_shared<Outcome>();
    auto done = [outcome](const Status& s) {
      std::lock_guard<std::mutex> lock(outcome->mu);
      outcome->status = s;
      outcome->done = true;
      outcome->cv.notify_all();
    };
    Status s;
    {
      nb::gil_scoped_release release;
      s = saver_->Save(path, ck, std::move(o), done);
    }
    // The previous save is finished and the saver holds nothing of its
    // runtime any more: it may go, and so may the temporaries its copies
    // read (contiguous and conjugate-resolved copies), freed with the GIL.
    // This save's stay until its copies are certainly done: the next save
    // or Wait(), not when this call returns, as a device copy may still be
    // reading them (torch.cuda.empty_cache() could hand their memory back to
    // the driver under it).
    runtime_ = std::move(runtime);
    files_ = std::move(files);
    progress_ = p;
    temporaries_ = std::move(keep_alive);
    ThrowIfError(s);
    RecordForSnapshot(cuda_tensors, caller_streams);
    return SaveTicket(std::move(outcome), std::move(p));
  }

  void Cancel() { saver_->Cancel(); }
  bool Done() const { return saver_->Done(); }

  // Blocks with the GIL released until nothing is in flight.
  void Wait() {
    Status s;
    {
      nb::gil_scoped_release release;
      s = saver_->Wait();
    }
    temporaries_.clear();
    ThrowIfError(s);
  }

  nb::dict Stats() const {
    const AsyncSaveStats st = saver_->stats();
    nb::dict d;
    d["snapshot_bytes"] = st.snapshot_bytes;
    d["snapshot_capacity"] = st.snapshot_capacity;
    d["wait_seconds"] = st.wait_seconds;
    d["snapshot_seconds"] = st.snapshot_seconds;
    d["persist_seconds"] = st.persist_seconds;
    d["saves"] = st.saves;
    return d;
  }

 private:
  // The snapshot's device copies may still be pending when Save returns, and
  // torch's caching allocator hands a freed tensor's memory out again on the
  // stream it was allocated on at once, without waiting for other streams: a
  // tensor of an all-gather stream or a user's side stream, freed right
  // after the call, could be overwritten before its copy runs. So every CUDA
  // tensor of the state is recorded (tensor.record_stream) on torch's stream
  // of its device that the copies were ordered against: that stream waits
  // for the copies (the caller stream's contract, options.h), so the
  // allocator reuses the memory only after them. A tensor allocated on that
  // stream needs nothing (torch skips the record). A tensor that cannot be
  // recorded (a subclass without record_stream) makes the call wait for the
  // snapshot's copies instead, so nothing is at risk either way.
  void RecordForSnapshot(const std::vector<nb::object>& cuda_tensors,
                         const std::map<int, nb::object>& streams) {
    if (streams.empty()) return;  // no device copy, or not torch's devices
    for (const nb::object& t : cuda_tensors) {
      try {
        nb::object index = t.attr("device").attr("index");
        auto it = streams.find(index.is_none() ? 0 : nb::cast<int>(index));
        if (it == streams.end()) continue;  // nothing of that device was copied
        t.attr("record_stream")(it->second);
      } catch (nb::python_error& e) {
        (void)TakePythonError(e);
        nb::gil_scoped_release release;
        // A copy's failure is the persist's error too, reported by the ticket.
        (void)saver_->WaitSnapshot();
        return;
      }
    }
  }

  std::unique_ptr<AsyncSaver> saver_ = std::make_unique<AsyncSaver>();
  // The last save's: the saver may hold pinned memory and streams of it
  // until the next save.
  std::shared_ptr<DeviceRuntime> runtime_;
  // The last save's file system (an S3 one made with explicit options),
  // which its persist writes through.
  std::shared_ptr<FileSystem> files_;
  std::shared_ptr<Progress> progress_;
  // The last save's temporaries (see Save); destroyed after the destructor
  // has joined the saver, with the GIL held again.
  std::vector<nb::object> temporaries_;
};

}  // namespace

void RegisterAsync(nb::module_& m) {
  // A saver held by a global (a CheckpointManager at module level) is still
  // alive when the module is torn down; that is no leak worth a warning.
  nb::set_leak_warnings(false);
  nb::class_<SaveTicket>(m, "SaveTicket")
      .def("wait", &SaveTicket::Wait, "timeout"_a.none())
      .def("done", &SaveTicket::Done)
      .def("check", &SaveTicket::Check);
  nb::class_<PyAsyncSaver>(m, "AsyncSaver")
      .def(nb::init<>())
      .def("save", &PyAsyncSaver::Save, "path"_a, "state"_a, "rng"_a, "options"_a,
           "metadata"_a, "origin"_a.none(), "progress"_a.none(), "emulate_devices"_a,
           "fs"_a.none() = nb::none())
      .def("cancel", &PyAsyncSaver::Cancel)
      .def("done", &PyAsyncSaver::Done)
      .def("wait", &PyAsyncSaver::Wait)
      .def("stats", &PyAsyncSaver::Stats);
}

}  // namespace rckpt::python
