#include "convert/bundle.h"

#include <algorithm>

#include "convert_test_util.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::rckpt::testing::CpuRngState;
using ::rckpt::testing::Make;
using convert::AddBundlePart;
using convert::BundlePart;
using convert::UnbundlePart;

// A weights file's checkpoint: a flat map of tensors, one of them on cuda:1.
Checkpoint Weights() {
  Checkpoint ck;
  EXPECT_OK(ck.AddTensor("model", "embed.weight", Make(DType::kF32, {2, 3}, 1)));
  EXPECT_OK(ck.AddTensor("model", "head.bias", Make(DType::kF16, {3}, 2)));
  ck.mutable_tensors().back().origin = Device::Cuda(1);
  ck.Tree() = Value::Map({{Value("embed.weight"), Value::TensorRef("embed.weight")},
                          {Value("head.bias"), Value::TensorRef("head.bias")}});
  ck.Metadata()["format"] = "pt";
  return ck;
}

// An RNG file's checkpoint: records the tree refers to, one unreferenced
// tensor.
Checkpoint Rng() {
  Checkpoint ck;
  EXPECT_OK(ck.AddRng("cpu", RngKind::kTorchCpu, CpuRngState()));
  EXPECT_OK(ck.AddTensor("data", "extra", Make(DType::kU8, {4}, 3)));
  ck.Tree() = Value::Map({{Value("cpu"), Value::RngRef("cpu")},
                          {Value("nested"), Value::List({Value::RngRef("cpu"), Value(1)})}});
  return ck;
}

Checkpoint Bundle() {
  Checkpoint b;
  EXPECT_OK(AddBundlePart(&b, {"model", "model", Weights()}));
  EXPECT_OK(AddBundlePart(&b, {"rng_state", "rng_state", Rng()}));
  return b;
}

TEST(BundleTest, KeepsEachPartUnderItsKey) {
  Checkpoint b = Bundle();
  EXPECT_EQ(*b.Tree().Find("model")->Find("head.bias"), Value::TensorRef("model.head.bias"));
  EXPECT_EQ(b.Tree().Find("rng_state")->Find("nested")->items()[0],
            Value::RngRef("rng_state.cpu"));
  const TensorEntry* bias = b.FindTensor("model.head.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->section, "model");
  EXPECT_EQ(bias->origin, Device::Cuda(1));
  EXPECT_EQ(b.FindTensor("rng_state.extra")->section, "rng_state");
  ASSERT_NE(b.FindRng("rng_state.cpu"), nullptr);
  EXPECT_EQ(b.Metadata().at("rckpt.bundle.model"), "{\"format\":\"pt\"}");
  EXPECT_EQ(b.Metadata().count("rckpt.bundle.rng_state"), 0u);
}

TEST(BundleTest, GivesEachPartBackAsItWas) {
  Checkpoint b = Bundle();
  for (const auto& [key, original] :
       {std::pair{"model", Weights()}, std::pair{"rng_state", Rng()}}) {
    ASSERT_OK_AND_ASSIGN(Checkpoint part, UnbundlePart(b, key));
    EXPECT_EQ(part.Tree(), original.Tree()) << key;
    EXPECT_EQ(part.Metadata(), original.Metadata()) << key;
    ASSERT_EQ(part.tensors().size(), original.tensors().size()) << key;
    for (size_t i = 0; i < part.tensors().size(); ++i) {
      EXPECT_EQ(part.tensors()[i].name, original.tensors()[i].name);
      EXPECT_EQ(part.tensors()[i].origin, original.tensors()[i].origin);
      const auto a = part.tensors()[i].tensor.host_bytes();
      const auto b = original.tensors()[i].tensor.host_bytes();
      EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
    }
    ASSERT_EQ(part.rng().size(), original.rng().size()) << key;
    for (size_t i = 0; i < part.rng().size(); ++i) {
      EXPECT_EQ(part.rng()[i].name, original.rng()[i].name);
      EXPECT_EQ(part.rng()[i].bytes, original.rng()[i].bytes);
    }
  }
}

TEST(BundleTest, RefusesBadKeysLeavingTheBundleAsItWas) {
  Checkpoint b = Bundle();
  const size_t tensors = b.tensors().size();
  EXPECT_THAT(AddBundlePart(&b, {"a.b", "x", Weights()}),
              StatusIs(StatusCode::kInvalidArgument, "hold no '.'"));
  EXPECT_THAT(AddBundlePart(&b, {"", "x", Weights()}),
              StatusIs(StatusCode::kInvalidArgument, "non-empty"));
  EXPECT_THAT(AddBundlePart(&b, {"model", "x", Weights()}),
              StatusIs(StatusCode::kInvalidArgument, "two parts under the key 'model'"));
  EXPECT_EQ(b.tensors().size(), tensors);
  Checkpoint not_map;
  not_map.Tree() = Value::List({});
  EXPECT_THAT(AddBundlePart(&not_map, {"k", "s", Weights()}),
              StatusIs(StatusCode::kInvalidArgument, "not a map of parts"));
}

TEST(BundleTest, UnbundleNamesWhatIsMissingOrDamaged) {
  Checkpoint b = Bundle();
  EXPECT_THAT(UnbundlePart(b, "optimizer"), StatusIs(StatusCode::kNotFound, "'optimizer'"));
  b.Metadata()["rckpt.bundle.model"] = "[1]";
  EXPECT_THAT(UnbundlePart(b, "model"),
              StatusIs(StatusCode::kCorruption, "'rckpt.bundle.model' is not a JSON object"));
}

}  // namespace
}  // namespace rckpt
