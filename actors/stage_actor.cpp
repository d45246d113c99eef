// The stage actor: one rank's share of the model, driving its schedule coroutine. Transfers
// complete on the data plane's thread; their callback only sends this actor a resume message, so
// the schedule advances inside this actor's handlers alone.
#include <caf/all.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <thread>

#include "actors/config_message.hpp"
#include "actors/inspect.hpp"
#include "actors/inspection.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "checkpoint/checkpoint_error.hpp"
#include "comm/transport.hpp"
#include "data/data_error.hpp"
#include "training/rank_worker.hpp"

namespace mactor::actors {
namespace {

enum class job_kind { idle, iteration, evaluation };

struct stage_state {
  std::unique_ptr<config::megatron_args> args;
  std::unique_ptr<training::rank_worker> worker;
  caf::actor coordinator, replica, checkpointer;
  // Where snapshots are copied; the checkpointer hands each written one's buffers back.
  std::shared_ptr<checkpoint::snapshot_buffers> snapshot_buffers = std::make_shared<checkpoint::snapshot_buffers>();
  job_kind job = job_kind::idle;
  bool failed = false;
  std::shared_ptr<stage_reporter> reporter;  // for the inspector (inspection.hpp)
  static inline const char* name = "stage";
};

using stage_actor = caf::stateful_actor<stage_state>;

// Turns an exception into one job-level error naming this rank (and the peer, for the data plane).
void fail(stage_actor* self, training::parallel_context& ctx, job_control& control, std::exception_ptr e) {
  abort_job a;
  a.rank = ctx.rank();
  try {
    std::rethrow_exception(e);
  } catch (const comm::comm_error& x) {
    a.message = "rank " + std::to_string(ctx.rank()) + ": communication with rank " + std::to_string(x.rank()) +
                " failed: " + x.what();
    a.lost_peer = true;
  } catch (const data::data_error& x) {
    a.exit_code = 2;
    a.message = x.what();
  } catch (const checkpoint::checkpoint_error& x) {
    a.exit_code = 2;  // --load / --save point at something unusable
    a.message = "rank " + std::to_string(ctx.rank()) + ": " + x.what();
  } catch (const training::layout_mismatch& x) {
    a.exit_code = 2;  // the ranks were started with different flags
    a.message = x.what();
  } catch (const std::exception& x) {
    a.message = "rank " + std::to_string(ctx.rank()) + ": training failed: " + x.what();
  }
  self->state.failed = true;
  if (self->state.coordinator) self->send(self->state.coordinator, a);
  control.fail(a.exit_code, a.message, a.lost_peer);
}

void pump(stage_actor* self) {
  auto& s = self->state;
  if (s.job == job_kind::idle || !s.worker->pump()) return;
  if (s.job == job_kind::iteration) {
    s.reporter->step_begun();
    // --rerun-mode: a rejected result runs the iteration again, on every rank.
    while (s.worker->rerun_iteration())
      if (!s.worker->pump()) {
        s.reporter->step_done();
        return;
      }
    auto report = s.worker->finish_iteration();
    s.reporter->step_done();
    s.job = job_kind::idle;
    self->send(s.replica, std::move(report));
  } else {
    auto report = s.worker->finish_evaluation();
    s.job = job_kind::idle;
    self->send(s.replica, std::move(report));
  }
}

// The config: build this rank's model and worker, read --load, and tell the coordinator what
// this rank can evaluate and where it resumes.
void configure(stage_actor* self, training::parallel_context& ctx, config_message& m) {
  auto& s = self->state;
  s.args = std::make_unique<config::megatron_args>(std::move(m.args));
  s.worker = std::make_unique<training::rank_worker>(*s.args, ctx);
  s.worker->set_wakeup([me = caf::actor_cast<caf::actor>(self)] { caf::anon_send(me, resume_message{}); });
  s.reporter->attach(&s.worker->engine());  // the status actor starts reporting
  stage_ready ready;
  ready.rank = ctx.rank();
  ready.valid_sets = s.worker->has_split(validation_split) ? s.worker->validation_sets() : 0;
  ready.has_test = s.worker->has_split(test_split);
  if (const auto loaded = s.worker->load_checkpoint()) {
    ready.loaded = true;
    s.worker->set_start_iteration(loaded->position.iteration);
    ready.saved_iteration = loaded->saved_iteration;
    ready.iteration = loaded->position.iteration;
    ready.consumed = loaded->position.consumed_train_samples;
    ready.skipped = loaded->position.skipped_train_samples;
    ready.floating_point_operations = loaded->position.floating_point_operations;
    ready.load_directory = loaded->directory;
  }
  self->send(s.coordinator, ready);
}

void begin_iteration(stage_actor* self, int rank, const run_iteration& m) {
  auto& r = *self->state.reporter;
  if (auto seconds = r.test_stall(rank, m.iteration)) {  // test hook (inspection.hpp)
    r.override_activity("stalled by the test hook MACTOR_TEST_STALL_RANK: sleeping " +
                        std::to_string(static_cast<int>(*seconds)) + " s before iteration " +
                        std::to_string(m.iteration));
    std::this_thread::sleep_for(std::chrono::duration<double>(*seconds));
    r.override_activity(std::nullopt);
  }
  r.iteration_begun(m.iteration);
  self->state.worker->begin_iteration(m.iteration, m.consumed);
  self->state.job = job_kind::iteration;
  pump(self);
}

// Between iterations: the copy is all the training waits for; the checkpointer writes.
void capture_checkpoint(stage_actor* self, int rank, const save_checkpoint& m) {
  auto& s = self->state;
  const auto start = std::chrono::steady_clock::now();
  auto snapshot = std::make_shared<checkpoint::rank_state>(s.worker->capture_checkpoint(
      m.iteration, m.consumed, m.skipped, m.floating_point_operations, m.non_persistent, s.snapshot_buffers.get()));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  self->send(s.checkpointer, checkpoint_write{std::move(snapshot), m.iteration, s.coordinator, m.directory,
                                              m.non_persistent, s.snapshot_buffers});
  self->send(s.coordinator, checkpoint_captured{rank, m.iteration, seconds});
}

caf::behavior stage(stage_actor* self, training::parallel_context* ctx, std::shared_ptr<job_control> control,
                    caf::actor checkpointer, std::shared_ptr<stage_reporter> reporter) {
  self->state.checkpointer = std::move(checkpointer);
  self->state.reporter = std::move(reporter);
  // Every handler runs through this: after a failure the stage only waits to be stopped.
  auto guarded = [self, ctx, control](auto&& body) {
    if (self->state.failed) return;
    self->state.reporter->handled(static_cast<std::int64_t>(self->mailbox().size()));
    try {
      body();
    } catch (...) {
      fail(self, *ctx, *control, std::current_exception());
    }
  };
  return {
      [=](config_message& m) {
        self->state.coordinator = caf::actor_cast<caf::actor>(self->current_sender());
        guarded([&] { configure(self, *ctx, m); });
      },
      [=](run_iteration& m) {
        self->state.replica = caf::actor_cast<caf::actor>(self->current_sender());
        guarded([&] { begin_iteration(self, ctx->rank(), m); });
      },
      [=](run_evaluation& m) {
        self->state.replica = caf::actor_cast<caf::actor>(self->current_sender());
        guarded([&] {
          self->state.worker->begin_evaluation(m.split, m.set);
          self->state.job = job_kind::evaluation;
          pump(self);
        });
      },
      [=](save_checkpoint& m) { guarded([&] { capture_checkpoint(self, ctx->rank(), m); }); },
      [=](resume_message&) { guarded([&] { pump(self); }); },
      [=](stop_message&) {
        // The worker's wakeup holds a handle to this actor: drop it, or the actor never dies.
        // The status actor stops reading the engine first.
        self->state.reporter->attach(nullptr);
        self->state.worker.reset();
        self->quit();
      },
  };
}

}  // namespace

caf::actor spawn_stage(caf::actor_system& sys, training::parallel_context& ctx, std::shared_ptr<job_control> control,
                       caf::actor checkpointer, std::shared_ptr<stage_reporter> reporter) {
  return sys.spawn<caf::detached>(stage, &ctx, std::move(control), std::move(checkpointer), std::move(reporter));
}

caf::actor spawn_scheduled_stage(caf::actor_system& sys, training::parallel_context& ctx, std::shared_ptr<job_control> control,
                                 caf::actor checkpointer, std::shared_ptr<stage_reporter> reporter) {
  return sys.spawn(stage, &ctx, std::move(control), std::move(checkpointer), std::move(reporter));
}

}  // namespace mactor::actors
