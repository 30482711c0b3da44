// Helpers for format tests: sample checkpoints and byte-level file surgery.
#ifndef RCKPT_TESTS_FORMAT_FORMAT_TEST_UTIL_H_
#define RCKPT_TESTS_FORMAT_FORMAT_TEST_UTIL_H_

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "format/file_reader.h"
#include "format/layout.h"
#include "rckpt/checkpoint.h"
#include "rckpt/file.h"
#include "rckpt/io.h"
#include "test_util.h"

namespace rckpt::testing {

// Deterministic pseudo-random bytes.
inline std::vector<std::byte> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>(rng() & 0xff);
  return out;
}

// Float-like data that compresses somewhat (as trained weights do).
inline std::vector<float> SmoothFloats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> out(n);
  for (auto& x : out) x = d(rng);
  return out;
}

inline Tensor HostTensor(DType dtype, Shape shape, uint64_t seed) {
  uint64_t n = *ShapeBytes(shape, dtype);
  auto bytes = RandomBytes(n, seed);
  return *Tensor::FromBytes(dtype, std::move(shape), bytes);
}

// Loads every tensor of `path` to host memory, origins kept.
inline Result<Checkpoint> LoadAllToHost(FileSystem& fs, const std::string& path,
                                        bool verify = true) {
  LoadOptions o;
  o.fs = &fs;
  o.map_location = MapLocation::To(Device::Cpu());
  o.verify_checksums = verify;
  o.threads = 2;
  return Load(path, o);
}

// `file` with its manifest replaced by `manifest` and a footer to match
// (`m` is the original file's manifest: where it starts, where data ends).
inline std::vector<std::byte> WithManifest(const std::vector<std::byte>& file, const Manifest& m,
                                           std::span<const uint8_t> manifest,
                                           uint16_t version_minor = kFormatMinorUnsharded) {
  std::vector<std::byte> out(file.begin(), file.begin() + m.manifest_offset);
  const auto* p = reinterpret_cast<const std::byte*>(manifest.data());
  out.insert(out.end(), p, p + manifest.size());
  Footer f;
  f.manifest_offset = m.manifest_offset;
  f.manifest_size = manifest.size();
  f.manifest_checksum = Checksum(std::as_bytes(manifest));
  f.data_end = m.data_end;
  f.file_size = out.size() + kFooterSize;
  f.version_minor = version_minor;
  const auto fb = EncodeFooter(f);
  out.insert(out.end(), fb.begin(), fb.end());
  return out;
}

inline std::string Bytes(const Tensor& t) {
  auto b = t.host_bytes();
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// Asserts two checkpoints hold the same content, bit for bit.
inline void ExpectSameContent(const Checkpoint& a, const Checkpoint& b) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const auto& x = a.tensors()[i];
    const auto& y = b.tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.section, y.section);
    EXPECT_EQ(x.role, y.role) << x.name;
    EXPECT_EQ(x.tensor.dtype(), y.tensor.dtype()) << x.name;
    EXPECT_EQ(x.tensor.shape(), y.tensor.shape()) << x.name;
    EXPECT_EQ(x.Origin(), y.Origin()) << x.name;
    EXPECT_TRUE(Bytes(x.tensor) == Bytes(y.tensor)) << x.name;
  }
  ASSERT_EQ(a.rng().size(), b.rng().size());
  for (size_t i = 0; i < a.rng().size(); ++i) {
    EXPECT_EQ(a.rng()[i].name, b.rng()[i].name);
    EXPECT_EQ(a.rng()[i].kind, b.rng()[i].kind);
    EXPECT_EQ(a.rng()[i].origin, b.rng()[i].origin);
    EXPECT_TRUE(a.rng()[i].bytes == b.rng()[i].bytes);
  }
  EXPECT_TRUE(a.Tree() == b.Tree()) << a.Tree().DebugString() << "\nvs\n" << b.Tree().DebugString();
  EXPECT_EQ(a.Metadata(), b.Metadata());
}

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_FORMAT_FORMAT_TEST_UTIL_H_
