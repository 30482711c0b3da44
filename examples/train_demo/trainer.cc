#include "trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "dataset.h"

namespace train_demo {
namespace {

using rckpt::Device;
using rckpt::DType;
using rckpt::Result;
using rckpt::Shape;
using rckpt::Status;

StateTensor MakeTensor(std::string section, std::string name, DType dtype,
                       Shape shape, bool on_run_device) {
  StateTensor t;
  t.section = std::move(section);
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.on_run_device = on_run_device;
  size_t numel = 1;
  for (int64_t d : t.shape) numel *= static_cast<size_t>(d);
  if (dtype == DType::kI64) {
    t.i64.assign(numel, 0);
  } else {
    t.f32.assign(numel, 0.0f);
  }
  return t;
}

// The loss is a Gaussian negative log-likelihood with a learned log-variance
// s: 0.5 * exp(-s) * r^2 + 0.5 * s per sample (constant dropped).
struct Gradients {
  std::vector<std::vector<float>> g;  // one per param
};

void UpdateSchedule(TrainState& s, double valid_loss, bool better) {
  Controller& c = s.controller;
  const Config& cfg = s.config;
  if (valid_loss < c.plateau_best) {
    c.plateau_best = valid_loss;
    c.plateau_bad_epochs = 0;
  } else if (++c.plateau_bad_epochs > cfg.plateau_patience) {
    c.lr = std::max(c.lr * cfg.plateau_factor, cfg.min_lr);
    c.plateau_bad_epochs = 0;
  }
  c.boredom = better ? 0 : c.boredom + 1;
  if (c.boredom >= cfg.stop_patience) c.stopped_early = true;
}

// Mean squared error of the model in evaluation mode (no dropout).
double ValidationLoss(const TrainState& s) {
  const int64_t h = s.config.hidden;
  const std::vector<float>& w1 = s.params[0].f32;
  const std::vector<float>& b1 = s.params[1].f32;
  const std::vector<float>& w2 = s.params[2].f32;
  const std::vector<float>& b2 = s.params[3].f32;
  const std::vector<float>& w3 = s.params[4].f32;
  const std::vector<float>& b3 = s.params[5].f32;
  std::vector<float> a1(h), a2(h);
  double sum = 0;
  for (int64_t idx : s.valid_indices.i64) {
    const float* in = &s.x.f32[idx * kInputDim];
    for (int64_t j = 0; j < h; ++j) {
      float z = b1[j];
      for (int d = 0; d < kInputDim; ++d) z += w1[j * kInputDim + d] * in[d];
      a1[j] = std::tanh(z);
    }
    for (int64_t k = 0; k < h; ++k) {
      float z = b2[k];
      for (int64_t j = 0; j < h; ++j) z += w2[k * h + j] * a1[j];
      a2[k] = z > 0 ? z : 0.0f;
    }
    float out = b3[0];
    for (int64_t k = 0; k < h; ++k) out += w3[k] * a2[k];
    double r = static_cast<double>(s.y.f32[idx]) - out;
    sum += r * r;
  }
  return sum / static_cast<double>(s.valid_indices.i64.size());
}

Status EndEpoch(TrainState& s, DeviceMemory& memory) {
  Controller& c = s.controller;
  Metrics& m = s.metrics;
  EpochRecord r;
  r.epoch = c.epoch;
  r.step = c.global_step;
  r.train_loss = m.running_loss_sum / static_cast<double>(m.running_batches);
  r.valid_loss = ValidationLoss(s);
  r.lr = c.lr;
  r.better = m.best_epoch < 0 || r.valid_loss < m.best_valid_loss;
  if (r.better) {
    m.best_valid_loss = r.valid_loss;
    m.best_epoch = c.epoch;
    for (int i = 0; i < kNumModelParams; ++i) {
      s.best_model[i].f32 = s.params[i].f32;
      RCKPT_RETURN_IF_ERROR(memory.Upload(s.best_model[i]));
    }
  }
  m.history.push_back(r);
  m.running_loss_sum = 0;
  m.running_batches = 0;
  UpdateSchedule(s, r.valid_loss, r.better);
  c.epoch += 1;
  s.order.i64 = s.train_indices.i64;
  Shuffle(s.order.i64, s.shuffle_rng);
  s.cursor = 0;
  return memory.Upload(s.order);
}

void InitUniform(std::vector<float>& v, double bound, std::mt19937_64& engine) {
  for (float& w : v) w = static_cast<float>((2.0 * Uniform01(engine) - 1.0) * bound);
}

}  // namespace

namespace {

// Shared by the const and non-const AllTensors.
template <typename State, typename T>
std::vector<T*> CollectTensors(State& s) {
  std::vector<T*> all;
  for (auto* group : {&s.params, &s.exp_avg, &s.exp_avg_sq, &s.step, &s.best_model}) {
    for (T& t : *group) all.push_back(&t);
  }
  for (T* t : {&s.x, &s.y, &s.train_indices, &s.valid_indices, &s.order}) all.push_back(t);
  return all;
}

}  // namespace

std::vector<StateTensor*> TrainState::AllTensors() {
  return CollectTensors<TrainState, StateTensor>(*this);
}

std::vector<const StateTensor*> TrainState::AllTensors() const {
  return CollectTensors<const TrainState, const StateTensor>(*this);
}

int64_t TrainState::ParameterCount() const {
  int64_t n = 0;
  for (const StateTensor& p : params) n += static_cast<int64_t>(p.f32.size());
  return n;
}

TrainState LayoutState(const Config& config) {
  TrainState s;
  s.config = config;
  const int64_t h = config.hidden;
  struct P {
    const char* section;
    const char* name;
    Shape shape;
  };
  const P layout[kNumParams] = {
      {"model", "model.fc1.weight", {h, kInputDim}},
      {"model", "model.fc1.bias", {h}},
      {"model", "model.fc2.weight", {h, h}},
      {"model", "model.fc2.bias", {h}},
      {"model", "model.fc3.weight", {1, h}},
      {"model", "model.fc3.bias", {1}},
      {"loss", "loss.log_var", {1}},
  };
  for (int i = 0; i < kNumParams; ++i) {
    const P& p = layout[i];
    std::string state = "optimizer.state." + std::to_string(i) + ".";
    s.params.push_back(MakeTensor(p.section, p.name, DType::kF32, p.shape, true));
    s.exp_avg.push_back(
        MakeTensor("optimizer", state + "exp_avg", DType::kF32, p.shape, true));
    s.exp_avg_sq.push_back(
        MakeTensor("optimizer", state + "exp_avg_sq", DType::kF32, p.shape, true));
    // Like torch's Adam, the step counter is a 0-d host tensor; rckpt gives
    // 0-d "...step" tensors of the optimizer section the host role.
    s.step.push_back(MakeTensor("optimizer", state + "step", DType::kI64, {}, false));
    if (i < kNumModelParams) {
      std::string best = std::string("metrics.best_model.") + (p.name + 6);
      s.best_model.push_back(MakeTensor("metrics", best, DType::kF32, p.shape, false));
    }
  }
  const int64_t n = config.n_samples;
  const int64_t n_train = n - config.n_valid;
  s.x = MakeTensor("database", "database.x", DType::kF32, {n, kInputDim}, true);
  s.y = MakeTensor("database", "database.y", DType::kF32, {n}, true);
  s.train_indices =
      MakeTensor("database", "database.train_indices", DType::kI64, {n_train}, false);
  s.valid_indices = MakeTensor("database", "database.valid_indices", DType::kI64,
                               {config.n_valid}, false);
  s.order = MakeTensor("database", "database.order", DType::kI64, {n_train}, false);
  return s;
}

Result<TrainState> NewRun(const Config& config, Device device, DeviceMemory& memory) {
  RCKPT_ASSIGN_OR_RETURN(const int devices, memory.runtime()->DeviceCount());
  if (device.is_cuda() && device.index >= devices) {
    return Status::DeviceUnavailable(
        "--device " + device.ToString() + ": this machine has " + std::to_string(devices) +
        " CUDA device(s) (runtime '" + std::string(memory.runtime()->name()) +
        "'); use --device cpu, or --emulate-devices N to try device placements");
  }
  TrainState s = LayoutState(config);
  // Separate engines, each seeded from the run seed, so that e.g. a change of
  // dropout rate does not change the data order.
  s.data_rng.seed(config.seed);
  s.init_rng.seed(config.seed ^ 0x9e3779b97f4a7c15ull);
  s.shuffle_rng.seed(config.seed ^ 0xbf58476d1ce4e5b9ull);
  s.dropout_rng.seed(config.seed ^ 0x94d049bb133111ebull);

  Dataset data = MakeDataset(config.n_samples, config.n_valid, s.data_rng);
  s.x.f32 = std::move(data.x);
  s.y.f32 = std::move(data.y);
  s.train_indices.i64 = std::move(data.train_indices);
  s.valid_indices.i64 = std::move(data.valid_indices);

  // torch.nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  const double fan_in[kNumModelParams] = {kInputDim, kInputDim,
                                          static_cast<double>(config.hidden),
                                          static_cast<double>(config.hidden),
                                          static_cast<double>(config.hidden),
                                          static_cast<double>(config.hidden)};
  for (int i = 0; i < kNumModelParams; ++i) {
    InitUniform(s.params[i].f32, 1.0 / std::sqrt(fan_in[i]), s.init_rng);
    s.best_model[i].f32 = s.params[i].f32;
  }
  s.params[kLogVar].f32[0] = 0.0f;

  s.controller.lr = config.base_lr;
  s.controller.plateau_best = std::numeric_limits<double>::infinity();
  s.metrics.best_valid_loss = std::numeric_limits<double>::infinity();
  s.order.i64 = s.train_indices.i64;
  Shuffle(s.order.i64, s.shuffle_rng);

  for (StateTensor* t : s.AllTensors()) {
    RCKPT_RETURN_IF_ERROR(
        memory.Place(*t, t->on_run_device ? device : Device::Cpu()).WithContext(t->name));
  }
  RCKPT_RETURN_IF_ERROR(memory.Synchronize());
  return s;
}

Status Step(TrainState& s, DeviceMemory& memory) {
  const Config& cfg = s.config;
  const int64_t h = cfg.hidden;
  const int64_t batch = cfg.batch_size;
  const float* w1 = s.params[0].f32.data();
  const float* b1 = s.params[1].f32.data();
  const float* w2 = s.params[2].f32.data();
  const float* b2 = s.params[3].f32.data();
  const float* w3 = s.params[4].f32.data();
  const float* b3 = s.params[5].f32.data();
  const float log_var = s.params[kLogVar].f32[0];
  const float precision = std::exp(-log_var);
  const float keep_scale = static_cast<float>(1.0 / (1.0 - cfg.dropout));

  std::vector<std::vector<float>> grad(kNumParams);
  for (int i = 0; i < kNumParams; ++i) grad[i].assign(s.params[i].f32.size(), 0.0f);
  std::vector<float> a1(h), h1(h), m1(h), z2(h), h2(h), m2(h), dz2(h);
  double loss_sum = 0;

  for (int64_t b = 0; b < batch; ++b) {
    const int64_t idx = s.order.i64[s.cursor + b];
    const float* in = &s.x.f32[idx * kInputDim];
    for (int64_t j = 0; j < h; ++j) {
      m1[j] = Uniform01(s.dropout_rng) >= cfg.dropout ? keep_scale : 0.0f;
    }
    for (int64_t k = 0; k < h; ++k) {
      m2[k] = Uniform01(s.dropout_rng) >= cfg.dropout ? keep_scale : 0.0f;
    }
    // Forward.
    for (int64_t j = 0; j < h; ++j) {
      float z = b1[j];
      for (int d = 0; d < kInputDim; ++d) z += w1[j * kInputDim + d] * in[d];
      a1[j] = std::tanh(z);
      h1[j] = a1[j] * m1[j];
    }
    for (int64_t k = 0; k < h; ++k) {
      float z = b2[k];
      for (int64_t j = 0; j < h; ++j) z += w2[k * h + j] * h1[j];
      z2[k] = z;
      h2[k] = (z > 0 ? z : 0.0f) * m2[k];
    }
    float out = b3[0];
    for (int64_t k = 0; k < h; ++k) out += w3[k] * h2[k];
    const float r = s.y.f32[idx] - out;
    loss_sum += 0.5 * precision * r * r + 0.5 * log_var;

    // Backward (mean over the batch).
    const float inv_batch = 1.0f / static_cast<float>(batch);
    const float d_out = -precision * r * inv_batch;
    grad[kLogVar][0] += (0.5f - 0.5f * precision * r * r) * inv_batch;
    grad[5][0] += d_out;
    for (int64_t k = 0; k < h; ++k) {
      grad[4][k] += d_out * h2[k];
      dz2[k] = z2[k] > 0 ? d_out * w3[k] * m2[k] : 0.0f;
      grad[3][k] += dz2[k];
    }
    for (int64_t j = 0; j < h; ++j) {
      float dh1 = 0;
      for (int64_t k = 0; k < h; ++k) {
        grad[2][k * h + j] += dz2[k] * h1[j];
        dh1 += dz2[k] * w2[k * h + j];
      }
      const float dz1 = dh1 * m1[j] * (1.0f - a1[j] * a1[j]);
      grad[1][j] += dz1;
      for (int d = 0; d < kInputDim; ++d) grad[0][j * kInputDim + d] += dz1 * in[d];
    }
  }

  // Adam, as torch.optim.Adam (no weight decay, no amsgrad).
  for (int i = 0; i < kNumParams; ++i) {
    int64_t& step = s.step[i].i64[0];
    step += 1;
    const double bc1 = 1.0 - std::pow(cfg.beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(cfg.beta2, static_cast<double>(step));
    const float step_size = static_cast<float>(s.controller.lr / bc1);
    const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    const float beta1 = static_cast<float>(cfg.beta1);
    const float beta2 = static_cast<float>(cfg.beta2);
    const float eps = static_cast<float>(cfg.eps);
    std::vector<float>& p = s.params[i].f32;
    std::vector<float>& m = s.exp_avg[i].f32;
    std::vector<float>& v = s.exp_avg_sq[i].f32;
    const std::vector<float>& g = grad[i];
    for (size_t e = 0; e < p.size(); ++e) {
      m[e] = beta1 * m[e] + (1.0f - beta1) * g[e];
      v[e] = beta2 * v[e] + (1.0f - beta2) * g[e] * g[e];
      const float denom = std::sqrt(v[e]) / bc2_sqrt + eps;
      p[e] -= step_size * m[e] / denom;
    }
    RCKPT_RETURN_IF_ERROR(memory.Upload(s.params[i]));
    RCKPT_RETURN_IF_ERROR(memory.Upload(s.exp_avg[i]));
    RCKPT_RETURN_IF_ERROR(memory.Upload(s.exp_avg_sq[i]));
    RCKPT_RETURN_IF_ERROR(memory.Upload(s.step[i]));
  }

  s.metrics.running_loss_sum += loss_sum / static_cast<double>(batch);
  s.metrics.running_batches += 1;
  s.controller.global_step += 1;
  s.cursor += batch;
  // The last partial batch of an epoch is dropped (drop_last=True).
  if (s.cursor + batch > static_cast<int64_t>(s.order.i64.size())) {
    RCKPT_RETURN_IF_ERROR(EndEpoch(s, memory));
  }
  return memory.Synchronize();
}

std::string DescribeEpoch(const EpochRecord& r) {
  char line[160];
  std::snprintf(line, sizeof(line),
                "epoch %lld (step %lld): train nll %.5f  valid mse %.5f  lr %.2e%s",
                static_cast<long long>(r.epoch), static_cast<long long>(r.step),
                r.train_loss, r.valid_loss, r.lr, r.better ? "  best" : "");
  return line;
}

}  // namespace train_demo
