"""torch.cuda played by the stand-in CUDA driver of the C++ tests, so rckpt's glue to torch's
CUDA world (python/src/torch_device.cc: tensors from torch.empty, ordering with
torch.cuda.current_stream, model_device="auto" as torch.cuda.current_device; and
python/src/async_module.cc: save_async recording the saved tensors with record_stream) runs
without a GPU. CudaBlocks plays torch's caching allocator for tensors to save, on streams of
their own: a freed block is handed out again on its stream at once, unless the tensor was
recorded on other streams, whose work at the free it then waits for, as torch's does.

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
                     "cuMemcpyDtoHAsync_v2", "cuMemcpyHtoDAsync_v2", "cuStreamSynchronize",
                     "cuStreamCreate", "cuStreamDestroy_v2", "cuEventCreate", "cuEventRecord",
                     "cuEventSynchronize", "cuEventDestroy_v2"):
            getattr(self.lib, name).restype = ctypes.c_int
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(_CUdeviceptr), ctypes.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [_CUdeviceptr]
        self.lib.cuMemcpyDtoHAsync_v2.argtypes = [ctypes.c_void_p, _CUdeviceptr, ctypes.c_size_t,
                                                  ctypes.c_void_p]
        self.lib.cuMemcpyHtoDAsync_v2.argtypes = [_CUdeviceptr, ctypes.c_void_p, ctypes.c_size_t,
                                                  ctypes.c_void_p]
        self.lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        self.lib.cuStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
        self.lib.cuStreamDestroy_v2.argtypes = [ctypes.c_void_p]
        self.lib.cuEventCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
        self.lib.cuEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib.cuEventSynchronize.argtypes = [ctypes.c_void_p]
        self.lib.cuEventDestroy_v2.argtypes = [ctypes.c_void_p]
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

    def write(self, device: int, ptr: int, data: bytes, stream: Optional[int] = None) -> None:
        """Copies `data` to `ptr` on `stream` (None: the default stream) and waits for it."""
        buf = ctypes.create_string_buffer(data, len(data))
        self._in_context(device, lambda: self.lib.cuMemcpyHtoDAsync_v2(ptr, buf, len(data), stream),
                         "cuMemcpyHtoDAsync_v2")
        self._in_context(device, lambda: self.lib.cuStreamSynchronize(stream), "cuStreamSynchronize")

    def create_stream(self, device: int) -> int:
        s = ctypes.c_void_p()
        self._in_context(device, lambda: self.lib.cuStreamCreate(ctypes.byref(s), 1),
                         "cuStreamCreate")
        return int(s.value or 0)

    def destroy_stream(self, device: int, stream: int) -> None:
        self._in_context(device, lambda: self.lib.cuStreamDestroy_v2(stream), "cuStreamDestroy_v2")

    def record_event(self, device: int, stream: int) -> int:
        """An event after the work queued on `stream` (0: the default stream) so far.

        Made with CU_EVENT_BLOCKING_SYNC: the stand-in holds every event of the process to
        that rule, and this fake's events are not what it checks."""
        e = ctypes.c_void_p()
        self._in_context(device, lambda: self.lib.cuEventCreate(ctypes.byref(e), 1),
                         "cuEventCreate")
        self._in_context(device, lambda: self.lib.cuEventRecord(e, stream or None),
                         "cuEventRecord")
        return int(e.value or 0)

    def wait_and_destroy_event(self, device: int, event: int) -> None:
        self._in_context(device, lambda: self.lib.cuEventSynchronize(event), "cuEventSynchronize")
        self._in_context(device, lambda: self.lib.cuEventDestroy_v2(event), "cuEventDestroy_v2")

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


class FakeSavedCuda(torch.Tensor):
    """A torch.Tensor that rckpt's save takes for a CUDA tensor: its device, data_ptr and
    record_stream are the stand-in's (its CPU storage is never read). Made by CudaBlocks."""

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    _fake_device: torch.device
    _ptr: int
    _stream: int
    _bytes: int
    recorded: list[int]

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return self._fake_device

    def data_ptr(self) -> int:  # type: ignore[override]
        return self._ptr

    def record_stream(self, stream: Any) -> None:  # type: ignore[override]
        self.recorded.append(int(stream.cuda_stream))


class UnrecordedCuda(FakeSavedCuda):
    """One whose record_stream is lost (what saving without the record would be)."""

    def record_stream(self, stream: Any) -> None:  # type: ignore[override]
        pass


class CudaBlocks:
    """torch's caching allocator, for tensors to save: blocks of the stand-in's memory, each
    allocated on a stream and handed out again on that stream as soon as it is freed, or,
    for a tensor recorded on other streams, once their work queued at the free is done."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self._lock = threading.Lock()
        self._free: list[tuple[int, int, int, int]] = []  # (device, stream, nbytes, ptr)
        self._all: list[tuple[int, int]] = []  # (device, ptr) of every block
        self._waiters: list[threading.Thread] = []

    def _block(self, device: int, stream: int, nbytes: int) -> int:
        with self._lock:
            for i, (d, s, n, p) in enumerate(self._free):
                if (d, s, n) == (device, stream, nbytes):
                    del self._free[i]
                    return p
        ptr = self.driver.alloc(device, nbytes)
        self._all.append((device, ptr))
        return ptr

    def tensor(self, values: torch.Tensor, device: int, stream: int,
               cls: type = FakeSavedCuda) -> Any:
        """`values` in a block of `device` allocated on `stream` (a created one, not 0)."""
        values = values.contiguous()
        t: Any = torch.Tensor._make_subclass(cls, values)  # type: ignore[arg-type]
        t._fake_device = torch.device("cuda", device)
        t._stream = stream
        t.recorded = []
        data = values.numpy().tobytes()
        t._bytes = len(data)
        t._ptr = self._block(device, stream, len(data)) if data else 0
        if data:
            self.driver.write(device, t._ptr, data, stream)
        return t

    def fill(self, nbytes: int, device: int, stream: int, byte: int) -> int:
        """A new allocation of nbytes on `stream`, written with `byte` at once (its next user's
        work); its address."""
        ptr = self._block(device, stream, nbytes)
        self.driver.write(device, ptr, bytes([byte]) * nbytes, stream)
        with self._lock:
            self._free.append((device, stream, nbytes, ptr))
        return ptr

    def free(self, t: FakeSavedCuda) -> None:
        """The last reference to `t` went: its block goes back to its stream's pool."""
        device = t._fake_device.index or 0
        if not t._bytes:
            return
        block = (device, t._stream, t._bytes, t._ptr)
        others = [s for s in t.recorded if s != t._stream]
        if not others:
            with self._lock:
                self._free.append(block)
            return
        events = [self.driver.record_event(device, s) for s in others]

        def release() -> None:
            for e in events:
                self.driver.wait_and_destroy_event(device, e)
            with self._lock:
                self._free.append(block)
        waiter = threading.Thread(target=release)
        waiter.start()
        self._waiters.append(waiter)

    def close(self) -> None:
        for w in self._waiters:
            w.join()
        for device, ptr in self._all:
            self.driver.free(device, ptr)
        self._all.clear()
        self._free.clear()
