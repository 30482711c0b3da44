#include "s3_binding.h"

#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "errors.h"
#include "rckpt/s3.h"

namespace rckpt::python {
namespace {

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// A Python object the library holds past any GIL (inside a file system's
// options): released with the GIL taken, and left alone once the
// interpreter is going away.
class PyRef {
 public:
  explicit PyRef(nb::object o) : o_(o.release().ptr()) {}
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() {
    if (!Py_IsInitialized() || Finalizing()) return;
    nb::gil_scoped_acquire gil;
    Py_DECREF(o_);
  }
  nb::handle get() const { return o_; }

 private:
  PyObject* o_;
};

template <typename T>
T Get(nb::dict options, const char* key) {
  if (!options.contains(key)) {
    throw StatusError(
        Status::InvalidArgument(std::string("S3 options: no '") + key + "'"));
  }
  return nb::cast<T>(options[key]);
}

// The library's side of rckpt.s3's credentials hand-over: `fn()` returns
// (access_key_id, secret_access_key, session_token, expires_unix).
std::function<Result<S3Credentials>()> CredentialsSource(nb::object fn,
                                                         std::string name) {
  auto ref = std::make_shared<PyRef>(std::move(fn));
  return [ref, name]() -> Result<S3Credentials> {
    if (!Py_IsInitialized() || Finalizing()) {
      return Status::IoError(
          name + ": Python is shutting down, so no credentials can be had");
    }
    nb::gil_scoped_acquire gil;
    try {
      nb::tuple t = nb::cast<nb::tuple>(ref->get()());
      if (t.size() != 4) throw nb::cast_error();
      return S3Credentials{
          nb::cast<std::string>(t[0]), nb::cast<std::string>(t[1]),
          nb::cast<std::string>(t[2]), nb::cast<int64_t>(t[3])};
    } catch (nb::python_error& e) {
      return Status::IoError(name + ": " + PythonErrorText(e));
    } catch (const nb::cast_error&) {
      return Status::IoError(
          name +
          ": the credentials callable did not return (access key id, "
          "secret, token, expiry) as str, str, str, int");
    }
  };
}

S3Addressing AddressingNamed(const std::string& name) {
  if (name == "auto") return S3Addressing::kAuto;
  if (name == "path") return S3Addressing::kPath;
  if (name == "virtual") return S3Addressing::kVirtualHosted;
  throw StatusError(Status::InvalidArgument(
      "addressing must be 'auto', 'path' or 'virtual', not '" + name + "'"));
}

S3Encryption EncryptionNamed(const std::string& name) {
  if (name.empty()) return S3Encryption::kBucketDefault;
  if (name == "AES256") return S3Encryption::kS3;
  if (name == "aws:kms") return S3Encryption::kKms;
  throw StatusError(
      Status::InvalidArgument("encryption must be None, 'AES256' (SSE-S3) or "
                              "'aws:kms' (SSE-KMS), not '" +
                              name + "'"));
}

// S3Options from rckpt.s3.S3Options (as a dict of its fields, checked by
// the Python layer), with `credentials_source` (None: the library's chain).
S3Options OptionsOf(nb::dict d, nb::object credentials_source,
                    const std::string& source_name) {
  S3Options o;
  o.endpoint = Get<std::string>(d, "endpoint");
  o.region = Get<std::string>(d, "region");
  const std::string key = Get<std::string>(d, "access_key_id");
  const std::string secret = Get<std::string>(d, "secret_access_key");
  if (!key.empty() || !secret.empty()) {
    o.credentials =
        S3Credentials{key, secret, Get<std::string>(d, "session_token")};
  }
  if (!credentials_source.is_none()) {
    o.credentials_source =
        CredentialsSource(std::move(credentials_source), source_name);
    o.credentials_source_name = source_name;
  }
  o.profile = Get<std::string>(d, "profile");
  o.addressing = AddressingNamed(Get<std::string>(d, "addressing"));
  o.encryption = EncryptionNamed(Get<std::string>(d, "encryption"));
  o.kms_key_id = Get<std::string>(d, "kms_key_id");
  o.max_requests = Get<int>(d, "max_requests");
  o.part_bytes = Get<uint64_t>(d, "part_bytes");
  o.upload_parts_in_flight = Get<int>(d, "upload_parts_in_flight");
  o.upload_buffer_bytes = Get<uint64_t>(d, "upload_buffer_bytes");
  o.max_attempts = Get<int>(d, "max_attempts");
  o.retry_base_delay_ms = Get<int>(d, "retry_base_delay_ms");
  o.retry_max_delay_ms = Get<int>(d, "retry_max_delay_ms");
  o.connect_timeout_ms = Get<int>(d, "connect_timeout_ms");
  o.stall_timeout_s = Get<int>(d, "stall_timeout_s");
  o.ca_file = Get<std::string>(d, "ca_file");
  o.read_environment = Get<bool>(d, "read_environment");
  return o;
}

FileSystemHandle MakeS3FileSystem(nb::dict options,
                                  nb::object credentials_source,
                                  const std::string& source_name,
                                  const std::string& description) {
  S3Options o = OptionsOf(options, std::move(credentials_source), source_name);
  std::optional<Result<std::unique_ptr<FileSystem>>> made;
  {
    nb::gil_scoped_release release;
    made.emplace(NewS3FileSystem(o));
  }
  return FileSystemHandle{
      std::shared_ptr<FileSystem>(ValueOrThrow(std::move(*made))), description};
}

std::string CredentialSource(nb::dict options) {
  return ValueOrThrow(S3CredentialSource(OptionsOf(options, nb::none(), "")));
}

}  // namespace

std::shared_ptr<FileSystem> FileSystemOf(nb::handle fs) {
  if (fs.is_none()) return nullptr;
  return nb::cast<const FileSystemHandle&>(fs).fs;
}

void RegisterS3(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<FileSystemHandle>(m, "FileSystem")
      .def("__repr__", [](const FileSystemHandle& h) {
        return "<rckpt._core.FileSystem " + h.description + ">";
      });
  m.def("s3_file_system", &MakeS3FileSystem, "options"_a,
        "credentials_source"_a.none(), "source_name"_a, "description"_a);
  m.def("s3_credential_source", &CredentialSource, "options"_a);
  m.def("s3_supported", &S3Supported);
}

}  // namespace rckpt::python
