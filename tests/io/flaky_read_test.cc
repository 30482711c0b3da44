// Bytes damaged on their way from the file (a network, a flaky disk): a
// chunk that fails its checksum is read once more before it is refused, by
// loads and by verify alike.
#include <atomic>
#include <cstring>

#include "format/file_reader.h"
#include "rckpt/inspect.h"
#include "rckpt/io.h"
#include "test_util.h"

namespace rckpt {
namespace {

// Reads of `base` with one byte flipped in those that cover `offset`, the
// first `damaged` times.
class FlakyFile : public RandomAccessFile {
 public:
  FlakyFile(std::unique_ptr<RandomAccessFile> base, uint64_t offset, int damaged,
            std::atomic<int>* covering)
      : base_(std::move(base)), offset_(offset), damaged_(damaged), covering_(covering) {}
  uint64_t Size() const override { return base_->Size(); }
  Status ReadAt(uint64_t offset, std::span<std::byte> dst) const override {
    RCKPT_RETURN_IF_ERROR(base_->ReadAt(offset, dst));
    if (offset <= offset_ && offset_ < offset + dst.size()) {
      if (covering_->fetch_add(1) < damaged_) dst[offset_ - offset] ^= std::byte{0x40};
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<RandomAccessFile> base_;
  uint64_t offset_;
  int damaged_;
  std::atomic<int>* covering_;
};

class FlakyFileSystem : public MemFileSystem {
 public:
  uint64_t offset = 0;
  int damaged = 0;
  std::atomic<int> covering{0};
  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, MemFileSystem::OpenForRead(path));
    return std::unique_ptr<RandomAccessFile>(
        std::make_unique<FlakyFile>(std::move(f), offset, damaged, &covering));
  }
};

// A checkpoint of four 1 MiB tensors in `fs`; the file offset of a byte in
// the middle of the third one's chunk.
uint64_t SaveFour(FlakyFileSystem& fs) {
  Checkpoint ck;
  for (int i = 0; i < 4; ++i) {
    Tensor t = *Tensor::Empty(DType::kU8, {1 << 20});
    std::memset(t.data(), i + 1, 1 << 20);
    EXPECT_OK(ck.AddTensor("model", testing::Numbered("w", i), std::move(t)));
  }
  EXPECT_OK(Save("ck.rckpt", ck, {.fs = &fs}));
  auto reader = FileReader::Open(fs, "ck.rckpt");
  EXPECT_TRUE(reader.ok());
  fs.covering = 0;  // the reads of offset 0 just made
  for (const TensorMeta& t : (*reader)->manifest().tensors) {
    if (t.name == "w2") return t.chunks[0].offset + 1000;
  }
  return 0;
}

TEST(FlakyReadTest, AChunkDamagedOnceIsReadAgainAndLoads) {
  FlakyFileSystem fs;
  fs.offset = SaveFour(fs);
  fs.damaged = 1;
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load("ck.rckpt", {.threads = 2, .fs = &fs}));
  const Tensor& w2 = back.FindTensor("w2")->tensor;
  EXPECT_EQ(static_cast<const uint8_t*>(w2.data())[1000 - 0], 3);
  EXPECT_EQ(fs.covering.load(), 2);
}

TEST(FlakyReadTest, AChunkDamagedEveryTimeIsRefusedAfterOneMoreRead) {
  FlakyFileSystem fs;
  fs.offset = SaveFour(fs);
  fs.damaged = 1000;
  EXPECT_THAT(Load("ck.rckpt", {.threads = 2, .fs = &fs}),
              StatusIs(StatusCode::kCorruption, "tensor 'w2': chunk 0"));
  EXPECT_EQ(fs.covering.load(), 2);
}

TEST(FlakyReadTest, VerifyReadsADamagedChunkOnceMore) {
  FlakyFileSystem fs;
  fs.offset = SaveFour(fs);
  // How often a sound verify reads the byte (its padding check reads it
  // too), then the same with every read damaged: one read more.
  ASSERT_OK(VerifyRckpt("ck.rckpt", nullptr, {}, &fs));
  const int sound = fs.covering.exchange(0);
  fs.damaged = 1000;
  EXPECT_THAT(VerifyRckpt("ck.rckpt", nullptr, {}, &fs),
              StatusIs(StatusCode::kCorruption, "checksum mismatch"));
  EXPECT_EQ(fs.covering.exchange(0), sound + 1);
  fs.damaged = sound;  // every read of the first pass damaged, the next one not
  EXPECT_OK(VerifyRckpt("ck.rckpt", nullptr, {}, &fs));
}

}  // namespace
}  // namespace rckpt
