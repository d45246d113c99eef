// Training state <-> checkpoint pieces. See checkpoint/README.md ("Expressing model/ shards as
// pieces") for how a tensor-parallel shard and a distributed-optimizer range become pieces.
#include "training/checkpointing.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/non_persistent.hpp"
#include "checkpoint/torch_layout.hpp"
#include "config/config_json.hpp"
#include "model/optimizer_adam.hpp"
#include "model/optimizer_sgd.hpp"
#include "training/checkpoint_pieces.hpp"
#include "training/checkpoint_state.hpp"
#include "training/checkpoint_strictness.hpp"
#include "config/data_parallel_sharding.hpp"
#include "training/fp8_checkpoint_state.hpp"
#include "training/host_floats.hpp"
#include "training/local_checkpoint_agreement.hpp"
#include "training/moe_upcycling.hpp"
#include "training/torch_checkpointing.hpp"

namespace mactor::training {
namespace {

using checkpoint::checkpoint_error;
using checkpoint::tensor_piece;
using json = nlohmann::json;

// Megatron's _load_base_checkpoint: with --non-persistent-ckpt-type global, the non-persistent
// directory's checkpoint is loaded when it is at least as new as the persistent one (or
// --ckpt-step's), whatever --ckpt-step says.
void newer_non_persistent(const config::megatron_args& a, std::string& dir, std::optional<std::int64_t>& iteration) {
  const auto& ck = a.checkpointing;
  if (ck.non_persistent_ckpt_type != std::optional<std::string>("global")) return;
  const auto np_dir = checkpoint::non_persistent_dir(ck.non_persistent_global_ckpt_dir, dir);
  const auto np = checkpoint::read_tracker(np_dir);
  if (!np) return;
  const auto persistent = iteration ? iteration : checkpoint::read_tracker(dir);
  if (*np < persistent.value_or(-1)) return;
  dir = np_dir;
  iteration = *np;
}

// The same rule for --non-persistent-ckpt-type local: the newest checkpoint every rank holds (a
// collective: every rank calls it), read from this rank's own directory. Returns whether it is taken.
bool newer_local(const config::megatron_args& a, parallel_context& ctx, std::string& dir,
                 std::optional<std::int64_t>& iteration) {
  const auto local = agreed_local_checkpoint(a, ctx);
  if (!local) return false;
  const auto persistent = iteration ? iteration : checkpoint::read_tracker(dir);
  if (local->iteration < persistent.value_or(-1)) return false;
  dir = local->directory;
  iteration = local->iteration;
  return true;
}

}  // namespace

checkpoint::rank_state capture_checkpoint(const config::megatron_args& a, parallel_context& ctx, stage_engine& engine,
                                          const model::lr_scheduler& scheduler, const training_position& at,
                                          std::int64_t padded_vocab_size, bool whole_rank,
                                          checkpoint::snapshot_buffers* buffers) {
  if (a.checkpointing.ckpt_format == "torch" && !whole_rank)
    return capture_torch_checkpoint(a, ctx, engine, scheduler, at, padded_vocab_size);
  checkpoint::rank_state state;
  const int t = ctx.tp_rank(), tp = ctx.groups().tp();
  // The experts split over their own tensor-parallel group (whole with --expert-tensor-parallel-size 1).
  const auto rank_in_split = [&](const model::parameter& p) { return p.expert ? ctx.expert_tp_rank() : t; };
  const auto split_size = [&](const model::parameter& p) { return p.expert ? ctx.groups().etp() : tp; };
  // Context-parallel ranks hold the same parameters as their data-parallel replica's first one;
  // the distributed optimizer shards over both (Megatron's with_context_parallel group).
  // A whole rank's state (a local checkpoint) holds everything this rank loads, replicas' included.
  const bool first_replica = whole_rank || (ctx.dp_rank() == 0 && ctx.cp_rank() == 0);
  // Expert parallelism: each expert-parallel rank holds its own experts, the same as its
  // expert-data-parallel replicas'; their first one saves them.
  const auto saves = [&](const model::parameter& p) {
    return whole_rank || (p.expert ? ctx.expert_dp_rank() == 0 : first_replica);
  };
  // A piece another rank saves for this one (a replicated tensor's, a later stage's embedding copy).
  const auto saved_elsewhere = [&](const model::gpt_chunk& chunk, const model::parameter& p) {
    return !whole_rank && (is_shared_copy(chunk, p) || (p.split == model::tp_split::replicated && rank_in_split(p) != 0));
  };
  const bool sharded = config::shards_optimizer(a) && ctx.optimizer_shard_group() != nullptr;
  // With several distributed-optimizer instances each holds every shard: the first one saves.
  const bool shard_saver = whole_rank || ctx.optimizer_instance() == 0;
  const auto slots = optimizer_slots(engine);
  // The model as fp32 main parameters (a 16-bit model's weights are these, rounded). A replica
  // holds them all, except a 16-bit model's under the distributed optimizer: each replica holds
  // (and saves, as flat ranges) the shard it updates; the all-gather brings only the 16-bit
  // weights.
  if (sharded && (engine.main_params().separate() || engine.params_sharded())) {
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const auto& s = slots[i];
      if (!shard_saver || saved_elsewhere(*s.chunk, *s.param)) continue;
      const host_floats local(engine.device(), engine.optimizer().params()[i].value - s.begin, s.begin, s.end);
      for (auto& q : pieces_of(s.param->name, *s.param, rank_in_split(*s.param), split_size(*s.param), s.begin, s.end,
                               local.local(), buffers))
        state.pieces.push_back(std::move(q));
    }
  } else {
    for (std::size_t c = 0; c < engine.chunks().size(); ++c)
      for (const auto& p : engine.chunks()[c].parameters()) {
        const auto& chunk = engine.chunks()[c];
        if (!saves(p) || saved_elsewhere(chunk, p)) continue;
        const host_floats main(engine.device(), engine.main_params().value_at(c, p.offset), 0, p.numel);
        for (auto& q : pieces_of(p.name, p, rank_in_split(p), split_size(p), 0, p.numel, main.local(), buffers))
          state.pieces.push_back(std::move(q));
      }
  }
  // Megatron's persistent buffers: the routers' expert biases (equal on every replica).
  if (first_replica && t == 0)
    for (auto& chunk : engine.chunks())
      for (auto* r : chunk.moe_routers())
        if (!r->expert_bias().empty())
          state.pieces.push_back(buffer_piece(r->expert_bias_name(), r->expert_bias().size(), r->expert_bias().data()));
  // The delayed fp8 recipe's histories and scales, equal over the amax group (tensor-, data- and
  // context-parallel ranks): saved where the weight's first tensor-parallel shard is.
  append_fp8_states(engine, [&](const model::parameter& p) { return saves(p) && (whole_rank || rank_in_split(p) == 0); },
                    state);
  if (!a.checkpointing.no_save_optim.value_or(false)) {
    // Whole optimizer state from the first replica; the distributed optimizer's shards from each.
    auto& opt = engine.optimizer();
    std::vector<float> unscaled;  // a state kept in a smaller dtype, as fp32
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const auto& s = slots[i];
      if ((!sharded && !saves(*s.param)) || (sharded && !shard_saver) || saved_elsewhere(*s.chunk, *s.param)) continue;
      for (const auto& tensor : state_tensors(opt, i)) {
        if (tensor.empty()) continue;  // before the first step (or SGD without momentum)
        // The state covers local elements [begin, end): index it from the local tensor's start.
        const float* local = tensor.data(unscaled) - s.begin;
        for (auto& q : pieces_of(optimizer_name(tensor.kind, s.param->name), *s.param, rank_in_split(*s.param),
                                 split_size(*s.param), s.begin, s.end, local, buffers))
          state.pieces.push_back(std::move(q));
      }
    }
  }
  if (ctx.rank() == 0 || whole_rank) {
    json args = json::parse(config::to_json(a));
    args["consumed_train_samples"] = at.consumed_train_samples;
    args["skipped_train_samples"] = at.skipped_train_samples;
    args["num_floating_point_operations_so_far"] = at.floating_point_operations;
    args["consumed_valid_samples"] = at.consumed_valid_samples;
    args["padded_vocab_size"] = padded_vocab_size;
    args["iteration"] = at.iteration;
    json common = {{"checkpoint_version", 3.0},
                   {"iteration", at.iteration},
                   {"args", std::move(args)},
                   {"opt_param_scheduler", scheduler_json(scheduler.state())},
                   {"optimizer", {{"saved", !a.checkpointing.no_save_optim.value_or(false)},
                                  {"kind", a.training.optimizer},
                                  {"step", optimizer_steps(engine.optimizer())},
                                  {"grad_scaler", scaler_json(engine.scaler())}}},
                   // Dropout masks and data order derive from (--seed, sample index): the
                   // position above is the whole random state.
                   {"rng_state", {{"seed", a.initialization.seed}, {"kind", "derived from seed and sample index"}}}};
    state.common = std::move(common);
  }
  return state;
}

std::optional<load_source> load_source_of(const config::megatron_args& a) {
  const auto& c = a.checkpointing;
  // The tracker is read here only to decide the fallback; without one, --load is the source as given.
  if (!c.pretrained_checkpoint || (c.load && checkpoint::read_tracker(*c.load))) {
    if (!c.load) return std::nullopt;
    return load_source{*c.load, c.finetune, false};
  }
  if (!checkpoint::read_tracker(*c.pretrained_checkpoint))
    throw checkpoint_error("No checkpoint found in load directory or pretrained directory: --load " + c.load.value_or("(none)") +
                           " and --pretrained-checkpoint " + *c.pretrained_checkpoint +
                           " have no latest_checkpointed_iteration.txt; check the paths");
  return load_source{*c.pretrained_checkpoint, true, true};
}

std::optional<loaded_checkpoint> load_checkpoint(const config::megatron_args& a, parallel_context& ctx, stage_engine& engine,
                                                 model::lr_scheduler& scheduler) {
  const auto source = load_source_of(a);
  if (a.moe.moe_use_upcycling && checkpoint::read_tracker(a.checkpointing.save.value_or("")))
    throw checkpoint_error("The upcycling destination directory already exists (--save " + *a.checkpointing.save +
                           " holds a checkpoint). Please check if --moe-use-upcycling is mistakenly enabled. Upcycling "
                           "should only be set for the first run when converting the dense model. All subsequent runs "
                           "should remove this flag.");
  if (!source) return std::nullopt;
  std::string dir = source->directory;
  std::optional<std::int64_t> iteration = a.checkpointing.ckpt_step;
  bool from_local = false;  // a local checkpoint is in torch_dist pieces whatever --ckpt-format says
  if (!source->pretrained) {
    newer_non_persistent(a, dir, iteration);
    from_local = newer_local(a, ctx, dir, iteration);
  }
  if (!iteration) {
    iteration = checkpoint::read_tracker(dir);
    if (!iteration) {
      if (a.checkpointing.exit_on_missing_checkpoint)
        throw checkpoint_error("--load " + dir + " has no checkpoint (no " +
                               (std::filesystem::path(dir) / "latest_checkpointed_iteration.txt").string() +
                               ") and --exit-on-missing-checkpoint is set; check the path or drop the flag");
      if (!a.checkpointing.perform_initialization)
        throw checkpoint_error("--no-initialization leaves the weights for a checkpoint to fill, but " + dir +
                               " holds no checkpoint (no latest_checkpointed_iteration.txt): point --load at one, or "
                               "drop --no-initialization");
      return std::nullopt;
    }
  }
  // Megatron's rule: --auto-detect-ckpt-format (and --ckpt-format torch_dist) look at what the
  // iteration holds; --ckpt-format torch loads the torch format.
  const auto iteration_path = checkpoint::iteration_dir(dir, *iteration);
  std::error_code missing;
  if (!from_local && std::filesystem::is_directory(iteration_path, missing)) {
    const bool detect = a.checkpointing.auto_detect_ckpt_format || a.checkpointing.ckpt_format == "torch_dist";
    const auto stored = checkpoint::detect_format(iteration_path);
    if (stored == checkpoint::stored_format::torch && (detect || a.checkpointing.ckpt_format == "torch"))
      return load_torch_checkpoint(a, ctx, engine, scheduler, iteration_path, source->finetune);
    if (stored == checkpoint::stored_format::torch_dist && a.checkpointing.ckpt_format == "torch" && !detect)
      throw checkpoint_error(iteration_path.string() + " is a torch_dist checkpoint but --ckpt-format is torch; "
                             "pass --auto-detect-ckpt-format (or --ckpt-format torch_dist) to load it");
  }
  checkpoint::checkpoint_reader reader(dir, iteration);
  // --moe-use-upcycling: the MoE model's tensors computed from the dense checkpoint's.
  std::optional<moe_upcycling> upcycling;
  if (a.moe.moe_use_upcycling) upcycling.emplace(reader, upcycling_settings_of(a));
  const checkpoint::tensor_source& tensors = upcycling ? static_cast<const checkpoint::tensor_source&>(*upcycling) : reader;
  const std::string where = reader.directory().string();
  loaded_checkpoint out;
  out.directory = where;
  out.saved_iteration = reader.iteration();
  const json& common = reader.common();
  const int t = ctx.tp_rank(), tp = ctx.groups().tp();
  // The experts split over their own tensor-parallel group (whole with --expert-tensor-parallel-size 1).
  const auto rank_in_split = [&](const model::parameter& p) { return p.expert ? ctx.expert_tp_rank() : t; };
  const auto split_size = [&](const model::parameter& p) { return p.expert ? ctx.groups().etp() : tp; };

  // Into `dest` in `dest_where`'s memory (the main parameters are on the model's device).
  auto read_into = [&](const std::string& name, const model::parameter& p, std::size_t begin, std::size_t end,
                       float* dest, tensor::device dest_where = tensor::cpu) {
    if (!tensors.has(name))
      throw checkpoint_error(where + " has no tensor " + name + "; was it saved by a different model (check --num-layers, "
                             "--swiglu, --untie-embeddings-and-output-weights)?");
    std::size_t at = 0;
    for (auto& q : pieces_of(name, p, rank_in_split(p), split_size(p), begin, end, nullptr)) {
      tensors.read(q);
      write_floats(dest_where, dest + at, q.data);
      at += q.data.size();
    }
  };
  // --dist-ckpt-strictness decides what an absent tensor (or an unused one) means; --ckpt-format
  // fsdp_dtensor has Megatron's strict DCP load instead (a tensor the model asks for must be
  // there), or with --no-strict-fsdp-dtensor-load its partial load (the differences printed, the
  // absent tensors keep their initial values).
  const auto& ck = a.checkpointing;
  const std::string strictness = ck.ckpt_format != "fsdp_dtensor" ? ck.dist_ckpt_strictness
                                 : ck.strict_fsdp_dtensor_load    ? "raise_unexpected"
                                                                  : "log_unexpected";
  checkpoint_keys keys;
  std::vector<std::string> requested;
  std::vector<model::moe_router*> biased;
  // Upcycling: Megatron loads the dense checkpoint into the dense model; what only the MoE model
  // has (routers, shared experts, expert biases) keeps its initial values.
  const bool check_keys = !upcycling;
  for (auto& chunk : engine.chunks()) {
    for (auto& p : chunk.parameters()) {
      requested.push_back(p.name);
      if (check_keys && !tensors.has(p.name)) keys.unexpected.push_back(p.name);
    }
    for (auto* r : chunk.moe_routers())
      if (!r->expert_bias().empty()) {
        biased.push_back(r);
        requested.push_back(r->expert_bias_name());
        if (check_keys && !reader.has(r->expert_bias_name())) keys.unexpected.push_back(r->expert_bias_name());
      }
  }
  // fp8 states are optional either way: a run without fp8 (or another recipe) ignores them, a
  // linear with none keeps its fresh state.
  for (const auto& name : reader.names())
    if (is_fp8_state_name(name)) requested.push_back(name);
  if (strictness_checks_missing(strictness) && check_keys)
    keys.missing = unrequested_keys(reader.names(), requested, ctx.world());
  apply_strictness(strictness, keys, where, ctx.rank(),
                   ck.ckpt_format != "fsdp_dtensor" ? ""
                   : ck.strict_fsdp_dtensor_load    ? "--ckpt-format fsdp_dtensor loads strictly; "
                                                      "--no-strict-fsdp-dtensor-load loads the rest"
                                                    : "--no-strict-fsdp-dtensor-load");
  for (std::size_t c = 0; c < engine.chunks().size(); ++c)
    for (auto& p : engine.chunks()[c].parameters()) {
      if (!tensors.has(p.name)) continue;  // allowed by the strictness: it keeps its initial values
      if (tensors.global_shape(p.name) != p.full_shape)
        throw checkpoint_error(shape_mismatch(where, p, tensors.global_shape(p.name), common, a, tp));
      // The parts of p this rank holds: all of it, or with sharded parameters its shard's.
      for (const auto& h : engine.main_params().held(c, p.offset, p.offset + p.numel))
        read_into(p.name, p, h.begin - p.offset, h.end - p.offset, h.values, engine.device());
    }
  if (upcycling) repeat_router_rows(*upcycling, engine);
  restore_fp8_states(engine, reader, where);  // before the fp8 weights are cast with the weight's scale
  engine.model_params_from_main();  // a 16-bit model: its weights from the fp32 ones (fp8 ones cast)
  for (auto* r : biased) {
    auto& bias = r->expert_bias();
    if (!reader.has(r->expert_bias_name())) continue;  // allowed by the strictness: zeros
    if (reader.global_shape(r->expert_bias_name()) != std::vector<std::int64_t>{std::int64_t(bias.size())})
      throw checkpoint_error(where + " holds " + r->expert_bias_name() + " for a different number of experts; use the "
                             "--num-experts it was saved with");
    auto q = buffer_piece(r->expert_bias_name(), bias.size(), nullptr);
    reader.read(q);
    std::copy(q.data.begin(), q.data.end(), bias.begin());
  }

  const bool load_optim = !source->finetune && !a.checkpointing.no_load_optim.value_or(false);
  // Without the optimizer state Megatron rebuilds a 16-bit model's main parameters from its
  // weights, unless --load-main-params-from-ckpt takes the checkpoint's fp32 ones.
  if (!load_optim && !a.checkpointing.load_main_params_from_ckpt.value_or(false)) engine.main_params_from_model();
  if (load_optim) {
    const auto& o = common.value("optimizer", json::object());
    if (!o.value("saved", false))
      throw checkpoint_error(where + " holds no optimizer state (saved with --no-save-optim?); pass --no-load-optim "
                             "to load the model alone");
    if (o.value("kind", std::string()) != a.training.optimizer)
      throw checkpoint_error(where + " holds " + o.value("kind", std::string("?")) + " optimizer state but --optimizer is " +
                             a.training.optimizer + "; pass --no-load-optim to start the optimizer anew");
    auto& opt = engine.optimizer();
    const auto slots = optimizer_slots(engine);
    const std::int64_t steps = o.value("step", std::int64_t{0});
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const auto& s = slots[i];
      for (auto& tensor : state_tensors(opt, i)) {
        const auto name = optimizer_name(tensor.kind, s.param->name);
        if (!reader.has(name)) continue;  // saved before the first step, or SGD without momentum
        std::vector<float> values(s.end - s.begin, 0.0f);
        read_into(name, *s.param, s.begin, s.end, values.data());
        tensor.assign(std::move(values));
      }
    }
    if (auto* adam = dynamic_cast<model::adam_optimizer*>(&opt))
      for (auto& st : adam->state()) st.step = st.exp_avg.empty() ? 0 : steps;
    // The loss scaler goes on from where it was (a checkpoint without one leaves it at its start).
    if (auto* scaler = engine.scaler(); scaler && o.contains("grad_scaler") && !o["grad_scaler"].is_null()) {
      const auto& g = o["grad_scaler"];
      scaler->load({g.at("scale").get<float>(), g.at("growth_tracker").get<std::int64_t>(),
                    g.at("hysteresis_tracker").get<std::int64_t>()});
    }
    if (!common.contains("opt_param_scheduler"))
      throw checkpoint_error(where + " has no LR scheduler state; pass --no-load-optim to start the schedule anew");
    try {
      scheduler.load_state(scheduler_from_json(common["opt_param_scheduler"], where));
    } catch (const std::invalid_argument& e) {
      std::string why = e.what();
      if (why.rfind("error: ", 0) == 0) why.erase(0, 7);
      throw checkpoint_error(where + ": " + why);
    }
    out.optimizer_loaded = true;
  }
  if (!source->finetune) {
    const auto& args = common.value("args", json::object());
    out.position.iteration = out.saved_iteration;
    out.position.consumed_train_samples = args.value("consumed_train_samples", std::int64_t{0});
    out.position.skipped_train_samples = args.value("skipped_train_samples", std::int64_t{0});
    out.position.floating_point_operations = args.value("num_floating_point_operations_so_far", 0.0);
    out.position.consumed_valid_samples = args.value("consumed_valid_samples", std::int64_t{0});
  }
  if (upcycling) out.position.iteration = 1;  // Megatron's upcycling sets args.iteration = 1 and saves there
  return out;
}

}  // namespace mactor::training
