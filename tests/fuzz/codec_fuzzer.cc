// Fuzz target: ZstdDecompressExact on a hostile frame and destination size,
// and the byte-shuffle pair on arbitrary bytes. Input layout in
// codec_fuzz_input.h. Traps when:
//  - decompression fails with a code other than Corruption;
//  - a decoded buffer or the raw input does not survive
//    Unshuffle(Shuffle(x)) and Shuffle(Unshuffle(x));
//  - compressing the input and decoding it does not give it back.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "codec/codec.h"
#include "codec_fuzz_input.h"

namespace {

using rckpt::fuzz::kCodecElemModulus;
using rckpt::fuzz::kCodecHeaderBytes;
using rckpt::fuzz::kCodecMaxDst;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void CheckShuffleInverts(std::span<const std::byte> x, uint32_t elem) {
  std::vector<std::byte> a(x.size());
  std::vector<std::byte> b(x.size());
  rckpt::ShuffleBytes(x, a, elem);
  rckpt::UnshuffleBytes(a, b, elem);
  Check(std::equal(b.begin(), b.end(), x.begin()));
  rckpt::UnshuffleBytes(x, a, elem);
  rckpt::ShuffleBytes(a, b, elem);
  Check(std::equal(b.begin(), b.end(), x.begin()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kCodecHeaderBytes) return 0;
  const uint32_t elem = data[0] % kCodecElemModulus;
  const uint32_t dst_size =
      (data[1] | (uint32_t{data[2]} << 8) | (uint32_t{data[3]} << 16)) &
      kCodecMaxDst;
  const std::span<const std::byte> frame(
      reinterpret_cast<const std::byte*>(data) + kCodecHeaderBytes,
      size - kCodecHeaderBytes);

  std::vector<std::byte> dst(dst_size);
  const rckpt::Status s = rckpt::ZstdDecompressExact(frame, dst);
  if (s.ok()) {
    CheckShuffleInverts(dst, elem);
  } else {
    Check(s.code() == rckpt::StatusCode::kCorruption);
  }

  CheckShuffleInverts(frame, elem);

  // Compression of small inputs only: it dominates the time per input.
  const std::span<const std::byte> raw =
      frame.first(std::min<size_t>(frame.size(), 4096));
  std::vector<std::byte> packed(rckpt::ZstdBound(raw.size()));
  rckpt::Result<size_t> n = rckpt::ZstdCompress(raw, packed, 1 + elem % 3);
  Check(n.ok());
  std::vector<std::byte> back(raw.size());
  Check(rckpt::ZstdDecompressExact(std::span(packed).first(*n), back).ok());
  Check(std::equal(back.begin(), back.end(), raw.begin()));
  return 0;
}
