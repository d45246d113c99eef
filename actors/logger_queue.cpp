#include "actors/logger_queue.hpp"

#include <cstdlib>
#include <stdexcept>

namespace mactor::actors {

logger_queue logger_queue::from_env() {
  const char* v = std::getenv("MACTOR_LOGGER_QUEUE");
  if (!v || !*v) return logger_queue{};
  const std::string text(v);
  try {
    std::size_t used = 0;
    const long long n = std::stoll(text, &used);
    if (used == text.size() && n > 0) return logger_queue{n};
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("MACTOR_LOGGER_QUEUE='" + text +
                              "' is not a positive number of messages (e.g. MACTOR_LOGGER_QUEUE=1000)");
}

bool logger_queue::admit(std::int64_t iteration, std::int64_t handled, std::optional<std::string>* started) {
  // After a gap the record goes with the notice naming it: room for both.
  if (waiting(handled) + (dropped_ > 0 ? 1 : 0) < capacity_) return true;
  if (dropped_ == 0) {
    first_ = iteration;
    if (started)
      *started = "mactor: the logger has " + std::to_string(waiting(handled)) +
                 " messages waiting (MACTOR_LOGGER_QUEUE=" + std::to_string(capacity_) + "): iteration " +
                 std::to_string(iteration) + " and later ones go unlogged until it catches up; training does not wait";
  }
  last_ = iteration;
  ++dropped_;
  ++dropped_total_;
  return false;
}

std::optional<std::string> logger_queue::take_notice() {
  if (dropped_ == 0) return std::nullopt;
  std::string range = first_ == last_ ? "iteration " + std::to_string(first_)
                                      : "iterations " + std::to_string(first_) + "-" + std::to_string(last_);
  std::string line = "mactor: the logger fell behind (MACTOR_LOGGER_QUEUE=" + std::to_string(capacity_) + "): " +
                     std::to_string(dropped_) + " iteration record" + (dropped_ == 1 ? "" : "s") + " (" + range +
                     ") " + (dropped_ == 1 ? "was" : "were") +
                     " not logged; the next line averages over the iterations it saw";
  dropped_ = 0;
  return line;
}

}  // namespace mactor::actors
