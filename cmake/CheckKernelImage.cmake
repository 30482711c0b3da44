# cmake -DSOURCE_DIR=<repository root> -P CheckKernelImage.cmake
# The test cuda.KernelImageIsCurrent: the stamp of the committed kernel image
# (cuda/unshuffle_kernels.fatbin.txt) records the SHA-256 of the kernel
# sources it was made from (scripts/kernel-source-hash.sh: the files below,
# concatenated); a change to them without a new image fails here.
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
