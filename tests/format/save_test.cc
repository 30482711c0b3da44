// Saves are atomic: a failed or cancelled save leaves the previous file at
// the path untouched and no temporary behind.
#include "format/format_test_util.h"
#include "runtime/emulated_runtime.h"
#include "test_runtime.h"

namespace rckpt {
namespace {

using testing::HostTensor;

Checkpoint Sample(uint64_t seed) {
  Checkpoint ck;
  EXPECT_OK(ck.AddTensor("model", "w", HostTensor(DType::kF32, {256, 256}, seed)));
  ck.Tree()["seed"] = static_cast<int64_t>(seed);
  return ck;
}

size_t CountTemps(MemFileSystem& fs) {
  auto names = fs.ListDir("/");
  size_t n = 0;
  for (const auto& name : *names) n += name.find(".tmp-") != std::string::npos;
  return n;
}

TEST(SaveTest, FailedWriteKeepsPreviousFileAndRemovesTemporary) {
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  ASSERT_OK(Save("/ck.rckpt", Sample(1), o));
  auto before = *fs.GetFile("/ck.rckpt");
  fs.SetFaults({.fail_write_after_bytes = 10000});
  EXPECT_THAT(Save("/ck.rckpt", Sample(2), o), StatusIs(StatusCode::kIoError, "/ck.rckpt"));
  EXPECT_EQ(*fs.GetFile("/ck.rckpt"), before);
  EXPECT_EQ(CountTemps(fs), 0u);
}

TEST(SaveTest, FailedSyncOrRenameKeepsPreviousFile) {
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  ASSERT_OK(Save("/ck.rckpt", Sample(1), o));
  auto before = *fs.GetFile("/ck.rckpt");
  fs.SetFaults({.fail_sync = true});
  EXPECT_FALSE(Save("/ck.rckpt", Sample(2), o).ok());
  fs.SetFaults({.fail_rename = true});
  EXPECT_FALSE(Save("/ck.rckpt", Sample(3), o).ok());
  EXPECT_EQ(*fs.GetFile("/ck.rckpt"), before);
  EXPECT_EQ(CountTemps(fs), 0u);
}

TEST(SaveTest, CancelFromProgressCallbackStopsAndKeepsPreviousFile) {
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  o.chunk_bytes = 4096;
  ASSERT_OK(Save("/ck.rckpt", Sample(1), o));
  auto before = *fs.GetFile("/ck.rckpt");
  int calls = 0;
  o.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_LE(done, total);
    return ++calls < 3;
  };
  EXPECT_THAT(Save("/ck.rckpt", Sample(2), o), StatusIs(StatusCode::kIoError, "cancelled"));
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(*fs.GetFile("/ck.rckpt"), before);
  EXPECT_EQ(CountTemps(fs), 0u);
}

TEST(SaveTest, ProgressReachesTheTotal) {
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  o.chunk_bytes = 10000;
  uint64_t last_done = 0, last_total = 0;
  o.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
    return true;
  };
  ASSERT_OK(Save("/ck.rckpt", Sample(1), o));
  EXPECT_EQ(last_done, 256u * 256u * 4u);
  EXPECT_EQ(last_total, last_done);
}

// The zstd levels a save takes are the ones options.h documents, named in
// one message; a raw save does not use the level.
TEST(SaveTest, ZstdLevelRangeIsTheDocumentedOne) {
  EXPECT_EQ(kMinZstdLevel, -7);
  EXPECT_EQ(kMaxZstdLevel, 22);
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  o.codec = Codec::kZstd;
  for (int level : {kMinZstdLevel, kMaxZstdLevel}) {
    SCOPED_TRACE(level);
    o.level = level;
    ASSERT_OK(Save("/ck.rckpt", Sample(1), o));
    LoadOptions lo;
    lo.fs = &fs;
    ASSERT_OK(Load("/ck.rckpt", lo).status());
  }
  o.level = kMaxZstdLevel + 1;
  EXPECT_THAT(Save("/x.rckpt", Sample(1), o),
              StatusIs(StatusCode::kInvalidArgument,
                       "SaveOptions.level is 23: zstd levels run from -7 to 22"));
  o.level = kMinZstdLevel - 1;
  EXPECT_THAT(Save("/x.rckpt", Sample(1), o),
              StatusIs(StatusCode::kInvalidArgument,
                       "SaveOptions.level is -8: zstd levels run from -7 to 22"));
  EXPECT_FALSE(fs.Exists("/x.rckpt"));
  o.codec = Codec::kNone;
  o.level = 99;
  EXPECT_OK(Save("/x.rckpt", Sample(1), o));
}

TEST(SaveTest, RejectsBadOptionsBeforeWriting) {
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  o.alignment = 1000;
  EXPECT_THAT(Save("/ck.rckpt", Sample(1), o), StatusIs(StatusCode::kInvalidArgument, "alignment"));
  o.alignment = 4096;
  o.codec = Codec::kZstd;
  o.level = 99;
  EXPECT_THAT(Save("/ck.rckpt", Sample(1), o), StatusIs(StatusCode::kInvalidArgument, "level"));
  o.level = 1;
  o.chunk_bytes = 0;
  EXPECT_THAT(Save("/ck.rckpt", Sample(1), o), StatusIs(StatusCode::kInvalidArgument, "chunk_bytes"));
  EXPECT_FALSE(fs.Exists("/ck.rckpt"));
}

// A save never writes a file the reader would refuse: names the format does
// not allow are refused before anything is written, whether they came in
// through AddTensor (which refuses non-UTF-8 itself) or by editing entries.
TEST(SaveTest, NamesTheReaderWouldRefuseAreRefusedBeforeWriting) {
  Checkpoint bad;
  EXPECT_THAT(bad.AddTensor("model", "w\xff", HostTensor(DType::kF32, {2}, 1)),
              StatusIs(StatusCode::kInvalidArgument, "not valid UTF-8"));
  EXPECT_THAT(bad.AddTensor("mod\xc0\xaf" "el", "w", HostTensor(DType::kF32, {2}, 1)),
              StatusIs(StatusCode::kInvalidArgument, "section name"));
  EXPECT_THAT(bad.AddRng("r\xed\xa0\x80", RngKind::kTorchCuda, std::vector<std::byte>(16)),
              StatusIs(StatusCode::kInvalidArgument, "RNG record name"));
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  Checkpoint edited = Sample(1);
  edited.mutable_tensors()[0].name = std::string(70000, 'x');
  EXPECT_THAT(Save("/ck.rckpt", edited, o),
              StatusIs(StatusCode::kInvalidArgument, "is 70000 bytes, the limit is 65536"));
  edited.mutable_tensors()[0].name = "w\x80";
  EXPECT_THAT(Save("/ck.rckpt", edited, o),
              StatusIs(StatusCode::kInvalidArgument, "tensor name 'w\\x80' is not valid UTF-8"));
  EXPECT_FALSE(fs.Exists("/ck.rckpt"));
  EXPECT_EQ(CountTemps(fs), 0u);
  // Multi-byte names are fine and come back unchanged.
  Checkpoint good;
  ASSERT_OK(good.AddTensor("modèle", "поле.вес", HostTensor(DType::kF32, {2}, 1)));
  ASSERT_OK(Save("/ck.rckpt", good, o));
  o.fs = &fs;
  LoadOptions lo;
  lo.fs = &fs;
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load("/ck.rckpt", lo));
  ASSERT_NE(back.FindTensor("поле.вес"), nullptr);
  EXPECT_EQ(back.FindTensor("поле.вес")->section, "modèle");
}

TEST(SaveTest, LargeRawChunksStartAtTheAlignment) {
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  o.codec = Codec::kNone;
  o.chunk_bytes = 64 * 1024;
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "tiny", HostTensor(DType::kU8, {3}, 1)));
  ASSERT_OK(ck.AddTensor("model", "big", HostTensor(DType::kF32, {100000}, 2)));
  ASSERT_OK(Save("/ck.rckpt", ck, o));
  ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(fs, "/ck.rckpt"));
  for (const auto& c : reader->manifest().tensors[1].chunks) EXPECT_EQ(c.offset % 4096, 0u);
  // Small chunks are packed at 64-byte alignment instead of wasting a page.
  EXPECT_EQ(reader->manifest().tensors[0].chunks[0].offset, 64u);
}

TEST(SaveTest, IncompressibleChunksAreStoredRaw) {
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  o.codec = Codec::kZstd;
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "noise", HostTensor(DType::kU8, {100000}, 1)));
  ASSERT_OK(Save("/ck.rckpt", ck, o));
  ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(fs, "/ck.rckpt"));
  EXPECT_EQ(reader->manifest().tensors[0].chunks[0].codec, Codec::kNone);
}

// Device tensors reach the file through the pinned staging buffers, small
// chunks several to a buffer; the chunks must be the host path's.
TEST(SaveTest, DeviceTensorsSaveTheChunksOfTheirHostCopies) {
  Checkpoint host;
  for (int i = 0; i < 40; ++i) {
    ASSERT_OK(host.AddTensor("model", "small" + std::to_string(i),
                             HostTensor(i % 2 ? DType::kF32 : DType::kU8, {7 + 50 * i}, i)));
  }
  ASSERT_OK(host.AddTensor("model", "big", HostTensor(DType::kF32, {100000}, 99)));
  for (Codec codec : {Codec::kNone, Codec::kZstd}) {
    SCOPED_TRACE(static_cast<int>(codec));
    auto rt = NewTestRuntime({.device_count = 1});
    {
      Checkpoint on_device;
      std::vector<std::shared_ptr<void>> owned;
      for (const TensorEntry& e : host.tensors()) {
        ASSERT_OK_AND_ASSIGN(void* p, rt->Allocate(Device::Cuda(0), e.tensor.nbytes()));
        owned.emplace_back(p, [&rt](void* q) { rt->Free(Device::Cuda(0), q); });
        ASSERT_OK_AND_ASSIGN(Stream s, rt->CreateStream(Device::Cuda(0)));
        ASSERT_OK(rt->CopyToDeviceAsync(Device::Cuda(0), s, p, e.tensor.data(), e.tensor.nbytes()));
        ASSERT_OK(rt->Synchronize(Device::Cuda(0), s));
        rt->DestroyStream(Device::Cuda(0), s);
        ASSERT_OK(on_device.AddTensor(
            e.section, e.name, TensorView{p, e.tensor.dtype(), e.tensor.shape(), Device::Cuda(0)}));
      }
      MemFileSystem fs;
      SaveOptions o{.codec = codec, .chunk_bytes = 64 << 10, .threads = 3,
                    .runtime = rt.get(), .staging_bytes = 256 << 10, .fs = &fs};
      ASSERT_OK(Save("/device.rckpt", on_device, o));
      o.runtime = nullptr;
      ASSERT_OK(Save("/host.rckpt", host, o));
      ASSERT_OK_AND_ASSIGN(auto from_device, FileReader::Open(fs, "/device.rckpt"));
      ASSERT_OK_AND_ASSIGN(auto from_host, FileReader::Open(fs, "/host.rckpt"));
      const auto& a = from_device->manifest().tensors;
      const auto& b = from_host->manifest().tensors;
      ASSERT_EQ(a.size(), b.size());
      for (size_t t = 0; t < a.size(); ++t) {
        ASSERT_EQ(a[t].chunks.size(), b[t].chunks.size()) << a[t].name;
        for (size_t c = 0; c < a[t].chunks.size(); ++c) {
          EXPECT_EQ(a[t].chunks[c].offset, b[t].chunks[c].offset) << a[t].name;
          EXPECT_EQ(a[t].chunks[c].stored_size, b[t].chunks[c].stored_size) << a[t].name;
          EXPECT_EQ(a[t].chunks[c].checksum, b[t].chunks[c].checksum) << a[t].name;
          EXPECT_EQ(a[t].chunks[c].codec, b[t].chunks[c].codec) << a[t].name;
        }
      }
      ASSERT_OK_AND_ASSIGN(Checkpoint back, testing::LoadAllToHost(fs, "/device.rckpt"));
      ASSERT_EQ(back.tensors().size(), host.tensors().size());
      for (size_t t = 0; t < back.tensors().size(); ++t) {
        const Tensor& x = host.tensors()[t].tensor;
        const Tensor& y = back.tensors()[t].tensor;
        ASSERT_EQ(x.nbytes(), y.nbytes());
        EXPECT_EQ(std::memcmp(x.data(), y.data(), x.nbytes()), 0) << host.tensors()[t].name;
        EXPECT_EQ(back.tensors()[t].Origin(), Device::Cuda(0));
      }
    }
    EXPECT_TRUE(rt->NothingLive());
  }
}

TEST(SaveTest, PosixSaveReplacesFileAtomicallyAndCleansStaleTemporaries) {
  std::string dir = testing::NewTempDir("save");
  std::string path = dir + "/ck.rckpt";
  // A leftover of a crashed save by a process that no longer exists.
  std::string stale = path + ".tmp-999999999-0123456789abcdef";
  { FILE* f = fopen(stale.c_str(), "w"); fputs("junk", f); fclose(f); }
  SaveOptions o;
  ASSERT_OK(Save(path, Sample(1), o));
  ASSERT_OK(Save(path, Sample(2), o));
  EXPECT_FALSE(std::filesystem::exists(stale));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, testing::LoadAllToHost(PosixFileSystem(), path));
  EXPECT_EQ(back.Tree().Find("seed")->as_int(), 2);
  size_t entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) entries += e.exists();
  EXPECT_EQ(entries, 1u);
}

}  // namespace
}  // namespace rckpt
