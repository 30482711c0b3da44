#include "engine/engine_test_util.h"
#include "test_runtime.h"
#include "render.h"

namespace rckpt::cli {
namespace {

std::vector<Placement> Sample() {
  return {
      {"model.w", false, "model", Role::kModel, Device::Cuda(1),
       Device::Cuda(0)},
      {"optimizer.step", false, "optimizer", Role::kHost, Device::Cpu(),
       Device::Cpu()},
      {"torch_rng_state", true, "", Role::kHost, Device::Cpu(), Device::Cpu()},
  };
}

TEST(ReportTest, PlanJsonListsEveryPlacement) {
  EXPECT_EQ(
      RenderPlanJson(Sample()),
      R"({"schema_version":1,"placements":[)"
      R"({"name":"model.w","kind":"tensor","section":"model","role":"model","origin":"cuda:1","target":"cuda:0"},)"
      R"({"name":"optimizer.step","kind":"tensor","section":"optimizer","role":"host","origin":"cpu","target":"cpu"},)"
      R"({"name":"torch_rng_state","kind":"rng","section":null,"role":"host","origin":"cpu","target":"cpu"}]})");
}

TEST(ReportTest, PlanTextHasARowPerRecordAndASummary) {
  std::string text = RenderPlanText(Sample());
  EXPECT_THAT(text, ::testing::HasSubstr("tensor model.w"));
  EXPECT_THAT(text, ::testing::HasSubstr("cuda:1   cuda:0\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("rng    torch_rng_state"));
  EXPECT_THAT(text,
              ::testing::HasSubstr(
                  "2 tensors: 1 to cpu, 1 to cuda:0; 1 RNG records to cpu"));
}

TEST(ReportTest, LoadReportRecordsWhereThingsWentAndTheStats) {
  MemFileSystem fs;
  Checkpoint saved = testing::HippynnLike(Device::Cuda(1));
  ASSERT_OK(Save("/ck.rckpt", saved, SaveOptions{.fs = &fs}));
  auto rt = NewTestRuntime({.device_count = 1});
  LoadOptions o;
  o.fs = &fs;
  o.runtime = rt.get();
  o.model_device = DeviceSpec::Auto();
  ASSERT_OK_AND_ASSIGN(LoadReport r, LoadForReport("/ck.rckpt", o));
  EXPECT_EQ(r.runtime, rt->name());
  EXPECT_EQ(r.placements.size(), saved.tensors().size() + saved.rng().size());
  EXPECT_GE(r.stats.bytes_restored, saved.TensorBytes());
  EXPECT_GT(r.stats.staging_capacity, 0u);
  EXPECT_THAT(RenderLoadText(r), ::testing::HasSubstr("with the " + std::string(rt->name()) + " runtime"));
  std::string json = RenderLoadJson(r);
  EXPECT_THAT(json,
              ::testing::HasSubstr(R"("schema_version":1,"path":"/ck.rckpt")"));
  EXPECT_THAT(
      json,
      ::testing::HasSubstr(
          R"("name":"model.layer1.weight","kind":"tensor","section":"model","role":"model","origin":"cuda:1","target":"cuda:0")"));
  EXPECT_TRUE(rt->NothingLive());
}

}  // namespace
}  // namespace rckpt::cli
