// The checkpoints behind tests/data/golden/: built deterministically, so the
// generator (make_golden.cc) and the test (golden_test.cc) agree on content.
// Once a format version is released its golden files are frozen: change
// nothing here that alters what a v1.0 file must contain.
#ifndef RCKPT_TESTS_GOLDEN_GOLDEN_CHECKPOINTS_H_
#define RCKPT_TESTS_GOLDEN_GOLDEN_CHECKPOINTS_H_

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "core/shard_geometry.h"
#include "rckpt/options.h"
#include "rng/engine_states.h"

namespace rckpt::golden {

struct GoldenCase {
  std::string file;
  Checkpoint checkpoint;
  SaveOptions options;
  // What a load returns when it differs from `checkpoint` (sharded tensors
  // come back whole).
  std::optional<Checkpoint> loads_as;

  const Checkpoint& Expected() const { return loads_as ? *loads_as : checkpoint; }
};

inline Tensor Deterministic(DType dtype, Shape shape, uint32_t seed) {
  uint64_t n = *ShapeBytes(shape, dtype);
  std::vector<std::byte> b(n);
  std::mt19937 rng(seed);  // mt19937's sequence is fixed by the standard
  for (auto& x : b) x = static_cast<std::byte>(rng() & 0xff);
  return *Tensor::FromBytes(dtype, std::move(shape), b);
}

inline Tensor Smooth(Shape shape, uint32_t seed) {
  uint64_t n = *ShapeNumel(shape);
  std::vector<float> v(n);
  std::mt19937 rng(seed);
  for (uint64_t i = 0; i < n; ++i) {
    // A fixed formula (no <random> distributions: their output is not fixed).
    v[i] = static_cast<float>(static_cast<int32_t>(rng() % 2001) - 1000) * 1e-5f;
  }
  return *Tensor::FromBytes(DType::kF32, std::move(shape),
                            std::as_bytes(std::span<const float>(v)));
}

// A valid torch CPU generator state: seeded = 1, left = 1, next = 0.
inline std::vector<std::byte> TorchCpuState(uint32_t seed) {
  std::vector<std::byte> s(5056);
  std::mt19937 rng(seed);
  for (auto& x : s) x = static_cast<std::byte>(rng() & 0xff);
  uint64_t initial_seed = seed;
  int32_t left = 1, seeded = 1;
  uint64_t next = 0;
  std::memcpy(&s[0], &initial_seed, 8);
  std::memcpy(&s[8], &left, 4);
  std::memcpy(&s[12], &seeded, 4);
  std::memcpy(&s[16], &next, 8);
  return s;
}

// The engines behind v1.0-rng-binary-layout.rckpt, at the positions saved.
inline std::mt19937 GoldenMt19937() {
  std::mt19937 engine(20261203);
  engine.discard(1000);
  return engine;
}
inline std::mt19937_64 GoldenMt19937_64() {
  std::mt19937_64 engine(20261203);
  engine.discard(77);
  return engine;
}

// Format 1.1: a 4-rank job's state as a collective save lays it out:
// row-, column- and flat-sharded tensors with per-shard origins (rank r on
// cuda:r), a replicated tensor, per-rank RNG records, the common tree and the
// per-rank trees.
inline GoldenCase ShardedCase() {
  GoldenCase c{"v1.1-sharded.rckpt", {}, {}, Checkpoint()};
  Checkpoint& ck = c.checkpoint;
  Checkpoint& whole = *c.loads_as;
  auto add = [&](const char* section, const std::string& name, Tensor global,
                 std::vector<Block> blocks) {
    std::vector<TensorShard> shards;
    for (size_t r = 0; r < blocks.size(); ++r) {
      Tensor block = *Tensor::Empty(global.dtype(), blocks[r].sizes);
      CopyRegion(blocks[r], WholeBlock(global.shape()),
                 static_cast<const std::byte*>(global.data()), 0, blocks[r],
                 static_cast<std::byte*>(block.data()), DTypeSize(global.dtype()));
      shards.push_back(TensorShard{static_cast<int32_t>(r), blocks[r].offsets, block,
                                   Device::Cuda(static_cast<int>(r))});
    }
    (void)ck.AddShardedTensor(section, name, global.dtype(), global.shape(), shards);
    (void)whole.AddTensor(section, name, global);
    whole.mutable_tensors().back().origin = Device::Cuda(0);
  };
  auto rows = [](int64_t n, int64_t cols) {
    std::vector<Block> b;
    for (int64_t r = 0; r < 4; ++r) b.push_back(Block{{r * n / 4, 0}, {n / 4, cols}});
    return b;
  };
  (void)ck.AddTensor("model", "embed.weight", Smooth({8, 4}, 20));
  (void)whole.AddTensor("model", "embed.weight", Smooth({8, 4}, 20));
  add("model", "fc1.weight", Smooth({16, 12}, 21), rows(16, 12));
  std::vector<Block> cols;
  for (int64_t r = 0; r < 4; ++r) cols.push_back(Block{{0, r * 3}, {12, 3}});
  add("model", "fc2.weight", Smooth({12, 12}, 22), cols);
  std::vector<Block> flat = {Block{{0}, {50}}, Block{{50}, {50}}, Block{{100}, {50}},
                             Block{{150}, {43}}};
  add("optimizer", "flat.exp_avg", Smooth({193}, 23), flat);
  for (int r = 0; r < 4; ++r) {
    const std::string name = "rank" + std::to_string(r) + "/torch_rng_state";
    (void)ck.AddRng(name, RngKind::kTorchCpu, TorchCpuState(30 + r));
    (void)whole.AddRng(name, RngKind::kTorchCpu, TorchCpuState(30 + r));
  }
  for (Checkpoint* k : {&ck, &whole}) {
    Value& t = k->Tree();
    t["common"]["epoch"] = 3;
    t["common"]["scheduler"]["last_lr"] = 5e-4;
    t["ranks"] = Value::List({});
    for (int r = 0; r < 4; ++r) {
      Value cursor;
      cursor["data_cursor"] = 100 * r + 7;
      t["ranks"].Append(cursor);
    }
  }
  c.options.codec = Codec::kZstd;
  c.options.chunk_bytes = 256;
  return c;
}

inline std::vector<GoldenCase> GoldenCases() {
  std::vector<GoldenCase> cases;
  {
    GoldenCase c{"v1.0-all-dtypes-raw.rckpt", {}, {}};
    for (int d = 0; d < 17; ++d) {
      auto dtype = static_cast<DType>(d);
      (void)c.checkpoint.AddTensor("model", "t." + std::string(DTypeName(dtype)),
                                   Deterministic(dtype, {2, 3}, 10 + d));
    }
    (void)c.checkpoint.AddTensor("model", "scalar", Deterministic(DType::kF64, {}, 99));
    (void)c.checkpoint.AddTensor("model", "empty", Deterministic(DType::kF32, {0, 4}, 98));
    c.checkpoint.Metadata()["purpose"] = "golden";
    c.options.codec = Codec::kNone;
    cases.push_back(std::move(c));
  }
  {
    GoldenCase c{"v1.0-zstd-shuffle-multichunk.rckpt", {}, {}};
    (void)c.checkpoint.AddTensor("model", "layer.weight", Smooth({64, 96}, 1));
    (void)c.checkpoint.AddTensor("model", "layer.bias", Smooth({96}, 2));
    (void)c.checkpoint.AddTensor("model", "ids", Deterministic(DType::kI64, {300}, 3));
    c.options.codec = Codec::kZstd;
    c.options.level = 3;
    c.options.shuffle = Shuffle::kAuto;
    c.options.chunk_bytes = 4096;
    cases.push_back(std::move(c));
  }
  {
    GoldenCase c{"v1.0-training-state.rckpt", {}, {}};
    Checkpoint& ck = c.checkpoint;
    auto add_on = [&](const char* section, const char* name, Tensor t, Device origin) {
      (void)ck.AddTensor(section, name, std::move(t));
      ck.mutable_tensors().back().origin = origin;
    };
    add_on("model", "net.0.weight", Smooth({16, 8}, 4), Device::Cuda(1));
    add_on("model", "net.0.bias", Smooth({16}, 5), Device::Cuda(1));
    add_on("loss", "log_var", Smooth({}, 6), Device::Cuda(1));
    add_on("optimizer", "state.0.exp_avg", Smooth({16, 8}, 7), Device::Cuda(1));
    add_on("optimizer", "state.0.step", Deterministic(DType::kF32, {}, 8), Device::Cpu());
    add_on("metrics", "best_model.net.0.weight", Smooth({16, 8}, 9), Device::Cpu());
    add_on("database", "split.train", Deterministic(DType::kI64, {20}, 10), Device::Cpu());
    (void)ck.AddRng("torch_rng_state", RngKind::kTorchCpu, TorchCpuState(11));
    std::mt19937_64 engine(12);
    (void)ck.AddRng("shuffle_engine", RngKind::kMt19937_64, testing::LegacyEngineText(engine));
    (void)ck.AddRng("cuda_rng.1", RngKind::kTorchCuda,
                    std::vector<std::byte>(16, std::byte{7}), Device::Cuda(1));
    Value& t = ck.Tree();
    t["controller"]["current_epoch"] = 7;
    t["controller"]["boredom"] = 2;
    t["controller"]["lr"] = 1e-3;
    t["controller"]["stopping_key"] = "Loss";
    t["optimizer"]["param_groups"] =
        Value::List({Value::Map({{Value("lr"), Value(1e-3)},
                                 {Value("betas"), Value::Tuple({0.9, 0.999})},
                                 {Value("params"), Value::List({0})}})});
    t["optimizer"]["state"] = Value::Map(
        {{Value(0), Value::Map({{Value("step"), Value::TensorRef("state.0.step")},
                                {Value("exp_avg"), Value::TensorRef("state.0.exp_avg")}})}});
    t["metric_tracker"] = Value::Object(
        "hippynn.experiment.metric_tracker.MetricTracker",
        Value::Map({{Value("best_metric"), Value(0.125)},
                    {Value("history"), Value::List({1.0, 0.5, 0.25})},
                    {Value("epochs"), Value::Set({0, 1, 2})}}));
    t["rng"] = Value::RngRef("torch_rng_state");
    t["big"] = Value::BigInt(std::string("\x01\x00\x00\x00\x00\x00\x00\x00\x80", 9));
    t["blob"] = Value::Bytes(std::string("\x00\xff", 2));
    t["none"] = Value();
    t["flag"] = false;
    ck.Metadata()["framework"] = "golden";
    c.options.codec = Codec::kZstd;
    cases.push_back(std::move(c));
  }
  {
    // Section 7.1 of FORMAT.md: mt19937(_64) states in the binary layout.
    GoldenCase c{"v1.0-rng-binary-layout.rckpt", {}, {}};
    Checkpoint& ck = c.checkpoint;
    (void)ck.AddTensor("model", "w", Smooth({4}, 13));
    (void)ck.AddRng("mt19937", RngKind::kMt19937, CaptureEngine(GoldenMt19937()));
    (void)ck.AddRng("mt19937_64", RngKind::kMt19937_64, CaptureEngine(GoldenMt19937_64()));
    (void)ck.AddRng("mt19937.reference", RngKind::kMt19937, testing::ReferenceEngineState<uint32_t>(5489));
    ck.Tree()["rng"]["data"] = Value::RngRef("mt19937");
    c.options.codec = Codec::kNone;
    cases.push_back(std::move(c));
  }
  cases.push_back(ShardedCase());
  return cases;
}

}  // namespace rckpt::golden

#endif  // RCKPT_TESTS_GOLDEN_GOLDEN_CHECKPOINTS_H_
