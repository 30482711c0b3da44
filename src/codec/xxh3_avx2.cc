// XXH3-64 compiled for AVX2 (this file alone is built with -mavx2), chosen at
// run time by Checksum() when the CPU has AVX2. XXH3's value does not depend
// on the vector width, so files stay identical; the AVX2 loop hashes
// cache-resident chunks about twice as fast as the SSE2 build of libxxhash
// (docs/PERFORMANCE.md, Checksums).
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

#include "codec/xxh3_avx2.h"

namespace rckpt::internal {

uint64_t Xxh3Avx2(const void* data, size_t size) {
  return XXH3_64bits(data, size);
}

void* Xxh3Avx2NewState() {
  XXH3_state_t* s = XXH3_createState();
  if (s != nullptr) XXH3_64bits_reset(s);
  return s;
}

void Xxh3Avx2FreeState(void* state) {
  XXH3_freeState(static_cast<XXH3_state_t*>(state));
}

void Xxh3Avx2Update(void* state, const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, size);
}

uint64_t Xxh3Avx2Digest(const void* state) {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state));
}

}  // namespace rckpt::internal
