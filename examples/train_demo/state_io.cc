#include "state_io.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string_view>

#include "dataset.h"
#include "rckpt/rng.h"

namespace train_demo {
namespace {

using rckpt::Checkpoint;
using rckpt::Device;
using rckpt::Result;
using rckpt::Status;
using rckpt::Value;
using rckpt::ValueKind;

constexpr int64_t kStateVersion = 1;
constexpr const char* kProgram = "rckpt-train-demo";

struct Engine {
  const char* name;
  std::mt19937_64 TrainState::*engine;
};
constexpr Engine kEngines[] = {
    {"rng.data", &TrainState::data_rng},
    {"rng.init", &TrainState::init_rng},
    {"rng.shuffle", &TrainState::shuffle_rng},
    {"rng.dropout", &TrainState::dropout_rng},
};

// The key of `t` inside its tree map: the name without its section prefix.
std::string ShortName(const StateTensor& t, std::string_view prefix) {
  return t.name.substr(prefix.size());
}

Value ConfigTree(const Config& c) {
  Value v;
  v["input_dim"] = kInputDim;
  v["hidden"] = c.hidden;
  v["activations"] = Value::List({"tanh", "relu"});
  v["dropout"] = c.dropout;
  v["n_samples"] = c.n_samples;
  v["n_valid"] = c.n_valid;
  v["batch_size"] = c.batch_size;
  v["base_lr"] = c.base_lr;
  v["plateau_factor"] = c.plateau_factor;
  v["plateau_patience"] = c.plateau_patience;
  v["min_lr"] = c.min_lr;
  v["stop_patience"] = c.stop_patience;
  v["seed"] = static_cast<int64_t>(c.seed);
  return v;
}

Value OptimizerTree(const TrainState& s) {
  std::vector<Value::Entry> state;
  std::vector<Value> param_ids;
  for (int i = 0; i < kNumParams; ++i) {
    Value per_param;
    per_param["step"] = Value::TensorRef(s.step[i].name);
    per_param["exp_avg"] = Value::TensorRef(s.exp_avg[i].name);
    per_param["exp_avg_sq"] = Value::TensorRef(s.exp_avg_sq[i].name);
    // torch keys optimizer state by integer parameter id.
    state.emplace_back(Value(i), std::move(per_param));
    param_ids.emplace_back(i);
  }
  const Config& c = s.config;
  Value group;
  group["lr"] = s.controller.lr;
  group["betas"] = Value::Tuple({c.beta1, c.beta2});
  group["eps"] = c.eps;
  group["weight_decay"] = 0.0;
  group["amsgrad"] = false;
  group["params"] = Value::List(std::move(param_ids));
  Value v;
  v["state"] = Value::Map(std::move(state));
  v["param_groups"] = Value::List({std::move(group)});
  return v;
}

Value ControllerTree(const TrainState& s) {
  const Controller& c = s.controller;
  Value v;
  v["global_step"] = c.global_step;
  v["current_epoch"] = c.epoch;
  v["boredom"] = c.boredom;
  v["stopped_early"] = c.stopped_early;
  Value& sched = v["scheduler"];
  sched["kind"] = "ReduceLROnPlateau";
  sched["best"] = c.plateau_best;
  sched["num_bad_epochs"] = c.plateau_bad_epochs;
  return v;
}

Value MetricsTree(const TrainState& s) {
  const Metrics& m = s.metrics;
  Value v;
  v["metric_names"] = Value::List({"train_loss", "valid_loss", "lr"});
  Value history = Value::List();
  for (const EpochRecord& r : m.history) {
    Value e;
    e["epoch"] = r.epoch;
    e["step"] = r.step;
    e["train_loss"] = r.train_loss;
    e["valid_loss"] = r.valid_loss;
    e["lr"] = r.lr;
    e["better"] = r.better;
    history.Append(std::move(e));
  }
  v["history"] = std::move(history);
  v["best_valid_loss"] = m.best_valid_loss;
  v["best_epoch"] = m.best_epoch;
  v["running_loss_sum"] = m.running_loss_sum;
  v["running_batches"] = m.running_batches;
  Value& best = v["best_model"];
  for (const StateTensor& t : s.best_model) {
    best[ShortName(t, "metrics.best_model.")] = Value::TensorRef(t.name);
  }
  return v;
}

// Reading the tree back: every access names the path it expected.

Result<const Value*> Field(const Value& map, std::string_view where,
                           std::string_view key) {
  const Value* v = map.Find(key);
  if (v == nullptr) {
    return Status::Corruption("state tree '" + std::string(where) + "." +
                              std::string(key) + "': missing");
  }
  return v;
}

Status KindError(std::string_view where, std::string_view key, ValueKind expected,
                 ValueKind actual) {
  return Status::Corruption("state tree '" + std::string(where) + "." +
                            std::string(key) + "': expected " +
                            std::string(rckpt::ValueKindName(expected)) + ", found " +
                            std::string(rckpt::ValueKindName(actual)));
}

Result<const Value*> Typed(const Value& map, std::string_view where,
                           std::string_view key, ValueKind kind) {
  RCKPT_ASSIGN_OR_RETURN(const Value* v, Field(map, where, key));
  if (v->kind() != kind) return KindError(where, key, kind, v->kind());
  return v;
}

Result<int64_t> Int(const Value& map, std::string_view where, std::string_view key) {
  RCKPT_ASSIGN_OR_RETURN(const Value* v, Typed(map, where, key, ValueKind::kInt));
  return v->as_int();
}

Result<double> Float(const Value& map, std::string_view where, std::string_view key) {
  RCKPT_ASSIGN_OR_RETURN(const Value* v, Typed(map, where, key, ValueKind::kFloat));
  return v->as_float();
}

Result<bool> Bool(const Value& map, std::string_view where, std::string_view key) {
  RCKPT_ASSIGN_OR_RETURN(const Value* v, Typed(map, where, key, ValueKind::kBool));
  return v->as_bool();
}

Result<const Value*> Map(const Value& map, std::string_view where, std::string_view key) {
  return Typed(map, where, key, ValueKind::kMap);
}

Status OutOfRange(std::string_view what, int64_t value, std::string_view expected) {
  return Status::Corruption(std::string(what) + ": expected " + std::string(expected) +
                            ", found " + std::to_string(value));
}

Result<Config> ReadConfig(const Value& tree) {
  RCKPT_ASSIGN_OR_RETURN(const Value* v, Map(tree, "", "config"));
  const std::string_view w = "config";
  Config c;
  RCKPT_ASSIGN_OR_RETURN(int64_t input_dim, Int(*v, w, "input_dim"));
  if (input_dim != kInputDim) {
    return OutOfRange("state tree 'config.input_dim'", input_dim, std::to_string(kInputDim));
  }
  RCKPT_ASSIGN_OR_RETURN(c.hidden, Int(*v, w, "hidden"));
  RCKPT_ASSIGN_OR_RETURN(c.dropout, Float(*v, w, "dropout"));
  RCKPT_ASSIGN_OR_RETURN(c.n_samples, Int(*v, w, "n_samples"));
  RCKPT_ASSIGN_OR_RETURN(c.n_valid, Int(*v, w, "n_valid"));
  RCKPT_ASSIGN_OR_RETURN(c.batch_size, Int(*v, w, "batch_size"));
  RCKPT_ASSIGN_OR_RETURN(c.base_lr, Float(*v, w, "base_lr"));
  RCKPT_ASSIGN_OR_RETURN(c.plateau_factor, Float(*v, w, "plateau_factor"));
  RCKPT_ASSIGN_OR_RETURN(c.plateau_patience, Int(*v, w, "plateau_patience"));
  RCKPT_ASSIGN_OR_RETURN(c.min_lr, Float(*v, w, "min_lr"));
  RCKPT_ASSIGN_OR_RETURN(c.stop_patience, Int(*v, w, "stop_patience"));
  RCKPT_ASSIGN_OR_RETURN(int64_t seed, Int(*v, w, "seed"));
  c.seed = static_cast<uint64_t>(seed);
  if (c.hidden < 1 || c.hidden > 4096) {
    return OutOfRange("state tree 'config.hidden'", c.hidden, "1..4096");
  }
  if (c.n_samples < 2 || c.n_samples > (int64_t{1} << 24)) {
    return OutOfRange("state tree 'config.n_samples'", c.n_samples, "2..2^24");
  }
  if (c.n_valid < 1 || c.n_valid >= c.n_samples) {
    return OutOfRange("state tree 'config.n_valid'", c.n_valid, "1..n_samples-1");
  }
  if (c.batch_size < 1 || c.batch_size > c.n_samples - c.n_valid) {
    return OutOfRange("state tree 'config.batch_size'", c.batch_size,
                      "1..number of training samples");
  }
  if (!(c.dropout >= 0 && c.dropout < 1)) {
    return Status::Corruption("state tree 'config.dropout': expected [0, 1), found " +
                              std::to_string(c.dropout));
  }
  // The betas and eps live in the optimizer's param group, as in torch.
  RCKPT_ASSIGN_OR_RETURN(const Value* opt, Map(tree, "", "optimizer"));
  RCKPT_ASSIGN_OR_RETURN(const Value* groups,
                         Typed(*opt, "optimizer", "param_groups", ValueKind::kList));
  if (groups->size() != 1 || !groups->items()[0].is_map()) {
    return Status::Corruption(
        "state tree 'optimizer.param_groups': expected one map, found " +
        std::to_string(groups->size()) + " entries");
  }
  const Value& group = groups->items()[0];
  const std::string_view gw = "optimizer.param_groups.0";
  RCKPT_ASSIGN_OR_RETURN(const Value* betas, Typed(group, gw, "betas", ValueKind::kTuple));
  if (betas->size() != 2 || betas->items()[0].kind() != ValueKind::kFloat ||
      betas->items()[1].kind() != ValueKind::kFloat) {
    return Status::Corruption(
        "state tree 'optimizer.param_groups.0.betas': expected a tuple of 2 floats");
  }
  c.beta1 = betas->items()[0].as_float();
  c.beta2 = betas->items()[1].as_float();
  RCKPT_ASSIGN_OR_RETURN(c.eps, Float(group, gw, "eps"));
  return c;
}

Status ReadScalars(const Value& tree, TrainState& s) {
  RCKPT_ASSIGN_OR_RETURN(const Value* opt, Map(tree, "", "optimizer"));
  const Value& group = opt->Find(std::string_view("param_groups"))->items()[0];
  RCKPT_ASSIGN_OR_RETURN(s.controller.lr,
                         Float(group, "optimizer.param_groups.0", "lr"));

  RCKPT_ASSIGN_OR_RETURN(const Value* c, Map(tree, "", "controller"));
  Controller& ctl = s.controller;
  RCKPT_ASSIGN_OR_RETURN(ctl.global_step, Int(*c, "controller", "global_step"));
  RCKPT_ASSIGN_OR_RETURN(ctl.epoch, Int(*c, "controller", "current_epoch"));
  RCKPT_ASSIGN_OR_RETURN(ctl.boredom, Int(*c, "controller", "boredom"));
  RCKPT_ASSIGN_OR_RETURN(ctl.stopped_early, Bool(*c, "controller", "stopped_early"));
  RCKPT_ASSIGN_OR_RETURN(const Value* sched, Map(*c, "controller", "scheduler"));
  RCKPT_ASSIGN_OR_RETURN(ctl.plateau_best, Float(*sched, "controller.scheduler", "best"));
  RCKPT_ASSIGN_OR_RETURN(ctl.plateau_bad_epochs,
                         Int(*sched, "controller.scheduler", "num_bad_epochs"));

  RCKPT_ASSIGN_OR_RETURN(const Value* m, Map(tree, "", "metrics"));
  Metrics& met = s.metrics;
  RCKPT_ASSIGN_OR_RETURN(const Value* history,
                         Typed(*m, "metrics", "history", ValueKind::kList));
  for (size_t i = 0; i < history->items().size(); ++i) {
    const Value& e = history->items()[i];
    std::string w = "metrics.history." + std::to_string(i);
    if (!e.is_map()) return KindError("metrics.history", std::to_string(i),
                                      ValueKind::kMap, e.kind());
    EpochRecord r;
    RCKPT_ASSIGN_OR_RETURN(r.epoch, Int(e, w, "epoch"));
    RCKPT_ASSIGN_OR_RETURN(r.step, Int(e, w, "step"));
    RCKPT_ASSIGN_OR_RETURN(r.train_loss, Float(e, w, "train_loss"));
    RCKPT_ASSIGN_OR_RETURN(r.valid_loss, Float(e, w, "valid_loss"));
    RCKPT_ASSIGN_OR_RETURN(r.lr, Float(e, w, "lr"));
    RCKPT_ASSIGN_OR_RETURN(r.better, Bool(e, w, "better"));
    met.history.push_back(r);
  }
  RCKPT_ASSIGN_OR_RETURN(met.best_valid_loss, Float(*m, "metrics", "best_valid_loss"));
  RCKPT_ASSIGN_OR_RETURN(met.best_epoch, Int(*m, "metrics", "best_epoch"));
  RCKPT_ASSIGN_OR_RETURN(met.running_loss_sum, Float(*m, "metrics", "running_loss_sum"));
  RCKPT_ASSIGN_OR_RETURN(met.running_batches, Int(*m, "metrics", "running_batches"));

  RCKPT_ASSIGN_OR_RETURN(const Value* db, Map(tree, "", "database"));
  RCKPT_ASSIGN_OR_RETURN(s.cursor, Int(*db, "database", "cursor"));
  return Status::Ok();
}

// The restored indices and cursor are used to index the data: check them.
Status CheckIndices(const TrainState& s) {
  const int64_t n = s.config.n_samples;
  for (const StateTensor* t : {&s.train_indices, &s.valid_indices, &s.order}) {
    for (int64_t idx : t->i64) {
      if (idx < 0 || idx >= n) {
        return OutOfRange("tensor '" + t->name + "'", idx, "indices in [0, n_samples)");
      }
    }
  }
  const int64_t n_train = static_cast<int64_t>(s.order.i64.size());
  if (s.cursor < 0 || s.cursor + s.config.batch_size > n_train ||
      s.cursor % s.config.batch_size != 0) {
    return OutOfRange("state tree 'database.cursor'", s.cursor,
                      "a multiple of batch_size with a full batch left");
  }
  if (s.controller.global_step < 0) {
    return OutOfRange("state tree 'controller.global_step'", s.controller.global_step,
                      ">= 0");
  }
  return Status::Ok();
}

Status AttachTensor(const Checkpoint& ck, StateTensor& t, DeviceMemory& memory) {
  const rckpt::TensorEntry* e = ck.FindTensor(t.name);
  if (e == nullptr) {
    return Status::Corruption("tensor '" + t.name + "': missing from the checkpoint");
  }
  if (e->section != t.section) {
    return Status::Corruption("tensor '" + t.name + "': expected section '" + t.section +
                              "', found '" + e->section + "'");
  }
  if (e->tensor.dtype() != t.dtype || e->tensor.shape() != t.shape) {
    return Status::Corruption(
        "tensor '" + t.name + "': expected " + std::string(rckpt::DTypeName(t.dtype)) +
        " " + rckpt::ShapeToString(t.shape) + ", found " +
        std::string(rckpt::DTypeName(e->tensor.dtype())) + " " +
        rckpt::ShapeToString(e->tensor.shape()));
  }
  // From now on the tensor lives wherever the load put it.
  t.master = e->tensor;
  return memory.Download(t);
}

}  // namespace

Result<Checkpoint> ToCheckpoint(const TrainState& s) {
  Checkpoint ck;
  ck.Metadata()["program"] = kProgram;
  ck.Metadata()["state_version"] = std::to_string(kStateVersion);
  for (const StateTensor* t : s.AllTensors()) {
    RCKPT_RETURN_IF_ERROR(ck.AddTensor(t->section, t->name, t->master));
  }
  Value& tree = ck.Tree();
  tree["program"] = kProgram;
  tree["state_version"] = kStateVersion;
  tree["config"] = ConfigTree(s.config);
  Value& model = tree["model"];
  for (int i = 0; i < kNumModelParams; ++i) {
    model[ShortName(s.params[i], "model.")] = Value::TensorRef(s.params[i].name);
  }
  tree["loss"]["kind"] = "gaussian_nll";
  tree["loss"]["log_var"] = Value::TensorRef(s.params[kLogVar].name);
  tree["optimizer"] = OptimizerTree(s);
  tree["controller"] = ControllerTree(s);
  tree["metrics"] = MetricsTree(s);
  Value& db = tree["database"];
  db["cursor"] = s.cursor;
  for (const StateTensor* t : {&s.x, &s.y, &s.train_indices, &s.valid_indices, &s.order}) {
    db[ShortName(*t, "database.")] = Value::TensorRef(t->name);
  }
  Value& rng = tree["rng"];
  for (const Engine& e : kEngines) {
    RCKPT_RETURN_IF_ERROR(ck.AddRng(e.name, rckpt::RngKind::kMt19937_64,
                                    rckpt::CaptureEngine(s.*e.engine)));
    rng[std::string_view(e.name).substr(4)] = Value::RngRef(e.name);
  }
  return ck;
}

Result<TrainState> FromCheckpoint(const Checkpoint& ck, DeviceMemory& memory) {
  const Value& tree = ck.Tree();
  const Value* program = tree.Find(std::string_view("program"));
  if (program == nullptr || program->kind() != ValueKind::kString ||
      program->as_string() != kProgram) {
    return Status::InvalidArgument(
        std::string("not a checkpoint of ") + kProgram +
        ": state tree 'program' is missing or names another program");
  }
  RCKPT_ASSIGN_OR_RETURN(int64_t version, Int(tree, "", "state_version"));
  if (version != kStateVersion) {
    return Status::Unsupported("state tree 'state_version': expected " +
                               std::to_string(kStateVersion) + ", found " +
                               std::to_string(version));
  }
  RCKPT_ASSIGN_OR_RETURN(Config config, ReadConfig(tree));
  TrainState s = LayoutState(config);
  for (StateTensor* t : s.AllTensors()) {
    RCKPT_RETURN_IF_ERROR(AttachTensor(ck, *t, memory));
  }
  RCKPT_RETURN_IF_ERROR(memory.Synchronize());
  for (const Engine& e : kEngines) {
    const rckpt::RngRecord* r = ck.FindRng(e.name);
    if (r == nullptr) {
      return Status::Corruption(std::string("RNG record '") + e.name + "': missing");
    }
    if (r->kind != rckpt::RngKind::kMt19937_64) {
      return Status::Corruption(std::string("RNG record '") + e.name +
                                "': expected kind mt19937_64, found " +
                                std::string(rckpt::RngKindName(r->kind)));
    }
    RCKPT_RETURN_IF_ERROR(rckpt::RestoreEngine(r->bytes, &(s.*e.engine))
                              .WithContext(std::string("RNG record '") + e.name + "'"));
  }
  RCKPT_RETURN_IF_ERROR(ReadScalars(tree, s));
  RCKPT_RETURN_IF_ERROR(CheckIndices(s));
  return s;
}

std::string DescribePlacement(const TrainState& s) {
  // section -> device -> count, in first-seen section order.
  std::vector<std::pair<std::string, std::map<Device, int>>> by_section;
  for (const StateTensor* t : s.AllTensors()) {
    auto it = std::find_if(by_section.begin(), by_section.end(),
                           [&](const auto& p) { return p.first == t->section; });
    if (it == by_section.end()) {
      by_section.emplace_back(t->section, std::map<Device, int>{});
      it = std::prev(by_section.end());
    }
    it->second[t->master.device()] += 1;
  }
  std::string out;
  for (const auto& [section, devices] : by_section) {
    if (!out.empty()) out += "  ";
    out += section + ":";
    bool first = true;
    for (const auto& [device, count] : devices) {
      out += (first ? " " : ", ") + device.ToString() + " (" + std::to_string(count) + ")";
      first = false;
    }
  }
  return out;
}

}  // namespace train_demo
