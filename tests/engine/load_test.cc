// Load, LoadInto, ReadTensors and PlanLoad end to end on in-memory files,
// with the host-emulated multi-device runtime standing in for GPUs.
#include "engine/engine_test_util.h"
#include "test_runtime.h"
#include "format/file_reader.h"

namespace rckpt {
namespace {

using testing::BytesOf;
using testing::CountingFileSystem;
using testing::DevicesOf;
using testing::ExpectSameBytes;
using testing::HippynnLike;
using testing::HostBytes;
using testing::SmoothTensor;

constexpr char kPath[] = "/run/last.rckpt";

class LoadTest : public ::testing::Test {
 protected:
  void SaveCheckpoint(const Checkpoint& ck, SaveOptions o = {}) {
    o.fs = &fs_;
    o.threads = 2;
    ASSERT_OK(Save(kPath, ck, o));
    fs_.Reset();
  }
  // The copying load (the map_file opt-out): every byte read into new
  // memory. mapped_load_test.cc covers the default, mapped load.
  LoadOptions Options(DeviceRuntime* rt) {
    LoadOptions o;
    o.map_file = false;
    o.fs = &fs_;
    o.runtime = rt;
    o.threads = 3;
    return o;
  }
  std::unique_ptr<EmulatedRuntime> Emulated(int n) {
    return NewTestRuntime({.device_count = n});
  }
  // [begin, end) of every chunk of the tensors of `section`.
  std::vector<std::pair<uint64_t, uint64_t>> ExtentsOf(
      std::function<bool(const TensorMeta&)> pick) {
    auto reader = FileReader::Open(fs_.mem(), kPath);
    EXPECT_TRUE(reader.ok());
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const TensorMeta& t : (*reader)->manifest().tensors) {
      if (!pick(t)) continue;
      for (const ChunkMeta& c : t.chunks) {
        out.emplace_back(c.offset, c.offset + c.stored_size);
      }
    }
    return out;
  }

  CountingFileSystem fs_;
};

TEST_F(LoadTest, LoadsEveryTensorOntoItsEmulatedOriginBitForBit) {
  Checkpoint saved = HippynnLike(Device::Cuda(1));
  SaveCheckpoint(saved);
  auto rt = Emulated(2);
  {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, Options(rt.get())));
    ASSERT_EQ(ck.tensors().size(), saved.tensors().size());
    auto where = DevicesOf(ck);
    EXPECT_EQ(where["model.layer1.weight"], Device::Cuda(1));
    EXPECT_EQ(rt->DeviceOf(ck.FindTensor("model.layer1.weight")->tensor.data()),
              1);
    EXPECT_EQ(where["optimizer.state.0.step"], Device::Cpu());
    ExpectSameBytes(*rt, saved, ck);
    for (const TensorEntry& e : ck.tensors()) {
      EXPECT_EQ(e.Origin(), saved.FindTensor(e.name)->Origin()) << e.name;
    }
    EXPECT_EQ(ck.Tree()["controller"]["current_epoch"].as_int(), 7);
  }
  // The checkpoint owned its device memory and gave it back.
  EXPECT_TRUE(rt->NothingLive());
}

TEST_F(LoadTest, RngRecordsComeBackOnHostWithTheirBytes) {
  Checkpoint saved = HippynnLike(Device::Cuda(1));
  SaveCheckpoint(saved);
  auto rt = Emulated(1);
  LoadOptions o = Options(rt.get());
  o.map_location = MapLocation::To(Device::Cuda(0));
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
  const RngRecord* cpu = ck.FindRng("torch_rng_state");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->bytes, saved.FindRng("torch_rng_state")->bytes);
  std::mt19937 restored;
  ASSERT_OK(RestoreEngine(cpu->bytes, &restored));
  std::mt19937 original(1234);
  original.discard(77);
  EXPECT_EQ(restored(), original());  // the run continues where it stopped
  EXPECT_EQ(ck.FindRng("cuda_rng_state")->origin, Device::Cuda(1));
}

TEST_F(LoadTest, LoadIntoFillsHostAndDeviceBuffersWhereTheyAre) {
  Checkpoint saved = HippynnLike(Device::Cuda(1));
  SaveCheckpoint(saved);
  auto rt = Emulated(2);
  std::vector<LoadTarget> targets;
  std::vector<std::vector<std::byte>> host_buffers;
  std::vector<void*> device_buffers;
  for (const TensorEntry& e : saved.tensors()) {
    LoadTarget t{e.name, nullptr, e.tensor.dtype(), e.tensor.shape(), {}};
    if (e.section == "model") {
      t.device = Device::Cuda(0);  // the live model is on cuda:0 now
      auto p = rt->Allocate(t.device, e.tensor.nbytes());
      ASSERT_TRUE(p.ok());
      t.data = *p;
      device_buffers.push_back(*p);
    } else {
      host_buffers.emplace_back(e.tensor.nbytes());
      t.data = host_buffers.back().data();
    }
    targets.push_back(t);
  }
  ASSERT_OK(LoadInto(kPath, targets, Options(rt.get())));
  for (const LoadTarget& t : targets) {
    Tensor view =
        Tensor::Borrow(TensorView{t.data, t.dtype, t.shape, t.device});
    EXPECT_TRUE(BytesOf(*rt, view) ==
                HostBytes(saved.FindTensor(t.name)->tensor))
        << t.name;
  }
  for (void* p : device_buffers) rt->Free(Device::Cuda(0), p);
  EXPECT_TRUE(rt->NothingLive());
}

TEST_F(LoadTest, LoadIntoReportsMissingUnexpectedAndMismatchedTogether) {
  Checkpoint saved;
  ASSERT_OK(saved.AddTensor("model", "a", SmoothTensor(DType::kF32, {4}, 1)));
  ASSERT_OK(saved.AddTensor("model", "b", SmoothTensor(DType::kF32, {4}, 2)));
  ASSERT_OK(saved.AddTensor("model", "c", SmoothTensor(DType::kF32, {4}, 3)));
  SaveCheckpoint(saved);
  std::vector<float> a(4, 42.0f), b(8, 42.0f), z(4, 42.0f);
  std::vector<LoadTarget> targets = {
      {"a", a.data(), DType::kF32, {4}, {}},
      {"b", b.data(), DType::kF32, {8}, {}},  // shape differs
      {"z", z.data(), DType::kF16, {4}, {}},  // not in the file
  };
  Status s = LoadInto(kPath, targets, Options(nullptr));
  EXPECT_THAT(s, StatusIs(StatusCode::kInvalidArgument,
                          "1 missing from the file: 'z'"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("1 unexpected (in the file, "
                                                "no target): 'c'"));
  EXPECT_THAT(
      s.message(),
      ::testing::HasSubstr("'b': shape [4] in the file, [8] in the target"));
  // Checked before the first byte: nothing was written, nothing read.
  EXPECT_EQ(a[0], 42.0f);
  EXPECT_FALSE(fs_.ReadAny(4096, fs_.mem().GetFile(kPath)->size() - 4096));
  // Not strict: 'c' without a target is fine; 'z' still is not.
  EXPECT_THAT(LoadInto(kPath, {targets[0]}, Options(nullptr), /*strict=*/false),
              StatusIs(StatusCode::kOk, ""));
  EXPECT_NE(a[0], 42.0f);
}

TEST_F(LoadTest, LoadIntoADeviceThatDoesNotExistIsNamed) {
  Checkpoint saved;
  ASSERT_OK(saved.AddTensor("model", "a", SmoothTensor(DType::kF32, {4}, 1)));
  SaveCheckpoint(saved);
  std::vector<float> a(4);
  auto rt = Emulated(1);
  EXPECT_THAT(
      LoadInto(kPath, {{"a", a.data(), DType::kF32, {4}, Device::Cuda(3)}},
               Options(rt.get())),
      StatusIs(StatusCode::kDeviceUnavailable,
               "load_into target 'a' is on cuda:3, which does not exist: "
               "this machine has 1 CUDA device (cuda:0)"));
}

TEST_F(LoadTest, ReadTensorsReadsOnlyTheNamedTensorsChunks) {
  Checkpoint saved = HippynnLike(Device::Cuda(1), 512);
  SaveCheckpoint(saved, SaveOptions{.chunk_bytes = 16 << 10});
  auto rt = Emulated(2);
  ASSERT_OK_AND_ASSIGN(
      auto entries,
      ReadTensors(kPath, {"model.layer1.bias", "database.features"},
                  Options(rt.get())));
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "model.layer1.bias");
  EXPECT_EQ(entries[0].tensor.device(), Device::Cuda(1));
  EXPECT_EQ(entries[1].tensor.device(), Device::Cpu());
  EXPECT_TRUE(BytesOf(*rt, entries[0].tensor) ==
              HostBytes(saved.FindTensor("model.layer1.bias")->tensor));
  for (auto [b, e] : ExtentsOf([](const TensorMeta& t) {
         return t.name != "model.layer1.bias" && t.name != "database.features";
       })) {
    EXPECT_FALSE(fs_.ReadAny(b, e)) << "read [" << b << ", " << e << ")";
  }
}

TEST_F(LoadTest, ReadTensorsOntoAChosenDeviceAndUnknownNamesListed) {
  Checkpoint saved = HippynnLike(Device::Cuda(1));
  SaveCheckpoint(saved);
  auto rt = Emulated(1);
  LoadOptions o = Options(rt.get());
  o.map_location = MapLocation::To(Device::Cuda(0));
  ASSERT_OK_AND_ASSIGN(auto entries,
                       ReadTensors(kPath, {"model.layer1.weight"}, o));
  EXPECT_EQ(entries[0].tensor.device(), Device::Cuda(0));
  EXPECT_EQ(entries[0].Origin(), Device::Cuda(1));
  EXPECT_THAT(ReadTensors(kPath, {"nope", "model.layer1.bias", "nada"}, o),
              StatusIs(StatusCode::kNotFound, "'nope', 'nada'"));
}

TEST_F(LoadTest, SkippedSectionBytesAreNeverRead) {
  Checkpoint saved = HippynnLike(Device::Cpu(), 256);
  SaveCheckpoint(saved, SaveOptions{.chunk_bytes = 8 << 10});
  LoadOptions o = Options(nullptr);
  o.skip_sections = {"database", "metrics"};
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
  EXPECT_EQ(ck.FindTensor("database.features"), nullptr);
  EXPECT_EQ(ck.FindTensor("metrics.best_model.layer1.weight"), nullptr);
  EXPECT_NE(ck.FindTensor("model.layer1.weight"), nullptr);
  auto skipped = ExtentsOf([](const TensorMeta& t) {
    return t.section == "database" || t.section == "metrics";
  });
  ASSERT_FALSE(skipped.empty());
  for (auto [b, e] : skipped) EXPECT_FALSE(fs_.ReadAny(b, e));
  // And the loaded sections were read.
  for (auto [b, e] :
       ExtentsOf([](const TensorMeta& t) { return t.section == "model"; })) {
    EXPECT_TRUE(fs_.ReadAny(b, e));
  }
}

TEST_F(LoadTest, SectionsChoosesWhatIsRead) {
  Checkpoint saved = HippynnLike(Device::Cpu());
  SaveCheckpoint(saved);
  LoadOptions o = Options(nullptr);
  o.sections = {"model"};
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
  ASSERT_EQ(ck.tensors().size(), 2u);
  for (auto [b, e] :
       ExtentsOf([](const TensorMeta& t) { return t.section != "model"; })) {
    EXPECT_FALSE(fs_.ReadAny(b, e));
  }
}

TEST_F(LoadTest, SectionsChooseTheTreesEntriesToo) {
  Checkpoint saved = HippynnLike(Device::Cpu());
  saved.Tree()["model"]["weights"] = Value::TensorRef("model.layer1.weight");
  saved.Tree()["database"]["cursor"] = 3;
  saved.Tree()[""] = 0;  // a key that names no section
  SaveCheckpoint(saved);
  LoadOptions o = Options(nullptr);
  o.skip_sections = {"database"};
  ASSERT_OK_AND_ASSIGN(Checkpoint skipped, Load(kPath, o));
  EXPECT_EQ(skipped.Tree().Find("database"), nullptr);
  EXPECT_NE(skipped.Tree().Find("controller"), nullptr);
  EXPECT_NE(skipped.Tree().Find(""), nullptr);
  o.skip_sections.clear();
  o.sections = {"model"};
  ASSERT_OK_AND_ASSIGN(Checkpoint model, Load(kPath, o));
  ASSERT_EQ(model.Tree().size(), 1u);
  EXPECT_NE(model.Tree().Find("model"), nullptr);
  // Without a choice the tree is whole.
  ASSERT_OK_AND_ASSIGN(Checkpoint all, Load(kPath, Options(nullptr)));
  EXPECT_EQ(all.Tree(), saved.Tree());
}

TEST_F(LoadTest, StagingStaysWithinBoundOnACheckpointManyTimesLarger) {
  // 8 MiB of shuffled, compressed f32 going to two devices through 256 KiB.
  Checkpoint saved;
  for (int i = 0; i < 8; ++i) {
    testing::AddFrom(saved, "model", testing::Numbered("w", i),
                     SmoothTensor(DType::kF32, {256, 1024}, i),
                     Device::Cuda(i % 2));
  }
  SaveCheckpoint(saved, SaveOptions{.chunk_bytes = 64 << 10});
  auto rt = Emulated(2);
  LoadStats stats;
  LoadOptions o = Options(rt.get());
  o.staging_bytes = 256 << 10;
  o.stats = &stats;
  {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
    ExpectSameBytes(*rt, saved, ck);
  }
  EXPECT_GT(stats.staging_high_water, 0u);
  EXPECT_LE(stats.staging_high_water, o.staging_bytes);
  EXPECT_LE(stats.staging_capacity, o.staging_bytes);
  EXPECT_EQ(stats.bytes_restored, saved.TensorBytes());
  EXPECT_GT(stats.bytes_read, 0u);
  EXPECT_GT(stats.seconds, 0.0);
  EXPECT_TRUE(rt->NothingLive());
}

TEST_F(LoadTest, ChunksLargerThanASlotStreamInPieces) {
  Checkpoint saved;
  testing::AddFrom(saved, "model", "big",
                   SmoothTensor(DType::kF32, {1 << 18}, 9), Device::Cuda(0));
  testing::AddFrom(saved, "model", "raw", SmoothTensor(DType::kU8, {100000}, 8),
                   Device::Cuda(0));
  SaveCheckpoint(saved, SaveOptions{.chunk_bytes = 1 << 20});
  auto rt = Emulated(1);
  LoadStats stats;
  LoadOptions o = Options(rt.get());
  o.staging_bytes = 64 << 10;  // 16 times smaller than one chunk
  o.stats = &stats;
  {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
    ExpectSameBytes(*rt, saved, ck);
  }
  EXPECT_LE(stats.staging_high_water, o.staging_bytes);
  EXPECT_TRUE(rt->NothingLive());
}

TEST_F(LoadTest, UncompressedAndShuffledEncodingsRestoreOnDevices) {
  for (Codec codec : {Codec::kNone, Codec::kZstd}) {
    for (Shuffle shuffle : {Shuffle::kOn, Shuffle::kOff}) {
      Checkpoint saved = HippynnLike(Device::Cuda(0), 300);
      SaveCheckpoint(
          saved, SaveOptions{
                     .codec = codec, .chunk_bytes = 10000, .shuffle = shuffle});
      auto rt = Emulated(1);
      LoadOptions o = Options(rt.get());
      o.staging_bytes = 40000;
      {
        ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
        ExpectSameBytes(*rt, saved, ck);
      }
      EXPECT_TRUE(rt->NothingLive());
    }
  }
}

TEST_F(LoadTest, PlanLoadMatchesWhereLoadPutsThings) {
  Checkpoint saved = HippynnLike(Device::Cuda(1));
  SaveCheckpoint(saved);
  auto rt = Emulated(1);
  LoadOptions o = Options(rt.get());
  o.model_device = DeviceSpec::Auto();
  ASSERT_OK_AND_ASSIGN(auto plan, PlanLoad(kPath, o));
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
  auto where = DevicesOf(ck);
  size_t tensors = 0;
  for (const Placement& p : plan) {
    if (p.is_rng) {
      EXPECT_EQ(p.target, Device::Cpu());
      continue;
    }
    ++tensors;
    EXPECT_EQ(where[p.name], p.target) << p.name;
    EXPECT_EQ(p.origin, saved.FindTensor(p.name)->Origin());
  }
  EXPECT_EQ(tensors, ck.tensors().size());
}

TEST_F(LoadTest, PlanLoadForAnotherMachineGivesTheErrorItsLoadWould) {
  Checkpoint saved = HippynnLike(Device::Cuda(1));
  SaveCheckpoint(saved);
  LoadOptions o = Options(nullptr);
  ASSERT_OK(PlanLoad(kPath, o, /*cuda_device_count=*/2).status());
  auto planned = PlanLoad(kPath, o, 1);
  auto rt = Emulated(1);
  auto loaded = Load(kPath, Options(rt.get()));
  EXPECT_THAT(planned, StatusIs(StatusCode::kDeviceUnavailable, "cuda:1"));
  EXPECT_EQ(planned.status().ToString(), loaded.status().ToString());
}

TEST_F(LoadTest, HostLoadReadsRawChunksInPlaceWithoutARing) {
  Checkpoint saved = HippynnLike(Device::Cpu());
  SaveCheckpoint(saved, SaveOptions{.codec = Codec::kNone});
  LoadStats stats;
  LoadOptions o = Options(nullptr);
  o.stats = &stats;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
  EXPECT_EQ(stats.staging_capacity, 0u);
  EXPECT_EQ(stats.staging_high_water, 0u);
  ExpectSameBytes(HostRuntime(), saved, ck);
}

TEST_F(LoadTest, ProgressReportsAndMayCancel) {
  Checkpoint saved = HippynnLike(Device::Cpu(), 512);
  SaveCheckpoint(saved, SaveOptions{.chunk_bytes = 4096});
  uint64_t last = 0, total = 0;
  LoadOptions o = Options(nullptr);
  o.progress = [&](uint64_t done, uint64_t all) {
    EXPECT_GE(done, last);
    last = done;
    total = all;
    return true;
  };
  ASSERT_OK(Load(kPath, o).status());
  EXPECT_EQ(last, total);
  EXPECT_GT(total, 0u);
  o.progress = [](uint64_t, uint64_t) { return false; };
  EXPECT_THAT(Load(kPath, o), StatusIs(StatusCode::kIoError, "cancelled"));
}

}  // namespace
}  // namespace rckpt
