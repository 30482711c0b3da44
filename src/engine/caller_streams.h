// CallerStreams: the caller's streams of one call (options.h, CallerStream),
// each asked for once, and the two orderings a load or save needs between
// them and rckpt's own streams, made with events, never by synchronising a
// device.
//
// Thread-safety: call from the calling thread only (the callback may need
// it: Python's takes the GIL).
#ifndef RCKPT_SRC_ENGINE_CALLER_STREAMS_H_
#define RCKPT_SRC_ENGINE_CALLER_STREAMS_H_

#include <map>

#include "rckpt/options.h"
#include "rckpt/runtime.h"

namespace rckpt {

class CallerStreams {
 public:
  CallerStreams(DeviceRuntime& runtime, const CallerStream& caller)
      : runtime_(runtime), caller_(caller) {}

  bool active() const { return static_cast<bool>(caller_); }

  // An event after the work queued so far on the caller's stream of
  // `device`, for rckpt's streams to wait on (StreamWaitEvent); an empty
  // Event without a CallerStream. The caller destroys it.
  Result<Event> Mark(Device device);
  // Makes rckpt's `stream` on `device` wait for the caller's work so far.
  Status WaitForCaller(Device device, Stream stream);
  // Makes the caller's stream of `device` wait for the work queued on
  // rckpt's `stream` so far.
  Status CallerWaitsFor(Device device, Stream stream);

 private:
  Result<Stream> StreamOf(Device device);

  DeviceRuntime& runtime_;
  const CallerStream& caller_;
  std::map<Device, Stream> streams_;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_ENGINE_CALLER_STREAMS_H_
