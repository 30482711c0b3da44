// The CUDA device runtime: the CUDA runtime API, linked statically. On a
// machine without a driver or a GPU, cudaGetDeviceCount fails and the runtime
// reports 0 devices; nothing else is called then.
#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

#include "cuda_check.h"
#include "rckpt/runtime.h"
#include "unshuffle_kernel.h"

namespace rckpt {
namespace {

class CudaRuntimeImpl final : public DeviceRuntime {
 public:
  std::string_view name() const override { return "cuda"; }

  int DeviceCount() override {
    std::call_once(count_once_, [this] {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the error for later calls
        n = 0;
      }
      count_ = n;
    });
    return count_;
  }

  Result<void*> Allocate(Device device, uint64_t bytes) override {
    RCKPT_RETURN_IF_ERROR(Use(device, "Allocate"));
    void* p = nullptr;
    // cudaMalloc(0) may return nullptr; a distinct pointer keeps callers
    // simple.
    RCKPT_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
    return p;
  }

  void Free(Device device, void* ptr) override {
    if (ptr == nullptr || !Use(device, "Free").ok()) return;
    cudaFree(ptr);
  }

  Result<void*> AllocatePinned(uint64_t bytes) override {
    void* p = nullptr;
    RCKPT_CUDA_RETURN_IF_ERROR(
        cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable));
    return p;
  }
  void FreePinned(void* ptr) override {
    if (ptr != nullptr) cudaFreeHost(ptr);
  }

  Result<Stream> CreateStream(Device device) override {
    RCKPT_RETURN_IF_ERROR(Use(device, "CreateStream"));
    cudaStream_t s = nullptr;
    RCKPT_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return Stream{s};
  }
  void DestroyStream(Device device, Stream stream) override {
    if (stream.handle == nullptr || !Use(device, "DestroyStream").ok()) return;
    cudaStreamDestroy(static_cast<cudaStream_t>(stream.handle));
  }

  Status CopyToDeviceAsync(Device device, Stream stream, void* dst,
                           const void* src, uint64_t bytes) override {
    RCKPT_RETURN_IF_ERROR(Use(device, "CopyToDeviceAsync"));
    RCKPT_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                        static_cast<cudaStream_t>(stream.handle)));
    return Status::Ok();
  }
  Status CopyToHostAsync(Device device, Stream stream, void* dst,
                         const void* src, uint64_t bytes) override {
    RCKPT_RETURN_IF_ERROR(Use(device, "CopyToHostAsync"));
    RCKPT_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
                        static_cast<cudaStream_t>(stream.handle)));
    return Status::Ok();
  }

  Status UnshuffleAsync(Device device, Stream stream, void* dst,
                        const void* src, uint64_t bytes,
                        uint32_t elem_size) override {
    if (elem_size < 2) {
      return Status::InvalidArgument("UnshuffleAsync: elem_size " +
                                     std::to_string(elem_size) +
                                     ", expected >= 2");
    }
    RCKPT_RETURN_IF_ERROR(Use(device, "UnshuffleAsync"));
    RCKPT_CUDA_RETURN_IF_ERROR(LaunchUnshuffle(
        dst, src, bytes, elem_size, static_cast<cudaStream_t>(stream.handle)));
    return Status::Ok();
  }

  Result<Event> RecordEvent(Device device, Stream stream) override {
    RCKPT_RETURN_IF_ERROR(Use(device, "RecordEvent"));
    cudaEvent_t e = nullptr;
    RCKPT_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaError_t err =
        cudaEventRecord(e, static_cast<cudaStream_t>(stream.handle));
    if (err != cudaSuccess) {
      cudaEventDestroy(e);
      return CudaStatus(err, "cudaEventRecord");
    }
    return Event{e};
  }
  Status WaitEvent(Event event) override {
    if (event.handle == nullptr) return Status::Ok();
    RCKPT_CUDA_RETURN_IF_ERROR(
        cudaEventSynchronize(static_cast<cudaEvent_t>(event.handle)));
    return Status::Ok();
  }
  void DestroyEvent(Event event) override {
    if (event.handle != nullptr) {
      cudaEventDestroy(static_cast<cudaEvent_t>(event.handle));
    }
  }

  Status Synchronize(Device device, Stream stream) override {
    RCKPT_RETURN_IF_ERROR(Use(device, "Synchronize"));
    RCKPT_CUDA_RETURN_IF_ERROR(
        cudaStreamSynchronize(static_cast<cudaStream_t>(stream.handle)));
    return Status::Ok();
  }

 private:
  // Makes `device` current on the calling thread (the runtime's current
  // device is per thread, and the engine calls from worker threads).
  Status Use(Device device, std::string_view what) {
    if (!device.is_cuda()) {
      return Status::InvalidArgument(std::string(what) + ": device " +
                                     device.ToString() +
                                     " is not a CUDA device");
    }
    const int count = DeviceCount();
    if (device.index < 0 || device.index >= count) {
      return Status::DeviceUnavailable(
          std::string(what) + ": device " + device.ToString() +
          " does not exist (this machine has " + std::to_string(count) +
          " CUDA devices)");
    }
    RCKPT_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
    return Status::Ok();
  }

  std::once_flag count_once_;
  int count_ = 0;
};

}  // namespace

Result<DeviceRuntime*> CudaRuntime() {
  static CudaRuntimeImpl* runtime = new CudaRuntimeImpl();  // never destroyed
  return runtime;
}

}  // namespace rckpt
