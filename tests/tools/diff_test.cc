// diff compares content a restart depends on, never encoding; by default the
// state both files record, under --strict everything, under --tensors-only
// tensors.
#include <cmath>

#include "format/format_test_util.h"
#include "rckpt/convert.h"
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

DiffOptions Mode(DiffMode mode) {
  DiffOptions o;
  o.mode = mode;
  return o;
}

// "what" of every part the comparison left out.
std::set<std::string> LeftOut(const DiffReport& r) {
  std::set<std::string> out;
  for (const auto& n : r.not_compared) out.insert(n.what);
  return out;
}

std::string Listed(const DiffReport& r) {
  std::string s;
  for (const auto& d : r.differences) s += d.kind + " " + d.name + ": " + d.detail + "\n";
  return s;
}

TEST(DiffModeTest, DefaultComparesAnOrderedDictAsItsItems) {
  Checkpoint a = Base(), b = Copy(a);
  a.Tree()["model"] = Value::Object(
      "collections.OrderedDict",
      Value::Map({{Value("items"), Value::Map({{Value("w"), Value::TensorRef("w")}})},
                  {Value("state"), Value::Map({{Value("_metadata"), Value::Map()}})}}));
  b.Tree()["model"] = Value::Map({{Value("w"), Value::TensorRef("w")}});
  ASSERT_OK_AND_ASSIGN(DiffReport state, DiffCheckpoints(a, b));
  EXPECT_TRUE(state.identical) << Listed(state);
  EXPECT_EQ(LeftOut(state), std::set<std::string>{"OrderedDict attributes"});
  EXPECT_EQ(state.not_compared[0].why.rfind("torch's _metadata of 1 OrderedDict in A,", 0), 0u)
      << state.not_compared[0].why;
  // Two OrderedDicts are compared whole, attributes included.
  Checkpoint c = Copy(a);
  c.Tree()["model"].fields()["state"] = Value::Map({{Value("_metadata"), Value(1)}});
  ASSERT_OK_AND_ASSIGN(DiffReport both, DiffCheckpoints(a, c));
  EXPECT_EQ(Listed(both), "tree model.state._metadata: map {} vs int 1\n");
  EXPECT_TRUE(both.not_compared.empty());
  ASSERT_OK_AND_ASSIGN(DiffReport strict, DiffCheckpoints(a, b, Mode(DiffMode::kStrict)));
  ASSERT_EQ(strict.count, 1u);
  EXPECT_EQ(strict.differences[0].name, "model");
  EXPECT_TRUE(strict.not_compared.empty());
  // The items themselves are compared.
  b.Tree()["model"] = Value::Map({{Value("w"), Value::TensorRef("state.0.step")}});
  ASSERT_OK_AND_ASSIGN(state, DiffCheckpoints(a, b));
  EXPECT_EQ(state.count, 1u);
}

TEST(DiffModeTest, DefaultLeavesOutWhatOneFileDoesNotRecord) {
  Checkpoint a = Base(), b = Copy(a);
  b.mutable_tensors()[0].origin = Device::Cuda(1);
  b.Tree() = Value::Map({{Value("w"), Value::TensorRef("w")}});
  b.Metadata().clear();
  Checkpoint c;  // "w" in another section, with another role
  ASSERT_OK(c.AddTensor("weights", "w", a.tensors()[0].tensor, Role::kHost));
  DiffOptions o;
  o.b_records.origins = false;
  o.b_records.tree = false;
  o.b_records.metadata = false;
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b, o));
  EXPECT_TRUE(r.identical) << Listed(r);
  EXPECT_EQ(LeftOut(r), (std::set<std::string>{"origin devices", "state tree", "metadata"}));
  for (const auto& n : r.not_compared) EXPECT_EQ(n.why.rfind("B does not record", 0), 0u) << n.why;
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b, Mode(DiffMode::kStrict)));
  EXPECT_EQ(Listed(r),
            "tensor w: origin device cpu vs cuda:1\n"
            "tree (root): 2 entries vs 1\n"
            "tree epoch: key 'epoch' vs 'w' at position 0\n"
            "metadata k: only in A\n");

  DiffOptions sections;
  sections.a_records.sections = false;
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, c, sections));
  for (const auto& d : r.differences) EXPECT_EQ(d.detail.find("section"), std::string::npos);
  EXPECT_TRUE(LeftOut(r).count("sections and roles"));
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, c));
  EXPECT_NE(Listed(r).find("tensor w: section model vs weights"), std::string::npos) << Listed(r);
  EXPECT_NE(Listed(r).find("tensor w: role model vs host"), std::string::npos);
}

TEST(DiffModeTest, RngRecordMatchesAUint8TensorWhereKindsAreNotRecorded) {
  Checkpoint a, b;
  std::vector<std::byte> state = testing::RandomBytes(16, 5);
  ASSERT_OK(a.AddRng("torch_cuda_rng", RngKind::kTorchCuda, state));
  ASSERT_OK(b.AddTensor("data", "torch_cuda_rng", *Tensor::FromBytes(DType::kU8, {16}, state)));
  a.Tree() = Value::Map({{Value("torch_cuda_rng"), Value::RngRef("torch_cuda_rng")}});
  b.Tree() = Value::Map({{Value("torch_cuda_rng"), Value::TensorRef("torch_cuda_rng")}});
  DiffOptions o;
  o.b_records.rng_kinds = false;
  o.b_records.sections = false;
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b, o));
  EXPECT_TRUE(r.identical) << Listed(r);
  EXPECT_TRUE(LeftOut(r).count("RNG kinds"));
  b.mutable_tensors()[0].tensor.mutable_host_bytes()[3] ^= std::byte{1};
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b, o));
  EXPECT_EQ(Listed(r), "rng torch_cuda_rng: state bytes differ (16 vs 16 bytes)\n");
  // Where both files record RNG kinds, a record and a tensor are different things.
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b, Mode(DiffMode::kStrict)));
  EXPECT_NE(Listed(r).find("tensor torch_cuda_rng: only in B"), std::string::npos);
  EXPECT_NE(Listed(r).find("rng torch_cuda_rng: only in A"), std::string::npos);
}

TEST(DiffModeTest, CollectiveFileComparesAsItsCommonTree) {
  Checkpoint a = Base(), b = Copy(a);
  Value state = a.Tree();
  b.Tree() = Value::Map({{Value("common"), state}, {Value("ranks"), Value::List({Value()})}});
  b.Metadata()["rckpt.world_size"] = "1";
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b));
  EXPECT_TRUE(r.identical) << Listed(r);
  EXPECT_EQ(LeftOut(r), std::set<std::string>{"rckpt. metadata"});
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b, Mode(DiffMode::kStrict)));
  EXPECT_NE(Listed(r).find("metadata rckpt.world_size: only in B"), std::string::npos);
  EXPECT_NE(Listed(r).find("tree epoch: key 'epoch' vs 'common'"), std::string::npos) << Listed(r);
  // A rank's own state cannot be compared with a file that has none.
  b.Tree()["ranks"] = Value::List({Value::Map({{Value("step"), Value(1)}})});
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b));
  EXPECT_TRUE(r.identical);
  EXPECT_TRUE(LeftOut(r).count("per-rank trees"));
}

TEST(DiffModeTest, KeyOrderCountsOnlyWhereBothFilesRecordIt) {
  Checkpoint a = Base(), b = Copy(a);
  b.Tree() = Value();
  b.Tree()["lr"] = 0.001;
  b.Tree()["epoch"] = 3;
  DiffOptions o;
  o.a_records.key_order = false;
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b, o));
  EXPECT_TRUE(r.identical) << Listed(r);
  EXPECT_TRUE(LeftOut(r).count("key order"));
  b.Tree()["extra"] = 1;
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b, o));
  EXPECT_EQ(Listed(r), "tree extra: only in B\n");
}

TEST(DiffModeTest, TensorsOnlyComparesTensorDataAlone) {
  Checkpoint a = Base(), b = Copy(a);
  b.Tree()["epoch"] = 4;
  b.Metadata()["k"] = "other";
  b.mutable_rng()[0].bytes[0] ^= std::byte{1};
  b.mutable_tensors()[0].origin = Device::Cuda(3);
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b, Mode(DiffMode::kTensors)));
  EXPECT_TRUE(r.identical) << Listed(r);
  EXPECT_EQ(LeftOut(r), (std::set<std::string>{"sections and roles", "origin devices",
                                               "RNG records", "state tree", "metadata"}));
  Floats(b, "w")[2] += 1;
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b, Mode(DiffMode::kTensors)));
  EXPECT_EQ(r.count, 1u);
  EXPECT_EQ(r.differences[0].name, "w");
}

TEST(DiffModeTest, SectionsWithoutTensorsCountUnderStrictOnly) {
  Checkpoint a = Base(), b = Copy(a);
  ASSERT_OK(b.AddSection("spare", Role::kHost));
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(a, b));
  EXPECT_TRUE(r.identical) << Listed(r);
  EXPECT_EQ(LeftOut(r), std::set<std::string>{"sections without tensors"});
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b, Mode(DiffMode::kStrict)));
  EXPECT_EQ(Listed(r), "section spare: only in B\n");
  ASSERT_OK(a.AddSection("spare", Role::kModel));
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(a, b, Mode(DiffMode::kStrict)));
  EXPECT_EQ(Listed(r), "section spare: role model vs host\n");
  // A section that holds tensors is compared in state mode too.
  Checkpoint c = Copy(Base());
  Checkpoint d;
  ASSERT_OK(d.AddSection("model", Role::kHost));
  ASSERT_OK(d.AddTensor("model", "w", c.tensors()[0].tensor, Role::kModel));
  ASSERT_OK(d.AddTensor("optimizer", "state.0.step", c.tensors()[1].tensor));
  ASSERT_OK(d.AddRng("g", RngKind::kOpaque, c.rng()[0].bytes));
  d.Tree() = c.Tree();
  d.Metadata() = c.Metadata();
  ASSERT_OK_AND_ASSIGN(r, DiffCheckpoints(c, d));
  EXPECT_EQ(Listed(r), "section model: role model vs host\n");
}

// The two cases of docs/CLI.md, on committed fixtures (tests/data/diff/
// make_fixtures.py): each pair holds the same state in different containers.
struct Read {
  Checkpoint ck;
  ImportReport report;
};
Read ReadFixture(const std::string& rel) {
  Read r;
  auto ck = ReadAnyCheckpoint(std::string(RCKPT_TEST_DATA_DIR) + "/diff/" + rel, {}, &r.report);
  EXPECT_TRUE(ck.ok()) << rel << ": " << ck.status().ToString();
  if (ck.ok()) r.ck = std::move(ck).value();
  return r;
}

DiffReport DiffFixtures(const Read& a, const Read& b, DiffMode mode) {
  DiffOptions o;
  o.mode = mode;
  o.a_records = a.report.recorded;
  o.b_records = b.report.recorded;
  auto r = DiffCheckpoints(a.ck, b.ck, o);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : DiffReport{};
}

TEST(DiffModeTest, TorchStateDictAndItsSafetensorsHoldTheSameState) {
  Read pt = ReadFixture("state_dict.pt");
  Read st = ReadFixture("state_dict.safetensors");
  DiffReport r = DiffFixtures(pt, st, DiffMode::kState);
  EXPECT_TRUE(r.identical) << Listed(r);
  EXPECT_EQ(LeftOut(r), (std::set<std::string>{"sections and roles", "origin devices",
                                               "state tree"}));
  r = DiffFixtures(pt, st, DiffMode::kStrict);
  EXPECT_EQ(r.count, 1u) << Listed(r);  // an OrderedDict with _metadata vs a flat map
  EXPECT_EQ(r.differences[0].name, "(root)");
}

TEST(DiffModeTest, DcpDirectoryAndItsRckptWriterFileHoldTheSameState) {
  Read dir = ReadFixture("dcp");
  Read file = ReadFixture("writer.rckpt");
  DiffReport r = DiffFixtures(dir, file, DiffMode::kState);
  EXPECT_TRUE(r.identical) << Listed(r);
  EXPECT_EQ(LeftOut(r), (std::set<std::string>{"sections and roles", "origin devices",
                                               "key order", "metadata"}));
  r = DiffFixtures(dir, file, DiffMode::kStrict);
  EXPECT_FALSE(r.identical);
  EXPECT_NE(Listed(r).find("tree model: key 'model' vs 'common'"), std::string::npos) << Listed(r);
  // A changed value inside the state is found.
  file.ck.Tree()["common"]["epoch"] = 4;
  r = DiffFixtures(dir, file, DiffMode::kState);
  EXPECT_EQ(Listed(r), "tree epoch: 3 vs 4\n");
}

}  // namespace
}  // namespace rckpt
