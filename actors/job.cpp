// run_job: one rank's actor system, its actors, and how they find rank 0's coordinator.
#include "actors/job.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include "actors/env_settings.hpp"
#include "actors/inspection.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "actors/type_ids.hpp"
#include "checkpoint/replication.hpp"
#include "comm/rendezvous_client.hpp"
#include "training/ft_simulated_fault.hpp"
#include "training/rank_worker.hpp"

namespace mactor::actors {
namespace {

constexpr const char* coordinator_key = "mactor/coordinator";

// "host:port" -> (host, port).
std::pair<std::string, std::uint16_t> split_address(const std::string& a) {
  const auto colon = a.rfind(':');
  return {a.substr(0, colon), static_cast<std::uint16_t>(std::stoi(a.substr(colon + 1)))};
}

// How this rank reaches rank 0's coordinator; on rank 0 also the logger, waited for at a clean end.
struct coordinator_link {
  caf::actor coordinator, logger;
  std::string error;   // not empty: the job ends here
  int exit_code = 1;   // ... with this status (2: the user's flags)
  bool lost_peer = false;  // ... because rank 0 cannot be reached
};

// Rank 0: the coordinator, logger and evaluator; in a multi-rank job the coordinator is published
// and its address put in the rendezvous store.
coordinator_link host_coordinator(caf::actor_system& sys, const config::megatron_args& args,
                                  const comm::launch_env& env, training::parallel_context& ctx, std::FILE* out,
                                  std::shared_ptr<job_control> control) {
  coordinator_link link;
  const auto vocab = training::vocabulary_from_args(args);
  try {
    link.logger = spawn_logger(sys, args, out, ctx.world_size(), vocab.padded);
  } catch (const std::runtime_error& e) {
    link.error = e.what();
    link.exit_code = 2;
    return link;
  }
  auto evaluator = spawn_evaluator(sys, args);
  link.coordinator = spawn_coordinator(sys, args, ctx.groups(), vocab, link.logger, evaluator, std::move(control));
  if (ctx.world_size() == 1) return link;
  // Ranks on one node reach the coordinator over loopback; across nodes, over the host name.
  const bool one_node = env.local_world_size == env.world_size;
  const std::string host = one_node ? "127.0.0.1" : (env.master_addr.empty() ? "0.0.0.0" : env.master_addr);
  auto port = sys.middleman().publish(link.coordinator, 0, one_node ? "127.0.0.1" : nullptr);
  if (!port) {
    link.error = "rank 0: cannot publish the coordinator: " + sys.render(port.error());
    return link;
  }
  ctx.store()->set(coordinator_key, (host == "0.0.0.0" ? std::string("127.0.0.1") : host) + ":" + std::to_string(*port));
  return link;
}

// Every other rank: the coordinator at the address rank 0 put in the store.
coordinator_link reach_coordinator(caf::actor_system& sys, training::parallel_context& ctx) {
  coordinator_link link;
  const auto address = ctx.store()->get(coordinator_key, std::chrono::seconds(120));
  const auto [host, port] = split_address(address);
  auto remote = sys.middleman().remote_actor(host, port);
  if (!remote) {
    link.lost_peer = true;
    link.error = "rank " + std::to_string(ctx.rank()) + ": communication with rank 0 failed: cannot reach the coordinator at " +
                 address + ": " + sys.render(remote.error());
  } else {
    link.coordinator = *remote;
  }
  return link;
}

// --replication: the checkpointer's exchange of local checkpoints with this rank's clique.
std::shared_ptr<training::checkpoint_replicator> make_replicator(const config::megatron_args& args,
                                                                 training::parallel_context& ctx) {
  const auto& rep = args.distributed;
  const auto& local_dir = args.checkpointing.non_persistent_local_ckpt_dir;
  if (!rep.replication || !rep.replication_jump || !local_dir || !ctx.transport()) return nullptr;
  auto clique = checkpoint::replication_clique(ctx.rank(), static_cast<int>(*rep.replication_jump),
                                               static_cast<int>(rep.replication_factor), ctx.world_size());
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(distributed_timeout_s(args, true) * 1000));
  return std::make_shared<training::checkpoint_replicator>(*ctx.transport(), *local_dir, ctx.rank(), std::move(clique),
                                                           timeout);
}

// --enable-ft-package with FT_SIM_FAULT_DESC: the fault Megatron's tests inject (drawn alike on
// every rank from the job's id and restart count); throws std::invalid_argument for a bad text.
std::optional<training::simulated_fault> simulated_fault_of(const config::megatron_args& args,
                                                            const comm::launch_env& env, int world_size) {
  if (!args.ft_package.enable_ft_package) return std::nullopt;
  const auto seed = std::hash<std::string>{}(env.job_id + "/" + settings::env_or("MACTOR_RESTART_COUNT", "0"));
  return training::parse_simulated_fault(settings::env_or("FT_SIM_FAULT_DESC"), world_size, seed);
}

// This rank's own actors (the replica only on a replica's first rank, the checkpointer only with
// --save, the status actor only while the inspector is on).
struct rank_actors {
  caf::actor stage, status, agent, replica, checkpointer;
};

rank_actors spawn_rank_actors(caf::actor_system& sys, const config::megatron_args& args, const comm::launch_env& env,
                              training::parallel_context& ctx, std::shared_ptr<job_control> control,
                              const caf::actor& coordinator) {
  rank_actors actors;
  const int rank = ctx.rank();
  auto reporter = std::make_shared<stage_reporter>();
  if (args.checkpointing.save) {
    checkpoint_job_settings settings;
    settings.save_dir = *args.checkpointing.save;
    settings.retain_interval = args.checkpointing.save_retain_interval;
    settings.local_non_persistent = args.checkpointing.non_persistent_ckpt_type == std::optional<std::string>("local");
    settings.rank = rank;
    settings.world_size = ctx.world_size();
    settings.attempt_id = env.job_id;
    settings.replicator = make_replicator(args, ctx);
    auto activity = std::make_shared<side_activity>("checkpointer");
    reporter->add_side(activity);
    actors.checkpointer = spawn_checkpointer(sys, std::move(settings), std::move(activity));
  }
  actors.stage = spawn_stage(sys, ctx, control, actors.checkpointer, reporter);
  if (inspection_enabled()) {
    const hang_timeouts timeouts{distributed_timeout_s(args, false), after_init_timeout_s(args)};
    actors.status = spawn_stage_status(sys, reporter, rank, coordinator, timeouts);
  }
  actors.agent = spawn_agent(sys, control, rank, rank == 0 ? caf::actor{} : coordinator);
  const auto c = ctx.groups().coords();
  if (c.tp == 0 && c.cp == 0 && c.pp == 0) actors.replica = spawn_replica(sys, c.dp);
  return actors;
}

// Clean end. The stop from rank 0 may not have reached this rank's stage yet; a local one always
// does. The checkpointer and the logger are waited for, so every save is durable and every line
// out before this rank moves on.
void stop_rank_actors(caf::actor_system& sys, const rank_actors& actors, const caf::actor& logger) {
  caf::anon_send(actors.stage, stop_message{});
  if (actors.status) caf::anon_send_exit(actors.status, caf::exit_reason::user_shutdown);
  if (actors.checkpointer) {
    // The coordinator ends a job only after every save it asked for is durable.
    caf::anon_send(actors.checkpointer, stop_message{});
    caf::scoped_actor self{sys};
    self->wait_for(actors.checkpointer);
  }
  if (logger) {
    // Every line and TensorBoard event is out before this rank moves on, the swapped-in
    // loggers' too (actors/inspection.hpp).
    wait_for_loggers(sys, logger);
  }
}

}  // namespace

void configure_rank_system(caf::actor_system_config& cfg) {
  register_message_types(cfg);
  // Ranks share cores with compute: a small scheduler (the stage actor has its own thread), whose
  // idle workers block on a condition variable (work sharing). CAF's default work stealing polls
  // its queue between jobs, sleeping 50 us at a time for 25 ms after each one: with ranks sharing
  // cores every idle worker woke 10-20 thousand times a second, each a context switch.
  cfg.set("scheduler.max-threads", 2);
  cfg.set("scheduler.policy", caf::atom("sharing"));
}

job_outcome run_job(const config::megatron_args& args, const comm::launch_env& env, training::parallel_context& ctx,
                    std::FILE* out) {
  // The system keeps a reference to its config and reads it when a detached actor's thread ends
  // (actor_system::thread_terminates), which may be after this function returns: the config
  // lives as long as the system.
  auto* cfg = new caf::actor_system_config;
  const bool distributed = ctx.world_size() > 1;
  if (distributed) cfg->load<caf::io::middleman>();
  configure_rank_system(*cfg);
  // Left running on failure (see job.hpp); deleted after a clean end.
  auto* sys = new caf::actor_system(*cfg);
  auto control = std::make_shared<job_control>();
  const int rank = ctx.rank();
  std::optional<training::simulated_fault> fault;
  try {
    fault = simulated_fault_of(args, env, ctx.world_size());
  } catch (const std::invalid_argument& e) {
    return job_outcome{2, "rank " + std::to_string(rank) + ": bad setting: " + e.what(), {}, false};
  }

  auto link = rank == 0 ? host_coordinator(*sys, args, env, ctx, out, control) : reach_coordinator(*sys, ctx);
  if (!link.error.empty()) return job_outcome{link.exit_code, link.error, {}, link.lost_peer};
  auto actors = spawn_rank_actors(*sys, args, env, ctx, control, link.coordinator);
  caf::anon_send(link.coordinator, hello_message{rank, actors.stage, actors.agent, actors.replica});
  if (fault && rank == 0) {
    std::fprintf(out, "FT: Simulated fault: %s, rank to fail: %d, delay: %.2f s\n", fault->type.c_str(), fault->rank,
                 fault->delay_s);
    std::fflush(out);
  }
  if (fault && fault->rank == rank) training::arm_simulated_fault(*fault);

  auto outcome = control->wait();
  remove_inspector_token_file();  // rank 0's inspector token (actors/inspection.hpp)
  if (outcome.exit_code != 0) return outcome;  // the system stays up: a stage may be blocked
  // Every rank passes the data plane's barrier before any closes its actor system, so no rank's
  // connections vanish while another still waits for its stop messages.
  stop_rank_actors(*sys, actors, link.logger);
  ctx.shutdown();
  // An actor lives while any handle does: drop ours.
  actors = {};
  link = {};
  if (distributed) {
    // CAF 0.17's middleman can keep a remote-referenced detached actor alive after its peers
    // exit (seen here: ~actor_system waiting forever). The job is over and its output flushed,
    // so the system is left to the process's exit (pretrain_gpt ends with _Exit).
    return outcome;
  }
  delete sys;
  delete cfg;
  return outcome;
}

}  // namespace mactor::actors
