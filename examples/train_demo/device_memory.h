// Training state that lives on a device.
//
// Every tensor of the run has a master copy (`StateTensor::master`) where
// the state truly lives -- device memory allocated through the rckpt device
// runtime, or host memory -- and a host mirror the arithmetic reads and
// writes. After each step the changed mirrors are copied back to their
// masters; checkpoints are saved from the masters, and a resumed run adopts
// whatever the load returned as its masters.
#ifndef RCKPT_EXAMPLES_TRAIN_DEMO_DEVICE_MEMORY_H_
#define RCKPT_EXAMPLES_TRAIN_DEMO_DEVICE_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "rckpt/runtime.h"
#include "rckpt/tensor.h"

namespace train_demo {

// One tensor of the training state. The mirror is f32 or i64.
struct StateTensor {
  std::string section;  // checkpoint section ("model", "optimizer", ...)
  std::string name;     // unique checkpoint name ("model.fc1.weight")
  rckpt::DType dtype = rckpt::DType::kF32;
  rckpt::Shape shape;
  bool on_run_device = false;  // where a fresh run places it: --device or host
  std::vector<float> f32;      // the mirror when dtype is f32
  std::vector<int64_t> i64;    // the mirror when dtype is i64
  rckpt::Tensor master;

  std::span<std::byte> mirror_bytes();
  std::span<const std::byte> mirror_bytes() const;
};

// Moves bytes between masters and mirrors through one runtime.
// Not thread-safe.
class DeviceMemory {
 public:
  explicit DeviceMemory(rckpt::DeviceRuntime* runtime) : runtime_(runtime) {}
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  rckpt::DeviceRuntime* runtime() const { return runtime_; }

  // Gives `t` a master on `device` holding its mirror's bytes.
  rckpt::Status Place(StateTensor& t, rckpt::Device device);
  // Starts copying the mirror to the master (async on CUDA devices).
  rckpt::Status Upload(StateTensor& t);
  // Starts copying the master to the mirror.
  rckpt::Status Download(StateTensor& t);
  // Waits for every copy started so far.
  rckpt::Status Synchronize();

 private:
  rckpt::Result<rckpt::Stream> StreamFor(rckpt::Device device);

  rckpt::DeviceRuntime* runtime_;
  std::map<rckpt::Device, rckpt::Stream> streams_;
};

}  // namespace train_demo

#endif  // RCKPT_EXAMPLES_TRAIN_DEMO_DEVICE_MEMORY_H_
