// The CUDA runtime on a real GPU, compared byte for byte with the host path.
// Every test skips when the CUDA runtime is not built or sees no device, and
// fails instead under --require-gpu (the GPU proof, tests/gpu/proof.sh).
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codec/codec.h"
#include "engine/engine_test_util.h"
#include "test_runtime.h"

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
    if (!cuda.ok()) RCKPT_SKIP_WITHOUT_GPU(cuda.status().ToString());
    Result<int> n = (*cuda)->DeviceCount();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    if (*n == 0) RCKPT_SKIP_WITHOUT_GPU("no CUDA device: " + (*cuda)->NoDeviceReason());
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
  const int n = rt_->DeviceCount().value_or(0);
  SaveCheckpoint(HippynnLike(Device::Cuda(n), 1024));  // a GPU this box lacks
  EXPECT_THAT(Load(path_, Options()),
              StatusIs(StatusCode::kDeviceUnavailable, "was saved on cuda:"));
  LoadOptions o = Options();
  o.map_location = MapLocation::Map({{Device::Cuda(n), kCuda0}});
  ExpectSameAsHost(o);
}

TEST_F(GpuTest, ModelDeviceAutoIsTheCurrentDevice) {
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
        AddFrom(saved, "model", testing::Numbered("w", i),
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

TEST_F(GpuTest, TheShippedKernelLoadsOnThisGpu) {
  std::string why;
  EXPECT_TRUE(rt_->CanUnshuffle(kCuda0, &why)) << why;
}

TEST_F(GpuTest, TheHostUnshuffleGivesTheSameBytesAsTheKernel) {
  Checkpoint saved;
  AddFrom(saved, "model", "w", SmoothTensor(DType::kF32, {2048, 1024}, 7), kCuda0);
  SaveCheckpoint(saved, SaveOptions{.codec = Codec::kZstd, .shuffle = Shuffle::kOn});
  LoadOptions o = Options();
  LoadStats kernel, host;
  o.stats = &kernel;
  ExpectSameAsHost(o);
  o.device_unshuffle = false;
  o.stats = &host;
  ExpectSameAsHost(o);
  EXPECT_GT(kernel.device_unshuffled_bytes, 0u);
  EXPECT_GT(host.host_unshuffled_bytes, 0u);
}

// The driver entry points the checks below use, to see the thread's current
// context as torch would.
struct DriverForTest {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  int (*get_current)(void**) = nullptr;
  int (*set_current)(void*) = nullptr;
  int (*retain)(void**, int) = nullptr;
  int (*release)(int) = nullptr;
  DriverForTest() {
    if (lib == nullptr) return;
    get_current = reinterpret_cast<int (*)(void**)>(dlsym(lib, "cuCtxGetCurrent"));
    set_current = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cuCtxSetCurrent"));
    retain = reinterpret_cast<int (*)(void**, int)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    release = reinterpret_cast<int (*)(int)>(dlsym(lib, "cuDevicePrimaryCtxRelease_v2"));
  }
  void* Current() {
    void* c = nullptr;
    get_current(&c);
    return c;
  }
};

TEST_F(GpuTest, EveryCallLeavesTheThreadsCurrentContextAsItWas) {
  SaveCheckpoint(HippynnLike(kCuda0, 512));
  DriverForTest d;
  ASSERT_NE(d.lib, nullptr) << "the runtime loaded libcuda.so.1";
  void* before = d.Current();  // none, or whatever a previous test left
  ASSERT_OK(Load(path_, Options()).status());
  EXPECT_EQ(d.Current(), before);
  void* ctx = nullptr;
  ASSERT_EQ(d.retain(&ctx, 0), 0);
  ASSERT_EQ(d.set_current(ctx), 0);  // as torch.cuda.set_device(0) does
  LoadOptions o = Options();
  o.map_location = MapLocation::To(kCpu);
  ASSERT_OK(Load(path_, o).status());
  ASSERT_OK(Load(path_, Options()).status());
  EXPECT_EQ(d.Current(), ctx);
  ASSERT_EQ(d.set_current(before), 0);
  d.release(0);
}

// In a fresh process (this test re-runs itself: the suite's other tests
// have initialised CUDA in this one): a CPU-only load, then a fork whose
// child loads onto cuda:0. CUDA cannot be used in a child forked after the
// parent initialised it, so this fails if the CPU-only load touched the
// driver.
int ForkedChildUsesTheGpu() {
  MemFileSystem fs;
  SaveOptions so;
  so.fs = &fs;
  so.runtime = &HostRuntime();
  if (!Save("/f.rckpt", HippynnLike(kCpu, 64), so).ok()) return 10;
  LoadOptions lo;
  lo.fs = &fs;  // the default runtime: rckpt's CUDA runtime over libcuda.so.1
  if (!Load("/f.rckpt", lo).ok()) return 12;
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) != nullptr) return 13;
  const pid_t child = fork();
  if (child == 0) {
    lo.model_device = DeviceSpec::Of(kCuda0);
    Result<Checkpoint> on_gpu = Load("/f.rckpt", lo);
    _exit(on_gpu.ok() && on_gpu->FindTensor("model.layer1.weight")->tensor.device() == kCuda0
              ? 0
              : 14);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 15;
}

TEST(GpuForkTest, ACpuOnlyLoadLeavesTheDriverAloneSoAForkedChildCanUseTheGpu) {
  // The re-run child touches nothing of CUDA before its CPU-only load.
  if (std::getenv("RCKPT_GPU_FORK_CHILD") != nullptr) _exit(ForkedChildUsesTheGpu());
  Result<DeviceRuntime*> cuda = CudaRuntime();
  if (!cuda.ok() || (*cuda)->DeviceCount().value_or(0) == 0) {
    RCKPT_SKIP_WITHOUT_GPU("no CUDA device");
  }
  const std::string cmd = "RCKPT_GPU_FORK_CHILD=1 /proc/" + std::to_string(getpid()) +
                          "/exe --gtest_filter=GpuForkTest.* >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10 save, 12 the CPU-only load, 13 the CPU-only load loaded the driver, 14 the forked "
         "child could not load onto cuda:0, 15 it crashed";
}

}  // namespace
}  // namespace rckpt
