// ImportDcp and the DCP .metadata reader, on the fixtures of
// tests/data/make_dcp_fixture.py (tests/data/dcp/).
#include <filesystem>
#include <fstream>
#include <random>

#include "convert/dcp_import.h"
#include "convert/json.h"
#include "convert/pickle_reader.h"
#include "convert_test_util.h"
#include "rckpt/convert.h"
#include "rckpt/io.h"
#include "test_util.h"

namespace rckpt {
namespace {

namespace fs = std::filesystem;
using ::rckpt::testing::Fixture;
using ::rckpt::testing::NewTempDir;
using ::rckpt::testing::ReadBytes;
using ::rckpt::testing::ToBytes;

std::string Dcp(const std::string& name) { return Fixture("dcp/" + name); }

// A scratch copy of a fixture directory, to damage.
std::string CopyOf(const std::string& name) {
  std::string dir = NewTempDir("dcp_" + name) + "/" + name;
  fs::copy(Dcp(name), dir, fs::copy_options::recursive);
  return dir;
}

const Value* At(const Value& v, std::initializer_list<const char*> keys) {
  const Value* cur = &v;
  for (const char* k : keys) cur = cur ? cur->Find(std::string_view(k)) : nullptr;
  return cur;
}

template <typename T>
std::vector<T> Values(const Checkpoint& ck, const std::string& name) {
  const TensorEntry* t = ck.FindTensor(name);
  if (t == nullptr) return {};
  auto s = t->tensor.host_span<T>();
  return {s.begin(), s.end()};
}

template <typename T>
std::vector<T> Arange(int n) {
  std::vector<T> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<T>(i);
  return v;
}

TEST(DcpImportTest, RebuildsTheNestedStateDictFromPlannerPaths) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportDcp(Dcp("simple"), {}, &report));
  EXPECT_EQ(report.format, "dcp");
  const Value& tree = ck.Tree();
  ASSERT_EQ(tree.kind(), ValueKind::kMap);
  std::vector<std::string> keys;
  for (const auto& [k, v] : tree.entries()) keys.push_back(k.as_string());
  EXPECT_EQ(keys, (std::vector<std::string>{"model", "optim", "lst", "mask", "holes", "pair",
                                            "step", "name"}));
  EXPECT_EQ(*At(tree, {"model", "w"}), Value::TensorRef("model.w"));
  // A key holding a dot stays one key; the tensor is named by DCP's fqn.
  EXPECT_EQ(*At(tree, {"optim", "state", "layer.0.weight", "exp_avg"}),
            Value::TensorRef("optim.state.layer.0.weight.exp_avg"));
  EXPECT_EQ(*At(tree, {"step"}), Value(7));
  EXPECT_EQ(*At(tree, {"name"}), Value("run-1"));
  const Value* groups = At(tree, {"optim", "param_groups"});
  ASSERT_NE(groups, nullptr);
  ASSERT_EQ(groups->kind(), ValueKind::kList);
  EXPECT_EQ(*groups->items()[0].Find("lr"), Value(0.125));
  EXPECT_EQ(*groups->items()[0].Find("params"), Value::List({Value("layer.0.weight")}));
  const Value* lst = At(tree, {"lst"});
  ASSERT_EQ(lst->kind(), ValueKind::kList);
  EXPECT_EQ(lst->items(), (std::vector<Value>{Value::TensorRef("lst.0"), Value(3.5), Value(),
                                              Value(true)}));
  // DCP stores nothing for an empty dict: its list slot comes back None.
  const Value* holes = At(tree, {"holes"});
  ASSERT_EQ(holes->items().size(), 2u);
  EXPECT_EQ(holes->items()[0], Value());
  EXPECT_EQ(*holes->items()[1].Find("a"), Value::TensorRef("holes.1.a"));
  EXPECT_NE(std::find_if(report.warnings.begin(), report.warnings.end(),
                         [](const std::string& w) {
                           return w.find("no item 0") != std::string::npos;
                         }),
            report.warnings.end());
}

TEST(DcpImportTest, KeepsEveryTensorsValuesDtypeAndSection) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportDcp(Dcp("simple")));
  EXPECT_EQ(ck.tensors().size(), 8u);
  const TensorEntry* w = ck.FindTensor("model.w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->section, "model");
  EXPECT_EQ(w->role, Role::kModel);
  EXPECT_EQ(w->tensor.shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<float>(ck, "model.w"), Arange<float>(6));
  EXPECT_EQ(ck.FindTensor("model.b")->tensor.dtype(), DType::kBF16);
  EXPECT_EQ(Values<uint16_t>(ck, "model.b"), (std::vector<uint16_t>{0x0000, 0x3f80, 0x4000}));
  const TensorEntry* step = ck.FindTensor("optim.state.layer.0.weight.step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->section, "optim");
  EXPECT_EQ(step->tensor.shape(), Shape{});
  EXPECT_EQ(Values<float>(ck, "optim.state.layer.0.weight.step"), std::vector<float>{5.0f});
  EXPECT_EQ(Values<double>(ck, "optim.state.layer.0.weight.exp_avg"), Arange<double>(4));
  EXPECT_EQ(Values<int64_t>(ck, "lst.0"), Arange<int64_t>(2));
  EXPECT_EQ(ck.FindTensor("mask")->tensor.dtype(), DType::kBool);
  EXPECT_EQ(Values<uint8_t>(ck, "mask"), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(Values<int16_t>(ck, "holes.1.a"), Arange<int16_t>(2));
  // A tuple DCP stored whole keeps its tensors, named by their place in it.
  EXPECT_EQ(*At(ck.Tree(), {"pair"}), Value::Tuple({Value::TensorRef("pair.0"), Value("tag")}));
  EXPECT_EQ(ck.FindTensor("pair.0")->section, "pair");
  EXPECT_EQ(Values<uint8_t>(ck, "pair.0"), Arange<uint8_t>(3));
  // Every top-level key is a section, as rckpt.save makes them.
  std::vector<std::string> sections;
  for (const SectionInfo& s : ck.sections()) sections.push_back(s.name);
  EXPECT_EQ(sections, (std::vector<std::string>{"model", "optim", "lst", "mask", "holes", "pair",
                                                "step", "name"}));
}

TEST(DcpImportTest, KeysThatHoldDotsStayOneKeyOfTheTreeAndTheDcpVersionIsKept) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportDcp(Dcp("simple")));
  EXPECT_EQ(ck.Metadata().at("rckpt.dcp.version"), "1.0.0");
  EXPECT_EQ(ck.Metadata().count("rckpt.dcp.paths"), 0u) << "the tree holds the paths";
  // DCP's fqn optim.state.layer.0.weight.exp_avg is the path
  // optim / state / "layer.0.weight" / exp_avg.
  const Value* exp_avg = At(ck.Tree(), {"optim", "state", "layer.0.weight", "exp_avg"});
  ASSERT_NE(exp_avg, nullptr);
  EXPECT_EQ(*exp_avg, Value::TensorRef("optim.state.layer.0.weight.exp_avg"));
}

TEST(DcpImportTest, AssemblesTensorsShardedOverTwoRanksWhole) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportDcp(Dcp("sharded2")));
  EXPECT_TRUE(ck.sharded_tensors().empty());
  ASSERT_EQ(ck.tensors().size(), 3u);
  // Rows 0..2 on rank 0, 3..4 on rank 1.
  EXPECT_EQ(ck.FindTensor("model.rows")->tensor.shape(), (Shape{5, 3}));
  EXPECT_EQ(Values<float>(ck, "model.rows"), Arange<float>(15));
  // Columns 0..2 on rank 0, 3..5 on rank 1: blocks that are not contiguous.
  EXPECT_EQ(ck.FindTensor("model.cols")->tensor.shape(), (Shape{4, 6}));
  EXPECT_EQ(Values<int32_t>(ck, "model.cols"), Arange<int32_t>(24));
  EXPECT_EQ(Values<double>(ck, "model.rep"), Arange<double>(4));
  EXPECT_EQ(*At(ck.Tree(), {"epoch"}), Value(3));
}

TEST(DcpImportTest, ConvertedFileLoadsWithTheSameValues) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportDcp(Dcp("sharded2")));
  std::string out = NewTempDir("dcp_out") + "/sharded2.rckpt";
  ASSERT_OK(Save(out, ck));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load(out));
  EXPECT_EQ(Values<int32_t>(back, "model.cols"), Arange<int32_t>(24));
  EXPECT_EQ(back.Tree(), ck.Tree());
  EXPECT_EQ(back.Metadata(), ck.Metadata());
}

TEST(DcpImportTest, SafetensorsCarriesTheDcpMetadata) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportDcp(Dcp("sharded2")));
  std::string out = NewTempDir("dcp_st") + "/sharded2.safetensors";
  ASSERT_OK(ExportSafetensors(ck, out));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ImportSafetensors(out));
  EXPECT_EQ(back.Metadata(), ck.Metadata());
  EXPECT_EQ(Values<float>(back, "model.rows"), Arange<float>(15));
}

TEST(DcpImportTest, DetectsDirectoriesByTheirMetadata) {
  ASSERT_OK_AND_ASSIGN(CheckpointFormat f, DetectFormat(Dcp("simple")));
  EXPECT_EQ(f, CheckpointFormat::kDcp);
  std::string empty = NewTempDir("dcp_empty");
  Result<CheckpointFormat> none = DetectFormat(empty);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("without .metadata"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ReadAnyCheckpoint(Dcp("sharded2")));
  EXPECT_EQ(ck.tensors().size(), 3u);
}

void ExpectError(const Result<Checkpoint>& r, StatusCode code,
                 std::initializer_list<const char*> parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().message();
  for (const char* p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << r.status().message();
  }
}

TEST(DcpImportTest, MissingMetadataIsNotFound) {
  ExpectError(ImportDcp(NewTempDir("dcp_nometa")), StatusCode::kNotFound, {"no .metadata"});
}

TEST(DcpImportTest, MissingDistcpFileIsNotFoundNamingIt) {
  std::string dir = CopyOf("sharded2");
  fs::remove(dir + "/__1_0.distcp");
  ExpectError(ImportDcp(dir), StatusCode::kNotFound, {"__1_0.distcp", "is missing"});
}

TEST(DcpImportTest, ARangePastTheFileEndIsCorruption) {
  std::string dir = CopyOf("simple");
  fs::resize_file(dir + "/__0_0.distcp", fs::file_size(dir + "/__0_0.distcp") / 2);
  ExpectError(ImportDcp(dir), StatusCode::kCorruption, {"passes the end of the file"});
}

TEST(DcpImportTest, AnItemThatIsNoTorchSaveArchiveIsRefused) {
  std::string dir = CopyOf("simple");
  {
    std::fstream f(dir + "/__0_0.distcp", std::ios::in | std::ios::out | std::ios::binary);
    f.write("XXXX", 4);  // the first item's zip signature
  }
  ExpectError(ImportDcp(dir), StatusCode::kUnsupported, {"not a torch.save archive"});
}

TEST(DcpImportTest, EveryTruncationOfMetadataIsCorruption) {
  std::string dir = CopyOf("simple");
  std::vector<std::byte> meta = ReadBytes(dir + "/.metadata");
  for (size_t n = 0; n < meta.size(); n += 37) {
    Result<convert::DcpMetadata> md =
        convert::ParseDcpMetadata(std::span(meta).first(n), PickleLimits{});
    ASSERT_FALSE(md.ok()) << n;
    EXPECT_EQ(md.status().code(), StatusCode::kCorruption) << n << ": " << md.status().message();
  }
  std::ofstream(dir + "/.metadata", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(meta.data()), meta.size() / 2);
  ExpectError(ImportDcp(dir), StatusCode::kCorruption, {".metadata", "truncated"});
}

TEST(DcpImportTest, MutatedMetadataIsRefusedWithCorruptionOrUnsupported) {
  const std::vector<std::byte> meta = ReadBytes(Dcp("sharded2") + "/.metadata");
  std::mt19937 rng(21);
  int refused = 0;
  for (int i = 0; i < 5000; ++i) {
    std::vector<std::byte> m = meta;
    for (int k = 0; k < 1 + i % 4; ++k) {
      m[rng() % m.size()] = static_cast<std::byte>(rng() & 0xff);
    }
    Result<convert::DcpMetadata> md = convert::ParseDcpMetadata(m, PickleLimits{});
    if (md.ok()) continue;  // a changed value that is still valid
    ++refused;
    EXPECT_TRUE(md.status().code() == StatusCode::kCorruption ||
                md.status().code() == StatusCode::kUnsupported)
        << md.status().ToString();
  }
  EXPECT_GT(refused, 1000);
}

TEST(DcpImportTest, ChunkDtypeOrShapeDisagreeingWithMetadataIsCorruption) {
  ExpectError(ImportDcp(Dcp("bad_dtype")), StatusCode::kCorruption,
              {"model.w", "dtype f32", "f64"});
  ExpectError(ImportDcp(Dcp("bad_shape")), StatusCode::kCorruption,
              {"model.w", "shape [2, 3]", "[3, 2]"});
}

TEST(DcpImportTest, ChunksThatDoNotTileTheirTensorAreCorruption) {
  ExpectError(ImportDcp(Dcp("overlap")), StatusCode::kCorruption, {"model.rows", "overlap"});
}

TEST(DcpImportTest, StoragePathsLeavingTheDirectoryAreRefused) {
  ExpectError(ImportDcp(Dcp("escape")), StatusCode::kCorruption,
              {"../simple/__0_0.distcp", "not a file name"});
}

TEST(DcpImportTest, StreamTransformsAreUnsupported) {
  ExpectError(ImportDcp(Dcp("transformed")), StatusCode::kUnsupported, {"extensions (zstd)"});
}

TEST(DcpImportTest, HostileMetadataIsRefusedWithoutRunningIt) {
  // The pickle runs `touch /tmp/rckpt-dcp-hostile-ran` under pickle.load.
  const char* marker = "/tmp/rckpt-dcp-hostile-ran";
  fs::remove(marker);
  ExpectError(ImportDcp(Dcp("hostile")), StatusCode::kUnsupported,
              {"'os.system'", "not on the allow-list", "nothing was imported or executed"});
  EXPECT_FALSE(fs::exists(marker));
  ExpectError(ImportDcp(Dcp("hostile_getattr")), StatusCode::kUnsupported,
              {"getattr", "nothing was executed"});
}

TEST(DcpImportTest, AllowListRefusesEveryOtherGlobal) {
  // A protocol-2 pickle of GLOBAL 'builtins eval' + STOP: eval is allowed
  // nowhere, and torch's weights-only globals are not on DCP's list either.
  for (const char* global : {"builtins\neval\n", "torch._utils\n_rebuild_tensor_v2\n",
                             "collections\nCounter\n"}) {
    std::vector<std::byte> p = ToBytes(std::string("\x80\x02") + "c" + global + ".");
    Result<convert::PickleResult> r =
        convert::UnpickleAllowed(p, PickleLimits{}, convert::DcpAllowedGlobals());
    ASSERT_FALSE(r.ok()) << global;
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(r.status().message().find("not on the allow-list"), std::string::npos);
  }
  // An enum member through getattr becomes an inert global.
  const std::string member = "TORCH_CONTIGUOUS_FORMAT";
  std::vector<std::byte> p = ToBytes(
      std::string("\x80\x02" "cbuiltins\ngetattr\n"
                  "ctorch.distributed.checkpoint.metadata\n_MEM_FORMAT_ENCODING\n") +
      "X" + std::string(1, static_cast<char>(member.size())) + std::string(3, '\0') + member +
      "\x86R.");
  ASSERT_OK_AND_ASSIGN(convert::PickleResult r,
                       convert::UnpickleAllowed(p, PickleLimits{}, convert::DcpAllowedGlobals()));
  ASSERT_EQ(r.root->kind, convert::PyKind::kGlobal);
  EXPECT_EQ(r.root->s,
            "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT");
}

TEST(DcpImportTest, ScratchStagingGivesTheSameCheckpointAndLeavesNoFile) {
  for (const char* name : {"simple", "sharded2"}) {
    ASSERT_OK_AND_ASSIGN(Checkpoint in_memory, ImportDcp(Dcp(name)));
    ImportOptions o;
    o.scratch_dir = NewTempDir("dcp_scratch");
    ASSERT_OK_AND_ASSIGN(Checkpoint staged, ImportDcp(Dcp(name), o));
    EXPECT_TRUE(fs::is_empty(o.scratch_dir)) << name;
    ASSERT_EQ(staged.tensors().size(), in_memory.tensors().size());
    for (size_t i = 0; i < staged.tensors().size(); ++i) {
      const TensorEntry& a = staged.tensors()[i];
      const TensorEntry& b = in_memory.tensors()[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.section, b.section);
      EXPECT_EQ(a.tensor.dtype(), b.tensor.dtype());
      EXPECT_EQ(a.tensor.shape(), b.tensor.shape());
      EXPECT_EQ(::rckpt::testing::ToString(a.tensor.host_bytes()),
                ::rckpt::testing::ToString(b.tensor.host_bytes()))
          << a.name;
    }
    EXPECT_EQ(staged.Tree(), in_memory.Tree());
    EXPECT_EQ(staged.Metadata(), in_memory.Metadata());
  }
  // A failed import removes its scratch file too.
  ImportOptions o;
  o.scratch_dir = NewTempDir("dcp_scratch_fail");
  EXPECT_FALSE(ImportDcp(Dcp("bad_shape"), o).ok());
  EXPECT_TRUE(fs::is_empty(o.scratch_dir));
}

}  // namespace
}  // namespace rckpt
