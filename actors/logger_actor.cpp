// The logger actor (rank 0): prints what the coordinator sends, in the order it was sent, and
// writes the TensorBoard events. Hot swap (inspection.hpp): the logger builds its successor from
// new flags, keeps printing until the coordinator's handover (sent after the last record it gets),
// then gives the successor its interval state and exits; the successor holds back every record
// until then.
#include <caf/all.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "actors/inspection.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "config/config_json.hpp"
#include "training/log_writer.hpp"

namespace mactor::actors {
namespace {

struct logger_state {
  std::unique_ptr<training::log_writer> writer;
  caf::actor successor;  // built, not yet handed over
  static inline const char* name = "logger";
};

using logger_actor = caf::stateful_actor<logger_state>;

// The newest logger of each actor system, where the job's end finds the chain of swapped-in
// loggers (wait_for_loggers). Not CAF's registry: its put keeps the first actor given a name and
// ignores later ones, so after a second swap the job's end waited for the second logger only and
// the process could end before the third printed the records held back for its takeover. Weak
// handles: a logger that has quit is not kept, and every earlier one has quit before it.
struct newest_loggers {
  std::mutex mutex;
  std::unordered_map<const caf::actor_system*, caf::actor_addr> by_system;
};
newest_loggers& newest() {
  static newest_loggers table;
  return table;
}
void set_newest_logger(caf::actor_system& sys, const caf::actor& logger) {
  auto& t = newest();
  std::lock_guard lock(t.mutex);
  t.by_system[&sys] = logger.address();
}

// Test hook: MACTOR_TEST_SLOW_LOGGER_MS makes every iteration record take that long to log.
std::chrono::milliseconds test_delay() {
  const char* v = std::getenv("MACTOR_TEST_SLOW_LOGGER_MS");
  return std::chrono::milliseconds(v ? std::atoi(v) : 0);
}

// Every record counts as handled (the coordinator bounds the mailbox by it: logger_queue.hpp).
void count(logger_actor* self) {
  auto& c = counters_of("logger");
  c.handled.fetch_add(1, std::memory_order_relaxed);
  c.mailbox.store(static_cast<std::int64_t>(self->mailbox().size()), std::memory_order_relaxed);
}

training::record_time time_of(const log_time& t) {
  training::record_time r;
  r.steady = std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(t.steady_ns)));
  r.wall = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(t.wall_ns)));
  return r;
}

caf::behavior logging(logger_actor* self, std::FILE* out, int world, std::int64_t padded) {
  return {
      [=](log_line& m) {
        count(self);
        if (m.datetime)
          self->state.writer->print_datetime(m.text, time_of(m.at));
        else
          self->state.writer->print(m.text);
      },
      [=, delay = test_delay()](log_iteration& m) {
        count(self);
        if (delay.count() > 0) std::this_thread::sleep_for(delay);
        self->state.writer->exclude_time(m.excluded_seconds);
        self->state.writer->iteration(m.report, m.consumed, time_of(m.at), m.skipped);
      },
      [=](log_validation& m) {
        count(self);
        self->state.writer->validation(m.prefix, m.loss, m.iteration, m.consumed,
                                       m.set_index >= 0 ? std::optional<int>(m.set_index) : std::nullopt);
      },
      [=](log_timers& m) {
        count(self);
        self->state.writer->timers(m.names, m.timings);
      },
      [=](log_drop_tensorboard&) {
        count(self);
        self->state.writer->drop_tensorboard();
      },
      [=](logger_successor_request& m) -> std::tuple<bool, std::string, caf::actor> {
        if (self->state.successor) return {false, "a successor is already waiting", caf::actor{}};
        std::unique_ptr<training::log_writer> writer;
        try {
          writer = std::make_unique<training::log_writer>(config::from_json(m.args_json), out, world, padded);
        } catch (const std::exception& e) {
          return {false, e.what(), caf::actor{}};
        }
        auto successor = spawn_logger_successor(self->system(), std::move(writer), out, world, padded);
        self->state.successor = successor;
        // From now on the job's end waits for the successor (which ends with this one if unused).
        set_newest_logger(self->system(), successor);
        return {true, "", successor};
      },
      [=](logger_handover& h) {
        self->state.writer->flush();
        std::shared_ptr<training::log_writer> old(std::move(self->state.writer));
        self->send(h.successor, logger_takeover{std::move(old)});
        self->state.successor = caf::actor{};
        self->quit();
      },
      [=](stop_message&) {
        self->state.writer->flush();
        self->state.writer->state().wandb.reset();  // wandb.finish(): the run's files complete
        // A successor never handed over ends too (a null takeover).
        if (self->state.successor) self->send(self->state.successor, logger_takeover{});
        self->quit();
      },
  };
}

caf::behavior logger(logger_actor* self, std::shared_ptr<std::unique_ptr<training::log_writer>> writer, std::FILE* out,
                     int world, std::int64_t padded) {
  self->state.writer = std::move(*writer);
  self->state.writer->write_args();
  return logging(self, out, world, padded);
}

// A successor: holds every record back (skip), the stop too, until its predecessor's takeover.
caf::behavior successor(logger_actor* self, std::shared_ptr<std::unique_ptr<training::log_writer>> writer, std::FILE* out,
                        int world, std::int64_t padded) {
  self->state.writer = std::move(*writer);
  self->set_default_handler(caf::skip);
  return {
      [=](logger_takeover& t) {
        if (!t.old_writer) {
          self->quit();
          return;
        }
        self->state.writer->state() = std::move(t.old_writer->state());
        t.old_writer.reset();  // closes the old TensorBoard file
        self->set_default_handler(caf::print_and_drop);
        self->become(logging(self, out, world, padded));
      },
  };
}

}  // namespace

caf::actor spawn_logger(caf::actor_system& sys, const config::megatron_args& args, std::FILE* out, int world_size,
                        std::int64_t padded_vocab_size) {
  // Made here, not in the actor, so that a writer that cannot start (an unwritable
  // --tensorboard-dir) is an error at start rather than a job that trains without its log.
  auto box = std::make_shared<std::unique_ptr<training::log_writer>>(
      std::make_unique<training::log_writer>(args, out, world_size, padded_vocab_size));
  (*box)->start_wandb();
  return sys.spawn(logger, box, out, world_size, padded_vocab_size);
}

caf::actor spawn_logger_successor(caf::actor_system& sys, std::unique_ptr<training::log_writer> writer, std::FILE* out,
                                  int world_size, std::int64_t padded_vocab_size) {
  auto box = std::make_shared<std::unique_ptr<training::log_writer>>(std::move(writer));
  return sys.spawn(successor, box, out, world_size, padded_vocab_size);
}

caf::actor current_logger(caf::actor_system& sys, const caf::actor& first) {
  auto& t = newest();
  std::lock_guard lock(t.mutex);
  const auto it = t.by_system.find(&sys);
  if (it == t.by_system.end()) return first;
  auto next = caf::actor_cast<caf::actor>(it->second);
  return next ? next : first;  // no handle left anywhere: it quit, and every logger before it had
}

void wait_for_loggers(caf::actor_system& sys, const caf::actor& first) {
  caf::scoped_actor self{sys};
  for (auto l = first;;) {
    self->wait_for(l);
    auto next = current_logger(sys, l);
    if (next == l) return;
    l = next;
  }
}

}  // namespace mactor::actors
