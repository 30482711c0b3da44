#include "bench_data.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "util/thread_pool.h"

namespace rckpt::bench {
namespace {

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Inverse normal CDF on a 2^16 grid, interpolated: fast, deterministic
// normal samples whose mantissas are as random as real weights'.
class NormalTable {
 public:
  NormalTable() {
    constexpr int kN = 1 << 16;
    q_[0] = -4.5f;
    q_[kN] = 4.5f;
    for (int i = 1; i < kN; ++i) {
      const double p = static_cast<double>(i) / kN;
      double lo = -6, hi = 6;
      for (int it = 0; it < 60; ++it) {
        const double mid = (lo + hi) / 2;
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
      }
      q_[i] = static_cast<float>((lo + hi) / 2);
    }
  }
  float Sample(uint64_t r) const {
    const uint32_t idx = static_cast<uint32_t>(r >> 48);
    const float frac = static_cast<float>((r >> 24) & 0xffffff) * (1.0f / 16777216.0f);
    return q_[idx] + frac * (q_[idx + 1] - q_[idx]);
  }

 private:
  std::array<float, (1 << 16) + 1> q_;
};

const NormalTable& Normal() {
  static const NormalTable* table = new NormalTable();
  return *table;
}

uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

// How a parameter's values are distributed: mean + stddev * N(0, 1).
struct Param {
  std::string name;
  Shape shape;
  float mean;
  float stddev;
};

std::vector<Param> Params(int layers, int d) {
  const int64_t vocab = 8ll * d;
  std::vector<Param> ps;
  ps.push_back({"embed.weight", {vocab, d}, 0, 0.02f});
  for (int l = 0; l < layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    ps.push_back({p + "ln1.weight", {d}, 1, 0.05f});
    ps.push_back({p + "ln1.bias", {d}, 0, 0.01f});
    ps.push_back({p + "attn.qkv.weight", {3ll * d, d}, 0, 0.02f});
    ps.push_back({p + "attn.qkv.bias", {3ll * d}, 0, 0.01f});
    ps.push_back({p + "attn.out.weight", {d, d}, 0, 0.014f});
    ps.push_back({p + "attn.out.bias", {d}, 0, 0.01f});
    ps.push_back({p + "ln2.weight", {d}, 1, 0.05f});
    ps.push_back({p + "ln2.bias", {d}, 0, 0.01f});
    ps.push_back({p + "mlp.up.weight", {4ll * d, d}, 0, 0.02f});
    ps.push_back({p + "mlp.up.bias", {4ll * d}, 0, 0.01f});
    ps.push_back({p + "mlp.down.weight", {d, 4ll * d}, 0, 0.01f});
    ps.push_back({p + "mlp.down.bias", {d}, 0, 0.01f});
  }
  ps.push_back({"final_ln.weight", {d}, 1, 0.05f});
  ps.push_back({"final_ln.bias", {d}, 0, 0.01f});
  ps.push_back({"lm_head.weight", {vocab, d}, 0, 0.02f});
  return ps;
}

// Fills `n` floats with mean + stddev * N(0,1) (squared when `square`,
// as Adam's second moment is a running mean of squared gradients).
void FillNormal(float* out, uint64_t n, float mean, float stddev, bool square, uint64_t seed,
                ThreadPool& pool) {
  constexpr uint64_t kBlock = 1 << 18;
  const uint64_t blocks = (n + kBlock - 1) / kBlock;
  const NormalTable& table = Normal();
  pool.ParallelFor(blocks, [&](size_t b) {
    uint64_t s = seed * 0x100000001b3ull + b;
    const uint64_t end = std::min(n, (b + 1) * kBlock);
    for (uint64_t i = b * kBlock; i < end; ++i) {
      const float v = mean + stddev * table.Sample(SplitMix(s));
      out[i] = square ? v * v : v;
    }
  });
}

}  // namespace

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kWeightBf16: return "bf16 weights";
    case Kind::kWeightF32: return "f32 master weights";
    case Kind::kAdamM: return "f32 adam exp_avg";
    case Kind::kAdamV: return "f32 adam exp_avg_sq";
    case Kind::kStep: return "f32 step";
  }
  return "?";
}

Result<BenchData> Generate(uint64_t target_bytes, int layers, uint64_t seed, int threads) {
  BenchData data;
  data.layers = layers > 0 ? layers : 8;
  // Bytes per parameter element: bf16 weight + f32 master + two f32 moments.
  const double per_d2 = 14.0 * (16 + 12.0 * data.layers);
  int d = static_cast<int>(std::sqrt(static_cast<double>(target_bytes) / per_d2) / 64 + 0.5) * 64;
  data.width = std::max(d, 64);
  ThreadPool pool(std::max(1, threads - 1));
  uint64_t tensor_seed = seed;
  for (const Param& p : Params(data.layers, data.width)) {
    RCKPT_ASSIGN_OR_RETURN(Tensor master, Tensor::Empty(DType::kF32, p.shape));
    const uint64_t n = master.numel();
    FillNormal(static_cast<float*>(master.data()), n, p.mean, p.stddev, false, ++tensor_seed, pool);
    RCKPT_ASSIGN_OR_RETURN(Tensor bf16, Tensor::Empty(DType::kBF16, p.shape));
    const float* src = static_cast<const float*>(master.data());
    uint16_t* dst = static_cast<uint16_t*>(bf16.data());
    pool.ParallelFor((n + 65535) / 65536, [&](size_t b) {
      for (uint64_t i = b * 65536; i < std::min(n, (b + 1) * 65536); ++i) dst[i] = ToBf16(src[i]);
    });
    RCKPT_ASSIGN_OR_RETURN(Tensor m, Tensor::Empty(DType::kF32, p.shape));
    FillNormal(static_cast<float*>(m.data()), n, 0, 1e-3f, false, ++tensor_seed, pool);
    RCKPT_ASSIGN_OR_RETURN(Tensor v, Tensor::Empty(DType::kF32, p.shape));
    FillNormal(static_cast<float*>(v.data()), n, 0, 1e-3f, true, ++tensor_seed, pool);
    const float step_value = 1000.0f;
    RCKPT_ASSIGN_OR_RETURN(Tensor step, Tensor::FromBytes(DType::kF32, {},
        std::as_bytes(std::span<const float>(&step_value, 1))));
    const std::string opt = "optimizer.state." + p.name + ".";
    data.tensors.push_back({"model", p.name, Kind::kWeightBf16, std::move(bf16)});
    data.tensors.push_back({"optimizer", opt + "master", Kind::kWeightF32, std::move(master)});
    data.tensors.push_back({"optimizer", opt + "exp_avg", Kind::kAdamM, std::move(m)});
    data.tensors.push_back({"optimizer", opt + "exp_avg_sq", Kind::kAdamV, std::move(v)});
    data.tensors.push_back({"optimizer", opt + "step", Kind::kStep, std::move(step)});
  }
  for (const BenchTensor& t : data.tensors) data.bytes += t.tensor.nbytes();
  return data;
}

Result<Checkpoint> BenchData::ToCheckpoint() const {
  Checkpoint ck;
  for (const BenchTensor& t : tensors) {
    RCKPT_RETURN_IF_ERROR(ck.AddTensor(t.section, t.name, t.tensor.view()));
  }
  ck.Tree() = Value::Map({});
  return ck;
}

Status WriteSafetensors(const BenchData& data, const std::string& path) {
  std::string header = "{";
  uint64_t offset = 0;
  for (const BenchTensor& t : data.tensors) {
    if (header.size() > 1) header += ",";
    header += "\"" + t.section + "." + t.name + "\":{\"dtype\":\"";
    header += t.tensor.dtype() == DType::kBF16 ? "BF16" : "F32";
    header += "\",\"shape\":[";
    for (size_t i = 0; i < t.tensor.shape().size(); ++i) {
      if (i) header += ',';
      header += std::to_string(t.tensor.shape()[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + ",";
    offset += t.tensor.nbytes();
    header += std::to_string(offset) + "]}";
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!f) return Status::IoError("cannot create '" + path + "'");
  const uint64_t n = header.size();
  bool ok = std::fwrite(&n, 8, 1, f.get()) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
  for (const BenchTensor& t : data.tensors) {
    if (!ok) break;
    ok = std::fwrite(t.tensor.data(), 1, t.tensor.nbytes(), f.get()) == t.tensor.nbytes();
  }
  if (!ok || std::fflush(f.get()) != 0) return Status::IoError("write '" + path + "' failed");
  return Status::Ok();
}

}  // namespace rckpt::bench
