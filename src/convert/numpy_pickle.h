// NumPy values inside pickles, for the PyTorch importer and exporter.
//
// NumPy pickles an array as numpy.core.multiarray._reconstruct(ndarray, (0,),
// b'b') followed by BUILD (1, shape, dtype, is_fortran, raw bytes) (protocol
// 2; protocol 5 uses numpy.core.numeric._frombuffer(buffer, dtype, shape,
// order)), a scalar as numpy.core.multiarray.scalar(dtype, raw bytes) and a
// dtype as numpy.dtype(typestr, False, True) followed by BUILD (3 or 4, byte
// order, ...); NumPy 2 spells the modules numpy._core. The unpickler keeps
// these as inert object nodes, never calling anything; this file reads the
// ones of a dtype rckpt holds (bool, integers, floating, complex, datetime64,
// timedelta64; str and bytes scalars) into the values rckpt.save writes for
// NumPy values (python/rckpt/_state_types.py):
//   array:  Object("numpy.ndarray", {"dtype": name, "data": tensor}), the
//           tensor of the dtype rckpt.save stores (NumpyDType::Stored);
//   scalar: Object("numpy.scalar", {"dtype": name, "value": value}),
// and NumPy's generator states into numpy RNG records (core/rng_layout.h),
// and writes all of them back as NumPy pickles them.
#ifndef RCKPT_SRC_CONVERT_NUMPY_PICKLE_H_
#define RCKPT_SRC_CONVERT_NUMPY_PICKLE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "convert/pickle_reader.h"
#include "convert/pickle_writer.h"
#include "rckpt/dtype.h"
#include "rckpt/status.h"
#include "rckpt/tensor.h"
#include "rckpt/tree.h"

namespace rckpt::convert {

inline constexpr std::string_view kNdarrayClass = "numpy.ndarray";
inline constexpr std::string_view kNumpyScalarClass = "numpy.scalar";

// Checkpoint metadata naming the module NumPy's pickled globals used in the
// file a checkpoint was imported from ("numpy.core": NumPy 1, "numpy._core":
// NumPy 2), so that the export writes them back the same way: a file's
// reader (transformers' Trainer, loading with torch.load(weights_only=True))
// allows them under the name its NumPy gives them.
inline constexpr std::string_view kNumpyModuleKey = "rckpt.numpy_module";
inline constexpr std::string_view kNumpy1Module = "numpy.core";
inline constexpr std::string_view kNumpy2Module = "numpy._core";

// A NumPy dtype rckpt holds, in the host's byte order.
struct NumpyDType {
  char kind = 0;  // b i u f c m M; S U for scalars only
  uint32_t itemsize = 0;
  std::string unit;  // m, M: "ns", "25s"; empty: generic

  // NumPy's dtype.name: "float64", "datetime64[ns]", "float128"; "str" and
  // "bytes" for S and U (as rckpt.save names those scalars' dtypes).
  std::string Name() const;
  // The dtype of the tensor rckpt.save stores an array in: torch's where it
  // has one; unsigned 16-64 bit, datetimes and timedeltas as the signed
  // integers of their width; long double and its complex as uint8, the
  // tensor then having a last dimension of the item size (AsBytes).
  DType Stored() const;
  bool AsBytes() const { return Stored() == DType::kU8 && kind != 'u'; }
};

// The dtype named `name` (NumpyDType::Name's spelling); nullopt otherwise.
std::optional<NumpyDType> NumpyDTypeFromName(std::string_view name);

// Whether `node` is one of NumPy's array constructors (_reconstruct,
// _frombuffer), whatever its arguments.
bool IsNumpyArrayNode(const PyNode* node);
bool IsNumpyScalarNode(const PyNode* node);

// An array: its dtype, shape and elements in C order and the host's byte
// order, in the tensor Stored() names (shape + [itemsize] when AsBytes()).
struct NumpyArray {
  NumpyDType dtype;
  Tensor data;
};

// Reads the array an IsNumpyArrayNode node builds. nullopt: an array rckpt
// keeps inert (an object, string or structured dtype, a subclass of
// ndarray). Corruption for an array whose state NumPy would refuse (a byte
// count that is not shape x item size, a malformed dtype or shape);
// OutOfMemory.
Result<std::optional<NumpyArray>> ReadNumpyArray(const PyNode* node);

// The numpy.scalar value an IsNumpyScalarNode node builds; nullopt for a
// scalar rckpt keeps inert (an object or structured dtype, a str holding
// what UTF-8 cannot); Corruption as ReadNumpyArray.
Result<std::optional<Value>> ReadNumpyScalar(const PyNode* node);

// A numpy RNG record's bytes (core/rng_layout.h) from NumPy's legacy
// get_state() tuple or a bit generator's state dict. nullopt for anything
// else; a value of that shape whose fields NumPy would not give (a position
// past the key, a value wider than its field) adds a warning naming `where`
// and is nullopt too, so that it stays data. `array_class` receives the
// class path of an array the state holds (which says the NumPy module's
// spelling), if any.
Result<std::optional<std::string>> ReadNumpyRng(const PyNode* node, const std::string& where,
                                                std::vector<std::string>* warnings,
                                                std::string* array_class);

// Writers, the pickle NumPy writes with protocol 2; `module` is kNumpy1Module
// or kNumpy2Module.
void WriteNumpyArray(PickleWriter& p, std::string_view module, const NumpyDType& dtype,
                     std::span<const int64_t> shape, std::span<const std::byte> data);
// The tensor name of an Object("numpy.ndarray") value's fields, when they
// are {dtype: name, data: tensor reference} as rckpt.save and the importer
// make them; nullopt otherwise.
std::optional<std::string> NumpyArrayTensorName(const Value& fields);
// Whether `data` is the tensor such a value's dtype stores (NumpyDType::Stored,
// the item size as last dimension where AsBytes); InvalidArgument saying
// what differs otherwise.
Status CheckNumpyArrayValue(const Value& fields, const Tensor& data);
// The array an Object("numpy.ndarray") value that CheckNumpyArrayValue
// accepts stands for.
void WriteNumpyArrayValue(PickleWriter& p, std::string_view module, const Value& fields,
                          const Tensor& data);
// Whether an Object("numpy.scalar") value's fields are one rckpt.save or
// the importer makes (what WriteNumpyScalarValue writes).
bool IsNumpyScalarValue(const Value& fields);
void WriteNumpyScalarValue(PickleWriter& p, std::string_view module, const Value& fields);
// A numpy RNG record's state as NumPy's API gives it (get_state()'s tuple,
// a .state dict). InvalidArgument when the bytes are no valid layout.
Status WriteNumpyRng(PickleWriter& p, std::string_view module,
                     std::span<const std::byte> record);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_NUMPY_PICKLE_H_
