// Helpers shared by the conversion tests: fixture files, in-memory writable
// files, and hand-built torch.save archives.
#ifndef RCKPT_TESTS_CONVERT_CONVERT_TEST_UTIL_H_
#define RCKPT_TESTS_CONVERT_CONVERT_TEST_UTIL_H_

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "convert/zip.h"
#include "rckpt/file.h"
#include "gtest/gtest.h"
#include "rckpt/tensor.h"

namespace rckpt::testing {

inline std::string Fixture(const std::string& rel) {
  return std::string(RCKPT_TEST_DATA_DIR) + "/" + rel;
}

inline std::vector<std::byte> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(s.size());
  if (!s.empty()) std::memcpy(b.data(), s.data(), s.size());
  return b;
}

inline std::vector<std::byte> ToBytes(const std::string& s) {
  std::vector<std::byte> b(s.size());
  if (!s.empty()) std::memcpy(b.data(), s.data(), s.size());
  return b;
}

inline std::string ToString(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// A WritableFile appending to a string.
class StringFile : public WritableFile {
 public:
  explicit StringFile(std::string* out) : out_(out) {}
  Status Append(std::span<const std::byte> d) override {
    out_->append(reinterpret_cast<const char*>(d.data()), d.size());
    return Status::Ok();
  }
  Status Sync() override { return Status::Ok(); }
  Status Close() override { return Status::Ok(); }

 private:
  std::string* out_;
};

// A torch.save-like archive: <prefix>/data.pkl = pickle, plus the records
// (name relative to the prefix, bytes), each record's data aligned to `align`
// bytes (torch.save: 64).
inline std::string MakeArchive(const std::string& pickle,
                               const std::vector<std::pair<std::string, std::string>>& records,
                               const std::string& prefix = "archive/", uint64_t align = 64) {
  std::string out;
  StringFile f(&out);
  convert::ZipWriter z(&f, align);
  (void)z.Add(prefix + "data.pkl", {reinterpret_cast<const std::byte*>(pickle.data()),
                                    pickle.size()});
  for (const auto& [name, bytes] : records) {
    (void)z.Add(prefix + name, {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()});
  }
  (void)z.Finish();
  return out;
}

// Pickle fragments (protocol 2).
inline std::string PGlobal(const std::string& module, const std::string& name) {
  return "c" + module + "\n" + name + "\n";
}
inline std::string PStr(const std::string& s) {
  std::string out = "X";
  uint32_t n = static_cast<uint32_t>(s.size());
  out.append(reinterpret_cast<const char*>(&n), 4);
  return out + s;
}
inline std::string PInt(uint8_t v) { return std::string("K") + static_cast<char>(v); }

// A _rebuild_tensor_v2 call over FloatStorage `key` of `numel` elements with
// the given offset, sizes and strides (each < 256).
inline std::string PFloatTensor(const std::string& key, int numel, int offset,
                                const std::vector<int>& size, const std::vector<int>& stride,
                                const std::string& location = "cpu") {
  std::string s = PGlobal("torch._utils", "_rebuild_tensor_v2") + "((" + PStr("storage") +
                  PGlobal("torch", "FloatStorage") + PStr(key) + PStr(location) +
                  PInt(static_cast<uint8_t>(numel)) + "tQ" + PInt(static_cast<uint8_t>(offset));
  s += "(";
  for (int d : size) s += PInt(static_cast<uint8_t>(d));
  s += "t(";
  for (int d : stride) s += PInt(static_cast<uint8_t>(d));
  s += "t\x89" + PGlobal("collections", "OrderedDict") + ")Rt" + "R";
  return s;
}

// A host tensor whose bytes count up from `seed` in steps of 7.
inline Tensor Make(DType dtype, Shape shape, uint8_t seed) {
  auto t = Tensor::Zeros(dtype, shape);
  EXPECT_TRUE(t.ok());
  auto b = t->mutable_host_bytes();
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(seed + i * 7);
  return *t;
}

// A valid torch.get_rng_state() (5056 bytes).
inline std::vector<std::byte> CpuRngState() {
  std::vector<std::byte> s(5056);
  uint32_t one = 1, left = 1;
  std::memcpy(s.data() + 8, &left, 4);
  std::memcpy(s.data() + 12, &one, 4);
  return s;
}

inline std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_CONVERT_CONVERT_TEST_UTIL_H_
