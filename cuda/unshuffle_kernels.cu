// The translation unit nvcc compiles into the embedded kernel image
// (scripts/make-kernel-image.sh); the build itself never runs nvcc.
#include "unshuffle_kernels.cuh"
