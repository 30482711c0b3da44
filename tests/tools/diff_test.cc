// diff compares content a restart depends on, never encoding.
#include <cmath>

#include "format/format_test_util.h"
#include "rckpt/diff.h"

namespace rckpt {
namespace {

using testing::HostTensor;

Checkpoint Base() {
  Checkpoint ck;
  EXPECT_OK(ck.AddTensor("model", "w", HostTensor(DType::kF32, {4, 4}, 1)));
  EXPECT_OK(ck.AddTensor("optimizer", "state.0.step", HostTensor(DType::kI64, {}, 2)));
  EXPECT_OK(ck.AddRng("g", RngKind::kOpaque, testing::RandomBytes(8, 3)));
  ck.Tree()["epoch"] = 3;
  ck.Tree()["lr"] = 0.001;
  ck.Metadata()["k"] = "v";
  return ck;
}

float* Floats(Checkpoint& ck, const std::string& name) {
  for (auto& t : ck.mutable_tensors()) {
    if (t.name == name) return t.tensor.host_span<float>().data();
  }
  return nullptr;
}

Checkpoint Copy(const Checkpoint& src) {
  // Deep copy: tensors share bytes when a Checkpoint is copied.
  Checkpoint ck;
  for (const auto& s : src.sections()) EXPECT_OK(ck.AddSection(s.name, s.role));
  for (const auto& t : src.tensors()) {
    EXPECT_OK(ck.AddTensor(t.section, t.name,
                           *Tensor::FromBytes(t.tensor.dtype(), t.tensor.shape(), t.tensor.host_bytes()),
                           t.role));
    ck.mutable_tensors().back().origin = t.origin;
  }
  for (const auto& r : src.rng()) EXPECT_OK(ck.AddRng(r.name, r.kind, r.bytes, r.origin));
  ck.Tree() = src.Tree();
  ck.Metadata() = src.Metadata();
  return ck;
}

TEST(DiffTest, SameStateSavedWithDifferentEncodingsIsIdentical) {
  MemFileSystem fs;
  Checkpoint ck = Base();
  SaveOptions raw, zstd;
  raw.fs = zstd.fs = &fs;
  raw.codec = Codec::kNone;
  zstd.codec = Codec::kZstd;
  zstd.level = 9;
  zstd.chunk_bytes = 16;
  zstd.writer = "another writer";
  ASSERT_OK(Save("/a.rckpt", ck, raw));
  ASSERT_OK(Save("/b.rckpt", ck, zstd));
  ASSERT_OK_AND_ASSIGN(Checkpoint a, testing::LoadAllToHost(fs, "/a.rckpt"));
  ASSERT_OK_AND_ASSIGN(Checkpoint b, testing::LoadAllToHost(fs, "/b.rckpt"));
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b));
  EXPECT_TRUE(r.identical);
  EXPECT_EQ(r.count, 0u);
}

TEST(DiffTest, NegativeZeroAndNanPayloadCountBitForBit) {
  Checkpoint a = Base(), b = Copy(a);
  Floats(a, "w")[0] = 0.0f;
  Floats(b, "w")[0] = -0.0f;
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b));
  ASSERT_EQ(r.count, 1u);
  EXPECT_EQ(r.differences[0].name, "w");
  EXPECT_NE(r.differences[0].detail.find("first at flat index 0"), std::string::npos);
  Floats(b, "w")[0] = 0.0f;
  uint32_t n1 = 0x7fc00001, n2 = 0x7fc00002;
  std::memcpy(&Floats(a, "w")[5], &n1, 4);
  std::memcpy(&Floats(b, "w")[5], &n2, 4);
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b));
  EXPECT_FALSE(r.identical);
}

TEST(DiffTest, TolerancesRelaxFloatsOnly) {
  Checkpoint a = Base(), b = Copy(a);
  Floats(b, "w")[3] += 1e-6f;
  ASSERT_OK_AND_ASSIGN(DiffReport exact, DiffCheckpoints(a, b));
  EXPECT_FALSE(exact.identical);
  DiffOptions o;
  o.atol = 1e-5;
  ASSERT_OK_AND_ASSIGN(DiffReport loose, DiffCheckpoints(a, b, o));
  EXPECT_TRUE(loose.identical);
  o.atol = -1;
  EXPECT_THAT(DiffCheckpoints(a, b, o).status(), StatusIs(StatusCode::kInvalidArgument, "tolerances"));
}

TEST(DiffTest, OriginDevicesCountUnlessIgnored) {
  Checkpoint a = Base(), b = Copy(a);
  b.mutable_tensors()[0].origin = Device::Cuda(1);
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b));
  ASSERT_EQ(r.count, 1u);
  EXPECT_NE(r.differences[0].detail.find("origin device cpu vs cuda:1"), std::string::npos);
  DiffOptions o;
  o.ignore_devices = true;
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b, o));
  EXPECT_TRUE(r.identical);
}

TEST(DiffTest, TreeOrderValuesAndKindsAreCompared) {
  Checkpoint a = Base(), b = Copy(a);
  b.Tree() = Value();
  b.Tree()["lr"] = 0.001;
  b.Tree()["epoch"] = 3;  // same entries, other order
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b));
  EXPECT_FALSE(r.identical);
  Checkpoint c = Copy(a);
  c.Tree()["epoch"] = 3.0;  // float, not int
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, c));
  ASSERT_EQ(r.count, 1u);
  EXPECT_EQ(r.differences[0].name, "epoch");
  EXPECT_NE(r.differences[0].detail.find("int 3 vs float 3.0"), std::string::npos) << r.differences[0].detail;
}

TEST(DiffTest, MissingTensorsRngAndMetadataAreListed) {
  Checkpoint a = Base();
  Checkpoint b;
  ASSERT_OK(b.AddTensor("model", "other", HostTensor(DType::kF32, {1}, 9)));
  b.Tree() = a.Tree();
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b));
  std::set<std::string> seen;
  for (const auto& d : r.differences) seen.insert(d.kind + ":" + d.name + ":" + d.detail);
  EXPECT_TRUE(seen.count("tensor:w:only in A"));
  EXPECT_TRUE(seen.count("tensor:other:only in B"));
  EXPECT_TRUE(seen.count("rng:g:only in A"));
  EXPECT_TRUE(seen.count("metadata:k:only in A"));
}

TEST(DiffTest, RngStateBytesAreCompared) {
  Checkpoint a = Base(), b = Copy(a);
  b.mutable_rng()[0].bytes[0] ^= std::byte{1};
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b));
  ASSERT_EQ(r.count, 1u);
  EXPECT_EQ(r.differences[0].kind, "rng");
}

}  // namespace
}  // namespace rckpt
