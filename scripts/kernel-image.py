"""Compiles cuda/unshuffle_kernels.cu into a fatbin with CUDA 12.9's compiler libraries
from PyPI: NVRTC (nvidia-cuda-nvrtc-cu12, the CUDA C++ front end and PTX compiler nvcc
itself runs) makes a cubin per architecture and the PTX, nvFatbin (nvidia-nvfatbin-cu12)
packs them, uncompressed, into the image cuModuleLoadData loads. Run by
scripts/make-kernel-image.sh, which installs the packages; not by builds.

    python kernel-image.py SITE_PACKAGES SOURCE_DIR OUT.fatbin --cubins 75,80,... --ptx 75

Prints the toolkit version ("12.9") on success.
"""

import ctypes
import os
import sys


CSTDINT = b"""#pragma once
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
namespace std {
using ::int8_t; using ::uint8_t; using ::int16_t; using ::uint16_t;
using ::int32_t; using ::uint32_t; using ::int64_t; using ::uint64_t;
}
"""


def load(site, rel):
    path = os.path.join(site, "nvidia", rel)
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        sys.exit(f"kernel-image: cannot load {path}: {e}")


def main(argv):
    if len(argv) != 8 or argv[4] != "--cubins" or argv[6] != "--ptx":
        sys.exit(__doc__)
    site, source_dir, out = argv[1], argv[2], argv[3]
    cubins = [a for a in argv[5].split(",") if a]
    ptx_arch = argv[7]
    nvrtc = load(site, "cuda_nvrtc/lib/libnvrtc.so.12")
    fatbin = load(site, "nvfatbin/lib/libnvfatbin.so.12")
    nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
    fatbin.nvFatbinGetErrorString.restype = ctypes.c_char_p

    def check_rtc(what, rc, prog=None):
        if rc == 0:
            return
        log = ""
        if prog is not None:
            size = ctypes.c_size_t()
            nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(prog, buf)
            log = buf.value.decode(errors="replace")
        sys.exit(f"kernel-image: {what}: {nvrtc.nvrtcGetErrorString(rc).decode()}\n{log}")

    def check_fb(what, rc):
        if rc != 0:
            sys.exit(f"kernel-image: {what}: {fatbin.nvFatbinGetErrorString(rc).decode()}")

    major, minor = ctypes.c_int(), ctypes.c_int()
    check_rtc("nvrtcVersion", nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)))
    if major.value != 12:
        sys.exit(f"kernel-image: NVRTC {major.value}.{minor.value}: a CUDA 12 toolkit is needed "
                 "(its cubins load on every CUDA 12 driver, R525 and newer)")

    # The translation unit with its local headers, and the <cstdint> that nvcc takes from
    # the host compiler and NVRTC lacks: glibc's x86-64 and aarch64 (LP64) types.
    names = ["unshuffle_kernels.cuh", "unshuffle_params.h", "cstdint"]
    texts = [open(os.path.join(source_dir, n), "rb").read() for n in names[:2]] + [CSTDINT]
    source = open(os.path.join(source_dir, "unshuffle_kernels.cu"), "rb").read()

    def compile_for(arch, cubin):
        prog = ctypes.c_void_p()
        headers = (ctypes.c_char_p * len(names))(*texts)
        include_names = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
        check_rtc("nvrtcCreateProgram", nvrtc.nvrtcCreateProgram(
            ctypes.byref(prog), source, b"unshuffle_kernels.cu", len(names), headers,
            include_names))
        opts = [f"--gpu-architecture={'sm' if cubin else 'compute'}_{arch}".encode(),
                b"-std=c++17", b"--dopt=on", b"-default-device"]
        check_rtc(f"compiling for {'sm' if cubin else 'compute'}_{arch}",
                  nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)),
                  prog)
        size = ctypes.c_size_t()
        get_size = nvrtc.nvrtcGetCUBINSize if cubin else nvrtc.nvrtcGetPTXSize
        get = nvrtc.nvrtcGetCUBIN if cubin else nvrtc.nvrtcGetPTX
        check_rtc("size", get_size(prog, ctypes.byref(size)))
        buf = ctypes.create_string_buffer(size.value)
        check_rtc("get", get(prog, buf))
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
        return buf.raw

    handle = ctypes.c_void_p()
    opts = [b"-compress=false"]
    check_fb("nvFatbinCreate", fatbin.nvFatbinCreate(
        ctypes.byref(handle), (ctypes.c_char_p * len(opts))(*opts), len(opts)))
    for arch in cubins:
        code = compile_for(arch, cubin=True)
        check_fb(f"adding the sm_{arch} cubin", fatbin.nvFatbinAddCubin(
            handle, code, len(code), arch.encode(), f"unshuffle_sm_{arch}".encode()))
    ptx = compile_for(ptx_arch, cubin=False)
    ptx = ptx.rstrip(b"\0")
    check_fb(f"adding the compute_{ptx_arch} PTX", fatbin.nvFatbinAddPTX(
        handle, ptx, len(ptx), ptx_arch.encode(), f"unshuffle_compute_{ptx_arch}".encode(),
        b""))
    size = ctypes.c_size_t()
    check_fb("nvFatbinSize", fatbin.nvFatbinSize(handle, ctypes.byref(size)))
    buf = ctypes.create_string_buffer(size.value)
    check_fb("nvFatbinGet", fatbin.nvFatbinGet(handle, buf))
    fatbin.nvFatbinDestroy(ctypes.byref(handle))
    with open(out, "wb") as f:
        f.write(buf.raw)
    print(f"{major.value}.{minor.value}")


if __name__ == "__main__":
    main(sys.argv)
