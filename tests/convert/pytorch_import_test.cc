#include <cmath>
#include <cstring>
#include <random>

#include "convert/bytes.h"
#include "convert_test_util.h"
#include "io/mem_file.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::rckpt::testing::Fixture;
using ::rckpt::testing::Floats;
using ::rckpt::testing::MakeArchive;
using ::rckpt::testing::PFloatTensor;
using ::rckpt::testing::PGlobal;
using ::rckpt::testing::PStr;
using ::rckpt::testing::ReadBytes;
using ::rckpt::testing::ToBytes;

Result<Checkpoint> ImportFixture(const std::string& name, ImportOptions options = {},
                                 ImportReport* report = nullptr) {
  return ImportPyTorch(Fixture("pytorch/" + name), options, report);
}

std::vector<float> F32(const TensorEntry* t) {
  auto s = t->tensor.host_span<float>();
  return {s.begin(), s.end()};
}

const Value* At(const Value& v, std::initializer_list<const char*> keys) {
  const Value* cur = &v;
  for (const char* k : keys) {
    if (cur == nullptr) return nullptr;
    if (cur->kind() == ValueKind::kObject) cur = cur->fields().Find("items");
    cur = cur ? cur->Find(std::string_view(k)) : nullptr;
  }
  return cur;
}

TEST(PyTorchImportTest, ImportsEveryDtype) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("dtypes.pt"));
  struct Want {
    const char* name;
    DType dtype;
  } want[] = {{"float64", DType::kF64}, {"float32", DType::kF32}, {"float16", DType::kF16},
              {"bfloat16", DType::kBF16}, {"float8_e4m3fn", DType::kF8E4M3FN},
              {"float8_e5m2", DType::kF8E5M2}, {"int8", DType::kI8}, {"int16", DType::kI16},
              {"int32", DType::kI32}, {"int64", DType::kI64}, {"uint8", DType::kU8},
              {"uint16", DType::kU16}, {"uint32", DType::kU32}, {"uint64", DType::kU64},
              {"bool", DType::kBool}, {"complex64", DType::kC64}, {"complex128", DType::kC128}};
  for (const Want& w : want) {
    const TensorEntry* t = ck.FindTensor(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->tensor.dtype(), w.dtype) << w.name;
    EXPECT_EQ(t->tensor.shape(), Shape{4}) << w.name;
    EXPECT_EQ(t->section, "model");  // a dict of tensors only is a state dict
  }
  EXPECT_EQ(F32(ck.FindTensor("float32")), (std::vector<float>{0, 1.5f, -2.25f, 3}));
  auto f64 = ck.FindTensor("float64")->tensor.host_span<double>();
  EXPECT_EQ(f64[2], -2.25);
  auto c64 = ck.FindTensor("complex64")->tensor.host_span<float>();  // re, im pairs
  EXPECT_EQ(c64[2], 1.5f);
  EXPECT_EQ(c64[3], 0.0f);
  auto special = F32(ck.FindTensor("float32_special"));
  EXPECT_TRUE(std::isinf(special[0]));
  EXPECT_TRUE(std::isnan(special[2]));
  EXPECT_TRUE(std::signbit(special[3]));
}

TEST(PyTorchImportTest, KeepsStateDictMetadataAndReadsAnyTopFolder) {
  // Saved as module_state_dict.pth: its records live under module_state_dict/.
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("module_state_dict.pth"));
  const Value& tree = ck.Tree();
  ASSERT_EQ(tree.kind(), ValueKind::kObject);
  EXPECT_EQ(tree.as_string(), "collections.OrderedDict");
  const Value* md = tree.fields().Find("state");
  ASSERT_NE(md, nullptr);
  const Value* v = md->Find("_metadata");
  ASSERT_NE(v, nullptr);
  ASSERT_NE(v->Find("1"), nullptr);
  EXPECT_EQ(*v->Find("1")->Find("version"), Value(2));  // BatchNorm's version
  EXPECT_EQ(*At(tree, {"0.weight"}), Value::TensorRef("0.weight"));
  EXPECT_EQ(ck.FindTensor("1.num_batches_tracked")->tensor.dtype(), DType::kI64);
}

TEST(PyTorchImportTest, AssignsSectionsAndHostRoleToStepCounters) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("optimizer_adam.pt"));
  const TensorEntry* w = ck.FindTensor("model.0.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->section, "model");
  EXPECT_EQ(w->role, Role::kModel);
  const TensorEntry* step = ck.FindTensor("optimizer.state.0.step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->section, "optimizer");
  EXPECT_EQ(step->role, Role::kHost);
  EXPECT_EQ(ck.FindTensor("optimizer.state.0.exp_avg")->role, Role::kModel);
  EXPECT_EQ(step->tensor.host_span<float>()[0], 2.0f);
  // Integer keys stay integers; hyper-parameters stay in the tree.
  const Value* state = At(ck.Tree(), {"optimizer", "state"});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->entries()[0].first, Value(0));
  const Value* groups = At(ck.Tree(), {"optimizer", "param_groups"});
  ASSERT_NE(groups, nullptr);
  EXPECT_EQ(*groups->items()[0].Find("lr"), Value(1e-3));
  EXPECT_EQ(groups->items()[0].Find("betas")->kind(), ValueKind::kTuple);
  EXPECT_EQ(*At(ck.Tree(), {"epoch"}), Value(3));
}

TEST(PyTorchImportTest, SectionOverridesWin) {
  ImportOptions o;
  o.section_overrides["optimizer"] = "opt2";
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("optimizer_adam.pt", o));
  EXPECT_EQ(ck.FindTensor("optimizer.state.0.exp_avg")->section, "opt2");
  EXPECT_EQ(ck.FindTensor("model.0.weight")->section, "model");
}

TEST(PyTorchImportTest, MaterialisesViewsOfSharedStorages) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("views.pt"));
  auto base = F32(ck.FindTensor("base"));  // arange(24).reshape(4, 6)
  ASSERT_EQ(base.size(), 24u);
  EXPECT_EQ(F32(ck.FindTensor("row")), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(F32(ck.FindTensor("col")), (std::vector<float>{2, 8, 14, 20}));
  auto tr = F32(ck.FindTensor("transposed"));
  EXPECT_EQ(ck.FindTensor("transposed")->tensor.shape(), (Shape{6, 4}));
  EXPECT_EQ(tr[1], 6.0f);  // [0][1] of the transpose is base[1][0]
  EXPECT_EQ(F32(ck.FindTensor("slice")), (std::vector<float>{8, 9, 10, 14, 15, 16}));
  EXPECT_EQ(F32(ck.FindTensor("step"))[1], 2.0f);
  EXPECT_EQ(F32(ck.FindTensor("narrow_tail")), (std::vector<float>{20, 21, 22, 23}));
  auto ex = ck.FindTensor("expanded")->tensor.host_span<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(ex.begin(), ex.end()), (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
}

TEST(PyTorchImportTest, RecordsTiedTensorsOnce) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("tied.pt"));
  EXPECT_EQ(ck.tensors().size(), 2u);
  EXPECT_EQ(ck.FindTensor("decoder.weight"), nullptr);
  EXPECT_EQ(*At(ck.Tree(), {"decoder.weight"}), Value::TensorRef("encoder.weight"));
  EXPECT_EQ(*At(ck.Tree(), {"encoder.weight"}), Value::TensorRef("encoder.weight"));
}

TEST(PyTorchImportTest, ImportsZeroDimAndEmptyTensors) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("zero_d_empty.pt"));
  EXPECT_EQ(ck.FindTensor("scalar")->tensor.shape(), Shape{});
  EXPECT_EQ(F32(ck.FindTensor("scalar")), std::vector<float>{3.5f});
  EXPECT_EQ(ck.FindTensor("empty")->tensor.shape(), (Shape{0, 3}));
  EXPECT_EQ(ck.FindTensor("empty")->tensor.nbytes(), 0u);
  EXPECT_EQ(ck.FindTensor("empty1d")->tensor.dtype(), DType::kI64);
}

TEST(PyTorchImportTest, StorageLocationTagsBecomeOriginDevices) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("cuda_tagged.pt"));
  EXPECT_EQ(ck.FindTensor("on_cuda1")->Origin(), Device::Cuda(1));
  EXPECT_EQ(ck.FindTensor("on_cuda0")->Origin(), Device::Cuda(0));
  EXPECT_EQ(ck.FindTensor("on_cpu")->Origin(), Device::Cpu());
  EXPECT_TRUE(ck.FindTensor("on_cuda1")->tensor.device().is_cpu());  // bytes on host
}

TEST(PyTorchImportTest, DetectsRngStatesByKeyAndSize) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("rng_states.pt"));
  const RngRecord* cpu = ck.FindRng("torch_rng_state");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->kind, RngKind::kTorchCpu);
  EXPECT_EQ(cpu->bytes.size(), 5056u);
  const RngRecord* cuda = ck.FindRng("cuda_rng_state");
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->kind, RngKind::kTorchCuda);
  EXPECT_EQ(static_cast<uint8_t>(cuda->bytes[0]), 123);  // seed
  EXPECT_EQ(static_cast<uint8_t>(cuda->bytes[8]), 40);   // offset
  ASSERT_NE(ck.FindRng("cuda_rng_states.1"), nullptr);
  EXPECT_EQ(ck.FindRng("cuda_rng_states.1")->origin, Device::Cuda(1));
  EXPECT_EQ(*At(ck.Tree(), {"torch_rng_state"}), Value::RngRef("torch_rng_state"));
  // 16 zero bytes under an ordinary key stay a tensor.
  EXPECT_NE(ck.FindTensor("not_rng"), nullptr);
  EXPECT_EQ(ck.FindRng("not_rng"), nullptr);
}

TEST(PyTorchImportTest, RngKeyOptionMarksMoreRecords) {
  ImportOptions o;
  o.rng_keys = {"not_rng"};
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("rng_states.pt", o));
  ASSERT_NE(ck.FindRng("not_rng"), nullptr);
  EXPECT_EQ(ck.FindRng("not_rng")->kind, RngKind::kTorchCuda);  // 16 bytes
}

TEST(PyTorchImportTest, HfRngFileBecomesPythonNumpyAndTorchRecords) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("hf_rng_state.pth", {}, &report));
  ASSERT_NE(ck.FindRng("cpu"), nullptr);
  EXPECT_EQ(ck.FindRng("cpu")->kind, RngKind::kTorchCpu);
  EXPECT_TRUE(report.inert_classes.empty());
  // np.random.get_state(): a numpy record (legacy layout) named as read.
  EXPECT_EQ(*At(ck.Tree(), {"numpy"}), Value::RngRef("numpy"));
  ASSERT_NE(ck.FindRng("numpy"), nullptr);
  EXPECT_EQ(ck.FindRng("numpy")->kind, RngKind::kNumpy);
  EXPECT_EQ(ck.FindRng("numpy")->bytes.size(), 2516u);
  // random.getstate(): (3, 624 MT words + index, gauss) as a python record.
  EXPECT_EQ(*At(ck.Tree(), {"python"}), Value::RngRef("python"));
  const RngRecord* py = ck.FindRng("python");
  ASSERT_NE(py, nullptr);
  EXPECT_EQ(py->kind, RngKind::kPython);
  EXPECT_EQ(py->bytes.size(), 2516u);
}

TEST(PyTorchImportTest, KeepsUnknownClassesAsInertObjectsAndReportsThem) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("custom_class.pt", {}, &report));
  EXPECT_EQ(report.inert_classes, std::vector<std::string>{"mylib.metrics.MetricTracker"});
  const Value* mt = At(ck.Tree(), {"metric_tracker"});
  ASSERT_NE(mt, nullptr);
  EXPECT_EQ(mt->kind(), ValueKind::kObject);
  EXPECT_EQ(*mt->fields().Find("state")->Find("best_metric"), Value(0.5));
  // A tensor inside the object's state is named without the "state" level.
  const TensorEntry* bw = ck.FindTensor("metric_tracker.best_weights");
  ASSERT_NE(bw, nullptr);
  EXPECT_EQ(bw->section, "metrics");
  EXPECT_EQ(bw->role, Role::kHost);
}

TEST(PyTorchImportTest, StrictRefusesUnknownClasses) {
  ImportOptions o;
  o.strict = true;
  EXPECT_THAT(ImportFixture("custom_class.pt", o),
              StatusIs(StatusCode::kUnsupported, "mylib.metrics.MetricTracker"));
}

TEST(PyTorchImportTest, KeepsNestedScalarsAndRecognisedValues) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("nested.pt"));
  const Value& t = ck.Tree();
  EXPECT_EQ(At(t, {"tuple"})->kind(), ValueKind::kTuple);
  EXPECT_EQ(At(t, {"set"})->kind(), ValueKind::kSet);
  const Value* big = At(t, {"big_ints"});
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->items()[0], Value::BigInt(std::string("\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9)));
  EXPECT_EQ(big->items()[3].kind(), ValueKind::kBigInt);  // 2**63 does not fit int64
  EXPECT_EQ(At(t, {"ints"})->items()[10], Value(INT64_MAX));
  EXPECT_EQ(*At(t, {"bytes"}), Value::Bytes(std::string("\x00\x01\xff\x80" "abc", 7)));
  EXPECT_EQ(*At(t, {"empty_bytes"}), Value::Bytes(""));
  EXPECT_EQ(*At(t, {"unicode"}), Value("h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80"));
  EXPECT_EQ(*At(t, {"size"}), Value::Object("torch.Size", Value::Tuple({Value(2), Value(3)})));
  EXPECT_EQ(*At(t, {"dtype"}), Value::Object("torch.dtype", Value("float16")));
  EXPECT_EQ(*At(t, {"device_cuda1"}),
            Value::Object("torch.device", Value::Tuple({Value("cuda"), Value(1)})));
  EXPECT_EQ(*At(t, {"complex"}),
            Value::Object("builtins.complex", Value::Tuple({Value(1.0), Value(2.0)})));
  EXPECT_EQ(At(t, {"int_keys"})->entries()[2].first, Value(-5));
  EXPECT_EQ(At(t, {"tuple_keys"})->entries()[0].first, Value::Tuple({Value(1), Value(2)}));
  EXPECT_TRUE(std::signbit(At(t, {"floats"})->items()[3].as_float()));
  EXPECT_NE(ck.FindTensor("deep.a.b.c.0.d"), nullptr);
  EXPECT_NE(ck.FindTensor("tensor_in_list.1"), nullptr);
}

TEST(PyTorchImportTest, ReadsRezippedArchiveWithDataDescriptors) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("rezipped_zip64.pt"));
  EXPECT_EQ(F32(ck.FindTensor("col")), (std::vector<float>{2, 8, 14, 20}));
}

TEST(PyTorchImportTest, ReadsTorch1ArchivesWithoutByteorderRecord) {
  // Written by Debian's torch 1.13: no 'byteorder' record (little-endian),
  // storages in lexicographic key order, numpy 1.x module paths.
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportFixture("torch1_checkpoint.pt", {}, &report));
  EXPECT_EQ(F32(ck.FindTensor("many.t11")), (std::vector<float>{11, 11}));
  EXPECT_EQ(F32(ck.FindTensor("many.t2")), (std::vector<float>{2, 2}));
  auto col = ck.FindTensor("views.col")->tensor.host_span<double>();
  EXPECT_EQ(std::vector<double>(col.begin(), col.end()), (std::vector<double>{1, 7, 13, 19}));
  EXPECT_EQ(ck.FindTensor("optimizer.state.0.step")->role, Role::kHost);
  EXPECT_EQ(ck.FindRng("torch_rng_state")->kind, RngKind::kTorchCpu);
  EXPECT_EQ(ck.Tree().Find("tied")->items()[1], Value::TensorRef("many.t3"));
  EXPECT_EQ(ck.FindRng("numpy")->kind, RngKind::kNumpy);
  EXPECT_EQ(ck.Metadata().at("rckpt.numpy_module"), "numpy.core");
  EXPECT_TRUE(report.inert_classes.empty());
}

TEST(PyTorchImportTest, ReadsThroughTheFileSystemInterface) {
  MemFileSystem fs;
  fs.SetFile("/m/tied.pt", ReadBytes(Fixture("pytorch/tied.pt")));
  ImportOptions o;
  o.fs = &fs;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch("/m/tied.pt", o));
  EXPECT_EQ(ck.tensors().size(), 2u);
  EXPECT_THAT(ImportPyTorch("/m/missing.pt", o), StatusIs(StatusCode::kNotFound, ""));
}

// hippynn's real files are covered by tests/hippynn/.

// --- refusals ---------------------------------------------------------------

TEST(PyTorchRefusalTest, RefusesHostilePicklesWithoutRunningThem) {
  for (const char* f : {"hostile_os_system.pt", "hostile_posix_system.pt", "hostile_eval.pt",
                        "hostile_subprocess.pt"}) {
    EXPECT_THAT(ImportFixture(f), StatusIs(StatusCode::kUnsupported, "nothing was executed"))
        << f;
  }
}

TEST(PyTorchRefusalTest, RefusesLegacyFormatWithAdvice) {
  EXPECT_THAT(ImportFixture("legacy.pt"),
              StatusIs(StatusCode::kUnsupported, "pre-1.6 PyTorch legacy"));
  EXPECT_THAT(DetectFormat(Fixture("pytorch/legacy.pt")),
              StatusIs(StatusCode::kUnsupported, "re-save"));
}

TEST(PyTorchRefusalTest, RefusesTorchScriptArchivesWithAdvice) {
  EXPECT_THAT(ImportFixture("torchscript.pt"),
              StatusIs(StatusCode::kUnsupported, "TorchScript archive"));
}

TEST(PyTorchRefusalTest, RefusesCompressedRecords) {
  EXPECT_THAT(ImportFixture("rezipped_deflate.pt"),
              StatusIs(StatusCode::kUnsupported, "compressed"));
}

// --- damaged archives (hand-built) -------------------------------------------

Result<Checkpoint> ImportArchive(const std::string& bytes, ImportOptions o = {},
                                 ImportReport* report = nullptr) {
  static std::vector<std::byte> keep;
  keep = ToBytes(bytes);
  return ImportPyTorchFromBytes(keep, o, report);
}

std::string DictOf(const std::string& key, const std::string& value) {
  return "\x80\x02}(" + PStr(key) + value + "u.";
}

TEST(PyTorchCorruptionTest, ImportsAHandBuiltArchive) {
  std::string pkl = DictOf("w", PFloatTensor("0", 6, 1, {2, 2}, {1, 2}, "cuda:3"));
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportArchive(MakeArchive(
                                          pkl, {{"data/0", Floats({0, 1, 2, 3, 4, 5})}})));
  EXPECT_EQ(F32(ck.FindTensor("w")), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_EQ(ck.FindTensor("w")->Origin(), Device::Cuda(3));
}

// A zip written by another tool (zip -0) may place a storage at any offset:
// the tensor is then a copy, never a pointer into the mapping that is not
// aligned for its elements.
TEST(PyTorchCorruptionTest, AStorageAtAnUnalignedOffsetIsCopied) {
  const std::string pkl = DictOf("w", PFloatTensor("0", 3, 0, {3}, {1}));
  for (const std::string prefix : {"archive/", "archiv/", "archi/", "arch/"}) {
    const std::string zip = MakeArchive(pkl, {{"data/0", Floats({1, 2, 3})}}, prefix, 1);
    const std::vector<std::byte> bytes = ToBytes(zip);
    auto dir = convert::ReadZipDirectoryFromBytes(bytes);
    ASSERT_TRUE(dir.ok());
    if (dir->Find(prefix + "data/0")->data_offset % 4 == 0) continue;
    MemFileSystem fs;  // its files map, as files on disk do
    fs.SetFile("/w.pt", bytes);
    ImportOptions o;
    o.map_file = true;
    o.fs = &fs;
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch("/w.pt", o));
    const TensorEntry* w = ck.FindTensor("w");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(F32(w), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w->tensor.data()) % alignof(float), 0u) << prefix;
    return;
  }
  FAIL() << "no prefix gave an unaligned record";
}

// torch.save({"": t}): the key path gives the tensor no name.
TEST(PyTorchCorruptionTest, RefusesATensorUnderAnEmptyKeyPath) {
  std::string pkl = DictOf("", PFloatTensor("0", 2, 0, {2}, {1}));
  EXPECT_THAT(ImportArchive(MakeArchive(pkl, {{"data/0", Floats({0, 1})}})),
              StatusIs(StatusCode::kUnsupported,
                       "pytorch: a tensor's key path is empty (the key \"\"), which gives it no "
                       "name; rckpt names every tensor"));
}

TEST(PyTorchCorruptionTest, RejectsViewsOutsideTheirStorage) {
  std::string pkl = DictOf("w", PFloatTensor("0", 6, 3, {2, 2}, {2, 1}));
  EXPECT_THAT(ImportArchive(MakeArchive(pkl, {{"data/0", Floats({0, 1, 2, 3, 4, 5})}})),
              StatusIs(StatusCode::kCorruption, "reaches element 6 of a storage of 6"));
  std::string rank = DictOf("w", PFloatTensor("0", 6, 0, {2, 2}, {1}));
  EXPECT_THAT(ImportArchive(MakeArchive(rank, {{"data/0", Floats({0, 1, 2, 3, 4, 5})}})),
              StatusIs(StatusCode::kCorruption, "2 sizes but 1 strides"));
}

TEST(PyTorchCorruptionTest, RejectsRecordSizeMismatch) {
  std::string pkl = DictOf("w", PFloatTensor("0", 6, 0, {6}, {1}));
  EXPECT_THAT(ImportArchive(MakeArchive(pkl, {{"data/0", Floats({0, 1, 2})}})),
              StatusIs(StatusCode::kCorruption, "holds 12 bytes, its storage declares 6 x 4"));
}

TEST(PyTorchCorruptionTest, RejectsMissingRecords) {
  std::string pkl = DictOf("w", PFloatTensor("0", 1, 0, {1}, {1}));
  EXPECT_THAT(ImportArchive(MakeArchive(pkl, {})),
              StatusIs(StatusCode::kCorruption, "has no record"));
  std::string out;
  ::rckpt::testing::StringFile f(&out);
  convert::ZipWriter z(&f, 64);
  ASSERT_OK(z.Add("archive/version", convert::AsBytes("3\n")));
  ASSERT_OK(z.Finish());
  EXPECT_THAT(ImportArchive(out), StatusIs(StatusCode::kCorruption, "data.pkl"));
}

TEST(PyTorchCorruptionTest, RejectsEntriesOutsideTheTopFolder) {
  std::string zip = MakeArchive(DictOf("a", "K\x01"), {{"../evil", "x"}}, "archive/");
  EXPECT_OK(ImportArchive(zip).status());  // "archive/../evil" is still inside
  std::string out;
  ::rckpt::testing::StringFile f(&out);
  convert::ZipWriter z(&f, 64);
  std::string pkl = DictOf("a", "K\x01");
  ASSERT_OK(z.Add("archive/data.pkl", convert::AsBytes(pkl)));
  ASSERT_OK(z.Add("other/data/0", convert::AsBytes("x")));
  ASSERT_OK(z.Finish());
  EXPECT_THAT(ImportArchive(out), StatusIs(StatusCode::kCorruption, "outside the top folder"));
}

TEST(PyTorchCorruptionTest, CrcMismatchIsAWarningUnlessRequired) {
  std::string pkl = DictOf("w", PFloatTensor("0", 2, 0, {2}, {1}));
  std::string zip = MakeArchive(pkl, {{"data/0", Floats({1, 2})}});
  size_t at = zip.find(Floats({1, 2}));
  zip[at] ^= 1;  // flip a bit of the data, keep the CRC
  ImportReport report;
  EXPECT_OK(ImportArchive(zip, {}, &report).status());
  EXPECT_THAT(report.warnings, ::testing::Contains(::testing::HasSubstr("CRC-32")));
  ImportOptions o;
  o.require_crc32 = true;
  EXPECT_THAT(ImportArchive(zip, o), StatusIs(StatusCode::kCorruption, "CRC-32"));
}

TEST(PyTorchCorruptionTest, SwapsBigEndianArchives) {
  std::string pkl = DictOf("w", PFloatTensor("0", 1, 0, {1}, {1}));
  std::string be("\x3f\xc0\x00\x00", 4);  // 1.5f big-endian
  ASSERT_OK_AND_ASSIGN(Checkpoint ck,
                       ImportArchive(MakeArchive(pkl, {{"data/0", be}, {"byteorder", "big"}})));
  EXPECT_EQ(F32(ck.FindTensor("w")), std::vector<float>{1.5f});
  EXPECT_THAT(ImportArchive(MakeArchive(pkl, {{"data/0", be}, {"byteorder", "middle"}})),
              StatusIs(StatusCode::kCorruption, "byteorder"));
}

TEST(PyTorchImportTest, CyclesBecomeReferencesToTheFirstOccurrence) {
  // l = [1]; l.append(l)  -> [1, <ref to the root>]
  std::string pkl = std::string("\x80\x02]q\x00K\x01" "ah\x00" "a.", 12);
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportArchive(MakeArchive(pkl, {})));
  EXPECT_EQ(ck.Tree(), Value::List({Value(1), Value::Object("rckpt.ref", Value(""))}));
}

TEST(PyTorchCorruptionTest, BoundsSharedContainerExpansion) {
  // l0 = [0]; l1 = [l0, l0]; ... l40: 2^40 nodes if expanded naively.
  std::string pkl = "\x80\x02]" + std::string("q\x00K\x00" "a0", 6);
  for (int i = 1; i <= 40; ++i) {
    pkl += "](" + std::string("h") + static_cast<char>(i - 1) + "h" + static_cast<char>(i - 1) +
           "eq" + static_cast<char>(i) + "0";
  }
  pkl += "h" + std::string(1, static_cast<char>(40)) + ".";
  ImportOptions o;
  o.limits.max_tree_nodes = 100000;
  EXPECT_THAT(ImportArchive(MakeArchive(pkl, {}), o),
              StatusIs(StatusCode::kCorruption, "tree nodes"));
}

TEST(PyTorchCorruptionTest, RejectsNonZipFiles) {
  EXPECT_THAT(ImportArchive("hello, not a checkpoint"),
              StatusIs(StatusCode::kCorruption, "not a torch.save zip"));
  EXPECT_THAT(ImportArchive(std::string("PYTORCH1 preview")),
              StatusIs(StatusCode::kUnsupported, "preview"));
}

TEST(PyTorchCorruptionTest, EveryTruncationOfARealFileIsRejected) {
  auto bytes = ReadBytes(Fixture("pytorch/tied.pt"));
  for (size_t n = 0; n < bytes.size(); n += 7) {
    std::span<const std::byte> cut(bytes.data(), n);
    EXPECT_FALSE(ImportPyTorchFromBytes(cut).ok()) << n;
  }
}

}  // namespace
}  // namespace rckpt

namespace rckpt {
namespace {

TEST(PyTorchFuzzTest, MutatedArchivesNeverCrash) {
  // The NumPy file's pickle is most of its 21 KB: fewer runs reach its decoding as often.
  const std::pair<const char*, int> seeds[] = {
      {"pytorch/tied.pt", 3000}, {"pytorch/nested.pt", 3000}, {"pytorch/numpy_values_np2.pt", 800}};
  for (const auto& [f, runs] : seeds) {
    auto seed = ::rckpt::testing::ReadBytes(::rckpt::testing::Fixture(f));
    ASSERT_FALSE(seed.empty());
    std::mt19937 rng(7);
    for (int i = 0; i < runs; ++i) {
      std::vector<std::byte> m = seed;
      for (int e = 0, n = 1 + rng() % 8; e < n; ++e) {
        m[rng() % m.size()] = static_cast<std::byte>(rng());
      }
      (void)ImportPyTorchFromBytes(m);  // any status, never a crash
    }
  }
}

}  // namespace
}  // namespace rckpt
