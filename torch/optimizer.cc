// Optimizers: torch::optim::Adam, AdamW and SGD in the layout of Python's
// optimizer.state_dict().

#include <c10/util/Type.h>

#include <algorithm>
#include <cmath>

#include "bridge.h"
#include "dict_layout.h"
#include "optimizer_layout.h"

namespace rckpt::torch {
namespace {

namespace optim = ::torch::optim;

enum class OptimizerKind { kAdam, kAdamW, kSgd };

const char* OptimizerClass(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdam: return "torch::optim::Adam";
    case OptimizerKind::kAdamW: return "torch::optim::AdamW";
    case OptimizerKind::kSgd: return "torch::optim::SGD";
  }
  return "";
}

Result<OptimizerKind> OptimizerKindOf(const optim::Optimizer& optimizer) {
  if (dynamic_cast<const optim::Adam*>(&optimizer) != nullptr) return OptimizerKind::kAdam;
  if (dynamic_cast<const optim::AdamW*>(&optimizer) != nullptr) return OptimizerKind::kAdamW;
  if (dynamic_cast<const optim::SGD*>(&optimizer) != nullptr) return OptimizerKind::kSgd;
  return Status::Unsupported("rckpt::torch saves and restores the state of "
                             "torch::optim::Adam, AdamW and SGD, not of a " +
                             c10::demangle(typeid(optimizer).name()));
}

// A group's hyper-parameters as Python's optimizer writes them (torch 2.x
// key order), with libtorch's values and Python's defaults for what libtorch
// has not.
Value GroupTree(OptimizerKind kind, const optim::OptimizerOptions& options, Value params) {
  std::vector<Value::Entry> e;
  if (kind == OptimizerKind::kSgd) {
    const auto& o = static_cast<const optim::SGDOptions&>(options);
    e = {{"lr", o.lr()},
         {"momentum", o.momentum()},
         {"dampening", o.dampening()},
         {"weight_decay", o.weight_decay()},
         {"nesterov", o.nesterov()},
         {"maximize", false},
         {"foreach", Value()},
         {"differentiable", false},
         {"fused", Value()}};
  } else {
    auto adam = [&](const auto& o) {
      e = {{"lr", o.lr()},
           {"betas", Value::Tuple({std::get<0>(o.betas()), std::get<1>(o.betas())})},
           {"eps", o.eps()},
           {"weight_decay", o.weight_decay()},
           {"amsgrad", o.amsgrad()},
           {"maximize", false},
           {"foreach", Value()},
           {"capturable", false},
           {"differentiable", false},
           {"fused", Value()},
           {"decoupled_weight_decay", kind == OptimizerKind::kAdamW}};
    };
    if (kind == OptimizerKind::kAdam) adam(static_cast<const optim::AdamOptions&>(options));
    else adam(static_cast<const optim::AdamWOptions&>(options));
  }
  e.emplace_back("params", std::move(params));
  return Value::Map(std::move(e));
}

// The tensors of one parameter's state, by Python's field names.
Result<std::vector<std::pair<std::string, at::Tensor>>> StateTensors(
    OptimizerKind kind, const optim::OptimizerParamState& state, bool amsgrad) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  auto add = [&](const char* field, const at::Tensor& t) {
    if (t.defined()) out.emplace_back(field, t);
  };
  if (kind == OptimizerKind::kSgd) {
    add("momentum_buffer", static_cast<const optim::SGDParamState&>(state).momentum_buffer());
    return out;
  }
  auto adam = [&](const auto& s) {
    // Python keeps the step count as a 0-d float32 CPU tensor.
    add("step", at::full({}, static_cast<double>(s.step()), at::kFloat));
    add("exp_avg", s.exp_avg());
    add("exp_avg_sq", s.exp_avg_sq());
    if (amsgrad) add("max_exp_avg_sq", s.max_exp_avg_sq());
  };
  if (kind == OptimizerKind::kAdam) adam(static_cast<const optim::AdamParamState&>(state));
  else adam(static_cast<const optim::AdamWParamState&>(state));
  return out;
}

bool Amsgrad(OptimizerKind kind, const optim::OptimizerOptions& options) {
  if (kind == OptimizerKind::kAdam) {
    return static_cast<const optim::AdamOptions&>(options).amsgrad();
  }
  if (kind == OptimizerKind::kAdamW) {
    return static_cast<const optim::AdamWOptions&>(options).amsgrad();
  }
  return false;
}

// A group's hyper-parameters from the file, on a copy of the group's
// options, refusing what libtorch's optimizer does not do.
Result<std::unique_ptr<optim::OptimizerOptions>> ReadGroupOptions(
    OptimizerKind kind, const OptimizerGroupLayout& g, const optim::OptimizerOptions& current) {
  RCKPT_ASSIGN_OR_RETURN(bool maximize, g.Flag("maximize", false));
  if (maximize) {
    return Status::InvalidArgument(g.where + " has maximize=True, which " +
                                   OptimizerClass(kind) + " does not implement");
  }
  std::unique_ptr<optim::OptimizerOptions> options = current.clone();
  RCKPT_ASSIGN_OR_RETURN(double lr, g.Number("lr"));
  RCKPT_ASSIGN_OR_RETURN(double weight_decay, g.Number("weight_decay"));
  if (kind == OptimizerKind::kSgd) {
    auto& o = static_cast<optim::SGDOptions&>(*options);
    RCKPT_ASSIGN_OR_RETURN(double momentum, g.Number("momentum"));
    RCKPT_ASSIGN_OR_RETURN(double dampening, g.Number("dampening"));
    RCKPT_ASSIGN_OR_RETURN(bool nesterov, g.Flag("nesterov", false));
    o.lr(lr).momentum(momentum).dampening(dampening).weight_decay(weight_decay).nesterov(nesterov);
    return options;
  }
  RCKPT_ASSIGN_OR_RETURN(bool decoupled, g.Flag("decoupled_weight_decay", false));
  if (kind == OptimizerKind::kAdam && decoupled) {
    return Status::InvalidArgument(
        g.where + " has decoupled_weight_decay=True (AdamW's update, what Python's AdamW "
        "writes): restore it into a torch::optim::AdamW");
  }
  RCKPT_ASSIGN_OR_RETURN(auto betas, g.Pair("betas"));
  RCKPT_ASSIGN_OR_RETURN(double eps, g.Number("eps"));
  RCKPT_ASSIGN_OR_RETURN(bool amsgrad, g.Flag("amsgrad", false));
  auto adam = [&](auto& o) {
    o.lr(lr).betas({betas.first, betas.second}).eps(eps).weight_decay(weight_decay);
    o.amsgrad(amsgrad);
  };
  if (kind == OptimizerKind::kAdam) adam(static_cast<optim::AdamOptions&>(*options));
  else adam(static_cast<optim::AdamWOptions&>(*options));
  return options;
}

// A state tensor of the file, checked against its parameter and moved to
// the parameter's device (and dtype, for a floating-point parameter), as
// Python's load_state_dict moves it.
Result<at::Tensor> ParamStateTensor(const Loaded& ck, const OptimizerParamLayout& entry,
                                    const std::string& field, const at::Tensor& param) {
  const Value* v = entry.Find(field);
  const std::string where = entry.where + "['" + field + "']";
  if (v == nullptr || v->kind() != ValueKind::kTensorRef) {
    return Status::InvalidArgument(where + " is " +
                                   (v == nullptr ? "missing" : v->DebugString(64)) +
                                   ", expected a tensor");
  }
  auto it = ck.tensors.find(v->as_string());
  if (it == ck.tensors.end()) {
    return Status::NotFound(where + ": tensor '" + v->as_string() + "' was not loaded");
  }
  const at::Tensor& t = it->second;
  if (!t.sizes().equals(param.sizes())) {
    return Status::InvalidArgument(where + " has shape " + SizesText(t.sizes()) +
                                   " but its parameter has shape " + SizesText(param.sizes()));
  }
  return t.to(param.device(), param.is_floating_point() ? param.scalar_type() : t.scalar_type());
}

// Adam's step count: Python keeps a 0-d tensor (a float32 one), older
// versions a number.
Result<int64_t> StepCount(const Loaded& ck, const OptimizerParamLayout& entry) {
  const Value* v = entry.Find("step");
  const std::string where = entry.where + "['step']";
  double step = -1;
  if (v == nullptr) return Status::InvalidArgument(where + " is missing");
  if (v->kind() == ValueKind::kInt) {
    step = static_cast<double>(v->as_int());
  } else if (v->kind() == ValueKind::kFloat) {
    step = v->as_float();
  } else if (v->kind() == ValueKind::kTensorRef) {
    auto it = ck.tensors.find(v->as_string());
    if (it == ck.tensors.end()) {
      return Status::NotFound(where + ": tensor '" + v->as_string() + "' was not loaded");
    }
    if (it->second.numel() != 1) {
      return Status::InvalidArgument(where + " has shape " + SizesText(it->second.sizes()) +
                                     ", expected one element");
    }
    step = it->second.item<double>();
  }
  if (!(step >= 0 && step == std::floor(step) && step < 9007199254740992.0)) {
    return Status::InvalidArgument(where + " is " + v->DebugString(64) +
                                   (v->kind() == ValueKind::kTensorRef
                                        ? " = " + std::to_string(step) : std::string()) +
                                   ", expected a step count (a whole number >= 0)");
  }
  return static_cast<int64_t>(step);
}

Result<std::unique_ptr<optim::OptimizerParamState>> ReadParamState(
    OptimizerKind kind, const Loaded& ck, const OptimizerParamLayout& entry,
    const at::Tensor& param, bool amsgrad) {
  const std::vector<std::string> fields =
      kind == OptimizerKind::kSgd
          ? std::vector<std::string>{"momentum_buffer"}
          : std::vector<std::string>{"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  for (const auto& [name, value] : entry.fields) {
    if (std::find(fields.begin(), fields.end(), name) == fields.end()) {
      return Status::InvalidArgument(entry.where + " has '" + name + "', which the state of " +
                                     OptimizerClass(kind) + " does not have (the state of "
                                     "another optimizer class?)");
    }
  }
  if (kind == OptimizerKind::kSgd) {
    auto state = std::make_unique<optim::SGDParamState>();
    const Value* buffer = entry.Find("momentum_buffer");
    if (buffer != nullptr && !buffer->is_null()) {
      RCKPT_ASSIGN_OR_RETURN(at::Tensor t, ParamStateTensor(ck, entry, "momentum_buffer", param));
      state->momentum_buffer(t);
    }
    return std::unique_ptr<optim::OptimizerParamState>(std::move(state));
  }
  RCKPT_ASSIGN_OR_RETURN(int64_t step, StepCount(ck, entry));
  RCKPT_ASSIGN_OR_RETURN(at::Tensor exp_avg, ParamStateTensor(ck, entry, "exp_avg", param));
  RCKPT_ASSIGN_OR_RETURN(at::Tensor exp_avg_sq, ParamStateTensor(ck, entry, "exp_avg_sq", param));
  at::Tensor max_exp_avg_sq;
  if (amsgrad || entry.Find("max_exp_avg_sq") != nullptr) {
    RCKPT_ASSIGN_OR_RETURN(max_exp_avg_sq,
                           ParamStateTensor(ck, entry, "max_exp_avg_sq", param));
  }
  auto fill = [&](auto state) {
    state->step(step).exp_avg(exp_avg).exp_avg_sq(exp_avg_sq);
    if (max_exp_avg_sq.defined()) state->max_exp_avg_sq(max_exp_avg_sq);
    return std::unique_ptr<optim::OptimizerParamState>(std::move(state));
  };
  if (kind == OptimizerKind::kAdam) return fill(std::make_unique<optim::AdamParamState>());
  return fill(std::make_unique<optim::AdamWParamState>());
}

Status AddOptimizerState(Checkpoint* ck, const optim::Optimizer& optimizer,
                         std::string_view section) {
  RCKPT_ASSIGN_OR_RETURN(OptimizerKind kind, OptimizerKindOf(optimizer));
  RCKPT_RETURN_IF_ERROR(CheckNewSection(ck, section));
  const std::string name(section);
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<Value::Entry> state;
  std::vector<Value> groups;
  int64_t index = 0;
  for (const optim::OptimizerParamGroup& group : optimizer.param_groups()) {
    std::vector<Value> params;
    for (const at::Tensor& p : group.params()) {
      const int64_t i = index++;
      params.emplace_back(i);
      auto it = optimizer.state().find(p.unsafeGetTensorImpl());
      if (it == optimizer.state().end()) continue;
      const std::string prefix = TensorName(name + ".state", std::to_string(i));
      RCKPT_ASSIGN_OR_RETURN(auto fields,
                             StateTensors(kind, *it->second, Amsgrad(kind, group.options())));
      std::vector<Value::Entry> entries;
      for (const auto& [field, t] : fields) {
        std::string tensor_name = TensorName(prefix, field);
        if (ck->FindTensor(tensor_name) != nullptr || ck->FindRng(tensor_name) != nullptr) {
          return Status::InvalidArgument("the tensor name '" + tensor_name +
                                         "' is taken in the checkpoint");
        }
        RCKPT_ASSIGN_OR_RETURN(Tensor tensor, FromTorch(t, tensor_name));
        entries.emplace_back(Value(field), Value::TensorRef(tensor_name));
        tensors.emplace_back(std::move(tensor_name), std::move(tensor));
      }
      if (!entries.empty()) state.emplace_back(Value(i), Value::Map(std::move(entries)));
    }
    groups.push_back(GroupTree(kind, group.options(), Value::List(std::move(params))));
  }
  RCKPT_RETURN_IF_ERROR(ck->AddSection(section, DefaultRoleForSection(section)));
  for (auto& [tensor_name, tensor] : tensors) {
    RCKPT_RETURN_IF_ERROR(ck->AddTensor(section, tensor_name, std::move(tensor)));
  }
  ck->Tree()[section] = Value::Map({{"state", Value::Map(std::move(state))},
                                    {"param_groups", Value::List(std::move(groups))}});
  return Status::Ok();
}

Status RestoreOptimizerState(const Loaded& ck, optim::Optimizer& optimizer,
                             std::string_view section) {
  RCKPT_ASSIGN_OR_RETURN(OptimizerKind kind, OptimizerKindOf(optimizer));
  Result<OptimizerLayout> layout = ReadOptimizerLayout(ck.checkpoint.Tree(), section);
  if (!layout.ok()) return layout.status().WithContext("the loaded checkpoint");
  std::vector<optim::OptimizerParamGroup>& groups = optimizer.param_groups();
  if (layout->groups.size() != groups.size()) {
    return Status::InvalidArgument("section '" + std::string(section) + "' has " +
                                   std::to_string(layout->groups.size()) +
                                   " param_groups, the optimizer " +
                                   std::to_string(groups.size()));
  }
  // Saved parameter index -> (group, parameter), as Python pairs them: in
  // the order of the groups and of their parameters.
  std::map<int64_t, std::pair<size_t, at::Tensor>> params;
  std::vector<std::unique_ptr<optim::OptimizerOptions>> options;
  for (size_t g = 0; g < groups.size(); ++g) {
    const OptimizerGroupLayout& saved = layout->groups[g];
    if (saved.params.size() != groups[g].params().size()) {
      return Status::InvalidArgument(saved.where + " has " + std::to_string(saved.params.size()) +
                                     " parameters, the optimizer's group " + std::to_string(g) +
                                     " has " + std::to_string(groups[g].params().size()));
    }
    for (size_t j = 0; j < saved.params.size(); ++j) {
      params.emplace(saved.params[j], std::make_pair(g, groups[g].params()[j]));
    }
    RCKPT_ASSIGN_OR_RETURN(auto o, ReadGroupOptions(kind, saved, groups[g].options()));
    options.push_back(std::move(o));
  }
  std::vector<std::pair<void*, std::unique_ptr<optim::OptimizerParamState>>> states;
  for (const OptimizerParamLayout& entry : layout->state) {
    const auto& [g, param] = params.at(entry.index);
    RCKPT_ASSIGN_OR_RETURN(auto state, ReadParamState(kind, ck, entry, param,
                                                      Amsgrad(kind, *options[g])));
    states.emplace_back(param.unsafeGetTensorImpl(), std::move(state));
  }
  // Everything is checked: now the optimizer changes.
  for (size_t g = 0; g < groups.size(); ++g) groups[g].set_options(std::move(options[g]));
  optimizer.state().clear();
  for (auto& [key, state] : states) optimizer.state()[key] = std::move(state);
  return Status::Ok();
}

}  // namespace

Status AddOptimizer(Checkpoint* ck, const optim::Optimizer& optimizer, std::string_view section) {
  return Guard("AddOptimizer", [&] { return AddOptimizerState(ck, optimizer, section); });
}

Status RestoreOptimizer(const Loaded& ck, optim::Optimizer& optimizer, std::string_view section) {
  return Guard("RestoreOptimizer",
               [&] { return RestoreOptimizerState(ck, optimizer, section); });
}

}  // namespace rckpt::torch
