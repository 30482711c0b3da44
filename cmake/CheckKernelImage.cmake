# cmake -DSOURCE_DIR=<repository root> -P CheckKernelImage.cmake
# The test cuda.KernelImageIsCurrent: the stamp of the committed kernel image
# (cuda/unshuffle_kernels.fatbin.txt) records the SHA-256 of the kernel
# sources it was made from (scripts/kernel-source-hash.sh: the files below,
# concatenated); a change to them without a new image fails here. Also
# holds kMinKernelDriverVersion (include/rckpt/runtime.h) to the toolkit the
# stamp names: a CUDA N toolkit's cubins need a driver of CUDA N.0.
set(content "")
foreach(f unshuffle_params.h unshuffle_kernels.cuh unshuffle_kernels.cu)
  file(READ ${SOURCE_DIR}/cuda/${f} text)
  string(APPEND content "${text}")
endforeach()
string(SHA256 hash "${content}")
file(STRINGS ${SOURCE_DIR}/cuda/unshuffle_kernels.fatbin.txt stamp REGEX "^source-sha256 ")
string(REPLACE "source-sha256 " "" recorded "${stamp}")
if(NOT hash STREQUAL recorded)
  message(FATAL_ERROR "the kernel image is stale: cuda/unshuffle_kernels.fatbin.txt records "
                      "sources ${recorded}, they are now ${hash}; run scripts/make-kernel-image.sh "
                      "(needs nvcc) and commit cuda/unshuffle_kernels.fatbin*")
endif()
message(STATUS "the kernel image was made from the current sources (${hash})")

file(STRINGS ${SOURCE_DIR}/cuda/unshuffle_kernels.fatbin.txt cuda_line REGEX "^cuda ")
string(REGEX REPLACE "^cuda ([0-9]+)\\..*$" "\\1" major "${cuda_line}")
file(STRINGS ${SOURCE_DIR}/include/rckpt/runtime.h min_line
     REGEX "kMinKernelDriverVersion = [0-9]+;")
string(REGEX MATCH "= ([0-9]+)" unused "${min_line}")
set(min "${CMAKE_MATCH_1}")
math(EXPR want "${major} * 1000")
if(NOT min STREQUAL want)
  message(FATAL_ERROR "the kernel image is made by CUDA ${major} (its stamp: '${cuda_line}'), "
                      "whose cubins need a driver of CUDA ${major}.0 (${want}), but "
                      "kMinKernelDriverVersion in include/rckpt/runtime.h is ${min}")
endif()
message(STATUS "kMinKernelDriverVersion ${min} is what CUDA ${major}'s cubins need")
