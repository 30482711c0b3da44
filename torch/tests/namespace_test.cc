// The adapter's namespace beside libtorch's: `torch::` means libtorch in a
// program that writes `using namespace rckpt;` and in code added to namespace
// rckpt, as it does everywhere else. (This file is the test: it compiles only
// when rckpt declares nothing named `torch`.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "rckpt/torch.h"

namespace rckpt {
namespace {

// A helper a user adds inside namespace rckpt.
int64_t InFeatures(const torch::nn::Linear& linear) { return linear->options.in_features(); }

}  // namespace
}  // namespace rckpt

namespace {

using namespace rckpt;  // NOLINT: what the test is about

TEST(NamespaceTest, TorchIsLibtorchAfterUsingNamespaceRckpt) {
  torch::nn::Linear linear(3, 2);
  torch::Tensor zeros = torch::zeros({2});
  EXPECT_EQ(rckpt::InFeatures(linear), 3);
  Checkpoint ck;
  Status added = libtorch::AddModule(&ck, *linear);
  EXPECT_TRUE(added.ok()) << added.ToString();
  EXPECT_NE(ck.FindTensor("model.weight"), nullptr);
  EXPECT_TRUE(torch::equal(zeros, torch::zeros({2})));
}

}  // namespace
