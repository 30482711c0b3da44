#include "engine/caller_streams.h"

namespace rckpt {

Result<Stream> CallerStreams::StreamOf(Device device) {
  auto it = streams_.find(device);
  if (it != streams_.end()) return it->second;
  Result<Stream> s = caller_(device);
  if (!s.ok()) return s.status().WithContext("the caller's stream on " + device.ToString());
  streams_.emplace(device, *s);
  return *s;
}

Result<Event> CallerStreams::Mark(Device device) {
  if (!active()) return Event{};
  RCKPT_ASSIGN_OR_RETURN(Stream caller, StreamOf(device));
  return runtime_.RecordEvent(device, caller);
}

Status CallerStreams::WaitForCaller(Device device, Stream stream) {
  if (!active()) return Status::Ok();
  RCKPT_ASSIGN_OR_RETURN(Event e, Mark(device));
  Status s = runtime_.StreamWaitEvent(device, stream, e);
  runtime_.DestroyEvent(e);  // the wait keeps what it needs
  return s;
}

Status CallerStreams::CallerWaitsFor(Device device, Stream stream) {
  if (!active()) return Status::Ok();
  RCKPT_ASSIGN_OR_RETURN(Stream caller, StreamOf(device));
  RCKPT_ASSIGN_OR_RETURN(Event e, runtime_.RecordEvent(device, stream));
  Status s = runtime_.StreamWaitEvent(device, caller, e);
  runtime_.DestroyEvent(e);
  return s;
}

}  // namespace rckpt
