// Optimizers: torch::optim::Adam, AdamW and SGD in the layout of Python's
// optimizer.state_dict().

#include <c10/util/Type.h>

#include <algorithm>
#include <cmath>

#include "bridge.h"
#include "dict_layout.h"
#include "optimizer_layout.h"

namespace rckpt::libtorch {
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
  return Status::Unsupported("rckpt::libtorch saves and restores the state of "
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
    OptimizerKind kind, const OptimizerGroupLayout& g, const optim::OptimizerOptions& current,
    const RestoreOptimizerOptions& restore) {
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
  // Adam and AdamW differ only in how weight_decay is applied, so the
  // state of one fits the other and would change the update silently. A
  // file without the key (older torch wrote none, for either) cannot tell.
  const bool into_adamw = kind == OptimizerKind::kAdamW;
  RCKPT_ASSIGN_OR_RETURN(bool decoupled, g.Flag("decoupled_weight_decay", into_adamw));
  if (decoupled != into_adamw && !restore.accept_other_adam_variant) {
    return Status::InvalidArgument(
        g.where +
        (decoupled ? " has decoupled_weight_decay=True (AdamW's update, what Python's AdamW "
                     "writes): restore it into a torch::optim::AdamW"
                   : " has decoupled_weight_decay=False (Adam's update, what Python's Adam "
                     "writes): restore it into a torch::optim::Adam") +
        ", or set RestoreOptimizerOptions::accept_other_adam_variant to restore it into this " +
        OptimizerClass(kind));
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

// A state tensor of the file, checked against its parameter (OwnTensor
// places it).
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
  return t;
}

// The tensor a restored state keeps: the loaded values on the parameter's
// device (and in its dtype, for a floating-point parameter), as Python's
// load_state_dict moves them, copied into the optimizer's own tensor when it
// has one that fits, as RestoreModule copies into parameters. Never the
// loaded tensor itself: that is the caller's, and on the host a view of the
// file's mapping, which training would write through.
at::Tensor OwnTensor(const at::Tensor& loaded, const at::Tensor& own, const at::Tensor& param) {
  const at::ScalarType dtype =
      param.is_floating_point() ? param.scalar_type() : loaded.scalar_type();
  if (own.defined() && own.sizes().equals(loaded.sizes()) && own.device() == param.device() &&
      own.scalar_type() == dtype) {
    own.copy_(loaded);
    return own;
  }
  return loaded.to(param.device(), dtype, /*non_blocking=*/false, /*copy=*/true);
}

// Replaces the loaded tensors of `state` with tensors of the optimizer's
// (OwnTensor), `own` being the parameter's state before the restore, if any.
void OwnStateTensors(OptimizerKind kind, optim::OptimizerParamState& state,
                     const optim::OptimizerParamState* own, const at::Tensor& param) {
  auto place = [&](const at::Tensor& loaded, const at::Tensor* mine) {
    return OwnTensor(loaded, mine != nullptr ? *mine : at::Tensor(), param);
  };
  if (kind == OptimizerKind::kSgd) {
    auto& s = static_cast<optim::SGDParamState&>(state);
    const auto* o = static_cast<const optim::SGDParamState*>(own);
    if (s.momentum_buffer().defined()) {
      s.momentum_buffer(place(s.momentum_buffer(), o ? &o->momentum_buffer() : nullptr));
    }
    return;
  }
  auto adam = [&](auto& s, const auto* o) {
    s.exp_avg(place(s.exp_avg(), o ? &o->exp_avg() : nullptr));
    s.exp_avg_sq(place(s.exp_avg_sq(), o ? &o->exp_avg_sq() : nullptr));
    if (s.max_exp_avg_sq().defined()) {
      s.max_exp_avg_sq(place(s.max_exp_avg_sq(), o ? &o->max_exp_avg_sq() : nullptr));
    }
  };
  if (kind == OptimizerKind::kAdam) {
    adam(static_cast<optim::AdamParamState&>(state),
         static_cast<const optim::AdamParamState*>(own));
  } else {
    adam(static_cast<optim::AdamWParamState&>(state),
         static_cast<const optim::AdamWParamState*>(own));
  }
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
  OrderAfterC10Stream(ck);
  return Status::Ok();
}

Status RestoreOptimizerState(const Loaded& ck, optim::Optimizer& optimizer,
                             const RestoreOptimizerOptions& restore) {
  const std::string_view section = restore.section;
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
    RCKPT_ASSIGN_OR_RETURN(auto o, ReadGroupOptions(kind, saved, groups[g].options(), restore));
    options.push_back(std::move(o));
  }
  std::vector<std::pair<at::Tensor, std::unique_ptr<optim::OptimizerParamState>>> states;
  for (const OptimizerParamLayout& entry : layout->state) {
    const auto& [g, param] = params.at(entry.index);
    RCKPT_ASSIGN_OR_RETURN(auto state, ReadParamState(kind, ck, entry, param,
                                                      Amsgrad(kind, *options[g])));
    states.emplace_back(param, std::move(state));
  }
  // Everything is checked: now the optimizer changes.
  for (size_t g = 0; g < groups.size(); ++g) groups[g].set_options(std::move(options[g]));
  auto& live = optimizer.state();
  for (auto& [param, state] : states) {
    auto it = live.find(param.unsafeGetTensorImpl());
    OwnStateTensors(kind, *state, it != live.end() ? it->second.get() : nullptr, param);
  }
  live.clear();
  for (auto& [param, state] : states) live[param.unsafeGetTensorImpl()] = std::move(state);
  return Status::Ok();
}

}  // namespace

Status AddOptimizer(Checkpoint* ck, const optim::Optimizer& optimizer, std::string_view section) {
  return Guard("AddOptimizer", [&] { return AddOptimizerState(ck, optimizer, section); });
}

Status RestoreOptimizer(const Loaded& ck, optim::Optimizer& optimizer, std::string_view section) {
  return RestoreOptimizer(ck, optimizer, RestoreOptimizerOptions{.section = std::string(section)});
}

Status RestoreOptimizer(const Loaded& ck, optim::Optimizer& optimizer,
                        const RestoreOptimizerOptions& options) {
  return Guard("RestoreOptimizer", [&] { return RestoreOptimizerState(ck, optimizer, options); });
}

}  // namespace rckpt::libtorch
