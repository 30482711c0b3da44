// Status and Result<T>: how every fallible rckpt call reports failure.
//
// A Status is either OK or carries one code from a small, frozen set and a
// one-line message naming what went wrong, where, what was expected and what
// was found. Result<T> holds either a T or a non-OK Status. Neither throws;
// a damaged file is expected input, not an exceptional event.
//
// Thread-safety: Status and Result are values; distinct objects may be used
// from different threads freely, a single object needs external locking.
#ifndef RCKPT_STATUS_H_
#define RCKPT_STATUS_H_

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace rckpt {

// The codes are frozen: their numeric values are part of the ABI and the CLI
// maps each to a documented exit code (docs/CLI.md).
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,   // the caller's options or arguments are wrong
  kNotFound = 2,          // a file, tensor, section or key does not exist
  kCorruption = 3,        // the bytes read are not a valid checkpoint
  kIoError = 4,           // the operating system refused a read or write
  kUnsupported = 5,       // newer format version, or a feature not built in
  kDeviceUnavailable = 6, // a placement names a device this machine lacks
  kDeviceError = 7,       // a device runtime call failed
  kOutOfMemory = 8,       // an allocation (host, pinned or device) failed
  kAlreadyExists = 9,     // a write that must not replace found its path taken
};

// Returns the code's name, e.g. "Corruption".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;
  // Control bytes in `message` (newlines included) are stored as \xNN: a
  // message is always one line, whatever file bytes it quotes.
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return Status(StatusCode::kInvalidArgument, std::move(msg));
  }
  static Status NotFound(std::string msg) {
    return Status(StatusCode::kNotFound, std::move(msg));
  }
  static Status Corruption(std::string msg) {
    return Status(StatusCode::kCorruption, std::move(msg));
  }
  static Status IoError(std::string msg) {
    return Status(StatusCode::kIoError, std::move(msg));
  }
  static Status Unsupported(std::string msg) {
    return Status(StatusCode::kUnsupported, std::move(msg));
  }
  static Status DeviceUnavailable(std::string msg) {
    return Status(StatusCode::kDeviceUnavailable, std::move(msg));
  }
  static Status DeviceError(std::string msg) {
    return Status(StatusCode::kDeviceError, std::move(msg));
  }
  static Status OutOfMemory(std::string msg) {
    return Status(StatusCode::kOutOfMemory, std::move(msg));
  }
  static Status AlreadyExists(std::string msg) {
    return Status(StatusCode::kAlreadyExists, std::move(msg));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "Corruption: <message>", or "OK".
  std::string ToString() const;

  // Returns a status with the same code and "<context>: <message>".
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T> holds a T or a non-OK Status, as abseil's StatusOr does.
// Accessing the value of an error result (value(), *, ->) is a programming
// error, not an input error: it prints "rckpt::Result: value of an error:
// <status>" to stderr and aborts. An OK Status holds no T: constructing a
// Result from one gives an InvalidArgument error saying so. The rvalue
// accessors return the T by value, so that `for (auto& x : *F())` iterates
// over a T that lives as long as the loop.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) {
      v_ = Status::InvalidArgument("an OK Status was given to a Result<T>, which holds a T or "
                                   "an error");
    }
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { Check(); return std::get<T>(v_); }
  const T& value() const& { Check(); return std::get<T>(v_); }
  T value() && { Check(); return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // The value, or `fallback` for an error.
  T value_or(T fallback) const& { return ok() ? std::get<T>(v_) : std::move(fallback); }

 private:
  void Check() const {
    if (!ok()) {
      std::fprintf(stderr, "rckpt::Result: value of an error: %s\n",
                   std::get<Status>(v_).ToString().c_str());
      std::fflush(stderr);
      std::abort();
    }
  }
  std::variant<T, Status> v_;
};

}  // namespace rckpt

#define RCKPT_CONCAT_INNER_(a, b) a##b
#define RCKPT_CONCAT_(a, b) RCKPT_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define RCKPT_RETURN_IF_ERROR(expr)                     \
  do {                                                  \
    ::rckpt::Status rckpt_status_ = (expr);             \
    if (!rckpt_status_.ok()) return rckpt_status_;      \
  } while (0)

// Evaluates `rexpr` (a Result<T>); on error returns its status, otherwise
// declares or assigns `lhs` from the value.
#define RCKPT_ASSIGN_OR_RETURN(lhs, rexpr) \
  RCKPT_ASSIGN_OR_RETURN_IMPL_(RCKPT_CONCAT_(rckpt_result_, __LINE__), lhs, rexpr)
#define RCKPT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                 \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#endif  // RCKPT_STATUS_H_
