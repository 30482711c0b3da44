// AsyncSaver: saving without stopping training.
//
// Save(path, ck) copies the state into snapshot buffers the saver owns and
// returns; the file is then written on the saver's own thread by the
// ordinary Save (io.h), with all of its guarantees: one atomic rename of a
// fsynced temporary, the previous file at the path intact on any error,
// cancel or crash. The file holds the state exactly as it was at the call.
//
//   rckpt::AsyncSaver saver;
//   for (int step = 0; ...; ++step) {
//     Train(&model);                                  // mutates the tensors
//     if (step % 100 == 0) {
//       RCKPT_RETURN_IF_ERROR(saver.Save("run/last.rckpt", ck));  // ~memcpy
//     }
//   }
//   RCKPT_RETURN_IF_ERROR(saver.Wait());              // the last file is durable
//
// What is captured when:
//   - host tensors (plain and sharded blocks): copied by Save, on several
//     threads, into one host buffer; once Save returns the caller may change
//     or free them.
//   - device tensors: Save enqueues device-to-host copies into pinned memory
//     on a side stream of each device and returns once they are enqueued;
//     the persist waits for them before writing. The copies run after the
//     work queued on the caller's stream (SaveOptions::caller_stream, else
//     the checkpoint's own, Checkpoint::caller_stream). The snapshot holds
//     the device tensors (their owners) until its copies are done, so the
//     checkpoint may be dropped as soon as Save returns. The caller must not
//     change device tensors until WaitSnapshot() returns (or its own stream
//     is ordered after the copies); reading them (forward, backward) is fine.
//   - sections, the tree, RNG records and metadata: copied by Save.
// The snapshot buffers are allocated by the first Save and kept: the next
// Save of a state of the same size or smaller copies into memory already
// touched, which is ~30x faster than into fresh pages. A larger state
// reallocates them. Their size is stats().snapshot_capacity, about the
// state's tensor bytes: the persist writes raw tensors straight from the
// snapshot and streams zstd chunks through Save's bounded buffers, so no
// second full copy is made.
//
// At most one save is in flight: Save first waits for the previous one.
// Errors are never lost: a failed background save is reported by the next
// Save (which then starts nothing), by Wait(), or, when the save had a done
// callback, to that callback; a saver destroyed with an error nobody saw
// writes it to stderr.
//
// Thread-safety: Save and Wait are serialised by an internal mutex (one
// runs at a time, from any thread). Cancel, Done, WaitSnapshot and stats
// may be called from any thread at any time. The progress callback of the
// options and the done callback run on the saver's thread.
#ifndef RCKPT_ASYNC_SAVE_H_
#define RCKPT_ASYNC_SAVE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "rckpt/checkpoint.h"
#include "rckpt/options.h"
#include "rckpt/status.h"

namespace rckpt {

struct AsyncSaveStats {
  uint64_t snapshot_bytes = 0;     // tensor bytes captured by the last Save
  uint64_t snapshot_capacity = 0;  // host + pinned snapshot memory held now
  double wait_seconds = 0;         // the last Save's wait for the previous one
  double snapshot_seconds = 0;     // the last Save's copying, after that wait
  double persist_seconds = 0;      // time the last finished persist took
  uint64_t saves = 0;              // saves started
};

class AsyncSaver {
 public:
  // Called once with the outcome of one save (OK once the file is durable
  // under its final name), on the saver's thread.
  using DoneCallback = std::function<void(const Status&)>;

  AsyncSaver();
  // Waits for a save in flight to finish (it is not cancelled; call Cancel
  // first to stop it). An error nobody was told of goes to stderr.
  ~AsyncSaver();
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;

  // Waits for the previous save, then snapshots `ck` and starts writing it
  // to `path`. Returns OK once the snapshot is taken (device copies
  // enqueued). Errors, with nothing started:
  //   - the previous save's error when it failed and was not reported
  //     (by Wait or to its done callback), prefixed with its path;
  //   - InvalidArgument for an empty path;
  //   - OutOfMemory when the snapshot buffers cannot be had;
  //   - DeviceError / DeviceUnavailable enqueueing a device copy.
  // Bad options and everything Save can fail with are the persist's errors.
  // The options' file system must outlive the save, and their runtime
  // (DefaultRuntime() when unset) the saver or the next Save with another
  // runtime: the saver keeps pinned memory and streams of it until then. `progress`
  // runs on the saver's thread and may cancel as in Save. `done`, when
  // given, receives this save's outcome, and Wait / the next Save then do
  // not report it again.
  Status Save(const std::string& path, const Checkpoint& ck, SaveOptions options = {},
              DoneCallback done = nullptr);

  // Blocks until the save in flight (if any) is done; returns its outcome
  // unless it was already reported. OK when nothing is pending.
  Status Wait();

  // Blocks until the device copies of the last Save are done, so the
  // caller may change its device tensors. DeviceError when a copy failed
  // (the persist then fails with it too).
  Status WaitSnapshot();

  // Asks the save in flight to stop: it ends with IoError "cancelled" and
  // the previous file stays intact. No effect when nothing is in flight.
  void Cancel();

  // True when no save is in flight.
  bool Done() const;

  AsyncSaveStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rckpt

#endif  // RCKPT_ASYNC_SAVE_H_
