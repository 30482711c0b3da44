// rckpt::libtorch on the CPU: modules, tensor dicts, optimizers and RNG states
// in and out of checkpoints, and the errors of each. (The CUDA half is
// tests/gpu/libtorch/libtorch_gpu_test.cc; Python's side is test_interop.py.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "rckpt/inspect.h"
#include "rckpt/io.h"
#include "rckpt/torch.h"

namespace {

using ::testing::HasSubstr;
using rckpt::Status;
using rckpt::StatusCode;
namespace rt = rckpt::libtorch;

#define ASSERT_OK(expr)                              \
  do {                                               \
    const ::rckpt::Status s_ = (expr);               \
    ASSERT_TRUE(s_.ok()) << s_.ToString();           \
  } while (0)

// The code and a piece of the message of a failed call.
void ExpectError(const Status& s, StatusCode code, const std::string& part) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(part));
}

std::string TempPath(const std::string& name) {
  static const std::filesystem::path dir = [] {
    auto p = std::filesystem::path(::testing::TempDir()) /
             ("rckpt-torch-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return (dir / name).string();
}

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t hidden = 6)
      : fc1(register_module("fc1", torch::nn::Linear(3, hidden))),
        bn(register_module("bn", torch::nn::BatchNorm1d(hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(bn(fc1(x)))); }
  torch::nn::Linear fc1;
  torch::nn::BatchNorm1d bn;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Net);

// A net whose every parameter and buffer is filled from `seed`.
Net FilledNet(int seed, int64_t hidden = 6) {
  Net net(hidden);
  torch::NoGradGuard no_grad;
  at::Generator generator = at::detail::createCPUGenerator(seed);
  for (auto& item : net->named_parameters()) {
    item.value().copy_(torch::randn(item.value().sizes(), generator));
  }
  net->bn->running_mean.copy_(torch::full({hidden}, seed + 0.5));
  net->bn->num_batches_tracked.fill_(seed + 7);
  return net;
}

void ExpectSameState(torch::nn::Module& a, torch::nn::Module& b) {
  auto sa = a.named_parameters();
  auto sb = b.named_parameters();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].key(), sb[i].key());
    EXPECT_TRUE(torch::equal(sa[i].value(), sb[i].value())) << sa[i].key();
  }
  auto ba = a.named_buffers();
  auto bb = b.named_buffers();
  ASSERT_EQ(ba.size(), bb.size());
  for (size_t i = 0; i < ba.size(); ++i) {
    EXPECT_TRUE(torch::equal(ba[i].value(), bb[i].value())) << ba[i].key();
  }
}

// --- Modules ---------------------------------------------------------------

TEST(ModuleTest, SaveModuleThenLoadIntoRestoresParametersAndBuffers) {
  const std::string path = TempPath("module.rckpt");
  Net saved = FilledNet(1);
  ASSERT_OK(rt::SaveModule(path, *saved));
  Net restored = FilledNet(100);
  ASSERT_OK(rt::LoadInto(path, *restored));
  ExpectSameState(*saved, *restored);
  EXPECT_EQ(restored->bn->num_batches_tracked.item<int64_t>(), 8);
}

TEST(ModuleTest, SaveModuleWritesPythonsLayout) {
  const std::string path = TempPath("layout.rckpt");
  ASSERT_OK(rt::SaveModule(path, *FilledNet(1)));
  rckpt::Result<rckpt::InspectReport> report = rckpt::InspectRckpt(path);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::vector<std::string> names;
  for (const auto& t : report->tensors) {
    EXPECT_EQ(t.section, "model");
    names.push_back(t.name);
  }
  // state_dict() order: each module's parameters, then its buffers.
  EXPECT_THAT(names, ::testing::ElementsAre(
                         "model.fc1.weight", "model.fc1.bias", "model.bn.weight", "model.bn.bias",
                         "model.bn.running_mean", "model.bn.running_var",
                         "model.bn.num_batches_tracked", "model.fc2.weight", "model.fc2.bias"));
  const rckpt::Value* model = report->tree.Find("model");
  ASSERT_NE(model, nullptr);
  ASSERT_NE(model->Find("bn.running_var"), nullptr);
  EXPECT_EQ(model->Find("bn.running_var")->kind(), rckpt::ValueKind::kTensorRef);
  EXPECT_EQ(model->Find("bn.running_var")->as_string(), "model.bn.running_var");
  // No root marker: rckpt.load(path)["model"] is the state_dict in Python.
  EXPECT_EQ(report->metadata.count("rckpt.python.root"), 0u);
}

// A parameter registered under two names: "shared" and "a.weight".
struct TiedImpl : torch::nn::Module {
  TiedImpl() : a(register_module("a", torch::nn::Linear(4, 4))) {
    shared = register_parameter("shared", a->weight);
  }
  torch::nn::Linear a;
  torch::Tensor shared;
};
TORCH_MODULE(Tied);

TEST(ModuleTest, TiedWeightsAreStoredOnceAndRestoredToBoth) {
  const std::string path = TempPath("tied.rckpt");
  Tied saved;
  ASSERT_OK(rt::SaveModule(path, *saved));
  rckpt::Result<rckpt::InspectReport> report = rckpt::InspectRckpt(path);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->tensors.size(), 2u);  // shared, a.bias
  EXPECT_EQ(report->tree.Find("model")->Find("a.weight")->as_string(), "model.shared");
  Tied restored;
  ASSERT_OK(rt::LoadInto(path, *restored));
  EXPECT_TRUE(torch::equal(restored->a->weight, saved->a->weight));
  EXPECT_TRUE(restored->shared.is_same(restored->a->weight));
  EXPECT_TRUE(torch::equal(restored->a->bias, saved->a->bias));
}

TEST(ModuleTest, LoadIntoNamesEveryMismatchAndChangesNothing) {
  const std::string path = TempPath("mismatch.rckpt");
  struct OtherImpl : torch::nn::Module {
    OtherImpl() {
      register_module("fc1", torch::nn::Linear(3, 5));        // shape differs
      register_module("extra", torch::nn::Linear(1, 1));      // not in the module below
    }
  };
  OtherImpl other;
  ASSERT_OK(rt::SaveModule(path, other));
  Net net = FilledNet(3);
  Net before = FilledNet(3);
  Status s = rt::LoadInto(path, *net);
  ExpectError(s, StatusCode::kInvalidArgument, "section 'model' does not match the module");
  EXPECT_THAT(s.message(), HasSubstr("missing keys (in the module, not in the file): bn.weight"));
  EXPECT_THAT(s.message(), HasSubstr("unexpected keys (in the file, not in the module): "
                                     "extra.weight, extra.bias"));
  EXPECT_THAT(s.message(), HasSubstr("fc1.weight ('model.fc1.weight'): shape [5, 3] in the "
                                     "file, [6, 3] in the module"));
  ExpectSameState(*net, *before);
}

TEST(ModuleTest, LoadIntoNotStrictReportsIncompatibleKeys) {
  const std::string path = TempPath("partial.rckpt");
  struct PartImpl : torch::nn::Module {
    PartImpl() {
      fc2 = register_module("fc2", torch::nn::Linear(6, 2));
      register_buffer("step", torch::tensor(int64_t{5}));
    }
    torch::nn::Linear fc2{nullptr};
  };
  PartImpl part;
  {
    torch::NoGradGuard no_grad;
    part.fc2->weight.fill_(0.25);
  }
  ASSERT_OK(rt::SaveModule(path, part));
  Net net = FilledNet(4);
  rt::IncompatibleKeys keys;
  ASSERT_OK(rt::LoadInto(path, *net, {.strict = false}, &keys));
  EXPECT_TRUE(torch::equal(net->fc2->weight, part.fc2->weight));
  EXPECT_THAT(keys.missing_keys, ::testing::Contains("fc1.weight"));
  EXPECT_THAT(keys.missing_keys, ::testing::Not(::testing::Contains("fc2.weight")));
  EXPECT_THAT(keys.unexpected_keys, ::testing::ElementsAre("step"));
}

TEST(ModuleTest, LoadIntoANonContiguousParameter) {
  const std::string path = TempPath("noncontig.rckpt");
  Net saved = FilledNet(5);
  ASSERT_OK(rt::SaveModule(path, *saved));
  Net net = FilledNet(6);
  {
    torch::NoGradGuard no_grad;
    net->fc1->weight.set_(torch::zeros({3, 6}).t());  // [6, 3], strides (1, 6)
  }
  ASSERT_FALSE(net->fc1->weight.is_contiguous());
  ASSERT_OK(rt::LoadInto(path, *net));
  EXPECT_TRUE(torch::equal(net->fc1->weight, saved->fc1->weight));
}

TEST(ModuleTest, LoadIntoRefusesAMissingSectionAndAFileThatIsNotThere) {
  const std::string path = TempPath("tensors-only.rckpt");
  rt::TensorDict tensors;
  tensors.insert("a", torch::ones({2}));
  rckpt::Checkpoint ck;
  ASSERT_OK(rt::AddTensors(&ck, "weights", tensors));
  ASSERT_OK(rt::Save(path, ck));
  Net net;
  ExpectError(rt::LoadInto(path, *net), StatusCode::kNotFound, "no section 'model'");
  ExpectError(rt::LoadInto(TempPath("absent.rckpt"), *net), StatusCode::kNotFound,
              "absent.rckpt");
}

// A state_dict saved from a DDP-wrapped, torch.compile'd module: its keys
// are "module._orig_mod.<key>".
TEST(ModuleTest, PrefixesOfDdpAndTorchCompileAreStrippedWhenAsked) {
  const std::string path = TempPath("ddp-compiled.rckpt");
  Net saved = FilledNet(12);
  rt::TensorDict prefixed;
  for (const auto& item : saved->named_parameters()) {
    prefixed.insert("module._orig_mod." + item.key(), item.value());
  }
  for (const auto& item : saved->named_buffers()) {
    prefixed.insert("module._orig_mod." + item.key(), item.value());
  }
  rckpt::Checkpoint ck;
  ASSERT_OK(rt::AddTensors(&ck, "model", prefixed));
  ASSERT_OK(rt::Save(path, ck));
  Net net;
  ExpectError(rt::LoadInto(path, *net), StatusCode::kInvalidArgument,
              "unexpected keys (in the file, not in the module): module._orig_mod.fc1.weight");
  rt::LoadIntoOptions strip;
  strip.strip_prefixes = {"module.", "_orig_mod."};
  ASSERT_OK(rt::LoadInto(path, *net, strip));
  ExpectSameState(*saved, *net);
  rckpt::Result<rt::Loaded> back = rt::Load(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  Net restored;
  ASSERT_OK(rt::RestoreModule(*back, *restored, strip));
  ExpectSameState(*saved, *restored);
}

TEST(ModuleTest, KeysThatBecomeOneOnceStrippedAreRefused) {
  const std::string path = TempPath("ddp-clash.rckpt");
  rt::TensorDict tensors;
  tensors.insert("module.w", torch::ones({2}));
  tensors.insert("w", torch::zeros({2}));
  rckpt::Checkpoint ck;
  ASSERT_OK(rt::AddTensors(&ck, "model", tensors));
  ASSERT_OK(rt::Save(path, ck));
  torch::nn::Module module;
  module.register_parameter("w", torch::empty({2}));
  rt::LoadIntoOptions strip;
  strip.strip_prefixes = {"module."};
  ExpectError(rt::LoadInto(path, module, strip), StatusCode::kInvalidArgument,
              "keys 'module.w' and 'w' are both 'w' once the prefixes are stripped");
}

TEST(ModuleTest, LoadIntoRefusesADtypeMismatch) {
  const std::string path = TempPath("f64.rckpt");
  Net saved = FilledNet(7);
  saved->to(torch::kDouble);
  ASSERT_OK(rt::SaveModule(path, *saved));
  Net net;
  ExpectError(rt::LoadInto(path, *net), StatusCode::kInvalidArgument,
              "fc1.weight ('model.fc1.weight'): dtype f64 in the file, f32 in the module");
}

TEST(ModuleTest, RestoreModuleFromALoadedCheckpoint) {
  const std::string path = TempPath("restore.rckpt");
  Net saved = FilledNet(8);
  ASSERT_OK(rt::SaveModule(path, *saved));
  rckpt::Result<rt::Loaded> ck = rt::Load(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  Net net = FilledNet(9);
  ASSERT_OK(rt::RestoreModule(*ck, *net));
  ExpectSameState(*saved, *net);
  Net small(4);
  ExpectError(rt::RestoreModule(*ck, *small), StatusCode::kInvalidArgument,
              "shape [6, 3] in the file, [4, 3] in the module");
}

TEST(ModuleTest, AModuleOnAnUnsupportedDeviceIsAnErrorNotAnException) {
  torch::nn::Module module;
  module.register_parameter("w", torch::empty({2}, torch::kMeta));
  ExpectError(rt::SaveModule(TempPath("meta.rckpt"), module), StatusCode::kUnsupported,
              "tensor 'model.w' is on meta");
  EXPECT_FALSE(std::filesystem::exists(TempPath("meta.rckpt")));
}

// --- Tensor dicts ------------------------------------------------------------

TEST(TensorDictTest, RoundTripEveryDtypeInOrder) {
  const std::string path = TempPath("dtypes.rckpt");
  rt::TensorDict tensors;
  const std::vector<at::ScalarType> types = {
      at::kDouble, at::kFloat, at::kHalf, at::kBFloat16, at::kFloat8_e4m3fn, at::kFloat8_e5m2,
      at::kChar, at::kShort, at::kInt, at::kLong, at::kByte, at::kUInt16, at::kUInt32,
      at::kUInt64, at::kBool, at::kComplexFloat, at::kComplexDouble};
  for (at::ScalarType type : types) {
    tensors.insert(std::string(c10::toString(type)),
                   torch::arange(12, torch::kDouble).reshape({3, 4}).to(type));
  }
  tensors.insert("scalar", torch::tensor(3.5));
  tensors.insert("empty", torch::zeros({0, 5}));
  tensors.insert("transposed", torch::arange(6.0).reshape({2, 3}).t());
  ASSERT_OK(rt::SaveTensors(path, tensors));
  rckpt::Result<rt::TensorDict> back = rt::LoadTensors(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->keys(), tensors.keys());
  for (const auto& item : tensors) {
    const at::Tensor& t = (*back)[item.key()];
    EXPECT_EQ(t.scalar_type(), item.value().scalar_type()) << item.key();
    EXPECT_EQ(t.sizes(), item.value().sizes()) << item.key();
    // Byte for byte: every dtype has a byte view, not every dtype an equal().
    EXPECT_TRUE(torch::equal(t.contiguous().flatten().view(torch::kByte),
                             item.value().contiguous().flatten().view(torch::kByte)))
        << item.key();
  }
}

TEST(TensorDictTest, SaveTensorsMarksTheFileAsAPythonDict) {
  const std::string path = TempPath("dict.rckpt");
  rt::TensorDict tensors;
  tensors.insert("x", torch::ones({2}));
  ASSERT_OK(rt::SaveTensors(path, tensors));
  rckpt::Result<rckpt::InspectReport> report = rckpt::InspectRckpt(path);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->metadata.at("rckpt.python.root"), "model");  // rckpt.load gives the dict
  EXPECT_EQ(report->tensors.at(0).name, "model.x");
}

TEST(TensorDictTest, UnsupportedTensorsAreNamed) {
  rt::TensorDict sparse;
  sparse.insert("s", torch::eye(3).to_sparse());
  ExpectError(rt::SaveTensors(TempPath("sparse.rckpt"), sparse), StatusCode::kUnsupported,
              "tensor 'model.s' is of layout Sparse");
  rt::TensorDict qint;
  qint.insert("q", torch::quantize_per_tensor(torch::ones({2}), 0.1, 0, torch::kQInt8));
  ExpectError(rt::SaveTensors(TempPath("q.rckpt"), qint), StatusCode::kUnsupported,
              "tensor 'model.q' is quantized");
  EXPECT_FALSE(std::filesystem::exists(TempPath("q.rckpt")));
}

TEST(TensorDictTest, LoadTensorsRefusesASectionOfOtherValues) {
  const std::string path = TempPath("mixed.rckpt");
  rckpt::Checkpoint ck;
  rt::TensorDict tensors;
  tensors.insert("w", torch::ones({2}));
  ASSERT_OK(rt::AddTensors(&ck, "model", tensors));
  ck.Tree()["model"]["epoch"] = 3;
  ASSERT_OK(rt::Save(path, ck));
  ExpectError(rt::LoadTensors(path).status(), StatusCode::kInvalidArgument,
              "section 'model' holds values that are not tensors at 'epoch'");
}

// A missing section is NotFound from every call that reads one, naming the
// sections the file has.
TEST(TensorDictTest, AMissingSectionIsNotFoundFromEveryCall) {
  const std::string path = TempPath("one-section.rckpt");
  rckpt::Checkpoint ck;
  rt::TensorDict tensors;
  tensors.insert("w", torch::ones({2}));
  ASSERT_OK(rt::AddTensors(&ck, "model", tensors));
  ASSERT_OK(rt::Save(path, ck));
  ExpectError(rt::LoadTensors(path, "weights").status(), StatusCode::kNotFound,
              "no section 'weights'");
  rckpt::Result<rt::Loaded> back = rt::Load(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectError(rt::SectionTensors(*back, "weights").status(), StatusCode::kNotFound,
              "no section 'weights'");
  torch::nn::Module module;
  rt::LoadIntoOptions options;
  options.section = "weights";
  ExpectError(rt::LoadInto(path, module, options), StatusCode::kNotFound, "no section 'weights'");
  ExpectError(rt::RestoreModule(*back, module, options), StatusCode::kNotFound,
              "no section 'weights'");
  torch::nn::Linear linear(2, 2);
  torch::optim::SGD sgd(linear->parameters(), 0.1);
  ExpectError(rt::RestoreOptimizer(*back, sgd), StatusCode::kNotFound, "no section 'optimizer'");
}

TEST(TensorDictTest, NestedDictsAreJoinedWithDots) {
  const std::string path = TempPath("nested.rckpt");
  rckpt::Checkpoint ck;
  rt::TensorDict tensors;
  tensors.insert("enc.w", torch::ones({2}));
  ASSERT_OK(rt::AddTensors(&ck, "model", tensors));
  // {"model": {"enc": {"w": ...}}}, as Python's save of nested dicts writes it.
  rckpt::Value& model = ck.Tree()["model"];
  model = rckpt::Value::Map(
      {{"enc", rckpt::Value::Map({{"w", rckpt::Value::TensorRef("model.enc.w")}})}});
  ASSERT_OK(rt::Save(path, ck));
  rckpt::Result<rt::TensorDict> back = rt::LoadTensors(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->keys(), std::vector<std::string>{"enc.w"});
}

TEST(TensorDictTest, AddingASectionTwiceIsRefusedAndChangesNothing) {
  rckpt::Checkpoint ck;
  rt::TensorDict tensors;
  tensors.insert("w", torch::ones({2}));
  ASSERT_OK(rt::AddTensors(&ck, "model", tensors));
  ExpectError(rt::AddModule(&ck, *Net()), StatusCode::kInvalidArgument,
              "the checkpoint already has section 'model'");
  EXPECT_EQ(ck.tensors().size(), 1u);
  rckpt::Checkpoint list;
  list.Tree() = rckpt::Value::List();
  ExpectError(rt::AddTensors(&list, "model", tensors), StatusCode::kInvalidArgument,
              "the checkpoint's tree is a list");
}

TEST(TensorDictTest, EmulatedDevicesComeBackAsCpuTensors) {
  const std::string path = TempPath("emulated.rckpt");
  rt::TensorDict tensors;
  tensors.insert("w", torch::arange(5.0));
  ASSERT_OK(rt::SaveTensors(path, tensors));
  std::unique_ptr<rckpt::DeviceRuntime> runtime = rckpt::NewEmulatedRuntime(2);
  rckpt::LoadOptions options;
  options.runtime = runtime.get();
  options.map_location = rckpt::MapLocation::To(rckpt::Device::Cuda(1));
  rckpt::Result<rt::Loaded> ck = rt::Load(path, options);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->checkpoint.tensors().at(0).tensor.device(), rckpt::Device::Cuda(1));
  const at::Tensor& w = ck->tensors.at("model.w");
  EXPECT_TRUE(w.device().is_cpu());
  EXPECT_TRUE(torch::equal(w, torch::arange(5.0)));
}

// --- Optimizers --------------------------------------------------------------

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(Net&)>;

void Step(Net& net, torch::optim::Optimizer& optimizer, int seed) {
  torch::manual_seed(seed);
  optimizer.zero_grad();
  torch::mse_loss(net->forward(torch::randn({8, 3})), torch::randn({8, 2})).backward();
  optimizer.step();
}

// Trains 3 steps, checkpoints the optimizer, restores it into a fresh one
// over a copy of the model and trains both 2 more steps: bit-identical.
void ExpectResumesBitIdentically(const MakeOptimizer& make, const std::string& file) {
  const std::string path = TempPath(file);
  Net net = FilledNet(10);
  std::unique_ptr<torch::optim::Optimizer> optimizer = make(net);
  for (int i = 0; i < 3; ++i) Step(net, *optimizer, i);
  rckpt::Checkpoint ck;
  ASSERT_OK(rt::AddModule(&ck, *net));
  ASSERT_OK(rt::AddOptimizer(&ck, *optimizer));
  ASSERT_OK(rt::Save(path, ck));

  Net resumed = FilledNet(11);
  std::unique_ptr<torch::optim::Optimizer> resumed_optimizer = make(resumed);
  rckpt::Result<rt::Loaded> back = rt::Load(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_OK(rt::RestoreModule(*back, *resumed));
  ASSERT_OK(rt::RestoreOptimizer(*back, *resumed_optimizer));
  for (int i = 3; i < 5; ++i) {
    Step(net, *optimizer, i);
    Step(resumed, *resumed_optimizer, i);
  }
  ExpectSameState(*net, *resumed);
}

TEST(OptimizerTest, AdamResumesBitIdentically) {
  ExpectResumesBitIdentically([](Net& n) {
    return std::make_unique<torch::optim::Adam>(n->parameters(), torch::optim::AdamOptions(0.01));
  }, "adam.rckpt");
}

TEST(OptimizerTest, AdamWithAmsgradResumesBitIdentically) {
  ExpectResumesBitIdentically([](Net& n) {
    return std::make_unique<torch::optim::Adam>(
        n->parameters(), torch::optim::AdamOptions(0.01).amsgrad(true).weight_decay(0.1));
  }, "amsgrad.rckpt");
}

TEST(OptimizerTest, AdamWResumesBitIdentically) {
  ExpectResumesBitIdentically([](Net& n) {
    return std::make_unique<torch::optim::AdamW>(n->parameters(),
                                                 torch::optim::AdamWOptions(0.01));
  }, "adamw.rckpt");
}

TEST(OptimizerTest, SgdWithMomentumResumesBitIdentically) {
  ExpectResumesBitIdentically([](Net& n) {
    return std::make_unique<torch::optim::SGD>(
        n->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
  }, "sgd.rckpt");
}

TEST(OptimizerTest, TwoGroupsAndThePythonLayout) {
  Net net = FilledNet(12);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(net->fc1->parameters(),
                      std::make_unique<torch::optim::AdamOptions>(0.5));
  groups.emplace_back(net->fc2->parameters(),
                      std::make_unique<torch::optim::AdamOptions>(0.25));
  torch::optim::Adam adam(groups);
  Step(net, adam, 0);
  rckpt::Checkpoint ck;
  ASSERT_OK(rt::AddOptimizer(&ck, adam));
  const rckpt::Value& section = *ck.Tree().Find("optimizer");
  const rckpt::Value& g1 = section.Find("param_groups")->items().at(1);
  EXPECT_EQ(g1.Find("lr")->as_float(), 0.25);
  EXPECT_EQ(g1.Find("params")->items().at(0).as_int(), 2);  // numbered across the groups
  EXPECT_EQ(g1.Find("decoupled_weight_decay")->as_bool(), false);
  EXPECT_EQ(g1.Find("betas")->kind(), rckpt::ValueKind::kTuple);
  const rckpt::TensorEntry* step = ck.FindTensor("optimizer.state.2.step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->tensor.dtype(), rckpt::DType::kF32);
  EXPECT_EQ(step->tensor.shape(), rckpt::Shape{});
  EXPECT_EQ(step->role, rckpt::Role::kHost);  // as Python's CPU step counters
  EXPECT_NE(ck.FindTensor("optimizer.state.3.exp_avg_sq"), nullptr);
}

// Adam's state after one step, saved and loaded, for a test to edit.
rt::Loaded SavedAdam(const std::string& file) {
  Net net = FilledNet(13);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
  Step(net, adam, 0);
  rckpt::Checkpoint ck;
  EXPECT_TRUE(rt::AddOptimizer(&ck, adam).ok());
  const std::string path = TempPath(file);
  EXPECT_TRUE(rt::Save(path, ck).ok());
  rckpt::Result<rt::Loaded> loaded = rt::Load(path);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  return std::move(loaded).value();
}

rckpt::Value& Group0(rt::Loaded& ck) {
  return ck.checkpoint.Tree().Find("optimizer")->Find("param_groups")->items().at(0);
}

// Restoring `ck` into a fresh Adam over Net(hidden) fails as expected and
// leaves the optimizer as it was.
void ExpectAdamRefuses(const rt::Loaded& ck, StatusCode code, const std::string& part,
                       int64_t hidden = 6) {
  Net net(hidden);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.125));
  ExpectError(rt::RestoreOptimizer(ck, adam), code, part);
  EXPECT_EQ(static_cast<torch::optim::AdamOptions&>(adam.param_groups()[0].options()).lr(), 0.125);
  EXPECT_TRUE(adam.state().empty());
}

TEST(OptimizerTest, RestoreChecksEverythingBeforeChangingTheOptimizer) {
  rt::Loaded ck = SavedAdam("checks.rckpt");
  ExpectAdamRefuses(ck, StatusCode::kInvalidArgument,
                    "optimizer.state.0['exp_avg'] has shape [6, 3] but its parameter has shape "
                    "[4, 3]", /*hidden=*/4);
  {
    rt::Loaded edited = SavedAdam("maximize.rckpt");
    Group0(edited)["maximize"] = true;
    ExpectAdamRefuses(edited, StatusCode::kInvalidArgument,
                      "optimizer.param_groups[0] has maximize=True, which torch::optim::Adam "
                      "does not implement");
  }
  {
    rt::Loaded edited = SavedAdam("decoupled.rckpt");
    Group0(edited)["decoupled_weight_decay"] = true;
    ExpectAdamRefuses(edited, StatusCode::kInvalidArgument,
                      "restore it into a torch::optim::AdamW");
  }
  {
    rt::Loaded edited = SavedAdam("lr.rckpt");
    Group0(edited)["lr"] = "fast";
    ExpectAdamRefuses(edited, StatusCode::kInvalidArgument,
                      "optimizer.param_groups[0]['lr'] is a string ('fast'), expected a number");
  }
  {
    rt::Loaded edited = SavedAdam("field.rckpt");
    (*edited.checkpoint.Tree().Find("optimizer")->Find("state")->entries().at(0).second.Find(
        "exp_avg")) = rckpt::Value(1.0);
    ExpectAdamRefuses(edited, StatusCode::kInvalidArgument,
                      "optimizer.state.0['exp_avg'] is 1.0, expected a tensor");
  }
}

TEST(OptimizerTest, RestoreRefusesOtherGroupsAndOtherOptimizers) {
  rt::Loaded ck = SavedAdam("groups.rckpt");
  Net net;
  torch::optim::Adam fc1_only(net->fc1->parameters(), torch::optim::AdamOptions(0.5));
  ExpectError(rt::RestoreOptimizer(ck, fc1_only), StatusCode::kInvalidArgument,
              "optimizer.param_groups[0] has 6 parameters, the optimizer's group 0 has 2");
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(net->fc1->parameters());
  groups.emplace_back(net->fc2->parameters());
  torch::optim::Adam two(groups, torch::optim::AdamOptions(0.5));
  ExpectError(rt::RestoreOptimizer(ck, two), StatusCode::kInvalidArgument,
              "section 'optimizer' has 1 param_groups, the optimizer 2");
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  ExpectError(rt::RestoreOptimizer(ck, sgd), StatusCode::kInvalidArgument,
              "optimizer.param_groups[0] has no 'momentum'");
  torch::optim::RMSprop rmsprop(net->parameters());
  ExpectError(rt::RestoreOptimizer(ck, rmsprop), StatusCode::kUnsupported,
              "not of a torch::optim::RMSprop");
  rckpt::Checkpoint out;
  ExpectError(rt::AddOptimizer(&out, rmsprop), StatusCode::kUnsupported, "RMSprop");
}

TEST(OptimizerTest, AFileThatDoesNotSayRestoresIntoAdamWAndANumericStep) {
  rt::Loaded ck = SavedAdam("into-adamw.rckpt");
  // Older torch kept the step as a number, not a tensor, and wrote no
  // decoupled_weight_decay: Adam's file and AdamW's look alike.
  (*ck.checkpoint.Tree().Find("optimizer")->Find("state")->entries().at(0).second.Find("step")) =
      rckpt::Value(int64_t{41});
  Group0(ck)["decoupled_weight_decay"] = rckpt::Value();
  Net net;
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(0.5));
  ASSERT_OK(rt::RestoreOptimizer(ck, adamw));
  auto& group = static_cast<torch::optim::AdamWOptions&>(adamw.param_groups()[0].options());
  EXPECT_EQ(group.lr(), 0.01);
  EXPECT_EQ(group.weight_decay(), 0.0);  // Adam's, from the file
  auto& first = static_cast<torch::optim::AdamWParamState&>(
      *adamw.state().at(net->fc1->weight.unsafeGetTensorImpl()));
  EXPECT_EQ(first.step(), 41);
  EXPECT_EQ(adamw.state().size(), 6u);
}

TEST(OptimizerTest, AdamStateIsNotRestoredIntoAdamWUnlessAsked) {
  rt::Loaded ck = SavedAdam("adam-into-adamw.rckpt");
  Net net;
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(0.5));
  ExpectError(rt::RestoreOptimizer(ck, adamw), StatusCode::kInvalidArgument,
              "optimizer.param_groups[0] has decoupled_weight_decay=False (Adam's update, what "
              "Python's Adam writes): restore it into a torch::optim::Adam, or set "
              "RestoreOptimizerOptions::accept_other_adam_variant to restore it into this "
              "torch::optim::AdamW");
  EXPECT_EQ(static_cast<torch::optim::AdamWOptions&>(adamw.param_groups()[0].options()).lr(), 0.5);
  EXPECT_TRUE(adamw.state().empty());
  ASSERT_OK(rt::RestoreOptimizer(ck, adamw, {.accept_other_adam_variant = true}));
  EXPECT_EQ(static_cast<torch::optim::AdamWOptions&>(adamw.param_groups()[0].options()).lr(), 0.01);
  EXPECT_EQ(adamw.state().size(), 6u);
}

TEST(OptimizerTest, AdamWStateIsNotRestoredIntoAdamUnlessAsked) {
  rt::Loaded ck = SavedAdam("adamw-into-adam.rckpt");
  Group0(ck)["decoupled_weight_decay"] = true;  // as Python's AdamW writes it
  ExpectAdamRefuses(ck, StatusCode::kInvalidArgument,
                    "optimizer.param_groups[0] has decoupled_weight_decay=True (AdamW's update, "
                    "what Python's AdamW writes): restore it into a torch::optim::AdamW, or set "
                    "RestoreOptimizerOptions::accept_other_adam_variant");
  Net net;
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.5));
  ASSERT_OK(rt::RestoreOptimizer(ck, adam, {.section = "optimizer",
                                            .accept_other_adam_variant = true}));
  EXPECT_EQ(adam.state().size(), 6u);
}

TEST(OptimizerTest, TwoOptimizersRestoredFromOneLoadShareNothing) {
  rt::Loaded ck = SavedAdam("two.rckpt");  // host tensors in the file's mapping
  const at::Tensor saved = ck.tensors.at("optimizer.state.0.exp_avg").clone();
  Net net = FilledNet(14);
  torch::optim::Adam first(net->parameters(), torch::optim::AdamOptions(0.01));
  torch::optim::Adam second(net->parameters(), torch::optim::AdamOptions(0.01));
  ASSERT_OK(rt::RestoreOptimizer(ck, first));
  ASSERT_OK(rt::RestoreOptimizer(ck, second));
  Step(net, first, 1);
  auto* key = net->fc1->weight.unsafeGetTensorImpl();
  auto exp_avg = [&](torch::optim::Adam& adam) {
    return static_cast<torch::optim::AdamParamState&>(*adam.state().at(key)).exp_avg();
  };
  EXPECT_FALSE(torch::equal(exp_avg(first), saved));  // it stepped
  EXPECT_TRUE(torch::equal(exp_avg(second), saved));
  EXPECT_TRUE(torch::equal(ck.tensors.at("optimizer.state.0.exp_avg"), saved));
}

TEST(OptimizerTest, RestoreCopiesIntoTheOptimizersOwnStateTensors) {
  rt::Loaded ck = SavedAdam("own.rckpt");
  Net net = FilledNet(15);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
  Step(net, adam, 3);
  Step(net, adam, 4);
  auto* key = net->fc1->weight.unsafeGetTensorImpl();
  const at::Tensor own = static_cast<torch::optim::AdamParamState&>(*adam.state().at(key)).exp_avg();
  ASSERT_OK(rt::RestoreOptimizer(ck, adam));
  auto& state = static_cast<torch::optim::AdamParamState&>(*adam.state().at(key));
  EXPECT_TRUE(state.exp_avg().is_same(own));
  EXPECT_TRUE(torch::equal(own, ck.tensors.at("optimizer.state.0.exp_avg")));
  EXPECT_EQ(state.step(), 1);
}

TEST(OptimizerTest, SgdMomentumBuffersAreCopiedIntoTheOptimizersOwn) {
  const std::string path = TempPath("sgd-own.rckpt");
  Net net = FilledNet(16);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  Step(net, sgd, 0);
  rckpt::Checkpoint ck;
  ASSERT_OK(rt::AddOptimizer(&ck, sgd));
  ASSERT_OK(rt::Save(path, ck));
  rckpt::Result<rt::Loaded> back = rt::Load(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  auto* key = net->fc1->weight.unsafeGetTensorImpl();
  auto buffer = [&] {
    return static_cast<torch::optim::SGDParamState&>(*sgd.state().at(key)).momentum_buffer();
  };
  const at::Tensor own = buffer();
  const at::Tensor saved = own.clone();
  Step(net, sgd, 1);
  ASSERT_OK(rt::RestoreOptimizer(*back, sgd));
  EXPECT_TRUE(buffer().is_same(own));
  EXPECT_TRUE(torch::equal(own, saved));
  Step(net, sgd, 2);
  EXPECT_TRUE(torch::equal(back->tensors.at("optimizer.state.0.momentum_buffer"), saved));
}

// --- LR schedulers and archives ------------------------------------------

// Saves `ck` and loads it back with torch's devices.
rt::Loaded SavedAndLoaded(const rckpt::Checkpoint& ck, const std::string& name) {
  const std::string path = TempPath(name);
  EXPECT_TRUE(rt::Save(path, ck).ok());
  rckpt::Result<rt::Loaded> back = rt::Load(path);
  EXPECT_TRUE(back.ok()) << back.status().ToString();
  return back.ok() ? std::move(back).value() : rt::Loaded{};
}

double Lr(const torch::optim::Optimizer& optimizer) {
  return optimizer.param_groups().at(0).options().get_lr();
}

TEST(SchedulerTest, StepLrResumesItsSchedule) {
  torch::nn::Linear net(2, 2);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(1.0));
  torch::optim::StepLR scheduler(sgd, /*step_size=*/3, /*gamma=*/0.5);
  for (int i = 0; i < 4; ++i) scheduler.step();  // lr 0.5 after the 3rd
  rckpt::Checkpoint ck;
  ASSERT_OK(rt::AddOptimizer(&ck, sgd));
  ASSERT_OK(rt::AddLRScheduler(&ck, scheduler));
  const rckpt::Value* state = ck.Tree().Find("lr_scheduler");
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->Find("last_epoch")->as_int(), 4);  // Python's keys and counts
  EXPECT_EQ(state->Find("_step_count")->as_int(), 5);
  rt::Loaded back = SavedAndLoaded(ck, "step-lr.rckpt");

  torch::nn::Linear fresh(2, 2);
  torch::optim::SGD resumed(fresh->parameters(), torch::optim::SGDOptions(1.0));
  torch::optim::StepLR resumed_scheduler(resumed, 3, 0.5);
  ASSERT_OK(rt::RestoreOptimizer(back, resumed));
  ASSERT_OK(rt::RestoreLRScheduler(back, resumed_scheduler));
  for (int i = 0; i < 7; ++i) {
    scheduler.step();
    resumed_scheduler.step();
    EXPECT_EQ(Lr(resumed), Lr(sgd)) << "step " << i + 5;
  }
  EXPECT_EQ(Lr(sgd), 0.125);
  ExpectError(rt::RestoreLRScheduler(back, resumed_scheduler, "sched"), StatusCode::kNotFound,
              "no section 'sched'");
  ExpectError(rt::RestoreLRScheduler(back, resumed_scheduler, "optimizer"),
              StatusCode::kInvalidArgument, "is not an LR scheduler's state");
}

// A sampler's position through its own save/load, inside the checkpoint.
TEST(ArchiveTest, ARandomSamplerResumesMidEpoch) {
  torch::manual_seed(3);
  torch::data::samplers::RandomSampler sampler(100);
  sampler.reset();
  (void)sampler.next(30);
  torch::serialize::OutputArchive out;
  sampler.save(out);
  rckpt::Checkpoint ck;
  ASSERT_OK(rt::AddArchive(&ck, "sampler", out));
  rt::Loaded back = SavedAndLoaded(ck, "sampler.rckpt");
  torch::data::samplers::RandomSampler resumed(100);
  torch::serialize::InputArchive in;
  ASSERT_OK(rt::ReadArchive(back, "sampler", &in));
  resumed.load(in);
  EXPECT_EQ(resumed.index(), 30u);
  EXPECT_EQ(resumed.next(70).value(), sampler.next(70).value());
  ExpectError(rt::ReadArchive(back, "absent", &in), StatusCode::kNotFound, "no section 'absent'");
}

// An optimizer this adapter has no Python layout for round-trips in C++
// through libtorch's own serialization, in the same file.
TEST(ArchiveTest, RmspropAndAdagradRoundTripThroughAnArchive) {
  auto train = [](torch::nn::Linear& net, torch::optim::Optimizer& optimizer, int steps) {
    for (int i = 0; i < steps; ++i) {
      auto closure = [&] {
        optimizer.zero_grad();
        at::Tensor loss = net->forward(torch::ones({4, 3})).pow(2).sum();
        loss.backward();
        return loss;
      };
      optimizer.step(closure);
    }
  };
  auto check = [&](auto make) {
    torch::manual_seed(1);
    torch::nn::Linear net(3, 2);
    auto optimizer = make(net);
    train(net, *optimizer, 3);
    torch::serialize::OutputArchive out;
    optimizer->save(out);
    rckpt::Checkpoint ck;
    ASSERT_OK(rt::AddModule(&ck, *net));
    ASSERT_OK(rt::AddArchive(&ck, "optimizer", out));
    rt::Loaded back = SavedAndLoaded(ck, "archived-optimizer.rckpt");
    torch::nn::Linear resumed(3, 2);
    auto resumed_optimizer = make(resumed);
    ASSERT_OK(rt::RestoreModule(back, *resumed));
    torch::serialize::InputArchive in;
    ASSERT_OK(rt::ReadArchive(back, "optimizer", &in));
    resumed_optimizer->load(in);
    train(net, *optimizer, 2);
    train(resumed, *resumed_optimizer, 2);
    EXPECT_TRUE(torch::equal(net->weight, resumed->weight));
    EXPECT_TRUE(torch::equal(net->bias, resumed->bias));
  };
  check([](torch::nn::Linear& n) {
    return std::make_unique<torch::optim::Adagrad>(n->parameters(),
                                                   torch::optim::AdagradOptions(0.1));
  });
  check([](torch::nn::Linear& n) {
    return std::make_unique<torch::optim::RMSprop>(
        n->parameters(), torch::optim::RMSpropOptions(0.01).momentum(0.9).centered(true));
  });
}

// --- RNG -------------------------------------------------------------------

TEST(RngTest, CaptureAndRestoreTheDefaultAndNamedGenerators) {
  rckpt::Checkpoint ck;
  torch::manual_seed(123);
  at::Generator named = at::detail::createCPUGenerator(77);
  rt::GeneratorMap generators{{"data", named}};
  ASSERT_OK(rt::CaptureRng(&ck, generators));
  const rckpt::RngRecord* cpu = ck.FindRng("torch.cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->kind, rckpt::RngKind::kTorchCpu);
  EXPECT_EQ(cpu->bytes.size(), 5056u);
  ASSERT_NE(ck.FindRng("torch.data"), nullptr);
  const at::Tensor expected = torch::randn({4});
  const at::Tensor expected_named = torch::randn({4}, named);
  ASSERT_OK(ck.AddRng("python.random", rckpt::RngKind::kOpaque, std::vector<std::byte>(8)));

  torch::randn({100});
  torch::randn({100}, named);
  rckpt::Result<rt::RngRestoreReport> report = rt::RestoreRng(ck, generators);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(torch::equal(torch::randn({4}), expected));
  EXPECT_TRUE(torch::equal(torch::randn({4}, named), expected_named));
  EXPECT_THAT(report->restored, ::testing::ElementsAre("torch.cpu", "torch.data"));
  EXPECT_THAT(report->skipped, ::testing::ElementsAre("python.random"));
  // Without the named generator its record is skipped.
  report = rt::RestoreRng(ck);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_THAT(report->skipped, ::testing::ElementsAre("torch.data", "python.random"));
}

TEST(RngTest, ADamagedRecordRestoresNothing) {
  rckpt::Checkpoint ck;
  at::Generator named = at::detail::createCPUGenerator(5);
  ASSERT_OK(rt::CaptureRng(&ck, {{"data", named}}));
  // Make the named record a CUDA-sized state: it cannot go into a CPU generator.
  for (rckpt::RngRecord& r : ck.mutable_rng()) {
    if (r.name == "torch.data") {
      r.kind = rckpt::RngKind::kTorchCuda;
      r.bytes.resize(16);
    }
  }
  torch::manual_seed(9);
  const at::Tensor before = torch::randn({3});
  torch::manual_seed(9);
  ExpectError(rt::RestoreRng(ck, {{"data", named}}).status(), StatusCode::kInvalidArgument,
              "RNG record 'torch.data' holds a torch_cuda state, but its generator is a CPU "
              "generator");
  EXPECT_TRUE(torch::equal(torch::randn({3}), before));  // torch.cpu was not restored either
}

// The names Python's restore_rng restores torch's CPU generator from: those
// a Trainer rng_state.pth and accelerate's random_states_<i>.pkl are
// imported as.
TEST(RngTest, RestoresTheCpuGeneratorFromPythonsOtherNames) {
  for (const std::string name : {"cpu", "torch_manual_seed"}) {
    rckpt::Checkpoint captured;
    torch::manual_seed(31);
    ASSERT_OK(rt::CaptureRng(&captured));
    const at::Tensor expected = torch::randn({4});
    rckpt::Checkpoint imported;
    ASSERT_OK(imported.AddRng(name, rckpt::RngKind::kTorchCpu, captured.FindRng("torch.cpu")->bytes));
    ASSERT_OK(imported.AddRng("numpy", rckpt::RngKind::kOpaque, std::vector<std::byte>(8)));
    torch::manual_seed(5);
    rckpt::Result<rt::RngRestoreReport> report = rt::RestoreRng(imported);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_TRUE(torch::equal(torch::randn({4}), expected)) << name;
    EXPECT_THAT(report->restored, ::testing::ElementsAre(name));
    EXPECT_THAT(report->skipped, ::testing::ElementsAre("numpy"));
  }
}

TEST(RngTest, CudaRecordsUnderPythonsOtherNamesAreRestoredOrSkippedByDevice) {
  const bool cuda = torch::cuda::is_available();
  rckpt::Checkpoint ck;
  const std::vector<std::byte> state(16);  // seed 0, offset 0
  for (const std::string name : {"cuda", "cuda.0", "torch_cuda_manual_seed.0"}) {
    ASSERT_OK(ck.AddRng(name, rckpt::RngKind::kTorchCuda, state, rckpt::Device::Cuda(0)));
  }
  ASSERT_OK(ck.AddRng("cuda.x", rckpt::RngKind::kTorchCuda, state, rckpt::Device::Cuda(0)));
  rckpt::Result<rt::RngRestoreReport> report = rt::RestoreRng(ck);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  if (cuda) {
    EXPECT_THAT(report->restored,
                ::testing::ElementsAre("cuda", "cuda.0", "torch_cuda_manual_seed.0"));
    EXPECT_THAT(report->skipped, ::testing::ElementsAre("cuda.x"));
  } else {  // no device 0 here: skipped, as Python skips it
    EXPECT_TRUE(report->restored.empty());
    EXPECT_THAT(report->skipped,
                ::testing::ElementsAre("cuda", "cuda.0", "torch_cuda_manual_seed.0", "cuda.x"));
  }
}

TEST(RngTest, ACheckpointWithoutTorchsGeneratorsSaysItRestoredNothing) {
  rckpt::Checkpoint ck;
  ASSERT_OK(ck.AddRng("python.random", rckpt::RngKind::kOpaque, std::vector<std::byte>(8)));
  rckpt::Result<rt::RngRestoreReport> report = rt::RestoreRng(ck);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->restored.empty());
  EXPECT_THAT(report->skipped, ::testing::ElementsAre("python.random"));
}

TEST(RngTest, CaptureRefusesNamesThatAreTaken) {
  rckpt::Checkpoint ck;
  ASSERT_OK(rt::CaptureRng(&ck));
  ExpectError(rt::CaptureRng(&ck), StatusCode::kInvalidArgument,
              "the RNG record name 'torch.cpu' is taken in the checkpoint");
  rckpt::Checkpoint fresh;
  ExpectError(rt::CaptureRng(&fresh, {{"cpu", at::detail::createCPUGenerator(1)}}),
              StatusCode::kInvalidArgument, "'torch.cpu' is the name of a default generator's");
  EXPECT_TRUE(fresh.rng().empty());
}

}  // namespace
