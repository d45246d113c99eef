// The logger actor (rank 0): prints what the coordinator sends, in the order it was sent, and
// writes the TensorBoard events.
#include <caf/all.hpp>
#include <memory>

#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "training/log_writer.hpp"

namespace mactor::actors {
namespace {

struct logger_state {
  std::unique_ptr<training::log_writer> writer;
  static inline const char* name = "logger";
};

caf::behavior logger(caf::stateful_actor<logger_state>* self, config::megatron_args args, std::FILE* out, int world,
                     std::int64_t padded) {
  self->state.writer = std::make_unique<training::log_writer>(args, out, world, padded);
  self->state.writer->write_args();
  return {
      [=](log_line& m) {
        if (m.datetime)
          self->state.writer->print_datetime(m.text);
        else
          self->state.writer->print(m.text);
      },
      [=](log_iteration& m) { self->state.writer->iteration(m.report, m.consumed); },
      [=](log_validation& m) { self->state.writer->validation(m.prefix, m.loss, m.iteration, m.consumed); },
      [=](log_timers& m) { self->state.writer->timers(m.names, m.timings); },
      [=](log_exclude_time& m) { self->state.writer->exclude_time(m.seconds); },
      [=](log_drop_tensorboard&) { self->state.writer->drop_tensorboard(); },
      [=](stop_message&) {
        self->state.writer->flush();
        self->quit();
      },
  };
}

}  // namespace

caf::actor spawn_logger(caf::actor_system& sys, const config::megatron_args& args, std::FILE* out, int world_size,
                        std::int64_t padded_vocab_size) {
  return sys.spawn(logger, args, out, world_size, padded_vocab_size);
}

}  // namespace mactor::actors
