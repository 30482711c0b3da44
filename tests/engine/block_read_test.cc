// Reading blocks of sharded and whole tensors: the right bytes, and only
// the chunks that hold them.
#include "engine/block_read.h"

#include <gtest/gtest.h>

#include "format/format_test_util.h"
#include "format/shard_test_util.h"

namespace rckpt {
namespace {

using testing::Bytes;
using testing::HostTensor;
using testing::ShardsOf;
using testing::SliceOf;
using testing::SplitAlong;

class BlockReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 64 rows of 64 f32 (16 KiB), saved by 4 ranks in row blocks of 16, in
    // 1 KiB chunks (4 rows each); and the same tensor saved whole.
    ASSERT_OK(ck_.AddShardedTensor("model", "rows", DType::kF32, {64, 64},
                                   ShardsOf(global_, SplitAlong({64, 64}, 0, 4))));
    ASSERT_OK(ck_.AddTensor("model", "whole", global_));
    SaveOptions o;
    o.fs = &fs_;
    o.chunk_bytes = 1024;
    ASSERT_OK(Save("b.rckpt", ck_, o));
    ASSERT_OK_AND_ASSIGN(reader_, FileReader::Open(fs_, "b.rckpt"));
  }

  // Reads `block` of tensor `name`; returns it, and the stored bytes read.
  std::pair<Tensor, uint64_t> Read(const std::string& name, const Block& block) {
    const TensorMeta* t = nullptr;
    for (const TensorMeta& m : reader_->manifest().tensors) {
      if (m.name == name) t = &m;
    }
    Tensor out = *Tensor::Empty(DType::kF32, block.sizes);
    PipelineOptions po;
    po.threads = 2;
    PipelineStats stats;
    EXPECT_OK(ReadBlocks(*reader_, {BlockRead{t, block, static_cast<std::byte*>(out.data())}}, po,
                         &stats));
    return {out, stats.bytes_read};
  }

  MemFileSystem fs_;
  Tensor global_ = HostTensor(DType::kF32, {64, 64}, 7);
  Checkpoint ck_;
  std::unique_ptr<FileReader> reader_;
};

TEST_F(BlockReadTest, RowsAcrossShardBoundariesReadOnlyTheirChunks) {
  // Rows 14-33 cross two shard boundaries and start and end mid-chunk.
  const Block b{{14, 0}, {20, 64}};
  auto [got, read] = Read("rows", b);
  EXPECT_TRUE(Bytes(got) == Bytes(SliceOf(global_, b)));
  // Rows 12-35 (6 chunks of 4 rows) hold them: 24 rows, not all 64.
  EXPECT_EQ(read, 24u * 64 * 4);
}

TEST_F(BlockReadTest, AlignedRowBlocksReadExactlyTheirBytes) {
  const Block b{{16, 0}, {32, 64}};
  auto [got, read] = Read("rows", b);
  EXPECT_TRUE(Bytes(got) == Bytes(SliceOf(global_, b)));
  EXPECT_EQ(read, 32u * 64 * 4);
}

TEST_F(BlockReadTest, ColumnBlocksOfRowShardsAndOfWholeTensors) {
  const Block b{{5, 10}, {50, 7}};
  for (const char* name : {"rows", "whole"}) {
    auto [got, read] = Read(name, b);
    EXPECT_TRUE(Bytes(got) == Bytes(SliceOf(global_, b))) << name;
    // Columns cut every row: the chunks of rows 4-55 are read.
    EXPECT_EQ(read, 52u * 64 * 4) << name;
  }
}

}  // namespace
}  // namespace rckpt
