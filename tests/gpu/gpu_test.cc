// The CUDA runtime on a real GPU, compared byte for byte with the host path.
// Every test skips when the CUDA runtime is not built or sees no device.
#include "codec/codec.h"
#include "engine/engine_test_util.h"

namespace rckpt {
namespace {

using testing::AddFrom;
using testing::BytesOf;
using testing::DevicesOf;
using testing::ExpectSameBytes;
using testing::HippynnLike;
using testing::HostBytes;
using testing::SmoothTensor;

const Device kCpu = Device::Cpu();
const Device kCuda0 = Device::Cuda(0);

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<DeviceRuntime*> cuda = CudaRuntime();
    if (!cuda.ok()) GTEST_SKIP() << cuda.status().ToString();
    if ((*cuda)->DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    rt_ = *cuda;
  }
  void SaveCheckpoint(const Checkpoint& ck, SaveOptions o = {}) {
    o.fs = &fs_;
    o.runtime = rt_;
    ASSERT_OK(Save(path_, ck, o));
  }
  LoadOptions Options() {
    LoadOptions o;
    o.fs = &fs_;
    o.runtime = rt_;
    return o;
  }
  // Loads to host (the reference path) and with `o`; every tensor must hold
  // the same bytes in both.
  void ExpectSameAsHost(const LoadOptions& o) {
    LoadOptions host = Options();
    host.map_location = MapLocation::To(kCpu);
    ASSERT_OK_AND_ASSIGN(Checkpoint reference, Load(path_, host));
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, o));
    ASSERT_EQ(ck.tensors().size(), reference.tensors().size());
    ExpectSameBytes(*rt_, reference, ck);
  }

  DeviceRuntime* rt_ = nullptr;
  MemFileSystem fs_;
  std::string path_ = "/gpu.rckpt";
};

TEST_F(GpuTest, HostCheckpointToCuda0) {
  SaveCheckpoint(HippynnLike(kCpu, 1024));
  LoadOptions o = Options();
  o.model_device = DeviceSpec::Of(kCuda0);
  ExpectSameAsHost(o);
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, o));
  EXPECT_EQ(DevicesOf(ck)["model.layer1.weight"], kCuda0);
  EXPECT_EQ(DevicesOf(ck)["optimizer.state.0.step"], kCpu);
}

TEST_F(GpuTest, Cuda0CheckpointAsStoredReturnsToCuda0) {
  SaveCheckpoint(HippynnLike(kCuda0, 1024));
  ExpectSameAsHost(Options());
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, Options()));
  EXPECT_EQ(DevicesOf(ck)["model.layer1.weight"], kCuda0);
}

TEST_F(GpuTest, Cuda0CheckpointToHost) {
  SaveCheckpoint(HippynnLike(kCuda0, 1024));
  LoadOptions o = Options();
  o.map_location = MapLocation::To(kCpu);
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, o));
  for (const auto& [name, d] : DevicesOf(ck)) EXPECT_EQ(d, kCpu) << name;
}

TEST_F(GpuTest, TagMapFromAMissingGpuToCuda0) {
  const int n = rt_->DeviceCount();
  SaveCheckpoint(HippynnLike(Device::Cuda(n), 1024));  // a GPU this box lacks
  EXPECT_THAT(Load(path_, Options()),
              StatusIs(StatusCode::kDeviceUnavailable, "was saved on cuda:"));
  LoadOptions o = Options();
  o.map_location = MapLocation::Map({{Device::Cuda(n), kCuda0}});
  ExpectSameAsHost(o);
}

TEST_F(GpuTest, ModelDeviceAutoIsCuda0) {
  SaveCheckpoint(HippynnLike(kCuda0, 256));
  LoadOptions o = Options();
  o.model_device = DeviceSpec::Auto();
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, o));
  EXPECT_EQ(DevicesOf(ck)["model.layer1.weight"], kCuda0);
  EXPECT_EQ(DevicesOf(ck)["database.features"], kCpu);
}

TEST_F(GpuTest, EveryEncodingThroughASmallRing) {
  for (Codec codec : {Codec::kNone, Codec::kZstd}) {
    for (Shuffle shuffle : {Shuffle::kOn, Shuffle::kOff}) {
      Checkpoint saved;
      for (int i = 0; i < 4; ++i) {
        AddFrom(saved, "model", "w" + std::to_string(i),
                SmoothTensor(i % 2 ? DType::kF32 : DType::kF64, {999, 257}, i),
                kCuda0);
      }
      SaveCheckpoint(saved, SaveOptions{.codec = codec,
                                        .chunk_bytes = 256 << 10,
                                        .shuffle = shuffle});
      LoadOptions o = Options();
      o.staging_bytes = 1 << 20;
      LoadStats stats;
      o.stats = &stats;
      ExpectSameAsHost(o);
      EXPECT_LE(stats.staging_high_water, o.staging_bytes);
      o.staging_bytes = 64 << 10;  // chunks larger than a slot
      ExpectSameAsHost(o);
    }
  }
}

TEST_F(GpuTest, LoadIntoDeviceBuffers) {
  Checkpoint saved = HippynnLike(Device::Cuda(1), 512);
  SaveCheckpoint(saved);
  std::vector<LoadTarget> targets;
  std::vector<std::shared_ptr<void>> owned;
  for (const TensorEntry& e : saved.tensors()) {
    ASSERT_OK_AND_ASSIGN(void* p, rt_->Allocate(kCuda0, e.tensor.nbytes()));
    owned.emplace_back(p, [this](void* q) { rt_->Free(kCuda0, q); });
    targets.push_back({e.name, p, e.tensor.dtype(), e.tensor.shape(), kCuda0});
  }
  ASSERT_OK(LoadInto(path_, targets, Options()));
  for (const LoadTarget& t : targets) {
    Tensor view =
        Tensor::Borrow(TensorView{t.data, t.dtype, t.shape, t.device});
    EXPECT_TRUE(BytesOf(*rt_, view) ==
                HostBytes(saved.FindTensor(t.name)->tensor))
        << t.name;
  }
}

TEST_F(GpuTest, SaveFromDeviceMemory) {
  Checkpoint host = HippynnLike(kCuda0, 2048);
  Checkpoint on_device;
  std::vector<std::shared_ptr<void>> owned;
  for (const TensorEntry& e : host.tensors()) {
    ASSERT_OK_AND_ASSIGN(void* p, rt_->Allocate(kCuda0, e.tensor.nbytes()));
    owned.emplace_back(p, [this](void* q) { rt_->Free(kCuda0, q); });
    ASSERT_OK_AND_ASSIGN(Stream s, rt_->CreateStream(kCuda0));
    ASSERT_OK(rt_->CopyToDeviceAsync(kCuda0, s, p, e.tensor.data(),
                                     e.tensor.nbytes()));
    ASSERT_OK(rt_->Synchronize(kCuda0, s));
    rt_->DestroyStream(kCuda0, s);
    ASSERT_OK(on_device.AddTensor(
        e.section, e.name,
        TensorView{p, e.tensor.dtype(), e.tensor.shape(), kCuda0}, e.role));
  }
  SaveCheckpoint(on_device, SaveOptions{.chunk_bytes = 64 << 10,
                                        .staging_bytes = 1 << 20});
  LoadOptions o = Options();
  o.map_location = MapLocation::To(kCpu);
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load(path_, o));
  ExpectSameBytes(HostRuntime(), host, back);
  EXPECT_EQ(back.FindTensor("model.layer1.weight")->Origin(), kCuda0);
}

TEST_F(GpuTest, UnshuffleKernelMatchesHostUnshuffle) {
  for (uint32_t elem : {2u, 4u, 8u, 16u, 3u, 24u}) {
    for (uint64_t n : {uint64_t{1}, uint64_t{1000}, uint64_t{1} << 20,
                       (uint64_t{1} << 26) + 5}) {
      std::vector<std::byte> raw(n), shuffled(n), host(n), device(n);
      for (uint64_t i = 0; i < n; ++i) {
        raw[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
      }
      ShuffleBytes(raw, shuffled, elem);
      UnshuffleBytes(shuffled, host, elem);
      ASSERT_TRUE(host == raw);
      ASSERT_OK_AND_ASSIGN(void* src, rt_->Allocate(kCuda0, n));
      ASSERT_OK_AND_ASSIGN(void* dst, rt_->Allocate(kCuda0, n));
      ASSERT_OK_AND_ASSIGN(Stream s, rt_->CreateStream(kCuda0));
      ASSERT_OK(rt_->CopyToDeviceAsync(kCuda0, s, src, shuffled.data(), n));
      ASSERT_OK(rt_->UnshuffleAsync(kCuda0, s, dst, src, n, elem));
      ASSERT_OK(rt_->CopyToHostAsync(kCuda0, s, device.data(), dst, n));
      ASSERT_OK(rt_->Synchronize(kCuda0, s));
      rt_->DestroyStream(kCuda0, s);
      rt_->Free(kCuda0, src);
      rt_->Free(kCuda0, dst);
      EXPECT_TRUE(device == host) << "elem " << elem << " bytes " << n;
    }
  }
}

TEST_F(GpuTest, DefaultRuntimeIsCuda) {
  EXPECT_EQ(DefaultRuntime().name(), "cuda");
}

}  // namespace
}  // namespace rckpt
