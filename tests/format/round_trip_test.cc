// Save then load: everything that goes in comes back bit for bit.
#include <cmath>
#include <limits>

#include "format/format_test_util.h"
#include "rckpt/dtype.h"

namespace rckpt {
namespace {

using testing::ExpectSameContent;
using testing::HostTensor;
using testing::LoadAllToHost;

struct Encoding {
  const char* name;
  Codec codec;
  Shuffle shuffle;
  uint64_t chunk_bytes;
};

class RoundTripTest : public ::testing::TestWithParam<Encoding> {
 protected:
  SaveOptions Options() {
    SaveOptions o;
    o.codec = GetParam().codec;
    o.shuffle = GetParam().shuffle;
    o.chunk_bytes = GetParam().chunk_bytes;
    o.fs = &fs_;
    o.threads = 2;
    return o;
  }
  MemFileSystem fs_;
};

TEST_P(RoundTripTest, RoundTripAllDtypes) {
  Checkpoint ck;
  for (int d = 0; d < kNumDTypes; ++d) {
    auto dtype = static_cast<DType>(d);
    ASSERT_OK(ck.AddTensor("model", std::string("w.") + std::string(DTypeName(dtype)),
                           HostTensor(dtype, {3, 37}, 100 + d)));
  }
  ASSERT_OK(Save("/ck.rckpt", ck, Options()));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, LoadAllToHost(fs_, "/ck.rckpt"));
  ExpectSameContent(ck, back);
}

TEST_P(RoundTripTest, FloatSpecialValuesKeepTheirBits) {
  std::vector<float> v = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min()};
  uint32_t nan_payload = 0x7fc12345;
  float nan;
  std::memcpy(&nan, &nan_payload, 4);
  v.push_back(nan);
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "special", TensorView{v.data(), DType::kF32, {6}, {}}));
  ASSERT_OK(Save("/ck.rckpt", ck, Options()));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, LoadAllToHost(fs_, "/ck.rckpt"));
  ExpectSameContent(ck, back);
}

TEST_P(RoundTripTest, ZeroDimEmptyAndMultiChunkTensors) {
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("optimizer", "state.0.step", HostTensor(DType::kI64, {}, 1)));
  ASSERT_OK(ck.AddTensor("model", "empty", HostTensor(DType::kF32, {0, 5}, 2)));
  ASSERT_OK(ck.AddTensor("model", "empty1d", HostTensor(DType::kBF16, {0}, 3)));
  auto smooth = testing::SmoothFloats(100000, 4);
  ASSERT_OK(ck.AddTensor("model", "big", TensorView{smooth.data(), DType::kF32, {100, 1000}, {}}));
  ASSERT_OK(ck.AddTensor("model", "odd", HostTensor(DType::kC128, {7, 13}, 5)));
  ASSERT_OK(Save("/ck.rckpt", ck, Options()));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, LoadAllToHost(fs_, "/ck.rckpt"));
  ExpectSameContent(ck, back);
  EXPECT_EQ(back.FindTensor("state.0.step")->role, Role::kHost);
  EXPECT_EQ(back.FindTensor("big")->role, Role::kModel);
}

TEST_P(RoundTripTest, UnicodeNamesAndMetadata) {
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("modèle", "couche.权重.😀", HostTensor(DType::kF16, {4}, 9)));
  ck.Metadata()["note"] = "naïve ✓";
  ck.Metadata()["empty"] = "";
  ck.Tree()["clé"] = "valeur ✓";
  ASSERT_OK(Save("/ck.rckpt", ck, Options()));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, LoadAllToHost(fs_, "/ck.rckpt"));
  ExpectSameContent(ck, back);
  EXPECT_EQ(back.sections()[0].name, "modèle");
}

TEST_P(RoundTripTest, OriginDevicesAreRecorded) {
  Checkpoint ck;
  auto t = HostTensor(DType::kF32, {2, 2}, 11);
  ASSERT_OK(ck.AddTensor("model", "w", t));
  ck.mutable_tensors().back().origin = Device::Cuda(1);
  ASSERT_OK(ck.AddRng("cuda_rng", RngKind::kTorchCuda, testing::RandomBytes(16, 1), Device::Cuda(1)));
  ASSERT_OK(Save("/ck.rckpt", ck, Options()));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, LoadAllToHost(fs_, "/ck.rckpt"));
  EXPECT_EQ(back.FindTensor("w")->Origin(), Device::Cuda(1));
  EXPECT_TRUE(back.FindTensor("w")->tensor.device().is_cpu());
  EXPECT_EQ(back.FindRng("cuda_rng")->origin, Device::Cuda(1));
}

INSTANTIATE_TEST_SUITE_P(
    Encodings, RoundTripTest,
    ::testing::Values(Encoding{"raw", Codec::kNone, Shuffle::kOff, 4 << 20},
                      Encoding{"raw_small_chunks", Codec::kNone, Shuffle::kOff, 1000},
                      Encoding{"zstd", Codec::kZstd, Shuffle::kOff, 4 << 20},
                      Encoding{"zstd_shuffle_auto", Codec::kZstd, Shuffle::kAuto, 4096},
                      Encoding{"zstd_shuffle_on", Codec::kZstd, Shuffle::kOn, 777}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TreeRoundTrip, EveryValueKindNestedKeepsOrderAndBits) {
  Checkpoint ck;
  Value& t = ck.Tree();
  t["null"] = Value();
  t["bool"] = true;
  t["int"] = int64_t{-9007199254740993};
  t["float"] = -0.0;
  t["nan"] = std::nan("7");
  t["string"] = "hello";
  t["bytes"] = Value::Bytes(std::string("\0\x01\xff", 3));
  t["bigint"] = Value::BigInt(std::string("\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9));
  t["tensor"] = Value::TensorRef("layer.weight");
  t["rng"] = Value::RngRef("torch_rng_state");
  t["list"] = Value::List({1, 2.5, "x", Value::List({})});
  t["tuple"] = Value::Tuple({0.9, 0.999});
  t["set"] = Value::Set({3, 1, 2});
  t["intkeys"] = Value::Map({{Value(0), Value::Map({{Value("step"), Value(7)}})},
                             {Value(1), Value()}});
  t["tuplekey"] = Value::Map({{Value::Tuple({1, "a"}), Value("v")}});
  t["object"] = Value::Object("hippynn.MetricTracker",
                              Value::Map({{Value("best"), Value(0.5)}}));
  Value deep;
  Value* cur = &deep;
  for (int i = 0; i < 200; ++i) {
    (*cur)["d"] = Value();
    cur = &(*cur)["d"];
  }
  t["deep"] = deep;
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  ASSERT_OK(Save("/t.rckpt", ck, o));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, LoadAllToHost(fs, "/t.rckpt"));
  EXPECT_TRUE(back.Tree() == ck.Tree()) << back.Tree().DebugString();
  EXPECT_EQ(back.Tree().entries()[0].first.as_string(), "null");  // order kept
}

TEST(TreeRoundTrip, RejectsTreeDeeperThanTheLimit) {
  Checkpoint ck;
  Value* cur = &ck.Tree();
  for (int i = 0; i < 1100; ++i) {
    (*cur)["d"] = Value();
    cur = &(*cur)["d"];
  }
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  EXPECT_THAT(Save("/t.rckpt", ck, o), StatusIs(StatusCode::kInvalidArgument, "deeper than"));
  EXPECT_FALSE(fs.Exists("/t.rckpt"));
}

TEST(RngRoundTrip, Mt19937_64RestoredMidStreamContinuesTheSequence) {
  std::mt19937_64 engine(1234);
  for (int i = 0; i < 1000; ++i) engine();
  Checkpoint ck;
  ASSERT_OK(ck.AddRng("shuffle", RngKind::kMt19937_64, CaptureEngine(engine)));
  std::vector<uint64_t> expected;
  for (int i = 0; i < 50; ++i) expected.push_back(engine());
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  ASSERT_OK(Save("/r.rckpt", ck, o));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, LoadAllToHost(fs, "/r.rckpt"));
  std::mt19937_64 restored;
  ASSERT_OK(RestoreEngine(back.FindRng("shuffle")->bytes, &restored));
  for (uint64_t want : expected) EXPECT_EQ(restored(), want);
  EXPECT_TRUE(back.FindRng("shuffle")->origin.is_cpu());
}

TEST(SectionRoundTrip, ExplicitRolesAndCanonicalDefaults) {
  Checkpoint ck;
  ASSERT_OK(ck.AddSection("custom", Role::kHost));
  ASSERT_OK(ck.AddTensor("custom", "c", HostTensor(DType::kU8, {3}, 1)));
  ASSERT_OK(ck.AddTensor("metrics", "best.w", HostTensor(DType::kF32, {3}, 2)));
  ASSERT_OK(ck.AddTensor("database", "split", HostTensor(DType::kI64, {3}, 3)));
  ASSERT_OK(ck.AddTensor("model", "forced_host", HostTensor(DType::kF32, {3}, 4), Role::kHost));
  MemFileSystem fs;
  SaveOptions o;
  o.fs = &fs;
  ASSERT_OK(Save("/s.rckpt", ck, o));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, LoadAllToHost(fs, "/s.rckpt"));
  EXPECT_EQ(back.FindSection("custom")->role, Role::kHost);
  EXPECT_EQ(back.FindSection("metrics")->role, Role::kHost);
  EXPECT_EQ(back.FindSection("database")->role, Role::kData);
  EXPECT_EQ(back.FindTensor("forced_host")->role, Role::kHost);
  EXPECT_EQ(back.FindSection("model")->role, Role::kModel);
}

}  // namespace
}  // namespace rckpt
