#include "codec/codec.h"

#include "codec/xxh3_avx2.h"

#include <xxhash.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace rckpt {

#if defined(RCKPT_HAVE_XXH3_AVX2)
namespace {
const bool kCpuHasAvx2 = __builtin_cpu_supports("avx2");
}  // namespace
#endif

uint64_t Checksum(std::span<const std::byte> data) {
#if defined(RCKPT_HAVE_XXH3_AVX2)
  if (kCpuHasAvx2) return internal::Xxh3Avx2(data.data(), data.size());
#endif
  return XXH3_64bits(data.data(), data.size());
}

uint64_t ChecksumPortable(std::span<const std::byte> data) {
  return XXH3_64bits(data.data(), data.size());
}

ChecksumStream::ChecksumStream() : state_(nullptr), avx2_(false) {
#if defined(RCKPT_HAVE_XXH3_AVX2)
  if (kCpuHasAvx2) {
    avx2_ = true;
    state_ = internal::Xxh3Avx2NewState();
  }
#endif
  if (!avx2_) {
    XXH3_state_t* s = XXH3_createState();
    if (s != nullptr) XXH3_64bits_reset(s);
    state_ = s;
  }
  if (state_ == nullptr) throw std::bad_alloc();
}

ChecksumStream::~ChecksumStream() {
#if defined(RCKPT_HAVE_XXH3_AVX2)
  if (avx2_) {
    internal::Xxh3Avx2FreeState(state_);
    return;
  }
#endif
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void ChecksumStream::Update(std::span<const std::byte> piece) {
#if defined(RCKPT_HAVE_XXH3_AVX2)
  if (avx2_) {
    internal::Xxh3Avx2Update(state_, piece.data(), piece.size());
    return;
  }
#endif
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), piece.data(),
                     piece.size());
}

uint64_t ChecksumStream::Digest() const {
#if defined(RCKPT_HAVE_XXH3_AVX2)
  if (avx2_) return internal::Xxh3Avx2Digest(state_);
#endif
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

namespace {

using u8 = unsigned char;

// Scalar transposes, used for element sizes without a vector kernel and for
// the elements after the last full vector block. `begin` is the first
// element to process; `n` is the total element count (the stream length).
void ShuffleScalar(const u8* src, u8* dst, size_t elem, size_t n,
                   size_t begin) {
  // Blocks of elements small enough that the source block stays in L1 while
  // each of the `elem` output streams is written sequentially.
  const size_t block = std::max<size_t>(16, 16384 / elem);
  for (size_t i0 = begin; i0 < n; i0 += block) {
    const size_t i1 = std::min(n, i0 + block);
    for (size_t j = 0; j < elem; ++j) {
      u8* out = dst + j * n;
      const u8* in = src + j;
      for (size_t i = i0; i < i1; ++i) out[i] = in[i * elem];
    }
  }
}

void UnshuffleScalar(const u8* src, u8* dst, size_t elem, size_t n,
                     size_t begin) {
  const size_t block = std::max<size_t>(16, 16384 / elem);
  for (size_t i0 = begin; i0 < n; i0 += block) {
    const size_t i1 = std::min(n, i0 + block);
    for (size_t j = 0; j < elem; ++j) {
      const u8* in = src + j * n;
      u8* out = dst + j;
      for (size_t i = i0; i < i1; ++i) out[i * elem] = in[i];
    }
  }
}

#if defined(__SSE2__)
// Vector kernels for element sizes 2, 4 and 16, 16 elements (E registers)
// per step. A byte shuffle by E = 2^k is k rounds of the same perfect
// "de-interleave" (even bytes to the first half of the registers, odd bytes
// to the second); each round moves one more bit of the byte's position
// within its element into the register index, so after k rounds register j
// holds byte j of the 16 elements. Unshuffle runs the inverse round, a byte
// interleave, k times.
template <size_t E>
size_t ShuffleVector(const u8* src, u8* dst, size_t n) {
  const __m128i low_bytes = _mm_set1_epi16(0x00FF);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i v[E];
    __m128i w[E];
    for (size_t k = 0; k < E; ++k) {
      v[k] = _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(src + i * E + 16 * k));
    }
    for (size_t round = 1; round < E; round *= 2) {
      for (size_t p = 0; p < E / 2; ++p) {
        w[p] = _mm_packus_epi16(_mm_and_si128(v[2 * p], low_bytes),
                                _mm_and_si128(v[2 * p + 1], low_bytes));
        w[E / 2 + p] = _mm_packus_epi16(_mm_srli_epi16(v[2 * p], 8),
                                        _mm_srli_epi16(v[2 * p + 1], 8));
      }
      std::copy(w, w + E, v);
    }
    for (size_t k = 0; k < E; ++k) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k * n + i), v[k]);
    }
  }
  return i;
}

template <size_t E>
size_t UnshuffleVector(const u8* src, u8* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i v[E];
    __m128i w[E];
    for (size_t k = 0; k < E; ++k) {
      v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k * n + i));
    }
    for (size_t round = 1; round < E; round *= 2) {
      for (size_t p = 0; p < E / 2; ++p) {
        w[2 * p] = _mm_unpacklo_epi8(v[p], v[E / 2 + p]);
        w[2 * p + 1] = _mm_unpackhi_epi8(v[p], v[E / 2 + p]);
      }
      std::copy(w, w + E, v);
    }
    for (size_t k = 0; k < E; ++k) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i * E + 16 * k), v[k]);
    }
  }
  return i;
}

// Eight-byte elements get a fixed network over eight elements (an 8x8 byte
// transpose): the generic kernel needs 16 live registers for E = 8, which
// compilers spill, halving its speed.
size_t Shuffle8(const u8* src, u8* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const u8* s = src + i * 8;
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i x1 =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i x2 =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i x3 =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    const __m128i a0 = _mm_unpacklo_epi8(x0, x1);
    const __m128i a1 = _mm_unpackhi_epi8(x0, x1);
    const __m128i a2 = _mm_unpacklo_epi8(x2, x3);
    const __m128i a3 = _mm_unpackhi_epi8(x2, x3);
    const __m128i b0 = _mm_unpacklo_epi8(a0, a1);
    const __m128i b1 = _mm_unpackhi_epi8(a0, a1);
    const __m128i b2 = _mm_unpacklo_epi8(a2, a3);
    const __m128i b3 = _mm_unpackhi_epi8(a2, a3);
    // c[k] holds byte 2k of the eight elements, then byte 2k + 1.
    const __m128i c[4] = {
        _mm_unpacklo_epi32(b0, b2), _mm_unpackhi_epi32(b0, b2),
        _mm_unpacklo_epi32(b1, b3), _mm_unpackhi_epi32(b1, b3)};
    for (size_t k = 0; k < 4; ++k) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + 2 * k * n + i), c[k]);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + (2 * k + 1) * n + i),
                       _mm_unpackhi_epi64(c[k], c[k]));
    }
  }
  return i;
}

size_t Unshuffle8(const u8* src, u8* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i s[8];
    for (size_t k = 0; k < 8; ++k) {
      s[k] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + k * n + i));
    }
    const __m128i a0 = _mm_unpacklo_epi8(s[0], s[1]);
    const __m128i a1 = _mm_unpacklo_epi8(s[2], s[3]);
    const __m128i a2 = _mm_unpacklo_epi8(s[4], s[5]);
    const __m128i a3 = _mm_unpacklo_epi8(s[6], s[7]);
    const __m128i b0 = _mm_unpacklo_epi16(a0, a1);
    const __m128i b1 = _mm_unpackhi_epi16(a0, a1);
    const __m128i b2 = _mm_unpacklo_epi16(a2, a3);
    const __m128i b3 = _mm_unpackhi_epi16(a2, a3);
    u8* d = dst + i * 8;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi32(b0, b2));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16),
                     _mm_unpackhi_epi32(b0, b2));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 32),
                     _mm_unpacklo_epi32(b1, b3));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 48),
                     _mm_unpackhi_epi32(b1, b3));
  }
  return i;
}
#else
size_t Shuffle8(const u8*, u8*, size_t) { return 0; }
size_t Unshuffle8(const u8*, u8*, size_t) { return 0; }
template <size_t E>
size_t ShuffleVector(const u8*, u8*, size_t) {
  return 0;
}
template <size_t E>
size_t UnshuffleVector(const u8*, u8*, size_t) {
  return 0;
}
#endif

// Elements handled by the vector kernel for `elem`; the caller finishes the
// rest with the scalar loop.
size_t ShuffleFast(const u8* src, u8* dst, size_t elem, size_t n) {
  switch (elem) {
    case 2:
      return ShuffleVector<2>(src, dst, n);
    case 4:
      return ShuffleVector<4>(src, dst, n);
    case 8:
      return Shuffle8(src, dst, n);
    case 16:
      return ShuffleVector<16>(src, dst, n);
    default:
      return 0;
  }
}

size_t UnshuffleFast(const u8* src, u8* dst, size_t elem, size_t n) {
  switch (elem) {
    case 2:
      return UnshuffleVector<2>(src, dst, n);
    case 4:
      return UnshuffleVector<4>(src, dst, n);
    case 8:
      return Unshuffle8(src, dst, n);
    case 16:
      return UnshuffleVector<16>(src, dst, n);
    default:
      return 0;
  }
}


// Shared by both directions: whole elements through the vector kernel, the
// rest of them scalar, and a trailing partial element copied unchanged.
void Transform(std::span<const std::byte> src, std::span<std::byte> dst, uint32_t elem,
               size_t (*fast)(const u8*, u8*, size_t, size_t),
               void (*scalar)(const u8*, u8*, size_t, size_t, size_t)) {
  const size_t size = std::min(src.size(), dst.size());
  const auto* in = reinterpret_cast<const u8*>(src.data());
  auto* out = reinterpret_cast<u8*>(dst.data());
  if (elem < 2 || size < elem) {
    if (size > 0) std::memcpy(out, in, size);
    return;
  }
  const size_t n = size / elem;
  const size_t done = fast(in, out, elem, n);
  scalar(in, out, elem, n, done);
  const size_t tail = size - n * elem;
  if (tail > 0) std::memcpy(out + n * elem, in + n * elem, tail);
}

}  // namespace

void ShuffleBytes(std::span<const std::byte> src, std::span<std::byte> dst,
                  uint32_t elem) {
  Transform(src, dst, elem, ShuffleFast, ShuffleScalar);
}

void UnshuffleBytes(std::span<const std::byte> src, std::span<std::byte> dst,
                    uint32_t elem) {
  Transform(src, dst, elem, UnshuffleFast, UnshuffleScalar);
}

size_t ZstdBound(size_t raw_size) { return ZSTD_compressBound(raw_size); }

namespace {

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// Contexts are reused per thread: creating one costs more than compressing a
// small chunk, and the worker threads of a save or load live for the whole
// operation.
ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  return cctx.get();
}

ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  return dctx.get();
}

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

}  // namespace

Result<size_t> ZstdCompress(std::span<const std::byte> src,
                            std::span<std::byte> dst, int level) {
  ZSTD_CCtx* cctx = ThreadCCtx();
  if (cctx == nullptr) {
    return Status::OutOfMemory("zstd: cannot allocate a compression context");
  }
  // ZSTD_compressCCtx records the content size in the frame header, which
  // ZstdDecompressExact requires.
  const size_t n = ZSTD_compressCCtx(cctx, dst.data(), dst.size(), src.data(),
                                     src.size(), level);
  if (ZSTD_isError(n)) {
    const std::string what = ZSTD_getErrorName(n);
    switch (ZSTD_getErrorCode(n)) {
      case ZSTD_error_memory_allocation:
        return Status::OutOfMemory("zstd compress: " + what);
      case ZSTD_error_dstSize_tooSmall:
        return Status::InvalidArgument(
            "zstd compress: destination holds " + Bytes(dst.size()) +
            ", expected at least ZstdBound = " + Bytes(ZstdBound(src.size())));
      default:
        return Status::InvalidArgument("zstd compress at level " +
                                       std::to_string(level) + ": " + what);
    }
  }
  return n;
}

Status ZstdDecompressExact(std::span<const std::byte> src,
                           std::span<std::byte> dst) {
  if (src.size() < 4) {
    return Status::Corruption("zstd frame: expected at least 4 bytes, got " +
                              Bytes(src.size()));
  }
  uint32_t magic = 0;
  std::memcpy(&magic, src.data(), 4);
  if (magic != ZSTD_MAGICNUMBER) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08X", magic);
    return Status::Corruption(
        std::string("zstd frame: magic: expected 0xFD2FB528, got ") + buf);
  }
  // Everything the frame claims is checked before a byte is decoded, so a
  // hostile size never reaches the decoder.
  const unsigned long long declared =
      ZSTD_getFrameContentSize(src.data(), src.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) {
    return Status::Corruption("zstd frame: malformed frame header (" +
                              Bytes(src.size()) + " of input)");
  }
  if (declared == ZSTD_CONTENTSIZE_UNKNOWN) {
    return Status::Corruption("zstd frame: content size: expected " +
                              Bytes(dst.size()) +
                              ", the frame does not declare one");
  }
  if (declared != dst.size()) {
    return Status::Corruption("zstd frame: content size: expected " +
                              Bytes(dst.size()) + ", frame declares " +
                              Bytes(declared));
  }
  const size_t frame_size =
      ZSTD_findFrameCompressedSize(src.data(), src.size());
  if (ZSTD_isError(frame_size)) {
    return Status::Corruption(std::string("zstd frame: ") +
                              ZSTD_getErrorName(frame_size) + " (" +
                              Bytes(src.size()) + " of input)");
  }
  if (frame_size != src.size()) {
    return Status::Corruption("zstd frame: size: expected " +
                              Bytes(src.size()) + ", frame ends after " +
                              Bytes(frame_size));
  }
  ZSTD_DCtx* dctx = ThreadDCtx();
  if (dctx == nullptr) {
    return Status::OutOfMemory("zstd: cannot allocate a decompression context");
  }
  // One-shot decoding into dst: zstd never writes past the capacity given and
  // needs no window buffer of its own.
  const size_t n =
      ZSTD_decompressDCtx(dctx, dst.data(), dst.size(), src.data(), src.size());
  if (ZSTD_isError(n)) {
    if (ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation) {
      return Status::OutOfMemory(std::string("zstd decompress: ") +
                                 ZSTD_getErrorName(n));
    }
    return Status::Corruption(
        std::string("zstd frame: ") + ZSTD_getErrorName(n) + " (decoding " +
        Bytes(src.size()) + " into " + Bytes(dst.size()) + ")");
  }
  if (n != dst.size()) {
    return Status::Corruption("zstd frame: decoded size: expected " +
                              Bytes(dst.size()) + ", got " + Bytes(n));
  }
  return Status::Ok();
}

}  // namespace rckpt
