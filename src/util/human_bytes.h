// Byte counts for people: "512 B", "1.5 KiB", "3.2 GiB".
#ifndef RCKPT_SRC_UTIL_HUMAN_BYTES_H_
#define RCKPT_SRC_UTIL_HUMAN_BYTES_H_

#include <cstdint>
#include <string>

namespace rckpt {

// Binary units with one decimal; exact bytes below 1 KiB.
std::string HumanBytes(uint64_t n);

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_HUMAN_BYTES_H_
