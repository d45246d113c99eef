// The checkpointer: one per rank, on its own thread. The stage hands it a snapshot and goes on;
// it writes the rank's shards (rank 0 also commits the iteration once every rank's shards are
// durable) and tells the coordinator. Its mailbox is the save queue: a save starts only after
// the previous one has finished.
#include <caf/all.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "actors/inspection.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "checkpoint/local_checkpoint.hpp"
#include "checkpoint/non_persistent.hpp"
#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/save.hpp"

namespace mactor::actors {
namespace {

struct checkpointer_state {
  static inline const char* name = "checkpointer";
};

using checkpointer_actor = caf::stateful_actor<checkpointer_state>;

// MACTOR_TEST_CHECKPOINT_WRITE_DELAY_MS: a test hook that holds every save just before its first
// byte, so a test can kill the job while a save is surely in progress.
std::chrono::milliseconds test_write_delay() {
  const char* v = std::getenv("MACTOR_TEST_CHECKPOINT_WRITE_DELAY_MS");
  return std::chrono::milliseconds(v ? std::atoll(v) : 0);
}

std::string mib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// A local checkpoint: this rank's whole state, committed on its own; its older ones go only once
// this one is complete (the one before it stays, see local_checkpoint.hpp). With --replication
// the clique's peers then swap copies, whether or not this rank's save worked (they wait for it).
void save_local(const checkpoint_job_settings& settings, const std::string& dir, checkpoint_write& w,
                const checkpoint::save_options& options, side_activity& activity) {
  const auto own = checkpoint::local_rank_dir(dir, settings.rank);
  std::string save_error;
  try {
    checkpoint::save(own, w.iteration, 0, 1, *w.state, options);
    checkpoint::remove_old_iterations(own, checkpoint::local_checkpoints_kept);
  } catch (const std::exception& e) {
    save_error = e.what();
  }
  if (settings.replicator) {
    std::string peers;
    for (int r : settings.replicator->clique())
      if (r != settings.rank) peers += (peers.empty() ? "rank " : ", rank ") + std::to_string(r);
    activity.set("exchanging the replicas of iteration " + std::to_string(w.iteration) + " with " + peers, 0);
    settings.replicator->replicate(w.iteration, save_error.empty());
  }
  if (!save_error.empty()) throw checkpoint::checkpoint_error(save_error);
}

caf::behavior checkpointer(checkpointer_actor* self, checkpoint_job_settings settings,
                           std::shared_ptr<side_activity> activity) {
  return {
      [=](checkpoint_write& w) {
        checkpoint_saved reply;
        reply.rank = settings.rank;
        reply.iteration = w.iteration;
        const auto start = std::chrono::steady_clock::now();
        for (const auto& p : w.state->pieces) reply.bytes += static_cast<std::int64_t>(p.data.size() * sizeof(float));
        if (w.state->files)  // --ckpt-format torch
          for (const auto& f : *w.state->files) reply.bytes += static_cast<std::int64_t>(f.second.size());
        const auto waiting = static_cast<std::int64_t>(self->mailbox().size());
        const std::string dir = w.directory.empty() ? settings.save_dir : w.directory;
        activity->set("writing iteration " + std::to_string(w.iteration) + " (" + mib(reply.bytes) + ") to " + dir, waiting);
        try {
          checkpoint::save_options options;
          options.attempt_id = settings.attempt_id;
          if (const auto delay = test_write_delay(); delay.count() > 0)
            options.before_write = [delay] { std::this_thread::sleep_for(delay); };
          if (w.non_persistent && settings.local_non_persistent) {
            save_local(settings, dir, w, options, *activity);
          } else {
            // Megatron's cleanup_old_non_persistent_checkpoint (rank 0, before the save): the newest
            // complete one stays until this one is committed.
            if (w.non_persistent && settings.rank == 0)
              reply.removed_non_persistent = checkpoint::remove_old_iterations(dir, 1);
            if (!w.non_persistent) options.retain_interval = settings.retain_interval;
            options.on_deleted = [&reply](std::int64_t deleted) { reply.deleted_iteration = deleted; };
            checkpoint::save(dir, w.iteration, settings.rank, settings.world_size, *w.state, options);
          }
        } catch (const std::exception& e) {
          reply.ok = false;
          reply.error = "rank " + std::to_string(settings.rank) + ": saving the checkpoint of iteration " +
                        std::to_string(w.iteration) + " failed: " + e.what();
        }
        if (w.buffers) w.buffers->give_back(*w.state);  // the stage's next snapshot copies into them
        w.state.reset();
        reply.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        char done[96];
        std::snprintf(done, sizeof done, "idle (iteration %lld %s in %.1f s)", static_cast<long long>(w.iteration),
                      reply.ok ? "saved" : "failed", reply.seconds);
        activity->set(done, static_cast<std::int64_t>(self->mailbox().size()));
        self->send(w.reply_to, reply);
      },
      [=](stop_message&) { self->quit(); },
  };
}

}  // namespace

caf::actor spawn_checkpointer(caf::actor_system& sys, checkpoint_job_settings settings,
                              std::shared_ptr<side_activity> activity) {
  return sys.spawn<caf::detached>(checkpointer, std::move(settings), std::move(activity));
}

}  // namespace mactor::actors
