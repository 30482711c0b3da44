// The part of the CUDA driver API rckpt calls, declared here so that rckpt
// builds without a CUDA toolkit and loads the driver (libcuda.so.1) at run
// time. The types, constants and signatures are the driver's stable C ABI;
// every function is resolved by its versioned symbol name (the name cuda.h
// maps the plain name to), listed beside it in DriverApi.
//
// Internal to cuda/ and to the stand-in driver the tests load instead.
#ifndef RCKPT_CUDA_DRIVER_API_H_
#define RCKPT_CUDA_DRIVER_API_H_

#include <cstddef>
#include <cstdint>

namespace rckpt::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // NOLINT: the driver ABI's type
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
struct CUuuid {
  char bytes[16];
};

// CUresult values rckpt tells apart.
inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorInvalidValue = 1;
inline constexpr CUresult kErrorOutOfMemory = 2;
inline constexpr CUresult kErrorNotInitialized = 3;
inline constexpr CUresult kErrorDeinitialized = 4;
inline constexpr CUresult kErrorStubLibrary = 34;
inline constexpr CUresult kErrorInsufficientDriver = 35;
inline constexpr CUresult kErrorDeviceUnavailable = 46;
inline constexpr CUresult kErrorNoDevice = 100;
inline constexpr CUresult kErrorInvalidDevice = 101;
inline constexpr CUresult kErrorInvalidImage = 200;
inline constexpr CUresult kErrorInvalidContext = 201;
inline constexpr CUresult kErrorNoBinaryForGpu = 209;
inline constexpr CUresult kErrorInvalidPtx = 218;
inline constexpr CUresult kErrorJitCompilerNotFound = 221;
inline constexpr CUresult kErrorUnsupportedPtxVersion = 222;
inline constexpr CUresult kErrorOperatingSystem = 304;
inline constexpr CUresult kErrorInvalidHandle = 400;
inline constexpr CUresult kErrorNotFound = 500;
inline constexpr CUresult kErrorNotReady = 600;
inline constexpr CUresult kErrorIllegalAddress = 700;
inline constexpr CUresult kErrorContextIsDestroyed = 709;
inline constexpr CUresult kErrorLaunchFailed = 719;
inline constexpr CUresult kErrorNotPermitted = 800;
inline constexpr CUresult kErrorNotSupported = 801;
inline constexpr CUresult kErrorSystemNotReady = 802;
inline constexpr CUresult kErrorSystemDriverMismatch = 803;
inline constexpr CUresult kErrorCompatNotSupportedOnDevice = 804;
inline constexpr CUresult kErrorUnknown = 999;

inline constexpr unsigned kMemHostAllocPortable = 0x01;
inline constexpr unsigned kStreamNonBlocking = 0x1;
inline constexpr unsigned kEventBlockingSync = 0x1;
inline constexpr unsigned kEventDisableTiming = 0x2;
inline constexpr int kDeviceAttributeComputeCapabilityMajor = 75;
inline constexpr int kDeviceAttributeComputeCapabilityMinor = 76;

// The entry points, each with the symbol it is resolved by.
struct DriverApi {
  CUresult (*Init)(unsigned flags);                                // cuInit
  CUresult (*DriverGetVersion)(int* version);                      // cuDriverGetVersion
  CUresult (*GetErrorName)(CUresult error, const char** name);     // cuGetErrorName
  CUresult (*GetErrorString)(CUresult error, const char** text);   // cuGetErrorString
  CUresult (*DeviceGetCount)(int* count);                          // cuDeviceGetCount
  CUresult (*DeviceGet)(CUdevice* device, int ordinal);            // cuDeviceGet
  CUresult (*DeviceGetName)(char* name, int len, CUdevice device); // cuDeviceGetName
  CUresult (*DeviceGetUuid)(CUuuid* uuid, CUdevice device);        // cuDeviceGetUuid_v2
  CUresult (*DeviceTotalMem)(size_t* bytes, CUdevice device);      // cuDeviceTotalMem_v2
  CUresult (*DeviceGetPCIBusId)(char* id, int len, CUdevice device);  // cuDeviceGetPCIBusId
  CUresult (*DeviceGetAttribute)(int* value, int attribute, CUdevice device);  // cuDeviceGetAttribute
  CUresult (*DevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);  // cuDevicePrimaryCtxRetain
  CUresult (*DevicePrimaryCtxRelease)(CUdevice device);            // cuDevicePrimaryCtxRelease_v2
  CUresult (*CtxPushCurrent)(CUcontext ctx);                       // cuCtxPushCurrent_v2
  CUresult (*CtxPopCurrent)(CUcontext* ctx);                       // cuCtxPopCurrent_v2
  CUresult (*CtxGetCurrent)(CUcontext* ctx);                       // cuCtxGetCurrent
  CUresult (*CtxGetDevice)(CUdevice* device);                      // cuCtxGetDevice
  CUresult (*MemAlloc)(CUdeviceptr* ptr, size_t bytes);            // cuMemAlloc_v2
  CUresult (*MemFree)(CUdeviceptr ptr);                            // cuMemFree_v2
  CUresult (*MemHostAlloc)(void** ptr, size_t bytes, unsigned flags);  // cuMemHostAlloc
  CUresult (*MemFreeHost)(void* ptr);                              // cuMemFreeHost
  CUresult (*MemHostGetFlags)(unsigned* flags, void* ptr);         // cuMemHostGetFlags
  CUresult (*MemGetAddressRange)(CUdeviceptr* base, size_t* bytes,
                                 CUdeviceptr ptr);                 // cuMemGetAddressRange_v2
  CUresult (*StreamCreate)(CUstream* stream, unsigned flags);      // cuStreamCreate
  CUresult (*StreamDestroy)(CUstream stream);                      // cuStreamDestroy_v2
  CUresult (*StreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);  // cuStreamWaitEvent
  CUresult (*StreamQuery)(CUstream stream);                        // cuStreamQuery
  CUresult (*StreamSynchronize)(CUstream stream);                  // cuStreamSynchronize
  CUresult (*CtxSynchronize)();                                    // cuCtxSynchronize
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void* src, size_t bytes,
                              CUstream stream);                    // cuMemcpyHtoDAsync_v2
  CUresult (*MemcpyDtoHAsync)(void* dst, CUdeviceptr src, size_t bytes,
                              CUstream stream);                    // cuMemcpyDtoHAsync_v2
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                              CUstream stream);                    // cuMemcpyDtoDAsync_v2
  CUresult (*EventCreate)(CUevent* event, unsigned flags);         // cuEventCreate
  CUresult (*EventRecord)(CUevent event, CUstream stream);         // cuEventRecord
  CUresult (*EventSynchronize)(CUevent event);                     // cuEventSynchronize
  CUresult (*EventQuery)(CUevent event);                           // cuEventQuery
  CUresult (*EventDestroy)(CUevent event);                         // cuEventDestroy_v2
  CUresult (*ModuleLoadData)(CUmodule* module, const void* image); // cuModuleLoadData
  CUresult (*ModuleUnload)(CUmodule module);                       // cuModuleUnload
  CUresult (*ModuleGetFunction)(CUfunction* fn, CUmodule module, const char* name);  // cuModuleGetFunction
  CUresult (*LaunchKernel)(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                           unsigned block_x, unsigned block_y, unsigned block_z,
                           unsigned shared_bytes, CUstream stream, void** params,
                           void** extra);                          // cuLaunchKernel
};

}  // namespace rckpt::cuda

#endif  // RCKPT_CUDA_DRIVER_API_H_
