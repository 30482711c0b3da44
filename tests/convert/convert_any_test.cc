// Conversion chains among .rckpt, .pt and .safetensors (ReadAnyCheckpoint /
// WriteAnyCheckpoint) keep everything each format can carry: the start and
// the end of every chain are identical to a strict diff. What a format
// cannot hold is reported by the export, never dropped silently.
#include <cmath>
#include <cstring>
#include <random>

#include "convert/pytorch_layout.h"
#include "convert/zip.h"
#include "convert_test_util.h"
#include "core/rng_layout.h"
#include "rckpt/convert.h"
#include "rckpt/diff.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::rckpt::testing::CpuRngState;
using ::rckpt::testing::Fixture;
using ::rckpt::testing::Make;

std::vector<std::byte> PythonState(uint32_t seed, bool gauss) {
  std::mt19937 g(seed);
  std::vector<uint32_t> words(625);
  for (int i = 0; i < 624; ++i) words[i] = g();
  words[624] = 624;
  std::string s = EncodePythonRng(words, gauss, gauss ? 0.25 : 0.0);
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::vector<std::byte> Random(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(g());
  return out;
}

Value Ref(const char* name) { return Value::TensorRef(name); }

// Every RNG kind, tensors from three devices, sections with roles other
// than their defaults (and one without tensors), tied and unreferenced
// tensors, RNG records in the tree and outside it, a tree with every value
// kind .pt can rebuild, and metadata.
Checkpoint Everything() {
  Checkpoint ck;
  EXPECT_OK(ck.AddSection("extras", Role::kHost));
  EXPECT_OK(ck.AddSection("spare", Role::kModel));
  auto add = [&](const char* section, const char* name, Tensor t, Device origin) {
    EXPECT_OK(ck.AddTensor(section, name, std::move(t)));
    ck.mutable_tensors().back().origin = origin;
  };
  add("model", "model.w", Make(DType::kF32, {4, 3}, 1), Device::Cuda(1));
  add("model", "model.b", Make(DType::kBF16, {3}, 2), Device::Cuda(1));
  add("model", "model.scale", Make(DType::kF64, {}, 3), Device::Cpu());
  add("optimizer", "optimizer.state.0.exp_avg", Make(DType::kF32, {4, 3}, 4), Device::Cuda(0));
  add("optimizer", "optimizer.state.0.step", Make(DType::kF32, {}, 5), Device::Cpu());
  add("extras", "extras.counts", Make(DType::kI64, {5}, 6), Device::Cuda(0));
  add("extras", "extras.mask", Make(DType::kBool, {4}, 0), Device::Cpu());
  // uint8 tensors a plain import would take for RNG states by their keys
  // and sizes: they stay tensors.
  add("extras", "extras.cuda", Make(DType::kU8, {16}, 7), Device::Cpu());
  add("extras", "extras.rng_state", Tensor::FromBytes(DType::kU8, {5056}, CpuRngState()).value(),
      Device::Cpu());
  add("extras", "extras.lonely", Make(DType::kF16, {2}, 8), Device::Cuda(1));  // not in the tree
  EXPECT_OK(ck.AddRng("python.random", RngKind::kPython, PythonState(1, false)));
  EXPECT_OK(ck.AddRng("numpy.global", RngKind::kNumpy, Random(2504, 2)));
  EXPECT_OK(ck.AddRng("torch.cpu", RngKind::kTorchCpu, CpuRngState()));
  EXPECT_OK(ck.AddRng("torch.cuda.1", RngKind::kTorchCuda, Random(16, 3), Device::Cuda(1)));
  std::mt19937 mt(4);
  std::mt19937_64 mt64(5);
  EXPECT_OK(ck.AddRng("engine.mt", RngKind::kMt19937, CaptureEngine(mt)));
  EXPECT_OK(ck.AddRng("engine.mt64", RngKind::kMt19937_64, CaptureEngine(mt64), Device::Cuda(0)));
  EXPECT_OK(ck.AddRng("opaque", RngKind::kOpaque, Random(40, 6), Device::Cuda(0)));
  EXPECT_OK(ck.AddRng("loop.python", RngKind::kPython, PythonState(7, true), Device::Cuda(1)));

  Value model = Value::Object(
      "collections.OrderedDict",
      Value::Map({{Value("items"), Value::Map({{Value("w"), Ref("model.w")},
                                               {Value("b"), Ref("model.b")},
                                               {Value("scale"), Ref("model.scale")},
                                               {Value("tied"), Ref("model.w")}})},
                  {Value("state"),
                   Value::Map({{Value("_metadata"),
                                Value::Map({{Value(""), Value::Map({{Value("version"),
                                                                    Value(1)}})}})}})}}));
  Value optimizer = Value::Map(
      {{Value("state"),
        Value::Map({{Value(0), Value::Map({{Value("exp_avg"), Ref("optimizer.state.0.exp_avg")},
                                           {Value("step"), Ref("optimizer.state.0.step")}})}})},
       {Value("param_groups"),
        Value::List({Value::Map({{Value("lr"), Value(1e-3)},
                                 {Value("betas"), Value::Tuple({Value(0.9), Value(0.999)})},
                                 {Value("foreach"), Value()},
                                 {Value("params"), Value::List({Value(0)})}})})}});
  ck.Tree() = Value::Map({
      {Value("model"), model},
      {Value("optimizer"), optimizer},
      {Value("extras"), Value::Map({{Value("counts"), Ref("extras.counts")},
                                    {Value("mask"), Ref("extras.mask")},
                                    {Value("cuda"), Ref("extras.cuda")},
                                    {Value("rng_state"), Ref("extras.rng_state")}})},
      {Value("loop"), Value::Map({{Value("epoch"), Value(7)},
                                  {Value("cuda_rng"), Value::RngRef("torch.cuda.1")},
                                  {Value("python"), Value::RngRef("loop.python")},
                                  {Value("python_again"), Value::RngRef("loop.python")}})},
      {Value("values"),
       Value::List({Value(), Value(true), Value(-1), Value(int64_t{1} << 40), Value(INT64_MIN),
                    Value(-0.0), Value(std::nan("")), Value(INFINITY), Value("h\xc3\xa9llo"),
                    Value::Bytes(std::string("\x00\xff", 2)), Value::Bytes(""),
                    Value::BigInt(std::string("\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9)),
                    Value::Set({Value(1), Value(2)}), Value::Tuple(), Value::List(),
                    Value::Map()})},
      {Value("objects"),
       Value::Map({{Value("size"), Value::Object("torch.Size", Value::Tuple({Value(2), Value(3)}))},
                   {Value("device"),
                    Value::Object("torch.device", Value::Tuple({Value("cuda"), Value(1)}))},
                   {Value("dtype"), Value::Object("torch.dtype", Value("bfloat16"))},
                   {Value("layout"),
                    Value::Object("torch.layout", Value::Tuple({Value("torch.strided")}))},
                   {Value("complex"),
                    Value::Object("builtins.complex", Value::Tuple({Value(1.0), Value(-2.0)}))},
                   {Value("bytearray"), Value::Object("builtins.bytearray", Value::Bytes("ab"))}})},
      {Value(3), Value("int key")},
      {Value::Tuple({Value(1), Value("k")}), Value("tuple key")},
  });
  ck.Metadata()["run"] = "abc";
  ck.Metadata()["note"] = "h\xc3\xa9";
  return ck;
}

class ConvertChainTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::NewTempDir("chain"); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Writes the checkpoint that starts the chains: Everything() saved from
  // (emulated) device memory, so its origins are the devices the tensors
  // were on when saved.
  std::string Start(const Checkpoint& ck) {
    std::unique_ptr<DeviceRuntime> rt = NewEmulatedRuntime(2);
    SaveOptions host;
    EXPECT_OK(Save(Path("seed.rckpt"), ck, host));
    LoadOptions lo;
    lo.runtime = rt.get();
    auto on_devices = Load(Path("seed.rckpt"), lo);
    EXPECT_TRUE(on_devices.ok()) << on_devices.status().ToString();
    // Model-role tensors go back to their devices; the save reads them there.
    for (const TensorEntry& t : on_devices->tensors()) {
      if (t.role == Role::kModel) {
        EXPECT_EQ(t.tensor.device(), t.Origin()) << t.name;
      }
    }
    SaveOptions from_devices;
    from_devices.runtime = rt.get();
    EXPECT_OK(Save(Path("start.rckpt"), *on_devices, from_devices));
    return Path("start.rckpt");
  }

  // IN -> OUT as `rckpt convert` does it; nothing may be reported lost.
  void Convert(const std::string& in, const std::string& out) {
    ImportReport ir;
    auto ck = ReadAnyCheckpoint(in, {}, &ir);
    ASSERT_TRUE(ck.ok()) << in << ": " << ck.status().ToString();
    EXPECT_TRUE(ir.warnings.empty()) << in << ": " << ir.warnings[0];
    ExportReport er;
    ExportOptions eo;
    eo.report = &er;
    ASSERT_OK(WriteAnyCheckpoint(*ck, out, eo));
    EXPECT_TRUE(er.not_kept.empty()) << out << ": " << er.not_kept[0];
  }

  // The strict diff of two files, as `rckpt diff --strict A B` reads them.
  DiffReport StrictDiff(const std::string& a, const std::string& b) {
    auto ca = ReadAnyCheckpoint(a);
    auto cb = ReadAnyCheckpoint(b);
    EXPECT_TRUE(ca.ok() && cb.ok()) << a << " / " << b;
    DiffOptions o;
    o.mode = DiffMode::kStrict;
    auto r = DiffCheckpoints(*ca, *cb, o);
    EXPECT_TRUE(r.ok());
    return *r;
  }

  // Writes `ck` to `name`, which must keep everything; the export's note
  // ("" when none).
  std::string ExportNote(const Checkpoint& ck, const std::string& name) {
    ExportReport report;
    ExportOptions eo;
    eo.report = &report;
    EXPECT_OK(WriteAnyCheckpoint(ck, Path(name), eo));
    EXPECT_TRUE(report.not_kept.empty());
    EXPECT_LE(report.notes.size(), 1u);
    return report.notes.empty() ? "" : report.notes[0];
  }

  // Runs `chain` (file extensions) from `start`; the end must equal it.
  void ExpectChainKeepsEverything(const std::string& start, std::vector<std::string> chain) {
    std::string at = start, label;
    for (size_t i = 0; i < chain.size(); ++i) {
      std::string next = Path("step" + std::to_string(i) + "." + chain[i]);
      label += " -> " + chain[i];
      Convert(at, next);
      at = next;
    }
    DiffReport r = StrictDiff(start, at);
    std::string listed;
    for (const auto& d : r.differences) listed += d.kind + " " + d.name + ": " + d.detail + "\n";
    EXPECT_TRUE(r.identical) << start << label << ":\n" << listed;
    EXPECT_TRUE(r.not_compared.empty());
  }

  std::string dir_;
};

TEST_F(ConvertChainTest, RckptThroughPtAndSafetensorsComesBackWhole) {
  const std::string start = Start(Everything());
  for (auto chain : std::vector<std::vector<std::string>>{
           {"pt", "rckpt"},
           {"safetensors", "rckpt"},
           {"pt", "safetensors", "rckpt"},
           {"safetensors", "pt", "rckpt"},
           {"pt", "pt", "rckpt"}}) {
    ExpectChainKeepsEverything(start, chain);
  }
}

TEST_F(ConvertChainTest, RckptWithoutATreeComesBackWithoutOne) {
  Checkpoint ck = Everything();
  ck.Tree() = Value();
  const std::string start = Start(ck);
  ExpectChainKeepsEverything(start, {"pt", "rckpt"});
  ExpectChainKeepsEverything(start, {"safetensors", "rckpt"});
}

TEST_F(ConvertChainTest, PtFilesWrittenByTorchComeBackWhole) {
  for (const char* f : {"dtypes.pt", "module_state_dict.pth", "optimizer_adam.pt", "nested.pt",
                        "views.pt", "tied.pt", "zero_d_empty.pt", "rng_states.pt",
                        "cuda_tagged.pt"}) {
    const std::string start = Fixture("pytorch/") + f;
    ExpectChainKeepsEverything(start, {"rckpt", "pt"});
    ExpectChainKeepsEverything(start, {"pt"});
    if (std::string(f) != "dtypes.pt") {  // c128: safetensors has no such dtype
      ExpectChainKeepsEverything(start, {"safetensors", "pt"});
      ExpectChainKeepsEverything(start, {"rckpt", "safetensors", "rckpt", "pt"});
    }
  }
}

TEST_F(ConvertChainTest, SafetensorsFilesComeBackWhole) {
  for (const char* f : {"model.safetensors", "dtypes.safetensors"}) {
    const std::string start = Fixture("safetensors/") + f;
    ExpectChainKeepsEverything(start, {"rckpt", "safetensors"});
    ExpectChainKeepsEverything(start, {"pt", "safetensors"});
    ExpectChainKeepsEverything(start, {"pt", "rckpt", "safetensors"});
  }
}

// The issue this guards: a .rckpt with Python's captured RNG records went
// through .pt and came back with only python.random as an RNG record.
TEST_F(ConvertChainTest, RngRecordsOfEveryKindSurvivePt) {
  const std::string start = Start(Everything());
  Convert(start, Path("back.pt"));
  Convert(Path("back.pt"), Path("rt.rckpt"));
  ASSERT_OK_AND_ASSIGN(Checkpoint a, ReadAnyCheckpoint(start));
  ASSERT_OK_AND_ASSIGN(Checkpoint b, ReadAnyCheckpoint(Path("rt.rckpt")));
  ASSERT_EQ(b.rng().size(), a.rng().size());
  for (const RngRecord& r : a.rng()) {
    const RngRecord* back = b.FindRng(r.name);
    ASSERT_NE(back, nullptr) << r.name;
    EXPECT_EQ(back->kind, r.kind) << r.name;
    EXPECT_EQ(back->origin, r.origin) << r.name;
    EXPECT_EQ(back->bytes, r.bytes) << r.name;
  }
  EXPECT_EQ(b.FindTensor("numpy.global"), nullptr);
  EXPECT_EQ(b.FindTensor("torch.cpu"), nullptr);
}

// torch.save of the exported file's content, rewritten by another tool:
// the record then describes a pickle that is not there and is ignored.
// The archive `bytes` with record `name` (below the top folder) holding
// `content` instead.
std::vector<std::byte> ReplaceRecord(const std::vector<std::byte>& bytes, const std::string& name,
                                     const std::string& content) {
  auto dir = convert::ReadZipDirectoryFromBytes(bytes);
  EXPECT_TRUE(dir.ok());
  auto record = [&](const convert::ZipEntry& e) {
    return testing::ToString(std::span(bytes).subspan(e.data_offset, e.size));
  };
  std::string pickle;
  std::vector<std::pair<std::string, std::string>> records;
  for (const auto& e : dir->entries) {
    std::string rel = e.name.substr(std::string("archive/").size());
    std::string data = rel == name ? content : record(e);
    if (rel == "data.pkl") {
      pickle = data;
    } else {
      records.emplace_back(rel, data);
    }
  }
  return testing::ToBytes(testing::MakeArchive(pickle, records));
}

std::string LayoutOf(const std::vector<std::byte>& bytes) {
  auto dir = convert::ReadZipDirectoryFromBytes(bytes);
  const convert::ZipEntry* e = dir->Find("archive/" + std::string(convert::kPyTorchLayoutRecord));
  return testing::ToString(std::span(bytes).subspan(e->data_offset, e->size));
}

TEST_F(ConvertChainTest, PtWhosePickleWasRewrittenImportsAsAPlainTorchFile) {
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("extras", "w", Make(DType::kF32, {2}, 1), Role::kHost));
  ck.Tree() = Value::Map({{Value("w"), Ref("w")}});
  ck.Metadata()["k"] = "v";
  ASSERT_OK(WriteAnyCheckpoint(ck, Path("a.pt")));
  ck.Tree() = Value::Map({{Value("w"), Ref("w")}, {Value("epoch"), Value(1)}});
  ASSERT_OK(WriteAnyCheckpoint(ck, Path("b.pt")));
  // b.pt with a.pt's record: it describes another pickle.
  auto bytes = ReplaceRecord(testing::ReadBytes(Path("b.pt")),
                             std::string(convert::kPyTorchLayoutRecord),
                             LayoutOf(testing::ReadBytes(Path("a.pt"))));
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ImportPyTorchFromBytes(bytes, {}, &report));
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("describes another data.pkl"), std::string::npos)
      << report.warnings[0];
  // As torch.save wrote it: the section from the key, no metadata.
  EXPECT_EQ(back.FindTensor("w")->section, "w");
  EXPECT_TRUE(back.Metadata().empty());
  EXPECT_FALSE(report.recorded.sections);
}

// A record that describes this pickle but does not fit it is a damaged
// file; one that cannot be read is ignored, as a stale one.
TEST_F(ConvertChainTest, PtWithADamagedRecordIsCorruptionOrImportsPlain) {
  ASSERT_OK(WriteAnyCheckpoint(Everything(), Path("e.pt")));
  const auto bytes = testing::ReadBytes(Path("e.pt"));
  const std::string record(convert::kPyTorchLayoutRecord);
  ASSERT_OK_AND_ASSIGN(const convert::PyTorchLayout good,
                       convert::DecodePyTorchLayout(LayoutOf(bytes)));
  auto import = [&](const convert::PyTorchLayout& l) {
    return ImportPyTorchFromBytes(ReplaceRecord(bytes, record, EncodePyTorchLayout(l)));
  };
  ASSERT_OK(import(good).status());
  // A tensor whose storage the pickle does not use.
  convert::PyTorchLayout l = good;
  l.tensors[0].storage_key = "99";
  EXPECT_THAT(import(l).status(),
              StatusIs(StatusCode::kCorruption,
                       "names '" + good.tensors[0].name + "', which the pickle does not hold"));
  // One storage, or one RNG path, named twice: the second entry would never
  // be met in the pickle.
  l = good;
  l.tensors.push_back(l.tensors[0]);
  l.tensors.back().name += ".twin";
  EXPECT_THAT(import(l).status(), StatusIs(StatusCode::kCorruption, "twice"));
  for (size_t i = 0; i < good.rng.size(); ++i) {
    l = good;
    l.rng.push_back(l.rng[i]);
    l.rng.back().name += ".twin";
    EXPECT_THAT(import(l).status(), StatusIs(StatusCode::kCorruption, "twice")) << i;
  }
  // An RNG record over a float tensor's storage.
  l = good;
  l.rng[1].storage_key = l.tensors[0].storage_key;
  l.tensors.erase(l.tensors.begin());
  EXPECT_THAT(import(l).status(), StatusIs(StatusCode::kCorruption, "not uint8 bytes"));
  // A section of two roles; a torch_cpu record that is no CPU generator state.
  l = good;
  l.sections.push_back({l.sections[0].name, Role::kData});
  EXPECT_THAT(import(l).status(), StatusIs(StatusCode::kCorruption, "already exists"));
  l = good;
  for (auto& r : l.rng) {
    if (r.kind == RngKind::kNumpy) r.kind = RngKind::kTorchCpu;
  }
  EXPECT_THAT(import(l).status(), StatusIs(StatusCode::kCorruption, "numpy.global"));
  // Unreadable, or from a newer rckpt: ignored with a warning.
  std::string newer = EncodePyTorchLayout(good);
  newer.replace(newer.find("\"rckpt_layout\":1"), 16, "\"rckpt_layout\":2");
  for (const std::string& text : {std::string("[not json"), newer}) {
    ImportReport plain;
    ASSERT_OK_AND_ASSIGN(Checkpoint back,
                         ImportPyTorchFromBytes(ReplaceRecord(bytes, record, text), {}, &plain));
    ASSERT_FALSE(plain.warnings.empty());
    EXPECT_NE(plain.warnings.back().find("ignored"), std::string::npos) << plain.warnings.back();
    EXPECT_EQ(back.FindRng("numpy.global"), nullptr);  // a plain import: a uint8 tensor
    EXPECT_NE(back.FindTensor("numpy.global"), nullptr);
  }
}

// What a .pt cannot hold: objects torch.load(weights_only=True) cannot
// rebuild. Refused, or (drop_objects) written as None and reported.
TEST_F(ConvertChainTest, PtExportReportsEachDroppedObject) {
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("metrics", "metric_tracker.best", Make(DType::kF32, {1}, 1)));
  ck.Tree() = Value::Map(
      {{Value("metric_tracker"),
        Value::Object("mylib.Tracker",
                      Value::Map({{Value("best"), Ref("metric_tracker.best")}}))},
       {Value("history"), Value::List({Value::Object("mylib.Epoch", Value(1))})}});
  EXPECT_THAT(WriteAnyCheckpoint(ck, Path("x.pt")),
              StatusIs(StatusCode::kUnsupported, "mylib.Tracker"));
  ExportReport report;
  ExportOptions eo;
  eo.drop_objects = true;
  eo.report = &report;
  ASSERT_OK(WriteAnyCheckpoint(ck, Path("x.pt"), eo));
  ASSERT_EQ(report.not_kept.size(), 2u);
  EXPECT_NE(report.not_kept[0].find("'mylib.Tracker' at 'metric_tracker'"), std::string::npos)
      << report.not_kept[0];
  EXPECT_NE(report.not_kept[1].find("'mylib.Epoch' at 'history.0'"), std::string::npos)
      << report.not_kept[1];
  // A strict diff of the round trip finds exactly what was reported.
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ReadAnyCheckpoint(Path("x.pt")));
  DiffOptions strict;
  strict.mode = DiffMode::kStrict;
  ASSERT_OK_AND_ASSIGN(DiffReport r, DiffCheckpoints(ck, back, strict));
  ASSERT_EQ(r.count, 2u);
  EXPECT_EQ(r.differences[0].name, "metric_tracker");
  EXPECT_EQ(r.differences[1].name, "history.[0]");
}

// What a .safetensors cannot hold is refused, naming it; what only rckpt
// reads back is reported as a note.
TEST_F(ConvertChainTest, SafetensorsExportSaysWhatItCannotHoldAndWhatOnlyRckptReads) {
  Checkpoint c128;
  ASSERT_OK(c128.AddTensor("model", "z", Make(DType::kC128, {1}, 0)));
  EXPECT_THAT(WriteAnyCheckpoint(c128, Path("z.safetensors")),
              StatusIs(StatusCode::kUnsupported, "c128"));
  Checkpoint reserved;
  reserved.Metadata()["rckpt.tensors"] = "[]";
  EXPECT_THAT(WriteAnyCheckpoint(reserved, Path("r.safetensors")),
              StatusIs(StatusCode::kInvalidArgument, "reserved"));
  Checkpoint bad_utf8;
  bad_utf8.Metadata()["k"] = "\xff";
  EXPECT_THAT(WriteAnyCheckpoint(bad_utf8, Path("u.safetensors")),
              StatusIs(StatusCode::kInvalidArgument, "UTF-8"));
  EXPECT_FALSE(std::filesystem::exists(Path("z.safetensors")));

  std::string note = ExportNote(Everything(), "e.safetensors");
  for (const char* part : {"the state tree", "8 RNG records", "sections and roles",
                           "origin devices", "__metadata__"}) {
    EXPECT_NE(note.find(part), std::string::npos) << part << ": " << note;
  }
  // A plain model file has nothing only rckpt reads.
  Checkpoint plain;
  ASSERT_OK(plain.AddTensor("model", "w", Make(DType::kF32, {2}, 1)));
  plain.Tree() = Value::Map({{Value("w"), Ref("w")}});
  EXPECT_EQ(ExportNote(plain, "p.safetensors"), "");
}

TEST_F(ConvertChainTest, PtExportNotesWhatTorchLoadDoesNotShow) {
  std::string note = ExportNote(Everything(), "e.pt");
  for (const char* part : {"'numpy.global'", "'torch.cpu'", "user metadata (2 keys)",
                           ".data/rckpt.json"}) {
    EXPECT_NE(note.find(part), std::string::npos) << part << ": " << note;
  }
  EXPECT_EQ(note.find("'python.random'"), std::string::npos);  // a tuple torch shows
}

// A collective file's "rckpt.world_size" (and a DCP import's
// "rckpt.dcp.version") is metadata like any other key: it survives
// safetensors instead of failing the export.
TEST_F(ConvertChainTest, RckptMetadataKeysOutsideTheLayoutSurviveSafetensors) {
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w", Make(DType::kF32, {2}, 1)));
  ck.Tree() = Value::Map({{Value("common"), Value::Map({{Value("w"), Ref("w")}})},
                          {Value("ranks"), Value::List({Value(), Value()})}});
  ck.Metadata()["rckpt.world_size"] = "2";
  ck.Metadata()["rckpt.dcp.version"] = "1.0.0";
  const std::string start = Start(ck);
  ExpectChainKeepsEverything(start, {"safetensors", "rckpt"});
  ExpectChainKeepsEverything(start, {"pt", "safetensors", "pt", "rckpt"});
}

// The format names every front end takes come from one table.
TEST(ConvertTest, FormatNamesAreOneTable) {
  EXPECT_EQ(*ParseCheckpointFormat("rckpt"), CheckpointFormat::kRckpt);
  for (const char* pt : {"pt", "pth", "pytorch"}) {
    EXPECT_EQ(*ParseCheckpointFormat(pt), CheckpointFormat::kPyTorch) << pt;
  }
  EXPECT_EQ(*ParseCheckpointFormat("safetensors"), CheckpointFormat::kSafetensors);
  EXPECT_EQ(*ParseCheckpointFormat("dcp"), CheckpointFormat::kDcp);
  EXPECT_THAT(ParseCheckpointFormat("onnx").status(),
              StatusIs(StatusCode::kInvalidArgument,
                       "unknown format 'onnx': expected rckpt, pt, safetensors or dcp"));
}

// Convert checks the output before it reads the input, names a format by
// content or by name, rewrites recorded origins with MapLocation's syntax
// and reports what the CLI prints.
TEST_F(ConvertChainTest, ConvertChecksTheOutputFirstAndRewritesOrigins) {
  const std::string start = Start(Everything());
  ConvertOptions o;
  o.to = CheckpointFormat::kDcp;
  EXPECT_THAT(rckpt::Convert(Path("absent.pt"), Path("x"), o),
              StatusIs(StatusCode::kInvalidArgument, "does not write them"));
  o.to = CheckpointFormat::kUnknown;
  EXPECT_THAT(rckpt::Convert(Path("absent.pt"), dir_, o),
              StatusIs(StatusCode::kInvalidArgument, "is a directory: expected a file path"));
  EXPECT_THAT(rckpt::Convert(Path("absent.pt"), Path("no/x.rckpt"), o),
              StatusIs(StatusCode::kNotFound, "directory '" + Path("no") + "' does not exist"));
  EXPECT_THAT(rckpt::Convert(Path("absent.pt"), Path("x.ck"), o),
              StatusIs(StatusCode::kInvalidArgument, "no known extension"));
  EXPECT_THAT(rckpt::Convert(Path("absent.pt"), Path("x.rckpt"), o),
              StatusIs(StatusCode::kNotFound, "absent.pt"));

  o.set_device = *MapLocation::Parse("cuda:1=cuda:0,cpu=cuda", "set_device");
  o.save.codec = Codec::kZstd;
  ConvertReport report;
  ASSERT_OK(rckpt::Convert(start, Path("moved.pt"), o, &report));
  EXPECT_EQ(report.read.format, "rckpt");
  ASSERT_OK_AND_ASSIGN(Checkpoint moved, ReadAnyCheckpoint(Path("moved.pt")));
  ASSERT_OK_AND_ASSIGN(Checkpoint before, ReadAnyCheckpoint(start));
  ASSERT_EQ(moved.tensors().size(), before.tensors().size());
  std::map<std::string, Device> was;
  for (const TensorEntry& t : before.tensors()) was[t.name] = t.Origin();
  for (const TensorEntry& t : moved.tensors()) {
    ASSERT_TRUE(was.count(t.name)) << t.name;
    const Device d = was[t.name];
    // cuda:1 and cpu (to a bare "cuda", cuda:0 as an origin) become cuda:0.
    const Device want = d == Device::Cuda(1) || d == Device::Cpu() ? Device::Cuda(0) : d;
    EXPECT_EQ(t.Origin(), want) << t.name;
  }
  EXPECT_EQ(report.tensors, before.tensors().size());
  EXPECT_EQ(report.summary.rfind(start + " -> " + Path("moved.pt") + ": " +
                                     std::to_string(report.tensors) + " tensors, ",
                                 0),
            0u)
      << report.summary;
}

}  // namespace
}  // namespace rckpt
