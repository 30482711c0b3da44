#include "rckpt/options.h"
#include "test_util.h"

namespace rckpt {
namespace {

TensorInfo From(Device origin) {
  TensorInfo info;
  info.name.push_back('w');  // not = "w": GCC 12's -Wrestrict false positive at -O3
  info.origin = origin;
  return info;
}

TEST(MapLocationTest, ParsesOneDevice) {
  ASSERT_OK_AND_ASSIGN(MapLocation m, MapLocation::Parse("cuda:2"));
  EXPECT_TRUE(m.is_set());
  EXPECT_EQ(m.Apply(From(Device::Cuda(3))), Device::Cuda(2));
  EXPECT_EQ(m.ToString(), "cuda:2");
}

TEST(MapLocationTest, BareCudaIsTheCurrentDeviceUntilALoadResolvesIt) {
  ASSERT_OK_AND_ASSIGN(MapLocation m, MapLocation::Parse("cuda"));
  EXPECT_TRUE(m.NamesCurrentCuda());
  EXPECT_EQ(m.Apply(From(Device::Cuda(3))), Device::CurrentCuda());
  EXPECT_EQ(m.ToString(), "cuda");
  ASSERT_OK_AND_ASSIGN(MapLocation resolved, m.WithCurrentCuda(Device::Cuda(3)));
  EXPECT_FALSE(resolved.NamesCurrentCuda());
  EXPECT_EQ(resolved.Apply(From(Device::Cuda(0))), Device::Cuda(3));
  ASSERT_OK_AND_ASSIGN(MapLocation tags, MapLocation::Parse("cuda=cpu,cuda:0=cuda"));
  ASSERT_OK_AND_ASSIGN(resolved, tags.WithCurrentCuda(Device::Cuda(2)));
  EXPECT_EQ(resolved.ToString(), "cuda:0=cuda:2,cuda:2=cpu");
  ASSERT_OK_AND_ASSIGN(MapLocation plain, MapLocation::Parse("cuda:1=cuda:0"));
  EXPECT_FALSE(plain.NamesCurrentCuda());
}

TEST(MapLocationTest, ParsesTagMapAndRoundTripsThroughToString) {
  ASSERT_OK_AND_ASSIGN(MapLocation m,
                       MapLocation::Parse("cuda:1=cuda:0,cuda:2=cpu"));
  EXPECT_EQ(m.Apply(From(Device::Cuda(1))), Device::Cuda(0));
  EXPECT_EQ(m.Apply(From(Device::Cuda(2))), Device::Cpu());
  EXPECT_EQ(m.Apply(From(Device::Cuda(3))), Device::Cuda(3));
  EXPECT_EQ(m.ToString(), "cuda:1=cuda:0,cuda:2=cpu");
  ASSERT_OK_AND_ASSIGN(MapLocation again, MapLocation::Parse(m.ToString()));
  EXPECT_EQ(again.ToString(), m.ToString());
}

TEST(MapLocationTest, RejectsMalformedSpecsNamingThem) {
  EXPECT_THAT(MapLocation::Parse("cuda:x"),
              StatusIs(StatusCode::kInvalidArgument, "cuda:x"));
  EXPECT_THAT(MapLocation::Parse(""),
              StatusIs(StatusCode::kInvalidArgument, "empty"));
  EXPECT_THAT(MapLocation::Parse("cuda:1=cuda:0,cuda:2"),
              StatusIs(StatusCode::kInvalidArgument, "'cuda:2'"));
  EXPECT_THAT(MapLocation::Parse("cuda:1=cuda:0,cuda:1=cpu"),
              StatusIs(StatusCode::kInvalidArgument, "mapped twice"));
  EXPECT_THAT(MapLocation::Parse("gpu=cpu"),
              StatusIs(StatusCode::kInvalidArgument, "gpu"));
}

TEST(MapLocationTest, UnsetAndEmptyCallbackMapNothing) {
  MapLocation none;
  EXPECT_FALSE(none.is_set());
  EXPECT_EQ(none.Apply(From(Device::Cuda(1))), Device::Cuda(1));
  MapLocation empty = MapLocation::Fn(nullptr);
  EXPECT_FALSE(empty.is_set());
}

TEST(MapLocationTest, CallbackNulloptKeepsOrigin) {
  MapLocation m = MapLocation::Fn([](const TensorInfo& i) {
    return i.origin == Device::Cuda(1) ? std::optional<Device>(Device::Cpu())
                                       : std::nullopt;
  });
  EXPECT_EQ(m.Apply(From(Device::Cuda(1))), Device::Cpu());
  EXPECT_EQ(m.Apply(From(Device::Cuda(2))), Device::Cuda(2));
  EXPECT_EQ(m.ToString(), "<callback>");
}

}  // namespace
}  // namespace rckpt
