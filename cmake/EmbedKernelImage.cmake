# cmake -DIMAGE=<fatbin> -DSTAMP=<stamp> -DOUT=<source> -P EmbedKernelImage.cmake
# Writes a C++ source defining the kernel image's bytes and its stamp
# (cuda/kernel_image.cc declares them).
file(READ ${IMAGE} hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){24})" "\\1\n" bytes "${bytes}")
file(READ ${STAMP} stamp)
string(REPLACE "\\" "\\\\" stamp "${stamp}")
string(REPLACE "\"" "\\\"" stamp "${stamp}")
string(REPLACE "\n" "\\n\"\n\"" stamp "${stamp}")
file(WRITE ${OUT}.tmp "// Generated from ${IMAGE} by cmake/EmbedKernelImage.cmake.
#include <cstddef>
namespace rckpt::cuda {
// The driver reads 8-byte fields from the image's headers.
alignas(64) extern const unsigned char kUnshuffleImageBytes[] = {
${bytes}
};
extern const size_t kUnshuffleImageSize = ${size};
extern const char kUnshuffleImageStamp[] = \"${stamp}\";
}  // namespace rckpt::cuda
")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
