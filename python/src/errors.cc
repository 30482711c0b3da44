#include "errors.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

namespace nb = nanobind;

namespace rckpt::python {

std::string PythonErrorText(const nb::python_error& e) {
  nb::handle value = e.value();
  if (!value.is_valid()) return e.what();
  std::string text = Py_TYPE(value.ptr())->tp_name;
  try {
    const std::string message = nb::cast<std::string>(nb::str(value));
    if (!message.empty()) text += ": " + message;
  } catch (const nb::python_error&) {
    // str() of the exception failed: its type is all there is to say.
  }
  return text;
}

std::string TakePythonError(nb::python_error& e) {
  std::string text = PythonErrorText(e);
  e.restore();
  PyErr_Clear();
  return text;
}

void RegisterErrorTranslator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      // The classes live in Python so that they can inherit from the
      // built-in exceptions; the code name selects one.
      nb::object errors = nb::module_::import_("rckpt.errors");
      nb::object cls = errors.attr("error_class")(std::string(StatusCodeName(e.status().code())));
      PyErr_SetObject(cls.ptr(), nb::str(e.status().message().c_str()).ptr());
    }
  });
}

}  // namespace rckpt::python
