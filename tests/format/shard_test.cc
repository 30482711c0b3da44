// Sharded tensors (format 1.1) in one process: saved as blocks, loaded
// whole; the validator's answer to every kind of inconsistent shard.
#include <gtest/gtest.h>

#include "format/manifest.h"
#include "core/shard_geometry.h"
#include "format_test_util.h"
#include "render.h"
#include "shard_test_util.h"

namespace rckpt {
namespace {

using testing::Bytes;
using testing::HostTensor;
using testing::LoadAllToHost;
using testing::ShardsOf;
using testing::SplitAlong;

// Global tensors and how they are cut: by rows, by columns, as a 2x2 grid,
// and a flat 1-D tensor in uneven pieces.
struct Sample {
  Checkpoint ck;
  std::map<std::string, Tensor> global;
};

Sample MakeSample() {
  Sample s;
  s.global["model.row"] = HostTensor(DType::kF32, {10, 6}, 1);
  s.global["model.col"] = HostTensor(DType::kBF16, {5, 12}, 2);
  s.global["model.grid"] = HostTensor(DType::kI64, {6, 6}, 3);
  s.global["optimizer.flat"] = HostTensor(DType::kF32, {1001}, 4);
  s.global["model.replicated"] = HostTensor(DType::kF16, {7, 3}, 5);
  EXPECT_OK(s.ck.AddTensor("model", "model.replicated", s.global["model.replicated"]));
  EXPECT_OK(s.ck.AddShardedTensor("model", "model.row", DType::kF32, {10, 6},
                                  ShardsOf(s.global["model.row"], SplitAlong({10, 6}, 0, 4))));
  EXPECT_OK(s.ck.AddShardedTensor("model", "model.col", DType::kBF16, {5, 12},
                                  ShardsOf(s.global["model.col"], SplitAlong({5, 12}, 1, 4))));
  std::vector<Block> grid;
  for (int64_t r : {0, 3}) {
    for (int64_t c : {0, 3}) grid.push_back(Block{{r, c}, {3, 3}});
  }
  EXPECT_OK(s.ck.AddShardedTensor("model", "model.grid", DType::kI64, {6, 6},
                                  ShardsOf(s.global["model.grid"], grid)));
  EXPECT_OK(s.ck.AddShardedTensor("optimizer", "optimizer.flat", DType::kF32, {1001},
                                  ShardsOf(s.global["optimizer.flat"],
                                           SplitAlong({1001}, 0, 3))));
  return s;
}

class ShardTest : public ::testing::Test {
 protected:
  // Saves the sample with small chunks, so shards span several chunks.
  void SaveSample(Codec codec = Codec::kNone) {
    SaveOptions o;
    o.fs = &fs_;
    o.codec = codec;
    o.chunk_bytes = 64;
    ASSERT_OK(Save("s.rckpt", sample_.ck, o));
    ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(fs_, "s.rckpt"));
    manifest_ = reader->manifest();
  }

  // The saved file with its manifest rebuilt from `m`.
  std::vector<std::byte> Rebuilt(const Manifest& m) {
    FlatTree tree;
    return testing::WithManifest(*fs_.GetFile("s.rckpt"), manifest_, BuildManifestFromMeta(m, tree),
                                 kFormatMinorSharded);
  }

  Status OpenBytes(std::vector<std::byte> bytes) {
    fs_.SetFile("bad.rckpt", std::move(bytes));
    return FileReader::Open(fs_, "bad.rckpt").status();
  }

  TensorMeta& Find(Manifest& m, const std::string& name) {
    for (TensorMeta& t : m.tensors) {
      if (t.name == name) return t;
    }
    ADD_FAILURE() << name;
    return m.tensors[0];
  }

  MemFileSystem fs_;
  Sample sample_ = MakeSample();
  Manifest manifest_;
};

TEST_F(ShardTest, ShardedTensorsLoadWholeBitForBit) {
  for (Codec codec : {Codec::kNone, Codec::kZstd}) {
    SaveSample(codec);
    ASSERT_OK_AND_ASSIGN(Checkpoint back, LoadAllToHost(fs_, "s.rckpt"));
    ASSERT_EQ(back.tensors().size(), sample_.global.size());
    for (const auto& [name, global] : sample_.global) {
      const TensorEntry* t = back.FindTensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(t->tensor.shape(), global.shape()) << name;
      EXPECT_EQ(t->tensor.dtype(), global.dtype()) << name;
      EXPECT_TRUE(Bytes(t->tensor) == Bytes(global)) << name;
    }
  }
}

TEST_F(ShardTest, FileWithShardsDeclaresVersion11AndOthersStay10) {
  SaveSample();
  EXPECT_EQ(manifest_.version_minor, 1u);
  const TensorMeta& row = Find(manifest_, "model.row");
  ASSERT_EQ(row.shards.size(), 4u);
  EXPECT_EQ(row.shards[1].offsets, (Shape{3, 0}));
  EXPECT_EQ(row.shards[1].sizes, (Shape{3, 6}));
  EXPECT_GT(row.shards[1].num_chunks, 1u);
  Checkpoint plain;
  ASSERT_OK(plain.AddTensor("model", "w", HostTensor(DType::kF32, {4}, 9)));
  SaveOptions o;
  o.fs = &fs_;
  ASSERT_OK(Save("plain.rckpt", plain, o));
  ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(fs_, "plain.rckpt"));
  EXPECT_EQ(reader->manifest().version_minor, 0u);
}

TEST_F(ShardTest, LoadIntoAndReadTensorsAssembleToo) {
  SaveSample(Codec::kZstd);
  Tensor col = *Tensor::Zeros(DType::kBF16, {5, 12});
  LoadOptions o;
  o.fs = &fs_;
  ASSERT_OK(LoadInto("s.rckpt", {LoadTarget{"model.col", col.data(), DType::kBF16, {5, 12},
                                            Device::Cpu()}},
                     o, /*strict=*/false));
  EXPECT_TRUE(Bytes(col) == Bytes(sample_.global["model.col"]));
  ASSERT_OK_AND_ASSIGN(auto read, ReadTensors("s.rckpt", {"model.grid"}, o));
  ASSERT_EQ(read.size(), 1u);
  EXPECT_TRUE(Bytes(read[0].tensor) == Bytes(sample_.global["model.grid"]));
}

TEST_F(ShardTest, VerifyChecksEveryShardChunkAndInspectListsShards) {
  SaveSample(Codec::kZstd);
  const std::string path = testing::NewTempDir("shard") + "/s.rckpt";
  SaveOptions o;
  o.chunk_bytes = 64;
  ASSERT_OK(Save(path, sample_.ck, o));
  VerifyReport report;
  ASSERT_OK(VerifyRckpt(path, &report));
  EXPECT_EQ(report.tensors, 5u);
  ASSERT_OK_AND_ASSIGN(InspectReport inspect, InspectRckpt(path));
  EXPECT_EQ(inspect.format_version, "1.1");
  const std::string text = cli::RenderInspectText(inspect);
  EXPECT_NE(text.find("shard 3  rank 3  cpu  offsets [0, 9]  sizes [5, 3]"), std::string::npos)
      << text;
  EXPECT_NE(cli::RenderInspectJson(inspect).find("\"shards\":[{\"rank\":0"), std::string::npos);
}

TEST_F(ShardTest, AddShardedTensorRefusesBadBlocks) {
  Checkpoint ck;
  const Tensor g = HostTensor(DType::kF32, {8, 4}, 1);
  auto blocks = SplitAlong({8, 4}, 0, 2);
  auto overlap = blocks;
  overlap[1].offsets[0] = 3;
  overlap[1].sizes[0] = 4;
  EXPECT_THAT(ck.AddShardedTensor("model", "w", DType::kF32, {8, 4}, ShardsOf(g, overlap)),
              StatusIs(StatusCode::kInvalidArgument, "shards 0 and 1 overlap"));
  auto gap = blocks;
  gap[1].offsets[0] = 5;
  gap[1].sizes[0] = 3;
  EXPECT_THAT(ck.AddShardedTensor("model", "w", DType::kF32, {8, 4}, ShardsOf(g, gap)),
              StatusIs(StatusCode::kInvalidArgument, "cover 28 of its 32 elements"));
  auto shards = ShardsOf(g, blocks);
  shards[1].offsets = {5, 0};
  EXPECT_THAT(ck.AddShardedTensor("model", "w", DType::kF32, {8, 4}, shards),
              StatusIs(StatusCode::kInvalidArgument, "outside the global shape"));
  EXPECT_THAT(ck.AddShardedTensor("model", "w", DType::kF16, {8, 4}, ShardsOf(g, blocks)),
              StatusIs(StatusCode::kInvalidArgument, "shard 0: block dtype f32"));
  ASSERT_OK(ck.AddShardedTensor("model", "w", DType::kF32, {8, 4}, ShardsOf(g, blocks)));
  EXPECT_THAT(ck.AddTensor("model", "w", g), StatusIs(StatusCode::kInvalidArgument, "already"));
}

TEST_F(ShardTest, RejectsOverlappingShards) {
  SaveSample();
  Manifest m = manifest_;
  // Shard 2 of the 2x2 grid moved up onto shard 0: same sizes, so its
  // chunks still match, but rows 0-2 are claimed twice and 3-5 by no one.
  Find(m, "model.grid").shards[2].offsets = {0, 0};
  EXPECT_THAT(OpenBytes(Rebuilt(m)),
              StatusIs(StatusCode::kCorruption, "tensor 'model.grid': shards 0 and 2 overlap"));
}

TEST_F(ShardTest, RejectsShardsThatLeaveAGap) {
  SaveSample();
  Manifest m = manifest_;
  TensorMeta& row = Find(m, "model.row");
  row.shape = {11, 6};
  row.nbytes = 11 * 6 * 4;
  EXPECT_THAT(OpenBytes(Rebuilt(m)),
              StatusIs(StatusCode::kCorruption, "shards cover 60 of its 66 elements"));
}

TEST_F(ShardTest, RejectsBlocksOutsideTheGlobalShape) {
  SaveSample();
  Manifest m = manifest_;
  Find(m, "model.row").shards[3].offsets = {9, 0};
  EXPECT_THAT(OpenBytes(Rebuilt(m)),
              StatusIs(StatusCode::kCorruption,
                       "tensor 'model.row': shard 3: block [9, 9+2) of dimension 0 is outside"));
  m = manifest_;
  Find(m, "model.row").shards[0].offsets = {0};
  EXPECT_THAT(OpenBytes(Rebuilt(m)),
              StatusIs(StatusCode::kCorruption, "shard 0: offsets has 1 and sizes 2 dimensions"));
  m = manifest_;
  Find(m, "model.col").shards[0].offsets = {-1, 0};
  EXPECT_THAT(OpenBytes(Rebuilt(m)), StatusIs(StatusCode::kCorruption, "is outside"));
}

TEST_F(ShardTest, RejectsShardChunksOutsideTheDataRegion) {
  SaveSample();
  Manifest m = manifest_;
  TensorMeta& col = Find(m, "model.col");
  col.chunks[col.shards[2].first_chunk].offset = manifest_.data_end + 4096;
  EXPECT_THAT(OpenBytes(Rebuilt(m)),
              StatusIs(StatusCode::kCorruption, "shard 2: chunk 0: extent"));
}

TEST_F(ShardTest, RejectsShardChunksThatDoNotCoverTheBlock) {
  SaveSample();
  Manifest m = manifest_;
  TensorMeta& flat = Find(m, "optimizer.flat");
  flat.shards[1].num_chunks -= 1;
  flat.shards[2].first_chunk -= 1;
  flat.shards[2].num_chunks += 1;
  EXPECT_THAT(OpenBytes(Rebuilt(m)),
              StatusIs(StatusCode::kCorruption, "shard 1: chunks hold"));
}

TEST_F(ShardTest, LoadAndVerifyRefuseInconsistentShards) {
  SaveSample();
  Manifest m = manifest_;
  Find(m, "model.grid").shards[2].offsets = {0, 0};
  fs_.SetFile("bad.rckpt", Rebuilt(m));
  EXPECT_THAT(LoadAllToHost(fs_, "bad.rckpt"), StatusIs(StatusCode::kCorruption, "overlap"));
  EXPECT_THAT(VerifyRckpt("bad.rckpt", nullptr, {}, &fs_),
              StatusIs(StatusCode::kCorruption, "overlap"));
}

}  // namespace
}  // namespace rckpt
