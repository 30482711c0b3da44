// Helpers for engine tests: a hippynn-shaped checkpoint "saved on cuda:1",
// byte-level reads of tensors wherever they live, and a file system that
// records every byte range read.
#ifndef RCKPT_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
#define RCKPT_TESTS_ENGINE_ENGINE_TEST_UTIL_H_

#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/file.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "runtime/emulated_runtime.h"
#include "test_util.h"

namespace rckpt::testing {

// Float data that compresses somewhat, as trained weights do.
inline Tensor SmoothTensor(DType dtype, Shape shape, uint64_t seed) {
  const uint64_t n = *ShapeBytes(shape, dtype);
  std::vector<std::byte> bytes(n);
  std::mt19937_64 rng(seed);
  if (dtype == DType::kF32) {
    std::normal_distribution<float> d(0.0f, 0.02f);
    for (uint64_t i = 0; i + 4 <= n; i += 4) {
      float x = d(rng);
      std::memcpy(bytes.data() + i, &x, 4);
    }
  } else {
    for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
  }
  return *Tensor::FromBytes(dtype, std::move(shape), bytes);
}

// Adds a host tensor recorded as saved from `origin`.
inline void AddFrom(Checkpoint& ck, std::string_view section,
                    std::string_view name, Tensor t, Device origin) {
  Status s = ck.AddTensor(section, name, std::move(t));
  ASSERT_TRUE(s.ok()) << s.ToString();
  ck.mutable_tensors().back().origin = origin;
}

// The shape of a hippynn training run's state, saved on `model_origin`:
// model and loss weights, Adam state (exp_avg on the device, 0-d step on
// cpu as torch keeps it), the metric tracker's best model (a device copy, in
// a host-role section), an evaluator tensor, a database and RNG records.
inline Checkpoint HippynnLike(Device model_origin = Device::Cuda(1),
                              int64_t width = 64) {
  Checkpoint ck;
  AddFrom(ck, "model", "model.layer1.weight",
          SmoothTensor(DType::kF32, {width, 32}, 1), model_origin);
  AddFrom(ck, "model", "model.layer1.bias", SmoothTensor(DType::kF32, {32}, 2),
          model_origin);
  AddFrom(ck, "loss", "loss.weights", SmoothTensor(DType::kF64, {4}, 3),
          model_origin);
  AddFrom(ck, "optimizer", "optimizer.state.0.exp_avg",
          SmoothTensor(DType::kF32, {width, 32}, 4), model_origin);
  AddFrom(ck, "optimizer", "optimizer.state.0.step",
          SmoothTensor(DType::kF32, {}, 5), Device::Cpu());
  AddFrom(ck, "metrics", "metrics.best_model.layer1.weight",
          SmoothTensor(DType::kF32, {width, 32}, 6), model_origin);
  AddFrom(ck, "evaluator", "evaluator.loss.scale",
          SmoothTensor(DType::kF32, {2}, 7), Device::Cpu());
  AddFrom(ck, "database", "database.features",
          SmoothTensor(DType::kI64, {256}, 8), Device::Cpu());
  std::mt19937 engine(1234);
  engine.discard(77);
  Status s = ck.AddRng("torch_rng_state", RngKind::kMt19937,
                       CaptureEngine(engine), Device::Cpu());
  if (!s.ok()) ADD_FAILURE() << s.ToString();
  std::vector<std::byte> cuda_state(16, std::byte{7});
  s = ck.AddRng("cuda_rng_state", RngKind::kTorchCuda, cuda_state,
                model_origin);
  if (!s.ok()) ADD_FAILURE() << s.ToString();
  ck.Tree()["controller"]["current_epoch"] = 7;
  return ck;
}

// A tensor's bytes, copied to host whatever its device.
inline std::vector<std::byte> BytesOf(DeviceRuntime& rt, const Tensor& t) {
  std::vector<std::byte> out(t.nbytes());
  if (t.device().is_cpu()) {
    if (t.nbytes() > 0) std::memcpy(out.data(), t.data(), t.nbytes());
    return out;
  }
  auto stream = rt.CreateStream(t.device());
  EXPECT_TRUE(stream.ok()) << stream.status().ToString();
  if (!stream.ok()) return out;
  Status s =
      rt.CopyToHostAsync(t.device(), *stream, out.data(), t.data(), t.nbytes());
  if (s.ok()) s = rt.Synchronize(t.device(), *stream);
  EXPECT_TRUE(s.ok()) << s.ToString();
  rt.DestroyStream(t.device(), *stream);
  return out;
}

inline std::vector<std::byte> HostBytes(const Tensor& t) {
  auto b = t.host_bytes();
  return {b.begin(), b.end()};
}

// Every tensor of `loaded` holds the bytes of the same-named tensor of
// `saved` (which is on host).
inline void ExpectSameBytes(DeviceRuntime& rt, const Checkpoint& saved,
                            const Checkpoint& loaded) {
  for (const TensorEntry& e : loaded.tensors()) {
    const TensorEntry* s = saved.FindTensor(e.name);
    ASSERT_NE(s, nullptr) << e.name;
    EXPECT_TRUE(BytesOf(rt, e.tensor) == HostBytes(s->tensor)) << e.name;
  }
}

// Where each loaded tensor and RNG record is: name -> device.
inline std::map<std::string, Device> DevicesOf(const Checkpoint& ck) {
  std::map<std::string, Device> out;
  for (const TensorEntry& e : ck.tensors()) out[e.name] = e.tensor.device();
  return out;
}

// A file system over a MemFileSystem that records the ranges read.
class CountingFileSystem : public FileSystem {
 public:
  MemFileSystem& mem() { return mem_; }
  std::vector<std::pair<uint64_t, uint64_t>> ranges() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ranges_;
  }
  uint64_t bytes_read() const {
    uint64_t n = 0;
    for (auto& [off, size] : ranges()) n += size;
    return n;
  }
  // True when any recorded read overlaps [begin, end).
  bool ReadAny(uint64_t begin, uint64_t end) const {
    for (auto& [off, size] : ranges()) {
      if (off < end && begin < off + size) return true;
    }
    return false;
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    ranges_.clear();
  }

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(
      const std::string& path) override {
    RCKPT_ASSIGN_OR_RETURN(auto inner, mem_.OpenForRead(path));
    return std::unique_ptr<RandomAccessFile>(
        new CountingFile(std::move(inner), this));
  }
  Result<std::unique_ptr<WritableFile>> OpenForWrite(
      const std::string& path) override {
    return mem_.OpenForWrite(path);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    return mem_.Rename(from, to);
  }
  Status Remove(const std::string& path) override { return mem_.Remove(path); }
  Status SyncParentDir(const std::string& path) override {
    return mem_.SyncParentDir(path);
  }
  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    return mem_.ListDir(dir);
  }
  bool Exists(const std::string& path) override { return mem_.Exists(path); }

 private:
  class CountingFile : public RandomAccessFile {
   public:
    CountingFile(std::unique_ptr<RandomAccessFile> inner,
                 CountingFileSystem* fs)
        : inner_(std::move(inner)), fs_(fs) {}
    uint64_t Size() const override { return inner_->Size(); }
    Status ReadAt(uint64_t offset, std::span<std::byte> dst) const override {
      {
        std::lock_guard<std::mutex> lock(fs_->mu_);
        fs_->ranges_.emplace_back(offset, dst.size());
      }
      return inner_->ReadAt(offset, dst);
    }

   private:
    std::unique_ptr<RandomAccessFile> inner_;
    CountingFileSystem* fs_;
  };

  MemFileSystem mem_;
  mutable std::mutex mu_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;
};

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
