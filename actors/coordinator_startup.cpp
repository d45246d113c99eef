// The coordinator's start of the job: its state and inspector, every rank's actors introducing
// themselves, the config to every stage, every stage's agreement on what it loaded, Megatron's
// start-up and load lines, and the start of training.
#include <caf/all.hpp>
#include <optional>
#include <string>

#include "actors/config_message.hpp"
#include "actors/coordinator_state.hpp"
#include "actors/inspect.hpp"
#include "actors/inspection.hpp"
#include "actors/logger_queue.hpp"
#include "actors/messages.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/non_persistent.hpp"
#include "checkpoint/torch_layout.hpp"
#include "training/checkpointing.hpp"

namespace mactor::actors::coordination {
namespace {

// Megatron's load_checkpoint lines for what the ranks loaded (they loaded already: a source that
// cannot be resolved failed there, with the reason), and the position training goes on from.
void take_loaded_checkpoint(coordinator_actor* self) {
  auto& s = self->state;
  std::optional<training::load_source> source;
  try {
    source = training::load_source_of(s.args);
  } catch (const std::exception&) {
  }
  if (source && source->pretrained)
    log(self, "Checkpoint file not found in load directory " + s.args.checkpointing.load.value_or("None") +
                  " attempting to finetune with checkpoint in " + source->directory);
  if (source) {
    const std::string* load = &source->directory;
    if (s.loaded) {
      // Megatron's infix: "distributed " for torch_dist, none for the torch format.
      std::string infix = "distributed ";
      std::string from = *load;  // a newer non-persistent checkpoint loads from its own directory
      const auto& ck = s.args.checkpointing;
      if (ck.non_persistent_ckpt_type == std::optional<std::string>("global")) {
        const auto np = checkpoint::non_persistent_dir(ck.non_persistent_global_ckpt_dir, *load);
        try {
          if (checkpoint::read_tracker(np) == s.loaded->saved_iteration) {
            from = np;
            log(self, "Loading from a non-persistent checkpoint (non-persistent iter " +
                          std::to_string(s.loaded->saved_iteration) + ")");
          }
        } catch (const std::exception&) {
        }
      }
      const bool from_local = ck.non_persistent_ckpt_type == std::optional<std::string>("local") &&
                              ck.non_persistent_local_ckpt_dir &&
                              s.loaded->load_directory.rfind(*ck.non_persistent_local_ckpt_dir, 0) == 0;
      if (from_local) {
        log(self, "Loading from a local non-persistent checkpoint (non-persistent iter " +
                      std::to_string(s.loaded->saved_iteration) + ") in " + *ck.non_persistent_local_ckpt_dir);
      }
      try {
        if (checkpoint::detect_format(checkpoint::iteration_dir(from, s.loaded->saved_iteration)) ==
            checkpoint::stored_format::torch)
          infix.clear();
      } catch (const std::exception&) {
      }
      if (s.ft) s.ft->checkpoint_loaded(from_local);
      log(self, " loading " + infix + "checkpoint from " + *load + " at iteration " + std::to_string(s.loaded->saved_iteration));
      log(self, " successfully loaded checkpoint from " + *load + layout_field(*s.groups) + " at iteration " +
                    std::to_string(s.loaded->iteration));
      s.iteration = s.loaded->iteration;
      s.consumed = s.loaded->consumed;
      s.skipped = s.loaded->skipped;
      s.floating_point_operations = s.floating_point_operations_at_start = s.loaded->floating_point_operations;
      s.result.consumed_train_samples = s.consumed;
    } else {
      log(self, "WARNING: could not find the metadata file " + *load + "/latest_checkpointed_iteration.txt");
      log(self, "    will not load any checkpoints and will start from random");
    }
  }
}

// Every stage is built and loaded: the start-up lines, then training (or what replaces it).
void all_ready(coordinator_actor* self) {
  auto& s = self->state;
  const auto& vocab = s.vocab;
  log(self, " > padded vocab (size: " + std::to_string(vocab.size) + ") with " + std::to_string(vocab.padded - vocab.size) +
                " dummy tokens (new size: " + std::to_string(vocab.padded) + ")");
  log(self, "after dataloaders are built", true);
  if (!s.load_mismatch.empty()) {
    fail(self, 1, s.load_mismatch);
    return;
  }
  take_loaded_checkpoint(self);
  if (s.args.logging.log_progress) log_progress_start(self);
  if (s.args.checkpointing.ckpt_convert_format) {
    convert_checkpoint_and_exit(self);
    return;
  }
  if (s.args.validation.skip_train) {
    log(self, "skipping training (--skip-train is on) ...");
    send_logger(self, log_drop_tensorboard{});
    finish_training(self);
    return;
  }
  if (s.args.moe.moe_use_upcycling && s.loaded) {
    // Megatron's upcycling saves the MoE model at iteration 1 before it trains.
    save_then(self, [self] {
      log(self, "Upcycled checkpoint saved to " + *self->state.args.checkpointing.save);
      begin_training(self);
    });
    return;
  }
  begin_training(self);
}

}  // namespace

void begin_training(coordinator_actor* self) {
  auto& s = self->state;
  log(self, "training ...");
  s.train_start = clock_type::now();
  if (s.iteration < *s.args.training.train_iters)
    start_iteration(self);
  else
    finish_training(self);  // the loaded checkpoint is already at --train-iters
}

// Sets up the coordinator's state, its inspector and the handler for ranks that vanish.
void start_coordinator(coordinator_actor* self, config::megatron_args args, comm::process_groups groups,
                       training::vocabulary vocab, caf::actor logger, caf::actor evaluator,
                       std::shared_ptr<job_control> control) {
  auto& s = self->state;
  s.args = std::move(args);
  s.batches = config::microbatch_plan_of(s.args);
  s.vocab = vocab;
  s.groups = std::make_unique<comm::process_groups>(groups);
  s.logger = logger;
  s.evaluator = evaluator;
  s.control = control;
  const int world = groups.world_size();
  s.stages.resize(world);
  s.agents.resize(world);
  s.replicas.resize(groups.dp());
  try {
    s.to_logger = logger_queue::from_env();
    s.inspect = job_inspection::start(self->system(), caf::actor_cast<caf::actor>(self), s.args, stderr);
    std::vector<std::string> straggler_lines;
    s.straggler = straggler_logging::start(s.args, world, straggler_lines);
    for (auto& line : straggler_lines) log(self, std::move(line));
  } catch (const std::invalid_argument& e) {
    control->fail(2, std::string("rank 0: bad setting: ") + e.what());
  } catch (const std::exception& e) {
    control->fail(1, std::string("rank 0: the inspector cannot start: ") + e.what());
  }
  try {
    start_fault_tolerance(self);
  } catch (const std::invalid_argument& e) {
    control->fail(2, std::string("rank 0: bad setting: ") + e.what());
  } catch (const std::exception& e) {  // the --save folder cannot be made, ft_state.json not read
    control->fail(1, std::string("rank 0: fault tolerance cannot start: ") + e.what());
  }
  if (s.inspect || s.ft) self->send(self, inspect_tick_atom::value);
  // A rank whose actors vanish (its process died, or the connection broke) fails the job.
  self->set_down_handler([=](caf::down_msg& dm) {
    if (self->state.finished) return;
    const auto it = self->state.rank_of.find(dm.source);
    const int rank = it == self->state.rank_of.end() ? -1 : it->second;
    fail(self, 1, "rank 0: communication with rank " + std::to_string(rank) +
                      " failed: its actors are gone (the process exited or the connection broke)", true);
  });
}

// A rank's actors have introduced themselves; once every rank has, the config goes to every stage
// and each replica gets its pipeline's stages.
void on_hello(coordinator_actor* self, const hello_message& h) {
  auto& s = self->state;
  s.stages[h.rank] = h.stage;
  s.agents[h.rank] = h.agent;
  if (h.replica) s.replicas[s.groups->coords_of(h.rank).dp] = h.replica;
  if (s.inspect) s.inspect->rank_joined(h.rank, h.replica ? s.groups->coords_of(h.rank).dp : -1);
  for (const auto& a : {h.stage, h.agent}) {
    s.rank_of[a.address()] = h.rank;
    if (h.rank != 0) self->monitor(a);
  }
  if (++s.hellos < static_cast<int>(s.stages.size())) return;
  // Everyone is here: the config to every stage, each replica its pipeline's stages.
  for (std::size_t d = 0; d < s.replicas.size(); ++d) {
    replica_setup setup{static_cast<int>(d), {}};
    for (int r = 0; r < static_cast<int>(s.stages.size()); ++r)
      if (s.groups->coords_of(r).dp == static_cast<int>(d)) setup.stages.push_back(s.stages[r]);
    self->send(s.replicas[d], setup);
  }
  broadcast(self, s.stages, config_message{s.args});
}

// A stage has built its model (and loaded the checkpoint, if any): every rank must agree on what it loaded.
void on_stage_ready(coordinator_actor* self, const stage_ready& r) {
  auto& s = self->state;
  s.valid_sets = s.valid_sets < 0 ? r.valid_sets : std::min(s.valid_sets, r.valid_sets);
  s.has_test = s.has_test && r.has_test;
  if (s.stages_ready == 0) {
    if (r.loaded) s.loaded = r;
  } else if (r.loaded != s.loaded.has_value() ||
             (r.loaded && (r.iteration != s.loaded->iteration || r.consumed != s.loaded->consumed))) {
    if (s.load_mismatch.empty())
      s.load_mismatch = "rank " + std::to_string(r.rank) + " loaded " +
                        (r.loaded ? "iteration " + std::to_string(r.saved_iteration) : std::string("no checkpoint")) +
                        " but another rank " +
                        (s.loaded ? "iteration " + std::to_string(s.loaded->saved_iteration) : std::string("none")) +
                        "; was the --load directory changed while the job started?";
  }
  if (++s.stages_ready == static_cast<int>(s.stages.size())) all_ready(self);
}

}  // namespace mactor::actors::coordination
