// The training state as an rckpt checkpoint, laid out the way a training
// library saves it:
//
//   section    tensors                                   role
//   model      model.fc{1,2,3}.{weight,bias}             model
//   loss       loss.log_var                              model
//   optimizer  optimizer.state.<i>.{exp_avg,exp_avg_sq}  model
//              optimizer.state.<i>.step (0-d i64)        host (automatic)
//   metrics    metrics.best_model.*                      host
//   database   database.{x,y,train_indices,valid_indices,order}  data
//   RNG        rng.{data,init,shuffle,dropout} (mt19937_64)      host
//
// and a state tree holding the configuration, the optimizer's param groups,
// the controller (schedule, early stopping, step and epoch), the metric
// history and the data cursor. The tree refers to tensors and RNG records by
// name.
#ifndef RCKPT_EXAMPLES_TRAIN_DEMO_STATE_IO_H_
#define RCKPT_EXAMPLES_TRAIN_DEMO_STATE_IO_H_

#include <string>

#include "device_memory.h"
#include "rckpt/checkpoint.h"
#include "trainer.h"

namespace train_demo {

// A checkpoint sharing the masters' memory (device tensors are saved from
// the device). `state` must stay unchanged until the save returns.
rckpt::Result<rckpt::Checkpoint> ToCheckpoint(const TrainState& state);

// Rebuilds the state from a loaded checkpoint. Each tensor stays where the
// load placed it (its master) and is copied to its host mirror; RNG engines
// are restored on the host. Corruption naming the entry when something is
// missing or has the wrong type or shape.
rckpt::Result<TrainState> FromCheckpoint(const rckpt::Checkpoint& ck,
                                         DeviceMemory& memory);

// "model: cuda:0 (6)  loss: cuda:0 (1)  optimizer: cuda:0 (14), cpu (7) ..."
std::string DescribePlacement(const TrainState& state);

}  // namespace train_demo

#endif  // RCKPT_EXAMPLES_TRAIN_DEMO_STATE_IO_H_
