// The training run: an MLP (8 -> H -> H -> 1; tanh, relu, dropout) with a
// learned Gaussian log-variance loss, trained by mini-batch Adam with a
// reduce-on-plateau learning rate and early stopping.
//
// Everything that decides the run's future is in TrainState, and all of it
// is checkpointed (state_io.h): the arithmetic is single-threaded with a
// fixed summation order, so the same state always produces bit-identical
// floats.
#ifndef RCKPT_EXAMPLES_TRAIN_DEMO_TRAINER_H_
#define RCKPT_EXAMPLES_TRAIN_DEMO_TRAINER_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "device_memory.h"
#include "rckpt/device.h"
#include "rckpt/status.h"

namespace train_demo {

// Fixed for the life of a run (stored in the checkpoint).
struct Config {
  uint64_t seed = 1;
  int64_t hidden = 64;
  double dropout = 0.1;
  int64_t n_samples = 320;
  int64_t n_valid = 80;
  int64_t batch_size = 16;
  double base_lr = 3e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double plateau_factor = 0.5;    // lr *= factor after `plateau_patience`
  int64_t plateau_patience = 2;   // epochs without a new best
  double min_lr = 1e-5;
  int64_t stop_patience = 6;      // early stop after this many bored epochs
};

// The learning-rate schedule and the early-stopping controller.
struct Controller {
  int64_t global_step = 0;
  int64_t epoch = 0;          // completed epochs
  double lr = 0;
  double plateau_best = 0;    // best validation loss the schedule has seen
  int64_t plateau_bad_epochs = 0;
  int64_t boredom = 0;        // epochs since the last new best
  bool stopped_early = false;
};

struct EpochRecord {
  int64_t epoch = 0;
  int64_t step = 0;
  double train_loss = 0;
  double valid_loss = 0;
  double lr = 0;
  bool better = false;
};

// The metric tracker: per-epoch history, the best epoch, and the running
// training loss of the epoch in progress (checkpoints fall mid-epoch).
struct Metrics {
  std::vector<EpochRecord> history;
  double best_valid_loss = 0;
  int64_t best_epoch = -1;
  double running_loss_sum = 0;
  int64_t running_batches = 0;
};

// Indices into TrainState::params.
inline constexpr int kNumModelParams = 6;  // fc1..fc3 weight and bias
inline constexpr int kLogVar = 6;          // the loss's parameter
inline constexpr int kNumParams = 7;

struct TrainState {
  Config config;
  Controller controller;
  Metrics metrics;
  int64_t cursor = 0;  // position in `order` of the next batch

  std::vector<StateTensor> params;      // kNumParams, sections model / loss
  std::vector<StateTensor> exp_avg;     // Adam, section optimizer
  std::vector<StateTensor> exp_avg_sq;
  std::vector<StateTensor> step;        // 0-d i64 Adam step counters
  std::vector<StateTensor> best_model;  // kNumModelParams, section metrics
  StateTensor x, y;                     // the data set, section database
  StateTensor train_indices, valid_indices, order;

  std::mt19937_64 data_rng;     // generated the data set and split
  std::mt19937_64 init_rng;     // initial weights
  std::mt19937_64 shuffle_rng;  // mini-batch order of every epoch
  std::mt19937_64 dropout_rng;  // dropout masks

  // Every tensor, in a fixed order.
  std::vector<StateTensor*> AllTensors();
  std::vector<const StateTensor*> AllTensors() const;
  int64_t ParameterCount() const;
  bool Done(int64_t steps) const {
    return controller.stopped_early || controller.global_step >= steps;
  }
};

// The tensors of a run with `config`: names, sections, dtypes and shapes,
// mirrors sized and zeroed, no masters yet.
TrainState LayoutState(const Config& config);

// A fresh run: generates the data, initialises the weights, draws the first
// epoch's order and places model, loss, optimizer and data tensors on
// `device` (the rest on host). DeviceUnavailable if `device` does not exist.
rckpt::Result<TrainState> NewRun(const Config& config, rckpt::Device device,
                                 DeviceMemory& memory);

// One optimisation step on the next mini-batch; at the end of an epoch also
// evaluates, updates metrics and controller and draws the next order. The
// changed tensors are copied back to their masters before it returns.
rckpt::Status Step(TrainState& state, DeviceMemory& memory);

// "epoch 3 (step 45): train 0.41 valid 0.38 lr 0.003 best" for the last epoch.
std::string DescribeEpoch(const EpochRecord& r);

}  // namespace train_demo

#endif  // RCKPT_EXAMPLES_TRAIN_DEMO_TRAINER_H_
