#include <cmath>
#include <cstring>

#include "convert/bytes.h"
#include "convert/pickle_reader.h"
#include "convert/zip.h"
#include "convert_test_util.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::rckpt::testing::CpuRngState;
using ::rckpt::testing::Fixture;
using ::rckpt::testing::Make;

// Everything a .pt file can carry: dtypes (v2 and v3 storages), origins,
// tied references, RNG records and every tree value kind torch can rebuild.
Checkpoint Rich() {
  Checkpoint ck;
  EXPECT_OK(ck.AddTensor("model", "model.w", Make(DType::kF32, {2, 3}, 1)));
  EXPECT_OK(ck.AddTensor("model", "model.b", Make(DType::kBF16, {3}, 2)));
  EXPECT_OK(ck.AddTensor("model", "model.f8", Make(DType::kF8E4M3FN, {4}, 3)));
  EXPECT_OK(ck.AddTensor("model", "model.u16", Make(DType::kU16, {2, 2}, 4)));
  EXPECT_OK(ck.AddTensor("model", "model.c128", Make(DType::kC128, {1}, 5)));
  EXPECT_OK(ck.AddTensor("model", "model.scalar", Make(DType::kI64, {}, 6)));
  EXPECT_OK(ck.AddTensor("model", "model.empty", Make(DType::kF32, {0, 5}, 7)));
  EXPECT_OK(ck.AddTensor("optimizer", "optimizer.state.0.exp_avg", Make(DType::kF32, {2}, 8)));
  ck.mutable_tensors().back().origin = Device::Cuda(1);
  EXPECT_OK(ck.AddRng("torch_rng_state", RngKind::kTorchCpu, CpuRngState()));
  Value model = Value::Object(
      "collections.OrderedDict",
      Value::Map({{Value("items"),
                   Value::Map({{Value("w"), Value::TensorRef("model.w")},
                               {Value("b"), Value::TensorRef("model.b")},
                               {Value("f8"), Value::TensorRef("model.f8")},
                               {Value("u16"), Value::TensorRef("model.u16")},
                               {Value("c128"), Value::TensorRef("model.c128")},
                               {Value("scalar"), Value::TensorRef("model.scalar")},
                               {Value("empty"), Value::TensorRef("model.empty")},
                               {Value("tied"), Value::TensorRef("model.w")}})},
                  {Value("state"),
                   Value::Map({{Value("_metadata"),
                                Value::Map({{Value(""), Value::Map({{Value("version"),
                                                                    Value(1)}})}})}})}}));
  ck.Tree() = Value::Map({
      {Value("model"), model},
      {Value("optimizer"),
       Value::Map({{Value("state"),
                    Value::Map({{Value(0), Value::Map({{Value("exp_avg"),
                                                       Value::TensorRef(
                                                           "optimizer.state.0.exp_avg")}})}})},
                   {Value("param_groups"),
                    Value::List({Value::Map({{Value("lr"), Value(1e-3)},
                                             {Value("betas"), Value::Tuple({Value(0.9),
                                                                            Value(0.999)})},
                                             {Value("foreach"), Value()},
                                             {Value("params"), Value::List({Value(0)})}})})}})},
      {Value("torch_rng_state"), Value::RngRef("torch_rng_state")},
      {Value("scalars"),
       Value::List({Value(true), Value(-1), Value(int64_t{1} << 40), Value(INT64_MIN),
                    Value(-0.0), Value(std::nan("")), Value("h\xc3\xa9"),
                    Value::Bytes(std::string("\x00\xff", 2)), Value::Bytes(""),
                    Value::BigInt(std::string("\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9))})},
      {Value("set"), Value::Set({Value(1), Value(2)})},
      {Value("size"), Value::Object("torch.Size", Value::Tuple({Value(2), Value(3)}))},
      {Value("device"), Value::Object("torch.device", Value::Tuple({Value("cuda"), Value(1)}))},
      {Value("dtype"), Value::Object("torch.dtype", Value("bfloat16"))},
      {Value("complex"), Value::Object("builtins.complex", Value::Tuple({Value(1.0), Value(2.0)}))},
      {Value("bytearray"), Value::Object("builtins.bytearray", Value::Bytes("ab"))},
      {Value::Tuple({Value(1), Value("k")}), Value("tuple key")},
  });
  return ck;
}

Result<Checkpoint> ExportAndImport(const Checkpoint& ck, ExportOptions eo = {},
                                   ImportReport* report = nullptr) {
  static MemFileSystem fs;
  eo.fs = &fs;
  RCKPT_RETURN_IF_ERROR(ExportPyTorch(ck, "/x/out.pt", eo));
  ImportOptions io;
  io.fs = &fs;
  return ImportPyTorch("/x/out.pt", io, report);
}

TEST(PyTorchExportTest, RoundTripsTensorsTreeRngAndOrigins) {
  Checkpoint ck = Rich();
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ExportAndImport(ck));
  ASSERT_EQ(back.tensors().size(), ck.tensors().size());
  for (const TensorEntry& t : ck.tensors()) {
    const TensorEntry* b = back.FindTensor(t.name);
    ASSERT_NE(b, nullptr) << t.name;
    EXPECT_EQ(b->tensor.dtype(), t.tensor.dtype()) << t.name;
    EXPECT_EQ(b->tensor.shape(), t.tensor.shape()) << t.name;
    EXPECT_EQ(b->Origin(), t.Origin()) << t.name;
    ASSERT_EQ(b->tensor.nbytes(), t.tensor.nbytes());
    EXPECT_EQ(0, std::memcmp(b->tensor.data(), t.tensor.data(), t.tensor.nbytes())) << t.name;
  }
  ASSERT_EQ(back.rng().size(), 1u);
  EXPECT_EQ(back.rng()[0].kind, RngKind::kTorchCpu);
  EXPECT_EQ(back.rng()[0].bytes, ck.rng()[0].bytes);
  EXPECT_EQ(back.Tree(), ck.Tree()) << back.Tree().DebugString() << "\n" << ck.Tree().DebugString();
}

TEST(PyTorchExportTest, WritesTheTorchSaveLayout) {
  MemFileSystem fs;
  ExportOptions eo;
  eo.fs = &fs;
  ASSERT_OK(ExportPyTorch(Rich(), "/x/a.pt", eo));
  const auto* bytes = fs.GetFile("/x/a.pt");
  ASSERT_NE(bytes, nullptr);
  ASSERT_OK_AND_ASSIGN(convert::ZipDirectory dir, convert::ReadZipDirectoryFromBytes(*bytes));
  EXPECT_EQ(dir.entries[0].name, "archive/data.pkl");
  ASSERT_NE(dir.Find("archive/byteorder"), nullptr);
  ASSERT_NE(dir.Find("archive/version"), nullptr);
  EXPECT_EQ(dir.Find("archive/.format_version"), nullptr);  // see docs/CONVERT.md
  ASSERT_NE(dir.Find("archive/data/0"), nullptr);
  for (const auto& e : dir.entries) {
    EXPECT_EQ(e.data_offset % 64, 0u) << e.name;
    EXPECT_EQ(e.crc32, convert::Crc32(std::span(*bytes).subspan(e.data_offset, e.size)));
  }
  // Tied: 8 tensors + 1 RNG record, "model.w" stored once.
  EXPECT_EQ(dir.Find("archive/data/9"), nullptr);
  ASSERT_NE(dir.Find("archive/data/8"), nullptr);
  std::string pkl = ::rckpt::testing::ToString(
      std::span(*bytes).subspan(dir.entries[0].data_offset, dir.entries[0].size));
  EXPECT_NE(pkl.find("cuda:1"), std::string::npos);
  EXPECT_NE(pkl.find("_rebuild_tensor_v3"), std::string::npos);  // f8 / u16
}

TEST(PyTorchExportTest, HonoursAlignmentOption) {
  MemFileSystem fs;
  ExportOptions eo;
  eo.fs = &fs;
  eo.pytorch_alignment = 4096;
  ASSERT_OK(ExportPyTorch(Rich(), "/x/a.pt", eo));
  ASSERT_OK_AND_ASSIGN(convert::ZipDirectory dir,
                       convert::ReadZipDirectoryFromBytes(*fs.GetFile("/x/a.pt")));
  for (const auto& e : dir.entries) EXPECT_EQ(e.data_offset % 4096, 0u) << e.name;
  ASSERT_NE(dir.Find("archive/.storage_alignment"), nullptr);
  eo.pytorch_alignment = 48;
  EXPECT_THAT(ExportPyTorch(Rich(), "/x/b.pt", eo),
              StatusIs(StatusCode::kInvalidArgument, "power of two"));
}

TEST(PyTorchExportTest, RefusesInertObjectsUnlessDropping) {
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("metrics", "metric_tracker.best", Make(DType::kF32, {1}, 1)));
  ck.Tree() = Value::Map(
      {{Value("metric_tracker"),
        Value::Object("mylib.Tracker",
                      Value::Map({{Value("state"),
                                   Value::Map({{Value("best"), Value::TensorRef(
                                                                   "metric_tracker.best")}})}}))},
       {Value("epoch"), Value(3)}});
  EXPECT_THAT(ExportAndImport(ck), StatusIs(StatusCode::kUnsupported, "mylib.Tracker"));
  ExportOptions eo;
  eo.drop_objects = true;
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ExportAndImport(ck, eo));
  EXPECT_EQ(*back.Tree().Find("metric_tracker"), Value());
  // The tensor the object held is not dropped: it is kept under its name.
  EXPECT_NE(back.FindTensor("metric_tracker.best"), nullptr);
}

// The top-level keys of the pickle torch.load reads from `path`.
std::vector<std::string> PickledTopKeys(MemFileSystem& fs, const std::string& path) {
  const auto* bytes = fs.GetFile(path);
  auto dir = convert::ReadZipDirectoryFromBytes(*bytes);
  EXPECT_TRUE(dir.ok());
  const convert::ZipEntry* pkl = dir->Find("archive/data.pkl");
  auto pr = convert::Unpickle(std::span(*bytes).subspan(pkl->data_offset, pkl->size),
                              PickleLimits{}, false);
  EXPECT_TRUE(pr.ok());
  std::vector<std::string> keys;
  for (const auto& [k, v] : pr->root->entries) keys.push_back(k->s);
  return keys;
}

TEST(PyTorchExportTest, AddsUnreferencedTensorsForTorchAndGivesTheTreeBackToRckpt) {
  MemFileSystem fs;
  ExportOptions eo;
  eo.fs = &fs;
  ImportOptions io;
  io.fs = &fs;
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "a", Make(DType::kF32, {2}, 1)));
  ASSERT_OK(ck.AddTensor("model", "b", Make(DType::kF32, {2}, 2)));
  ASSERT_OK(ck.AddRng("torch_rng_state", RngKind::kTorchCpu, CpuRngState()));
  // An empty tree: torch.load sees a dict of everything; rckpt the empty tree.
  ASSERT_OK(ExportPyTorch(ck, "/x/empty.pt", eo));
  EXPECT_EQ(PickledTopKeys(fs, "/x/empty.pt"),
            (std::vector<std::string>{"a", "b", "torch_rng_state"}));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ImportPyTorch("/x/empty.pt", io));
  EXPECT_TRUE(back.Tree().is_null()) << back.Tree().DebugString();
  EXPECT_EQ(back.tensors().size(), 2u);
  EXPECT_NE(back.FindRng("torch_rng_state"), nullptr);

  ck.Tree() = Value::Map({{Value("a"), Value::TensorRef("a")}});
  ASSERT_OK(ExportPyTorch(ck, "/x/some.pt", eo));
  EXPECT_EQ(PickledTopKeys(fs, "/x/some.pt"),
            (std::vector<std::string>{"a", "b", "torch_rng_state"}));
  ASSERT_OK_AND_ASSIGN(back, ImportPyTorch("/x/some.pt", io));
  EXPECT_EQ(back.Tree(), ck.Tree());
  EXPECT_NE(back.FindTensor("b"), nullptr);

  ck.Tree() = Value::List({Value::TensorRef("a")});
  EXPECT_THAT(ExportAndImport(ck), StatusIs(StatusCode::kInvalidArgument, "not referenced"));
  ck.Tree() = Value::Map({{Value("x"), Value::TensorRef("nope")}});
  EXPECT_THAT(ExportAndImport(ck), StatusIs(StatusCode::kInvalidArgument, "'nope'"));
}

TEST(PyTorchExportTest, RoundTripsEveryPyTorchFixture) {
  for (const char* f : {"dtypes.pt", "hf_rng_state.pth", "module_state_dict.pth", "optimizer_adam.pt", "nested.pt",
                        "views.pt", "tied.pt", "zero_d_empty.pt", "rng_states.pt",
                        "cuda_tagged.pt"}) {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(Fixture("pytorch/") + f));
    ASSERT_OK_AND_ASSIGN(Checkpoint back, ExportAndImport(ck));
    EXPECT_EQ(back.Tree(), ck.Tree()) << f;
    EXPECT_EQ(back.Metadata(), ck.Metadata()) << f;
    EXPECT_EQ(back.tensors().size(), ck.tensors().size()) << f;
    ASSERT_EQ(back.rng().size(), ck.rng().size()) << f;
    for (size_t i = 0; i < ck.rng().size(); ++i) {
      EXPECT_EQ(back.rng()[i].kind, ck.rng()[i].kind) << f;
      EXPECT_EQ(back.rng()[i].bytes, ck.rng()[i].bytes) << f;
    }
    for (const TensorEntry& t : ck.tensors()) {
      const TensorEntry* b = back.FindTensor(t.name);
      ASSERT_NE(b, nullptr) << f << " " << t.name;
      EXPECT_EQ(b->section, t.section);
      EXPECT_EQ(b->Origin(), t.Origin());
      EXPECT_EQ(0, std::memcmp(b->tensor.data(), t.tensor.data(), t.tensor.nbytes()));
    }
  }
}

TEST(PyTorchExportTest, FailedWriteLeavesThePreviousFileAndNoTemporary) {
  MemFileSystem fs;
  fs.SetFile("/x/keep.pt", ::rckpt::testing::ToBytes("previous"));
  MemFileSystem::Faults faults;
  faults.fail_write_after_bytes = 100;
  fs.SetFaults(faults);
  ExportOptions eo;
  eo.fs = &fs;
  EXPECT_THAT(ExportPyTorch(Rich(), "/x/keep.pt", eo), StatusIs(StatusCode::kIoError, ""));
  EXPECT_EQ(::rckpt::testing::ToString(*fs.GetFile("/x/keep.pt")), "previous");
  ASSERT_OK_AND_ASSIGN(auto names, fs.ListDir("/x"));
  EXPECT_EQ(names, std::vector<std::string>{"keep.pt"});
}

TEST(PyTorchExportTest, RefusesDeviceResidentTensors) {
  Checkpoint ck;
  static float fake[2];
  ASSERT_OK(ck.AddTensor("model", "w",
                         TensorView{fake, DType::kF32, {2}, Device::Cuda(0)}));
  MemFileSystem fs;
  ExportOptions eo;
  eo.fs = &fs;
  EXPECT_THAT(ExportPyTorch(ck, "/x/d.pt", eo),
              StatusIs(StatusCode::kInvalidArgument, "host memory"));
}

}  // namespace
}  // namespace rckpt
