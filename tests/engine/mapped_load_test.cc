// LoadOptions::map_file (on by default): tensors aliasing a private mapping
// of a real file, what the opt-out changes,
// chunks decoded straight from the mapping, and the small-chunk batching of
// the load pipeline (one read for neighbouring small chunks), read and
// mapped.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/engine_test_util.h"
#include "test_runtime.h"
#include "format/file_reader.h"

namespace rckpt {
namespace {

using testing::BytesOf;
using testing::ExpectSameBytes;
using testing::HippynnLike;
using testing::HostBytes;
using testing::SmoothTensor;

std::vector<char> FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// Hundreds of tensors from 0-d to a few KiB, of every width: what makes a
// checkpoint's cost per tensor show.
Checkpoint ManySmallTensors() {
  Checkpoint ck;
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF64, DType::kI64,
                          DType::kU8};
  for (int i = 0; i < 300; ++i) {
    const DType d = dtypes[i % 5];
    Shape shape = i % 7 == 0 ? Shape{} : Shape{(i * 37) % 900 + 1};
    Status s =
        ck.AddTensor(i % 2 ? "model" : "optimizer", testing::Numbered("t", i),
                     SmoothTensor(d, shape, i));
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  // And one that spans several chunks, so batched and unbatched jobs mix.
  Status s = ck.AddTensor("model", "big", SmoothTensor(DType::kF32, {300000}, 9));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return ck;
}

class MappedLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::NewTempDir("mapped") + "/run.rckpt";
  }
  void SaveTo(const Checkpoint& ck, SaveOptions o = {}) {
    o.threads = 2;
    ASSERT_OK(Save(path_, ck, o));
  }
  // The default load, which maps the file.
  LoadOptions Mapped() {
    LoadOptions o;
    o.threads = 3;
    return o;
  }
  // The opt-out: a copying load.
  LoadOptions Copying() {
    LoadOptions o = Mapped();
    o.map_file = false;
    return o;
  }
  std::unique_ptr<FileReader> Reader() {
    auto r = FileReader::Open(PosixFileSystem(), path_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  std::string path_;
};

TEST_F(MappedLoadTest, RawHostTensorsAliasTheFileAndHoldItsBytes) {
  Checkpoint saved = HippynnLike(Device::Cpu(), 256);
  SaveTo(saved);
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, Mapped()));
  ExpectSameBytes(HostRuntime(), saved, ck);
  // Aliasing: the distance between two tensors' data is the distance between
  // their chunks in the file, which separately allocated copies would not
  // keep.
  auto reader = Reader();
  ASSERT_NE(reader, nullptr);
  const TensorMeta* a = nullptr;
  const TensorMeta* b = nullptr;
  for (const TensorMeta& t : reader->manifest().tensors) {
    if (t.name == "model.layer1.weight") a = &t;
    if (t.name == "optimizer.state.0.exp_avg") b = &t;
  }
  ASSERT_TRUE(a != nullptr && b != nullptr);
  const auto* pa = static_cast<const std::byte*>(
      ck.FindTensor("model.layer1.weight")->tensor.data());
  const auto* pb = static_cast<const std::byte*>(
      ck.FindTensor("optimizer.state.0.exp_avg")->tensor.data());
  EXPECT_EQ(pb - pa, static_cast<std::ptrdiff_t>(b->chunks[0].offset) -
                         static_cast<std::ptrdiff_t>(a->chunks[0].offset));
}

TEST_F(MappedLoadTest, WritingAMappedTensorNeverChangesTheFile) {
  Checkpoint saved = HippynnLike(Device::Cpu(), 256);
  SaveTo(saved);
  const std::vector<char> before = FileBytes(path_);
  {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, Mapped()));
    Tensor& w = ck.mutable_tensors()[0].tensor;
    std::memset(w.data(), 0xAB, w.nbytes());
    EXPECT_EQ(static_cast<const unsigned char*>(w.data())[0], 0xAB);
  }
  EXPECT_EQ(FileBytes(path_), before);
  ASSERT_OK_AND_ASSIGN(Checkpoint again, Load(path_, Mapped()));
  ExpectSameBytes(HostRuntime(), saved, again);
}

TEST_F(MappedLoadTest, TensorsOutliveTheCheckpointAndTheFilesName) {
  Checkpoint saved = HippynnLike(Device::Cpu(), 256);
  SaveTo(saved);
  Tensor kept;
  {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, Mapped()));
    kept = ck.FindTensor("model.layer1.weight")->tensor;
  }
  // A later save replaces the file by rename: the mapping keeps the old
  // inode, so the kept tensor still reads the bytes it was loaded with.
  Checkpoint other = HippynnLike(Device::Cpu(), 256);
  std::memset(other.mutable_tensors()[0].tensor.data(), 0, 16);
  SaveTo(other);
  std::filesystem::remove(path_);
  EXPECT_TRUE(HostBytes(kept) ==
              HostBytes(saved.FindTensor("model.layer1.weight")->tensor));
}

TEST_F(MappedLoadTest, MappingIsTheDefaultAndTheOptOutCopies) {
  EXPECT_TRUE(LoadOptions{}.map_file);
  Checkpoint saved = HippynnLike(Device::Cpu(), 256);
  SaveTo(saved);
  auto distance = [](const Checkpoint& ck) {
    return static_cast<const std::byte*>(ck.FindTensor("optimizer.state.0.exp_avg")->tensor.data()) -
           static_cast<const std::byte*>(ck.FindTensor("model.layer1.weight")->tensor.data());
  };
  auto reader = Reader();
  ASSERT_NE(reader, nullptr);
  std::map<std::string, uint64_t> offset;
  for (const TensorMeta& t : reader->manifest().tensors) offset[t.name] = t.chunks[0].offset;
  const std::ptrdiff_t in_file = static_cast<std::ptrdiff_t>(offset["optimizer.state.0.exp_avg"]) -
                                 static_cast<std::ptrdiff_t>(offset["model.layer1.weight"]);
  ASSERT_OK_AND_ASSIGN(Checkpoint mapped, Load(path_, LoadOptions{}));
  EXPECT_EQ(distance(mapped), in_file);
  ASSERT_OK_AND_ASSIGN(Checkpoint copied, Load(path_, Copying()));
  EXPECT_NE(distance(copied), in_file);  // the arena packs tensors densely
  ExpectSameBytes(HostRuntime(), saved, copied);
}

TEST_F(MappedLoadTest, CopyingLoadSurvivesTheFileBeingTruncatedInPlace) {
  Checkpoint saved = HippynnLike(Device::Cpu(), 256);
  SaveTo(saved);
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, Copying()));
  ASSERT_EQ(::truncate(path_.c_str(), 0), 0);
  ExpectSameBytes(HostRuntime(), saved, ck);
}

// The hazard the opt-out exists for (docs/GUARANTEES.md): a file truncated
// in place under a mapped tensor takes its bytes away, written or not.
// How a process dies of SIGBUS: by the signal itself or, under
// AddressSanitizer (whose handler reports the fault and then aborts or exits
// as ASAN_OPTIONS say), with ASan's report of a BUS.
#if defined(__SANITIZE_ADDRESS__)
constexpr const char* kSigbusReport = "AddressSanitizer: BUS";
bool DiedOfSigbus(int status) {
  return (WIFSIGNALED(status) && (WTERMSIG(status) == SIGBUS || WTERMSIG(status) == SIGABRT)) ||
         (WIFEXITED(status) && WEXITSTATUS(status) != 0);
}
#else
constexpr const char* kSigbusReport = "";
bool DiedOfSigbus(int status) { return WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS; }
#endif

TEST_F(MappedLoadTest, MappedTensorOfAFileTruncatedInPlaceFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Checkpoint saved = HippynnLike(Device::Cpu(), 256);
  SaveTo(saved);
  EXPECT_EXIT(
      {
        Result<Checkpoint> ck = Load(path_, Mapped());
        if (!ck.ok()) std::_Exit(3);
        Tensor& w = ck->mutable_tensors()[0].tensor;
        std::memset(w.data(), 1, w.nbytes());  // private copies of its pages
        if (::truncate(path_.c_str(), 0) != 0) std::_Exit(4);
        volatile unsigned sum = 0;
        for (const TensorEntry& e : ck->tensors()) {
          const auto* p = static_cast<const unsigned char*>(e.tensor.data());
          for (uint64_t i = 0; i < e.tensor.nbytes(); i += 64) sum = sum + p[i];
        }
        std::_Exit(0);
      },
      DiedOfSigbus, kSigbusReport);
}

TEST_F(MappedLoadTest, CorruptRawChunkIsReportedNotHandedBack) {
  Checkpoint saved = HippynnLike(Device::Cpu(), 256);
  SaveTo(saved);
  auto reader = Reader();
  ASSERT_NE(reader, nullptr);
  uint64_t offset = 0;
  for (const TensorMeta& t : reader->manifest().tensors) {
    if (t.name == "optimizer.state.0.exp_avg") offset = t.chunks[0].offset + 100;
  }
  reader.reset();
  ASSERT_GT(offset, 0u);
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.put('\x5a');
  }
  EXPECT_THAT(Load(path_, Mapped()),
              StatusIs(StatusCode::kCorruption,
                       "tensor 'optimizer.state.0.exp_avg': chunk 0"));
  LoadOptions off = Mapped();
  off.verify_checksums = false;
  EXPECT_OK(Load(path_, off).status());
}

TEST_F(MappedLoadTest, CompressedAndShuffledChunksDecodeFromTheMapping) {
  Checkpoint saved = ManySmallTensors();
  SaveTo(saved, {.codec = Codec::kZstd, .chunk_bytes = 64 << 10});
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, Mapped()));
  ExpectSameBytes(HostRuntime(), saved, ck);
  // Into caller buffers.
  std::vector<std::vector<std::byte>> buffers;
  std::vector<LoadTarget> targets;
  for (const TensorEntry& e : saved.tensors()) {
    buffers.emplace_back(e.tensor.nbytes());
    targets.push_back({e.name, buffers.back().data(), e.tensor.dtype(),
                       e.tensor.shape(), Device::Cpu()});
  }
  ASSERT_OK(LoadInto(path_, targets, Mapped()));
  for (size_t i = 0; i < targets.size(); ++i) {
    EXPECT_TRUE(buffers[i] == HostBytes(saved.tensors()[i].tensor))
        << targets[i].name;
  }
}

TEST_F(MappedLoadTest, DeviceDestinationsStreamFromTheMapping) {
  Checkpoint saved = HippynnLike(Device::Cuda(0), 512);
  for (Codec codec : {Codec::kNone, Codec::kZstd}) {
    SaveTo(saved, {.codec = codec, .chunk_bytes = 16 << 10});
    auto rt = NewTestRuntime({.device_count = 1});
    LoadOptions o = Mapped();
    o.runtime = rt.get();
    o.staging_bytes = 64 << 10;
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, o));
    EXPECT_EQ(rt->DeviceOf(ck.FindTensor("model.layer1.weight")->tensor.data()), 0);
    ExpectSameBytes(*rt, saved, ck);
  }
}

TEST_F(MappedLoadTest, FilesThatCannotBeMappedAreRead) {
  // The in-memory test file system of the engine tests counts reads and
  // does not map: the load falls back to reading, with the same result.
  testing::CountingFileSystem fs;
  Checkpoint saved = HippynnLike(Device::Cpu(), 64);
  SaveOptions so;
  so.fs = &fs;
  ASSERT_OK(Save("/m.rckpt", saved, so));
  fs.Reset();
  LoadOptions o = Mapped();
  o.fs = &fs;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load("/m.rckpt", o));
  ExpectSameBytes(HostRuntime(), saved, ck);
  EXPECT_GT(fs.bytes_read(), 0u);
}

TEST_F(MappedLoadTest, InMemoryFilesMapToo) {
  MemFileSystem fs;
  Checkpoint saved = ManySmallTensors();
  SaveOptions so;
  so.fs = &fs;
  ASSERT_OK(Save("/m.rckpt", saved, so));
  LoadOptions o = Mapped();
  o.fs = &fs;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load("/m.rckpt", o));
  ExpectSameBytes(HostRuntime(), saved, ck);
}

// Small neighbouring chunks share one read and one task; every encoding and
// both read paths must still put each chunk's bytes in its own place, and a
// corrupt small chunk is still named.
TEST_F(MappedLoadTest, BatchedSmallChunksRestoreExactlyReadOrMapped) {
  Checkpoint saved = ManySmallTensors();
  for (Codec codec : {Codec::kNone, Codec::kZstd}) {
    SaveTo(saved, {.codec = codec});
    for (bool map : {false, true}) {
      LoadOptions o = Mapped();
      o.map_file = map;
      uint64_t last = 0, total = 0;
      o.progress = [&](uint64_t done, uint64_t all) {
        last = done;
        total = all;
        return true;
      };
      LoadStats stats;
      o.stats = &stats;
      ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(path_, o));
      ExpectSameBytes(HostRuntime(), saved, ck);
      EXPECT_EQ(last, total) << "progress ends at the total";
      EXPECT_EQ(stats.bytes_restored, total + 0u);
    }
  }
  // Corrupt tensor t150 (a small one, inside a batch).
  SaveTo(saved);
  auto reader = Reader();
  ASSERT_NE(reader, nullptr);
  uint64_t offset = 0;
  for (const TensorMeta& t : reader->manifest().tensors) {
    if (t.name == "t150") offset = t.chunks[0].offset;
  }
  reader.reset();
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    const char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(offset));
    f.put(static_cast<char>(c ^ 1));
  }
  for (bool map : {false, true}) {
    LoadOptions o = Mapped();
    o.map_file = map;
    EXPECT_THAT(Load(path_, o),
                StatusIs(StatusCode::kCorruption, "tensor 't150': chunk 0"))
        << (map ? "mapped" : "read");
  }
}

}  // namespace
}  // namespace rckpt
