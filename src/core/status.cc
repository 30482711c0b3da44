#include "rckpt/status.h"

#include <cstdio>

#include "util/hex.h"
#include "util/utf8.h"

namespace rckpt {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kDeviceUnavailable: return "DeviceUnavailable";
    case StatusCode::kDeviceError: return "DeviceError";
    case StatusCode::kOutOfMemory: return "OutOfMemory";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
  }
  return "Unknown";
}

namespace {

// Messages are one line by contract (the CLI prints them as such), and they
// often quote names read from untrusted files: control bytes, and bytes
// that are not UTF-8, are written as \xNN so no file can split or forge a
// message or garble a terminal.
std::string OneLine(std::string message) {
  auto is_control = [](unsigned char u) { return u < 0x20 || u == 0x7f; };
  bool clean = true;
  for (char c : message) clean &= !is_control(static_cast<unsigned char>(c));
  if (clean && IsValidUtf8(message)) return message;
  std::string out;
  out.reserve(message.size() + 16);
  for (size_t i = 0; i < message.size();) {
    const auto u = static_cast<unsigned char>(message[i]);
    const size_t n = Utf8SequenceAt(message, i);
    if (n == 0 || (n == 1 && is_control(u))) {
      AppendEscapedByte(out, u);
      ++i;
    } else {
      out.append(message, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace

Status::Status(StatusCode code, std::string message)
    : code_(code), message_(OneLine(std::move(message))) {}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  return Status(code_, std::move(msg));
}

}  // namespace rckpt
