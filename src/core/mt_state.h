// The stored state of a Mersenne Twister engine (std::mt19937, std::mt19937_64)
// in an RNG record: the binary layout of schema/FORMAT.md section 7.1, which
// CaptureEngine writes, and the textual form earlier files hold, which still
// restores.
//
// Binary layout (all little-endian), n = 624 words of 32 bits for mt19937,
// 312 words of 64 bits for mt19937_64; 2504 bytes either way:
//   [0, 4)   magic "MT32" or "MT64"
//   [4, 8)   index p (u32), 0..n
//   [8, ..)  n state words
// The words and index mean what mt19937ar.c's mt[] and mti mean (numpy's key
// and pos, libstdc++'s _M_x and _M_p): the next outputs are the tempered words
// p..n-1, then those of the next block, which the twist makes from all n.
#ifndef RCKPT_CORE_MT_STATE_H_
#define RCKPT_CORE_MT_STATE_H_

#include <cstddef>
#include <span>

#include "rckpt/rng.h"
#include "rckpt/status.h"

namespace rckpt {

// Checks `bytes` as a state of `kind` (kMt19937 or kMt19937_64), in either
// form: a record that begins with an ASCII digit or whitespace is the legacy
// textual form, anything else the binary layout. Returns Corruption naming
// the field, the expected and the actual value.
Status ValidateMtState(RngKind kind, std::span<const std::byte> bytes);

}  // namespace rckpt

#endif  // RCKPT_CORE_MT_STATE_H_
