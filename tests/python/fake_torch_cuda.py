"""torch.cuda played by the stand-in CUDA driver of the C++ tests, so rckpt's glue to torch's
CUDA world (python/src/torch_device.cc: tensors from torch.empty, ordering with
torch.cuda.current_stream, model_device="auto" as torch.cuda.current_device) runs without a GPU.

Used by test_torch_cuda_glue.py in a child process whose LD_LIBRARY_PATH makes
"libcuda.so.1" the stand-in, so rckpt's own runtime and this module load the same driver:
device memory that torch.empty hands out here is the stand-in's, and every copy rckpt makes
into it is checked by the stand-in (right device, live memory, a current context).
"""

import ctypes
import threading
from typing import Any, Callable, Optional

import torch

_CUdeviceptr = ctypes.c_uint64


class Driver:
    """The few driver calls a stand-in 'torch' needs: memory on a device, reading it back."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        for name in ("cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
                     "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuMemAlloc_v2", "cuMemFree_v2",
                     "cuMemcpyDtoHAsync_v2", "cuStreamSynchronize"):
            getattr(self.lib, name).restype = ctypes.c_int
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(_CUdeviceptr), ctypes.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [_CUdeviceptr]
        self.lib.cuMemcpyDtoHAsync_v2.argtypes = [ctypes.c_void_p, _CUdeviceptr, ctypes.c_size_t,
                                                  ctypes.c_void_p]
        self.lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        self.lib.rckpt_standin_device_of.argtypes = [ctypes.c_void_p]
        self.lib.rckpt_standin_hold_stream.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.lib.rckpt_standin_hold_stream.restype = ctypes.c_void_p
        self.lib.rckpt_standin_release.argtypes = [ctypes.c_void_p]
        self._check("cuInit", self.lib.cuInit(0))
        self._contexts: dict[int, ctypes.c_void_p] = {}
        self._handles: dict[int, ctypes.c_int] = {}

    @staticmethod
    def _check(call: str, rc: int) -> None:
        if rc != 0:
            raise RuntimeError(f"{call} failed: CUresult {rc}")

    def _in_context(self, device: int, fn: Callable[[], int], call: str) -> None:
        ctx = self._contexts.get(device)
        if ctx is None:
            handle = ctypes.c_int()
            self._check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(handle), device))
            ctx = ctypes.c_void_p()
            self._check("cuDevicePrimaryCtxRetain",
                        self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), handle))
            self._contexts[device] = ctx
            self._handles[device] = handle
        self._check("cuCtxPushCurrent_v2", self.lib.cuCtxPushCurrent_v2(ctx))
        try:
            self._check(call, fn())
        finally:
            popped = ctypes.c_void_p()
            self._check("cuCtxPopCurrent_v2", self.lib.cuCtxPopCurrent_v2(ctypes.byref(popped)))

    def alloc(self, device: int, nbytes: int) -> int:
        ptr = _CUdeviceptr()
        self._in_context(device, lambda: self.lib.cuMemAlloc_v2(ctypes.byref(ptr), nbytes),
                         "cuMemAlloc_v2")
        return int(ptr.value)

    def free(self, device: int, ptr: int) -> None:
        self._in_context(device, lambda: self.lib.cuMemFree_v2(ptr), "cuMemFree_v2")

    def read(self, device: int, ptr: int, nbytes: int) -> bytes:
        out = ctypes.create_string_buffer(nbytes)
        self._in_context(device, lambda: self.lib.cuMemcpyDtoHAsync_v2(out, ptr, nbytes, None),
                         "cuMemcpyDtoHAsync_v2")
        self._in_context(device, lambda: self.lib.cuStreamSynchronize(None), "cuStreamSynchronize")
        return out.raw

    def device_of(self, ptr: int) -> int:
        return int(self.lib.rckpt_standin_device_of(ptr))

    def violations(self) -> str:
        buf = ctypes.create_string_buffer(1 << 16)
        self.lib.rckpt_standin_violations(buf, len(buf))
        return buf.value.decode()

    def hold_default_stream(self, device: int) -> Callable[[], None]:
        """Work queued on `device`'s default stream from now on waits for the returned release."""
        gate = self.lib.rckpt_standin_hold_stream(None, device)
        return lambda: self.lib.rckpt_standin_release(gate)

    def close(self) -> None:
        for device in self._contexts:
            self._check("cuDevicePrimaryCtxRelease_v2",
                        self.lib.cuDevicePrimaryCtxRelease_v2(self._handles[device]))
        self._contexts.clear()
        self._handles.clear()


class FakeCudaTensor:
    """What the stand-in 'torch.empty(..., device="cuda:i")' returns: device memory and a shape."""

    def __init__(self, driver: Driver, shape: tuple[int, ...], dtype: torch.dtype,
                 index: int) -> None:
        self.driver = driver
        self.shape = shape
        self.dtype = dtype
        self.device = torch.device("cuda", index)
        numel = 1
        for d in shape:
            numel *= d
        self.nbytes = numel * torch.empty((), dtype=dtype).element_size()
        self._ptr = driver.alloc(index, self.nbytes) if self.nbytes else 0

    def data_ptr(self) -> int:
        return self._ptr

    def cpu(self) -> torch.Tensor:
        if not self.nbytes:
            return torch.zeros(self.shape, dtype=self.dtype)
        raw = bytearray(self.driver.read(self.device.index or 0, self._ptr, self.nbytes))
        return torch.frombuffer(raw, dtype=self.dtype).reshape(self.shape)

    def free(self) -> None:
        if self._ptr:
            self.driver.free(self.device.index or 0, self._ptr)
            self._ptr = 0


class FakeTorchCuda:
    """Installs torch.cuda.{is_available, device_count, current_device, current_stream} and a
    torch.empty that makes FakeCudaTensors for CUDA devices, recording what rckpt asked."""

    def __init__(self, driver: Driver, *, device_count: int = 2, current: int = 0,
                 available: bool = True, empty_error: Optional[str] = None) -> None:
        self.driver = driver
        self.device_count = device_count
        self.current = current
        self.available = available
        self.empty_error = empty_error
        self.empty_calls: list[tuple[tuple[int, ...], str, int]] = []
        self.stream_calls: list[int] = []
        self.made: list[FakeCudaTensor] = []
        self.threads: set[str] = set()
        self._real_empty = torch.empty

    def install(self) -> None:
        cuda: Any = torch.cuda
        cuda.is_available = lambda: self.available
        cuda.device_count = lambda: self.device_count
        cuda.current_device = lambda: self.current
        cuda.current_stream = self._current_stream
        setattr(torch, "empty", self._empty)

    def _current_stream(self, device: Optional[int] = None) -> Any:
        self.stream_calls.append(self.current if device is None else int(device))
        self.threads.add(threading.current_thread().name)

        class _Stream:
            cuda_stream = 0  # the legacy default stream, as torch's is unless told otherwise

        return _Stream()

    def _empty(self, *size: Any, **kwargs: Any) -> Any:
        device = kwargs.get("device")
        if device is None or torch.device(device).type != "cuda":
            return self._real_empty(*size, **kwargs)
        self.threads.add(threading.current_thread().name)
        shape = tuple(int(d) for d in (size[0] if len(size) == 1 and
                                       isinstance(size[0], (tuple, list)) else size))
        index = torch.device(device).index or 0
        dtype = kwargs.get("dtype") or torch.float32
        self.empty_calls.append((shape, str(dtype), index))
        if self.empty_error is not None:
            raise RuntimeError(self.empty_error)
        t = FakeCudaTensor(self.driver, shape, dtype, index)
        self.made.append(t)
        return t

    def free_all(self) -> None:
        for t in self.made:
            t.free()
        self.made.clear()
