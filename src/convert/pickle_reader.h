// A restricted, non-executing unpickler for PyTorch checkpoints.
//
// It interprets the opcodes of pickle protocols 0-5 that carry data (every
// opcode torch's weights-only unpickler accepts, plus the protocol 3/4 data
// opcodes) and builds an inert object graph. GLOBAL, REDUCE, NEWOBJ and BUILD
// never call anything: a closed set of recognised constructors (tensor
// rebuilds, OrderedDict, torch.Size, torch.device, dtypes, set, complex,
// bytearray, bytes via _codecs.encode) become data; any other class becomes
// an inert object node (class path, arguments, state). Globals from modules
// that can only mean code execution (os, subprocess, builtins.eval, ...) are
// refused with Unsupported before anything else happens. Structural damage
// (truncation, stack underflow, unknown opcode, bad memo index) is Corruption.
#ifndef RCKPT_SRC_CONVERT_PICKLE_READER_H_
#define RCKPT_SRC_CONVERT_PICKLE_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "rckpt/convert.h"
#include "rckpt/dtype.h"
#include "rckpt/status.h"

namespace rckpt::convert {

enum class PyKind : uint8_t {
  kNone,
  kBool,
  kInt,
  kBigInt,   // s: little-endian two's complement bytes
  kFloat,
  kStr,
  kBytes,
  kList,
  kTuple,
  kDict,     // entries; `state` holds BUILD state of an OrderedDict (_metadata)
  kSet,
  kGlobal,   // s: "module.name" (a class or function, never resolved)
  kObject,   // s: class path; args / state / entries (dict items) / items (list items)
  kKnown,    // s: class path of a recognised value type (torch.Size, torch.device,
             // torch.dtype, builtins.complex, builtins.bytearray, torch.layout); args
  kStorage,  // a persistent-id storage reference
  kTensor,   // a rebuilt tensor view of a storage
  kMark,     // only on the VM stack
};

struct PyNode;

struct StorageRef {
  std::string key;       // record data/<key>
  std::string location;  // 'cpu', 'cuda:1', ...
  std::optional<DType> dtype;  // nullopt: untyped (bytes); dtype from the rebuild
  std::string type_name;       // storage class, for messages
  uint64_t numel = 0;          // elements of dtype, or bytes when untyped
};

struct TensorRefInfo {
  PyNode* storage = nullptr;  // kStorage
  DType dtype = DType::kU8;
  int64_t offset = 0;
  std::vector<int64_t> size;
  std::vector<int64_t> stride;
};

struct PyNode {
  PyKind kind = PyKind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<PyNode*> items;
  std::vector<std::pair<PyNode*, PyNode*>> entries;
  PyNode* args = nullptr;   // kObject, kKnown
  PyNode* state = nullptr;  // kObject, kDict (BUILD state)
  bool has_items_index = false;
  StorageRef storage;  // kStorage
  TensorRefInfo tensor;  // kTensor
};

// The result of unpickling: the root object and the arena that owns every
// node (nodes may be shared, and containers may even contain themselves).
struct PickleResult {
  PyNode* root = nullptr;
  std::vector<std::unique_ptr<PyNode>> arena;
  std::vector<std::string> unknown_classes;  // sorted, unique
  std::vector<std::string> warnings;
};

// Unpickles `data`. `strict` refuses unknown classes (Unsupported, listing
// them). Limits from `limits` bound memo, stack and input size.
Result<PickleResult> Unpickle(std::span<const std::byte> data, const PickleLimits& limits,
                              bool strict);

// Unpickles a plain pickle (not a torch.save archive's data.pkl) whose
// globals must all be in `allowed` ("module.name" after the usual module
// renames): any other global is refused with Unsupported naming it, before
// anything is built from it; persistent ids are refused. Allowed classes
// become inert object nodes (NEWOBJ/REDUCE arguments, BUILD state), never
// called. builtins.getattr, when allowed, is accepted only as
// getattr(<allowed global>, "NAME") (how Python pickles an enum member) and
// yields the global "<class path>.NAME".
Result<PickleResult> UnpickleAllowed(std::span<const std::byte> data, const PickleLimits& limits,
                                     const std::set<std::string>& allowed);

// The fuzz entry point: unpickles with default limits, non-strict.
Status FuzzUnpickle(std::span<const std::byte> data);

// Maps a torch dtype name ("float32", "bfloat16") to a DType; nullopt for
// dtypes rckpt cannot hold (quantized, float8 fnuz, complex32, bits*).
std::optional<DType> TorchDTypeFromName(std::string_view name);
// The torch name of a DType ("float32").
std::string_view TorchDTypeName(DType dtype);
// The legacy storage class name of a DType ("FloatStorage"); empty for dtypes
// that torch pickles as UntypedStorage + dtype (_rebuild_tensor_v3).
std::string_view TorchStorageName(DType dtype);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_PICKLE_READER_H_
