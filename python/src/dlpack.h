// The DLPack ABI (v0.8, dlpack.h): the structs torch.from_dlpack consumes.
// Declared here because the interchange format is a stable C ABI of a few
// structs and no system package ships the header.
#ifndef RCKPT_PYTHON_SRC_DLPACK_H_
#define RCKPT_PYTHON_SRC_DLPACK_H_

#include <cstdint>

namespace rckpt::python {

enum DLDeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2 };
enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
  kDLComplex = 5,
};

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_DLPACK_H_
