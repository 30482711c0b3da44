// Import of the checkpoint files the real hippynn package writes
// (tests/data/hippynn, made by make_hippynn_fixtures.py from a tiny training
// run), checked against expected.json: what torch itself read back from the
// same files.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "convert/json.h"
#include "convert/pickle_reader.h"
#include "rckpt/checkpoint.h"
#include "rckpt/convert.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kDir = std::string(RCKPT_TEST_DATA_DIR) + "/hippynn/";
const std::string kBest = kDir + "best_checkpoint.pt";
const std::string kStructure = kDir + "experiment_structure.pt";
const std::string kBestModel = kDir + "best_model.pt";
constexpr char kMetricTracker[] = "hippynn.experiment.metric_tracker.MetricTracker";

std::string Fnv1a64(std::span<const std::byte> bytes) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (std::byte b : bytes) h = (h ^ static_cast<uint8_t>(b)) * 0x100000001B3ull;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string Hex(std::span<const std::byte> bytes) {
  std::string s;
  s.reserve(bytes.size() * 2);
  static const char kDigits[] = "0123456789abcdef";
  for (std::byte b : bytes) {
    s += kDigits[static_cast<uint8_t>(b) >> 4];
    s += kDigits[static_cast<uint8_t>(b) & 15];
  }
  return s;
}

const convert::Json& Expected() {
  static const convert::Json* json = [] {
    std::ifstream in(kDir + "expected.json");
    std::stringstream ss;
    ss << in.rdbuf();
    auto parsed = convert::ParseJson(ss.str());
    if (!parsed.ok()) {
      std::fprintf(stderr, "expected.json: %s\n", parsed.status().ToString().c_str());
      std::abort();
    }
    return new convert::Json(std::move(parsed).value());
  }();
  return *json;
}

const convert::Json& ExpectedFor(const std::string& file, const std::string& key) {
  const convert::Json* f = Expected().Find(file);
  const convert::Json* v = f ? f->Find(key) : nullptr;
  if (v == nullptr) {
    std::fprintf(stderr, "expected.json has no %s/%s\n", file.c_str(), key.c_str());
    std::abort();
  }
  return *v;
}

// (dtype, shape, checksum): what identifies a tensor's content.
using Fingerprint = std::tuple<std::string, std::string, std::string>;

Fingerprint FingerprintOf(const Tensor& t) {
  return {std::string(convert::TorchDTypeName(t.dtype())), ShapeToString(t.shape()),
          Fnv1a64(t.host_bytes())};
}

Fingerprint ExpectedFingerprint(const convert::Json& info) {
  Shape shape;
  for (const convert::Json& d : info.Find("shape")->items) shape.push_back(*d.AsInt());
  return {info.Find("dtype")->text, ShapeToString(shape), info.Find("fnv1a64")->text};
}

std::vector<std::string> Strings(const convert::Json& array) {
  std::vector<std::string> out;
  for (const convert::Json& s : array.items) out.push_back(s.text);
  return out;
}

TEST(HippynnBestCheckpoint, ImportsEveryTensorByNameWithTorchsBytes) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kBest, {}, &report));
  const convert::Json& tensors = ExpectedFor("best_checkpoint.pt", "tensors");
  ASSERT_GT(tensors.members.size(), 40u);
  EXPECT_EQ(ck.tensors().size(), tensors.members.size());
  for (const auto& [name, info] : tensors.members) {
    const TensorEntry* t = ck.FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(FingerprintOf(t->tensor), ExpectedFingerprint(info)) << name;
    EXPECT_EQ(t->Origin(), Device::Cpu()) << name;
  }
}

TEST(HippynnBestCheckpoint, AssignsSectionsAndRoles) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kBest));
  int model = 0, optimizer = 0, steps = 0, metrics = 0;
  for (const TensorEntry& t : ck.tensors()) {
    if (t.name.rfind("model.", 0) == 0) {
      ++model;
      EXPECT_EQ(t.section, "model") << t.name;
      EXPECT_EQ(t.role, Role::kModel) << t.name;
    } else if (t.name.rfind("controller.optimizer.state.", 0) == 0) {
      ++optimizer;
      EXPECT_EQ(t.section, "optimizer") << t.name;
      bool is_step = t.name.size() > 5 && t.name.substr(t.name.size() - 5) == ".step";
      if (is_step) {
        ++steps;
        EXPECT_EQ(t.role, Role::kHost) << t.name;
        EXPECT_TRUE(t.tensor.shape().empty()) << t.name;
      } else {
        EXPECT_EQ(t.role, Role::kModel) << t.name;
      }
    } else if (t.name.rfind("metric_tracker.best_model.", 0) == 0) {
      ++metrics;
      EXPECT_EQ(t.section, "metrics") << t.name;
      EXPECT_EQ(t.role, Role::kHost) << t.name;
    } else {
      ADD_FAILURE() << "unexpected tensor " << t.name;
    }
  }
  EXPECT_GT(model, 0);
  EXPECT_EQ(metrics, model);  // the tracker's best_model is a copy of the state dict
  const convert::Json& expected_steps = ExpectedFor("best_checkpoint.pt", "optimizer_steps");
  EXPECT_EQ(steps, static_cast<int>(expected_steps.members.size()));
  EXPECT_EQ(optimizer, 3 * steps);  // exp_avg, exp_avg_sq, step per parameter
  for (const auto& [param, step] : expected_steps.members) {
    const TensorEntry* t = ck.FindTensor("controller.optimizer.state." + param + ".step");
    ASSERT_NE(t, nullptr) << param;
    ASSERT_EQ(t->tensor.dtype(), DType::kF32);
    EXPECT_EQ(t->tensor.host_span<float>()[0], static_cast<float>(step.AsDouble())) << param;
  }
}

TEST(HippynnBestCheckpoint, TorchRngStateIsATorchCpuRecordWithTheSavedBytes) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kBest));
  const convert::Json& rng = *ExpectedFor("best_checkpoint.pt", "rng").Find("torch_rng_state");
  const RngRecord* r = ck.FindRng("torch_rng_state");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(ck.FindTensor("torch_rng_state"), nullptr);
  EXPECT_EQ(r->kind, RngKind::kTorchCpu);
  EXPECT_EQ(r->origin, Device::Cpu());
  EXPECT_EQ(r->bytes.size(), 5056u);
  EXPECT_EQ(static_cast<int64_t>(r->bytes.size()), *rng.Find("nbytes")->AsInt());
  EXPECT_EQ(Hex(r->bytes), rng.Find("hex")->text);
  const Value* ref = ck.Tree().Find("torch_rng_state");
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(*ref, Value::RngRef("torch_rng_state"));
}

TEST(HippynnBestCheckpoint, KeepsTheTopKeysAndControllerScalars) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kBest));
  std::vector<std::string> keys;
  for (const auto& [k, v] : ck.Tree().entries()) keys.push_back(k.as_string());
  EXPECT_EQ(keys, Strings(ExpectedFor("best_checkpoint.pt", "top_keys")));
  const Value* controller = ck.Tree().Find("controller");
  ASSERT_NE(controller, nullptr);
  ASSERT_TRUE(controller->is_map());
  const convert::Json& scalars = ExpectedFor("best_checkpoint.pt", "controller");
  ASSERT_EQ(scalars.members.size(), 9u);  // PatienceController's state vars
  for (const auto& [name, expected] : scalars.members) {
    const Value* v = controller->Find(name);
    ASSERT_NE(v, nullptr) << name;
    switch (expected.kind) {
      case convert::Json::Kind::kString: EXPECT_EQ(*v, Value(expected.text)) << name; break;
      case convert::Json::Kind::kNumber:
        if (expected.IsInteger()) {
          EXPECT_EQ(*v, Value(*expected.AsInt())) << name;
        } else {
          EXPECT_EQ(*v, Value(expected.AsDouble())) << name;
        }
        break;
      default: ADD_FAILURE() << "unexpected JSON kind for " << name;
    }
  }
  // The optimizer's state dict keeps its param_groups hyper-parameters.
  const Value* opt = controller->Find("optimizer");
  ASSERT_NE(opt, nullptr);
  const Value* groups = opt->Find("param_groups");
  ASSERT_NE(groups, nullptr);
  ASSERT_EQ(groups->size(), 1u);
  const Value* lr = groups->items()[0].Find("lr");
  ASSERT_NE(lr, nullptr);
  EXPECT_EQ(lr->kind(), ValueKind::kFloat);
  // The scheduler list holds RaiseBatchSizeOnPlateau's state dict.
  const Value* sched = controller->Find("scheduler");
  ASSERT_NE(sched, nullptr);
  ASSERT_EQ(sched->size(), 1u);
  EXPECT_NE(sched->items()[0].Find("inner"), nullptr);
}

TEST(HippynnBestCheckpoint, KeepsTheMetricTrackerAsAnInertObject) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kBest, {}, &report));
  EXPECT_EQ(report.format, "pytorch");
  EXPECT_THAT(report.inert_classes, ElementsAre(kMetricTracker));
  const Value* mt = ck.Tree().Find("metric_tracker");
  ASSERT_NE(mt, nullptr);
  ASSERT_EQ(mt->kind(), ValueKind::kObject);
  EXPECT_EQ(mt->as_string(), kMetricTracker);
  const Value* state = mt->fields().Find("state");
  ASSERT_NE(state, nullptr);
  const Value* epochs = state->Find("epoch_best_metric_values");
  ASSERT_NE(epochs, nullptr);
  EXPECT_EQ(static_cast<int64_t>(epochs->size()),
            *ExpectedFor("best_checkpoint.pt", "metric_tracker_epochs").AsInt());
  const Value* stopping = state->Find("stopping_key");
  ASSERT_NE(stopping, nullptr);
  EXPECT_EQ(*stopping, Value("Loss"));
  const Value* best = state->Find("best_model");
  ASSERT_NE(best, nullptr);
  EXPECT_NE(ck.FindTensor("metric_tracker.best_model.moddict.node0.species_map"), nullptr);
}

TEST(HippynnBestCheckpoint, StrictImportRefusesTheMetricTrackerByName) {
  ImportOptions opts;
  opts.strict = true;
  EXPECT_THAT(ImportPyTorch(kBest, opts), StatusIs(StatusCode::kUnsupported, kMetricTracker));
}

TEST(HippynnBestModel, IsAPlainStateDictInTheModelSection) {
  ImportOptions opts;
  opts.strict = true;
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kBestModel, opts, &report));
  EXPECT_TRUE(report.inert_classes.empty());
  const convert::Json& tensors = ExpectedFor("best_model.pt", "tensors");
  EXPECT_EQ(ck.tensors().size(), tensors.members.size());
  for (const auto& [name, info] : tensors.members) {
    const TensorEntry* t = ck.FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->section, "model") << name;
    EXPECT_EQ(FingerprintOf(t->tensor), ExpectedFingerprint(info)) << name;
  }
}

TEST(HippynnStructure, RecoversEveryTensorTheModulesHold) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kStructure, {}, &report));
  std::vector<Fingerprint> got, want;
  for (const TensorEntry& t : ck.tensors()) got.push_back(FingerprintOf(t.tensor));
  for (const convert::Json& info : ExpectedFor("experiment_structure.pt", "rebuilt").items) {
    want.push_back(ExpectedFingerprint(info));
  }
  ASSERT_GT(want.size(), 20u);
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  EXPECT_TRUE(ck.rng().empty());
  std::vector<std::string> keys;
  for (const auto& [k, v] : ck.Tree().entries()) keys.push_back(k.as_string());
  EXPECT_EQ(keys, Strings(ExpectedFor("experiment_structure.pt", "top_keys")));
}

TEST(HippynnStructure, ReportsThePickledClasses) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kStructure, {}, &report));
  std::vector<std::string> globals = Strings(ExpectedFor("experiment_structure.pt", "globals"));
  for (std::string& g : globals) {  // protocol 2 spells builtins as __builtin__
    if (g.rfind("__builtin__.", 0) == 0) g = "builtins." + g.substr(12);
  }
  for (const char* c : {"hippynn.graphs.graph.GraphModule",
                        "hippynn.experiment.assembly.TrainingModules",
                        "hippynn.experiment.evaluator.Evaluator",
                        "hippynn.experiment.controllers.PatienceController",
                        "hippynn.experiment.controllers.RaiseBatchSizeOnPlateau",
                        "hippynn.networks.hipnn.Hipnn", "torch.optim.adam.Adam",
                        "torch.nn.modules.linear.Linear"}) {
    EXPECT_THAT(report.inert_classes, Contains(std::string(c)));
  }
  // Every reported class is a global the pickle names, and every hippynn
  // global is reported.
  for (const std::string& c : report.inert_classes) EXPECT_THAT(globals, Contains(c));
  for (const std::string& g : globals) {
    if (g.rfind("hippynn.", 0) == 0) {
      EXPECT_THAT(report.inert_classes, Contains(g));
    }
  }
  EXPECT_TRUE(std::is_sorted(report.inert_classes.begin(), report.inert_classes.end()));
  const Value* controller = ck.Tree().Find("controller");
  ASSERT_NE(controller, nullptr);
  ASSERT_EQ(controller->kind(), ValueKind::kObject);
  EXPECT_EQ(controller->as_string(), "hippynn.experiment.controllers.PatienceController");
}

TEST(HippynnStructure, StrictImportRefusesNamingTheClasses) {
  ImportOptions opts;
  opts.strict = true;
  auto r = ImportPyTorch(kStructure, opts);
  ASSERT_THAT(r, StatusIs(StatusCode::kUnsupported, "hippynn.graphs.graph.GraphModule"));
  EXPECT_THAT(r.status().message(),
              HasSubstr("hippynn.experiment.controllers.PatienceController"));
  EXPECT_THAT(r.status().message(), HasSubstr("torch.optim.adam.Adam"));
}

void ExpectSameTensors(const Checkpoint& a, const Checkpoint& b);

TEST(HippynnStructure, ConvertsToRckptAndReadsBackEqual) {
  std::string dir = testing::NewTempDir("hippynn");
  ASSERT_OK_AND_ASSIGN(Checkpoint original, ImportPyTorch(kStructure));
  ASSERT_OK(WriteAnyCheckpoint(original, dir + "/structure.rckpt"));
  ASSERT_OK_AND_ASSIGN(Checkpoint stored, ReadAnyCheckpoint(dir + "/structure.rckpt"));
  ExpectSameTensors(original, stored);
  EXPECT_EQ(stored.Tree(), original.Tree());
}

void ExpectSameTensors(const Checkpoint& a, const Checkpoint& b) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const TensorEntry& t : a.tensors()) {
    const TensorEntry* u = b.FindTensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->tensor.dtype(), t.tensor.dtype()) << t.name;
    EXPECT_EQ(u->tensor.shape(), t.tensor.shape()) << t.name;
    EXPECT_EQ(u->Origin(), t.Origin()) << t.name;
    auto x = t.tensor.host_bytes();
    auto y = u->tensor.host_bytes();
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << t.name;
  }
  ASSERT_EQ(a.rng().size(), b.rng().size());
  for (const RngRecord& r : a.rng()) {
    const RngRecord* s = b.FindRng(r.name);
    ASSERT_NE(s, nullptr) << r.name;
    EXPECT_EQ(s->kind, r.kind) << r.name;
    EXPECT_EQ(s->bytes, r.bytes) << r.name;
  }
}

TEST(HippynnRoundTrip, PtToRckptToPtKeepsEveryTensorBitExact) {
  std::string dir = testing::NewTempDir("hippynn");
  ASSERT_OK_AND_ASSIGN(Checkpoint original, ImportPyTorch(kBest));
  ASSERT_OK(WriteAnyCheckpoint(original, dir + "/best.rckpt"));
  ASSERT_OK_AND_ASSIGN(Checkpoint stored, ReadAnyCheckpoint(dir + "/best.rckpt"));
  ExpectSameTensors(original, stored);
  EXPECT_EQ(stored.Tree(), original.Tree());

  ExportOptions drop;
  drop.drop_objects = true;
  ASSERT_OK(ExportPyTorch(stored, dir + "/best.pt", drop));
  ImportOptions strict;  // nothing but tensors and plain containers is left
  strict.strict = true;
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ImportPyTorch(dir + "/best.pt", strict, &report));
  EXPECT_TRUE(report.inert_classes.empty());
  ExpectSameTensors(original, back);
  const Value* mt = back.Tree().Find("metric_tracker");
  ASSERT_NE(mt, nullptr);
  EXPECT_TRUE(mt->is_null());
  EXPECT_EQ(*back.Tree().Find("controller"), *original.Tree().Find("controller"));
}

TEST(HippynnRoundTrip, ExportRefusesTheInertMetricTrackerWithoutDropObjects) {
  std::string dir = testing::NewTempDir("hippynn");
  ASSERT_OK_AND_ASSIGN(Checkpoint original, ImportPyTorch(kBest));
  EXPECT_THAT(ExportPyTorch(original, dir + "/best.pt"),
              StatusIs(StatusCode::kUnsupported, kMetricTracker));
}

}  // namespace
}  // namespace rckpt
