// The torch format's state dict from a rank's training state and back. Model tensors are the
// rank's local (tensor-parallel shard) tensors in the model's dtype under the parameters' names;
// the optimizer is laid out as Megatron's non-distributed optimizer state_dict: {'optimizer':
// torch's {'state': {i: {...}}, 'param_groups': [...]}, 'fp32_from_fp16_params': [[...]] (16-bit
// models), 'grad_scaler': {...}}, params numbered in mactor's optimizer order and named in the
// group's 'param_names' (torch's own optional key) so a load matches them by name.
#include "training/torch_checkpointing.hpp"

#include <cstring>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/torch_file.hpp"
#include "checkpoint/torch_layout.hpp"
#include "config/config_json.hpp"
#include "model/optimizer_adam.hpp"
#include "training/checkpoint_state.hpp"
#include "training/distrib_optim_file.hpp"
#include "training/fp8_checkpoint_state.hpp"
#include "training/host_floats.hpp"
#include "training/torch_pickle_values.hpp"

namespace mactor::training {
namespace {

using checkpoint::checkpoint_error;
using checkpoint::pickle_value;
using json = nlohmann::json;
using kind = pickle_value::kind;

std::vector<std::int64_t> local_shape(const model::parameter& p, int tp) {
  return model::shard_shape(p.full_shape, p.split, tp);
}

std::string model_key(std::size_t chunks, std::size_t c) {
  return chunks == 1 ? "model" : "model" + std::to_string(c);
}

pickle_value optimizer_dict(const config::megatron_args& a, stage_engine& engine, int tp) {
  auto& opt = engine.optimizer();
  const auto slots = optimizer_slots(engine);
  auto state = pickle_value::dict(), params = pickle_value::list(), names = pickle_value::list(),
       fp32 = pickle_value::list();
  const std::int64_t steps = optimizer_steps(opt);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    const auto shape = local_shape(*s.param, tp);
    auto entry = pickle_value::dict();
    for (const auto& st : state_tensors(opt, i)) {
      if (st.empty()) continue;
      const auto v = st.values();
      entry.set(st.kind, pickle_value::of_tensor(make_tensor(v.data(), v.size(), shape, tensor::dtype::float32)));
    }
    if (!entry.entries.empty()) {
      if (a.training.optimizer == "adam") entry.set("step", pickle_value::integer(steps));
      state.set(static_cast<std::int64_t>(i), std::move(entry));
    }
    params.items.push_back(pickle_value::integer(static_cast<std::int64_t>(i)));
    names.items.push_back(pickle_value::text(s.param->name));
    const host_floats main(opt.params()[i].where, opt.params()[i].value, 0, s.end - s.begin);
    fp32.items.push_back(
        pickle_value::of_tensor(make_tensor(main.local(), s.end - s.begin, shape, tensor::dtype::float32)));
  }
  auto group = pickle_value::dict();
  group.set("params", std::move(params));
  group.set("param_names", std::move(names));
  auto inner = pickle_value::dict();
  inner.set("state", std::move(state));
  inner.set("param_groups", pickle_value::list({std::move(group)}));
  auto out = pickle_value::dict();
  out.set("optimizer", std::move(inner));
  if (engine.main_params().separate()) out.set("fp32_from_fp16_params", pickle_value::list({std::move(fp32)}));
  if (engine.scaler()) out.set("grad_scaler", from_json(scaler_json(engine.scaler())));
  return out;
}

}  // namespace

pickle_value torch_state_dict(const config::megatron_args& a, parallel_context& ctx, stage_engine& engine,
                              const model::lr_scheduler& scheduler, const training_position& at,
                              std::int64_t padded_vocab_size) {
  const int tp = ctx.groups().tp();
  json args = json::parse(config::to_json(a));
  args["consumed_train_samples"] = at.consumed_train_samples;
  args["skipped_train_samples"] = at.skipped_train_samples;
  args["consumed_valid_samples"] = at.consumed_valid_samples;
  args["padded_vocab_size"] = padded_vocab_size;
  args["iteration"] = at.iteration;
  auto ns = pickle_value::object("argparse.Namespace");
  for (const auto& [k, v] : args.items()) ns.set(k, from_json(v));
  auto root = pickle_value::dict();
  root.set("args", std::move(ns));
  root.set("checkpoint_version", pickle_value::real(3.0));
  root.set("iteration", pickle_value::integer(at.iteration));
  auto& chunks = engine.chunks();
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    auto model = pickle_value::dict(true);
    // A 16-bit model saves its weights (main parameters of other ranks' shards are stale here),
    // those held as fp8 dequantized.
    auto weights = engine.main_params().separate() ? engine.main_params().model_values(c) : std::vector<float>();
    if (engine.fp8_params() && !weights.empty()) engine.fp8_params()->dequantize_into(c, weights);
    for (const auto& p : chunks[c].parameters()) {
      const host_floats main(weights.empty() ? engine.device() : tensor::cpu,
                             weights.empty() ? engine.main_params().value_at(c, p.offset) : weights.data() + p.offset,
                             0, p.numel);
      const float* v = main.local();
      // Megatron's last stage holds the tied embedding as its output layer's weight.
      const std::string key = is_shared_copy(chunks[c], p) ? "output_layer.weight" : p.name;
      model.set(key, pickle_value::of_tensor(make_tensor(v, p.numel, local_shape(p, tp), chunks[c].dtype())));
    }
    // The delayed fp8 recipe's histories and scales (TE's fp8 extra state), equal on every rank
    // of the amax group: each tensor-parallel rank's file carries them.
    for (const auto& [name, state] : fp8_states(chunks[c]))
      model.set(name, pickle_value::of_tensor(make_tensor(state.data(), state.size(), {std::int64_t(state.size())},
                                                          tensor::dtype::float32)));
    root.set(model_key(chunks.size(), c), std::move(model));
  }
  if (!a.checkpointing.no_save_optim.value_or(false)) {
    // The distributed optimizer's per-parameter state goes to distrib_optim.pt.
    root.set("optimizer", a.distributed.use_distributed_optimizer ? distributed_optimizer_dict(a, engine)
                                                                  : optimizer_dict(a, engine, tp));
    root.set("opt_param_scheduler", from_json(scheduler_json(scheduler.state())));
  }
  // Dropout masks and data order derive from (--seed, sample index): the position is the whole
  // random state, so rng_state records the seed instead of Megatron's generator states.
  auto rng = pickle_value::dict();
  rng.set("seed", pickle_value::integer(a.initialization.seed));
  rng.set("kind", pickle_value::text("derived from seed and sample index"));
  root.set("rng_state", pickle_value::list({std::move(rng)}));
  root.set("num_floating_point_operations_so_far", pickle_value::real(at.floating_point_operations));
  return root;
}

checkpoint::rank_state capture_torch_checkpoint(const config::megatron_args& a, parallel_context& ctx,
                                                stage_engine& engine, const model::lr_scheduler& scheduler,
                                                const training_position& at, std::int64_t padded_vocab_size) {
  checkpoint::rank_state state;
  state.files.emplace();
  const std::string file = checkpoint::torch_rank_file(ctx.tp_rank(), ctx.pp_rank(), ctx.groups().pp() > 1);
  // Collective over the shard group, so every rank gathers before any returns.
  std::optional<pickle_value> distrib_optim;
  if (a.distributed.use_distributed_optimizer && !a.checkpointing.no_save_optim.value_or(false))
    distrib_optim = distrib_optim_state(a, ctx, engine);
  // The data- and context-parallel replicas of the first hold the same model.
  if (ctx.dp_rank() != 0 || ctx.cp_rank() != 0) return state;
  state.files->emplace_back(file, checkpoint::torch_save_bytes(torch_state_dict(a, ctx, engine, scheduler, at, padded_vocab_size)));
  if (distrib_optim)
    state.files->emplace_back(checkpoint::torch_distrib_optim_file(file), checkpoint::torch_save_bytes(*distrib_optim));
  return state;
}

namespace {

// Refuses a file saved under another tensor/pipeline split (the torch format cannot reshard).
void check_layout(const pickle_value& root, const std::filesystem::path& file, int tp, int pp) {
  const pickle_value* args = root.find("args");
  if (!args) return;
  const pickle_value* saved_tp = args->find("tensor_model_parallel_size");
  const pickle_value* saved_pp = args->find("pipeline_model_parallel_size");
  if (!saved_tp || !saved_pp || saved_tp->k != kind::integer || saved_pp->k != kind::integer) return;
  if (saved_tp->i != tp || saved_pp->i != pp)
    throw checkpoint_error(file.string() + " was saved with --tensor-model-parallel-size " + std::to_string(saved_tp->i) +
                           " --pipeline-model-parallel-size " + std::to_string(saved_pp->i) + " but this run uses " +
                           std::to_string(tp) + " and " + std::to_string(pp) +
                           "; a --ckpt-format torch checkpoint loads only under the layout that saved it (save it "
                           "as torch_dist to change the layout)");
}

std::filesystem::path rank_file(const std::filesystem::path& dir, parallel_context& ctx) {
  const int tp = ctx.groups().tp(), pp = ctx.groups().pp();
  const auto file = dir / checkpoint::torch_rank_file(ctx.tp_rank(), ctx.pp_rank(), pp > 1);
  if (std::filesystem::exists(file)) return file;
  std::string found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("mp_rank_", 0) == 0) found += " " + e.path().filename().string();
  throw checkpoint_error(dir.string() + " has no " + checkpoint::torch_rank_file(ctx.tp_rank(), ctx.pp_rank(), pp > 1) +
                         " (it holds:" + found + "); this run's layout is --tensor-model-parallel-size " +
                         std::to_string(tp) + " --pipeline-model-parallel-size " + std::to_string(pp) +
                         ", and a --ckpt-format torch checkpoint loads only under the layout that saved it");
}

void load_optimizer(const pickle_value& root, stage_engine& engine, int tp, const std::string& where) {
  const pickle_value* o = root.find("optimizer");
  const pickle_value* inner = o ? o->find("optimizer") : nullptr;
  if (!inner) throw checkpoint_error(where + " holds no optimizer state (saved with --no-save-optim?); pass --no-load-optim to load the model alone");
  const pickle_value* state = inner->find("state");
  const pickle_value* groups = inner->find("param_groups");
  // Index -> name, from the groups' param_names.
  std::vector<std::pair<std::int64_t, std::string>> order;
  if (groups)
    for (const auto& g : groups->items) {
      const pickle_value* ids = g.find("params");
      const pickle_value* names = g.find("param_names");
      for (std::size_t k = 0; ids && k < ids->items.size(); ++k)
        order.emplace_back(ids->items[k].i, names && k < names->items.size() ? names->items[k].s : std::string());
    }
  // Megatron numbers params by its own param groups, which mactor does not rebuild: without the
  // names a match by position could pair same-shaped params wrongly, so it is refused.
  bool named_all = !order.empty();
  for (const auto& [id, name] : order) named_all = named_all && !name.empty();
  if (!named_all)
    throw checkpoint_error(where + " numbers its optimizer params without 'param_names' (Megatron's own files do), "
                           "so mactor cannot match them to its parameters; pass --no-load-optim (or --finetune) to "
                           "load the model alone");
  auto& opt = engine.optimizer();
  const auto slots = optimizer_slots(engine);
  std::vector<const pickle_value*> fp32;
  if (const pickle_value* f = o->find("fp32_from_fp16_params"))
    for (const auto& g : f->items)
      for (const auto& t : g.items) fp32.push_back(&t);
  std::int64_t steps = 0;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    // The saved position of this param, by name.
    std::size_t pos = order.size();
    for (std::size_t k = 0; k < order.size(); ++k)
      if (order[k].second == s.param->name) pos = k;
    if (pos == order.size())
      throw checkpoint_error(where + " has no optimizer state for " + s.param->name + "; pass --no-load-optim");
    const std::int64_t id = order[pos].first;
    const auto shape = local_shape(*s.param, tp);
    const std::string what = where + ": optimizer state of " + s.param->name;
    if (const pickle_value* e = state ? state->find(id) : nullptr) {
      for (auto& st : state_tensors(opt, i)) st.assign(floats_of(e->find(st.kind), shape, what + " (" + st.kind + ")"));
      if (const pickle_value* step = e->find("step"))
        steps = step->k == kind::tensor ? static_cast<std::int64_t>(floats_of(step, step->tensor->shape, what)[0])
                                        : static_cast<std::int64_t>(step->number(what + " step"));
    }
    if (engine.main_params().separate() && pos < fp32.size()) {
      const auto v = floats_of(fp32[pos], shape, what + " (fp32_from_fp16_params)");
      write_floats(opt.params()[i].where, opt.params()[i].value, v);
    }
  }
  if (auto* adam = dynamic_cast<model::adam_optimizer*>(&opt))
    for (auto& st : adam->state()) st.step = st.exp_avg.empty() ? 0 : steps;
  if (auto* scaler = engine.scaler(); scaler && o->find("grad_scaler")) {
    const json g = to_json(*o->find("grad_scaler"));
    scaler->load({g.at("scale").get<float>(), g.at("growth_tracker").get<std::int64_t>(),
                  g.at("hysteresis_tracker").get<std::int64_t>()});
  }
}

// --use-distributed-optimizer: the model file's param groups and its distrib_optim.pt.
void load_distributed_optimizer(const pickle_value& root, const config::megatron_args& a, stage_engine& engine,
                                const std::filesystem::path& file, const std::string& where) {
  const pickle_value* o = root.find("optimizer");
  if (!o) throw checkpoint_error(where + " holds no optimizer state (saved with --no-save-optim?); pass --no-load-optim to load the model alone");
  if (const pickle_value* inner = o->find("optimizer"); inner && inner->find("state"))
    throw checkpoint_error(where + " was saved without --use-distributed-optimizer (its optimizer state is in the "
                           "model file, not in distrib_optim.pt); drop --use-distributed-optimizer or pass --no-load-optim");
  const auto optim_file = file.parent_path() / "distrib_optim.pt";
  if (!std::filesystem::exists(optim_file))
    throw checkpoint_error(optim_file.string() + " is missing: the checkpoint holds no distributed optimizer state; "
                           "pass --no-load-optim to load the model alone");
  load_distrib_optim(checkpoint::torch_load(optim_file), *o, a, engine, optim_file.string());
}

}  // namespace

loaded_checkpoint load_torch_checkpoint(const config::megatron_args& a, parallel_context& ctx, stage_engine& engine,
                                        model::lr_scheduler& scheduler, const std::filesystem::path& dir, bool finetune) {
  const int tp = ctx.groups().tp();
  const auto file = rank_file(dir, ctx);
  const std::string where = file.string();
  const pickle_value root = checkpoint::torch_load(file);
  check_layout(root, file, tp, ctx.groups().pp());
  loaded_checkpoint out;
  out.directory = dir.string();
  if (const pickle_value* it = root.find("iteration")) out.saved_iteration = it->i;
  auto& chunks = engine.chunks();
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const pickle_value* model = root.find(model_key(chunks.size(), c));
    if (!model) throw checkpoint_error(where + " has no '" + model_key(chunks.size(), c) + "' (saved with another --num-layers-per-virtual-pipeline-stage?)");
    // Megatron loads the model strictly: a tensor this model has no parameter for is an error
    // (TransformerEngine's _extra_state entries aside).
    for (const auto& [key, value] : model->entries) {
      if (key.k != kind::text || key.s.ends_with("._extra_state") || is_fp8_state_name(key.s)) continue;
      bool known = false;
      for (const auto& p : chunks[c].parameters())
        known = known || p.name == key.s || (key.s == "output_layer.weight" && is_shared_copy(chunks[c], p));
      if (!known)
        throw checkpoint_error(where + " holds " + key.s + ", which this model does not have; it was saved by a "
                               "different model (check --num-layers, --swiglu, --untie-embeddings-and-output-weights)");
    }
    for (auto& p : chunks[c].parameters()) {
      const pickle_value* t = model->find(p.name);
      // Megatron's last stage keeps the tied embedding as output_layer.weight.
      if (!t && is_shared_copy(chunks[c], p)) t = model->find("output_layer.weight");
      if (!t) throw checkpoint_error(where + " has no tensor " + p.name + " in '" + model_key(chunks.size(), c) +
                                     "'; was it saved by a different model (check --num-layers, --swiglu, "
                                     "--untie-embeddings-and-output-weights)?");
      const auto v = floats_of(t, local_shape(p, tp), where + ": " + p.name);
      write_floats(engine.device(), engine.main_params().value_at(c, p.offset), v);
    }
    // Before the fp8 weights are cast with the weight's scale (model_params_from_main); a run
    // without fp8 ignores them.
    restore_fp8_states(chunks[c], [&](const std::string& name) -> std::optional<std::vector<float>> {
      const pickle_value* t = model->find(name);
      if (!t) return std::nullopt;
      const auto n = t->k == kind::tensor && t->tensor->shape.size() == 1 ? t->tensor->shape[0] : -1;
      return floats_of(t, {n}, where + ": " + name);
    }, where);
  }
  const bool load_optim = !finetune && !a.checkpointing.no_load_optim.value_or(false);
  if (load_optim) {
    if (a.distributed.use_distributed_optimizer)
      load_distributed_optimizer(root, a, engine, file, where);
    else if (std::filesystem::exists(file.parent_path() / "distrib_optim.pt"))
      throw checkpoint_error(where + " was saved with --use-distributed-optimizer (its optimizer state is in "
                             "distrib_optim.pt); pass --use-distributed-optimizer, or --no-load-optim to load the model alone");
    else
      load_optimizer(root, engine, tp, where);  // a 16-bit model's fp32 main parameters too
    const pickle_value* sched = root.find("opt_param_scheduler");
    if (!sched) throw checkpoint_error(where + " has no LR scheduler state; pass --no-load-optim to start the schedule anew");
    try {
      scheduler.load_state(scheduler_from_json(to_json(*sched), where));
    } catch (const std::invalid_argument& e) {
      throw checkpoint_error(where + ": " + e.what());
    }
    out.optimizer_loaded = true;
  }
  engine.model_params_from_main();
  if (!finetune) {
    const json args = root.find("args") ? to_json(*root.find("args")) : json::object();
    out.position.iteration = out.saved_iteration;
    out.position.consumed_train_samples = args.value("consumed_train_samples", std::int64_t{0});
    out.position.skipped_train_samples = args.value("skipped_train_samples", std::int64_t{0});
    out.position.consumed_valid_samples = args.value("consumed_valid_samples", std::int64_t{0});
    if (const pickle_value* f = root.find("num_floating_point_operations_so_far"))
      out.position.floating_point_operations = f->number(where + ": num_floating_point_operations_so_far");
  }
  return out;
}

std::string torch_checkpoint_args(const std::filesystem::path& dir) {
  for (const bool pipeline : {false, true}) {
    const auto file = dir / checkpoint::torch_rank_file(0, 0, pipeline);
    if (!std::filesystem::exists(file)) continue;
    const pickle_value root = checkpoint::torch_load(file);
    const pickle_value* args = root.find("args");
    if (!args) throw checkpoint_error(file.string() + " has no saved arguments");
    return to_json(*args).dump();
  }
  throw checkpoint_error(dir.string() + " has neither mp_rank_00 nor mp_rank_00_000; is it a torch-format checkpoint?");
}

}  // namespace mactor::training
