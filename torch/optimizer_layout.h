// How Python's optimizer.state_dict() sits in a checkpoint's state tree when
// the Python package saves it (and AddOptimizer writes it):
//   {"state": {index: {"step": ..., "exp_avg": tensor, ...}},
//    "param_groups": [{"lr": ..., "betas": (b1, b2), ..., "params": [index, ...]}]}
// read into plain values with every structural check made, for the libtorch
// side to apply. No libtorch here.
#ifndef RCKPT_TORCH_OPTIMIZER_LAYOUT_H_
#define RCKPT_TORCH_OPTIMIZER_LAYOUT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rckpt/status.h"
#include "rckpt/tree.h"

namespace rckpt::libtorch {

// One entry of "param_groups": its hyper-parameters (every key but
// "params", in file order) and the saved indices of its parameters.
struct OptimizerGroupLayout {
  std::string where;  // "optimizer.param_groups[0]", for messages
  std::vector<std::pair<std::string, const Value*>> options;
  std::vector<int64_t> params;

  const Value* Find(std::string_view key) const;
  // A number (int or float): InvalidArgument naming the key when it is
  // absent or of another kind.
  Result<double> Number(std::string_view key) const;
  // A bool, `fallback` when absent or None.
  Result<bool> Flag(std::string_view key, bool fallback) const;
  // A pair of numbers, a tuple or a list ("betas").
  Result<std::pair<double, double>> Pair(std::string_view key) const;
};

// One entry of "state": a parameter's saved index and its fields, each a
// TensorRef, a number or None.
struct OptimizerParamLayout {
  std::string where;  // "optimizer.state.3"
  int64_t index = 0;
  std::vector<std::pair<std::string, const Value*>> fields;

  const Value* Find(std::string_view key) const;
};

struct OptimizerLayout {
  std::vector<OptimizerGroupLayout> groups;
  std::vector<OptimizerParamLayout> state;  // in file order
};

// Reads section `section` of `tree`. NotFound without the section;
// InvalidArgument, naming the entry, when it is not an optimizer's
// state_dict: no "state" dict or "param_groups" list, a group without
// "params", a parameter index that is not an int or appears twice, a state
// entry whose index no group has, a field name that is not a str.
Result<OptimizerLayout> ReadOptimizerLayout(const Value& tree, std::string_view section);

}  // namespace rckpt::libtorch

#endif  // RCKPT_TORCH_OPTIMIZER_LAYOUT_H_
