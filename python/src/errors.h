// rckpt Status -> Python exceptions of the rckpt package (rckpt/errors.py):
// one class per status code, all subclasses of rckpt.Error, with the
// built-in base Python users expect (ValueError, FileNotFoundError, OSError,
// MemoryError) where there is one.
#ifndef RCKPT_PYTHON_SRC_ERRORS_H_
#define RCKPT_PYTHON_SRC_ERRORS_H_

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>

#include "rckpt/status.h"

namespace rckpt::python {

// Thrown by the bindings and translated at the module boundary.
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(Status status)
      : std::runtime_error(status.message()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) throw StatusError(result.status());
  return std::move(result).value();
}

// "Type: message" of a caught Python exception, for a Status message: one
// line, without the traceback its what() carries. REQUIRES: the GIL.
std::string PythonErrorText(const nanobind::python_error& e);

// PythonErrorText(e), and the exception dropped now, while the GIL is held:
// for a caught error that becomes a Status instead of propagating.
std::string TakePythonError(nanobind::python_error& e);

// Installs the translator from StatusError to rckpt's exception classes.
void RegisterErrorTranslator();

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_ERRORS_H_
