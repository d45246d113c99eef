// FT_SIM_FAULT_DESC (see the header).
#include "training/ft_simulated_fault.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <thread>
#include <unistd.h>

#include "config/python_text.hpp"

namespace mactor::training {
namespace {

std::string trimmed(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

}  // namespace

std::optional<simulated_fault> parse_simulated_fault(const std::string& description, int world_size,
                                                     std::uint64_t seed) {
  if (trimmed(description).empty()) return std::nullopt;
  const auto first = description.find(';');
  const auto second = first == std::string::npos ? std::string::npos : description.find(';', first + 1);
  if (second == std::string::npos || description.find(';', second + 1) != std::string::npos)
    throw std::invalid_argument("FT_SIM_FAULT_DESC '" + description +
                                "' is not TYPE;RANK;DELAY (e.g. rank_hung;1;30, or random;;30 for a random rank)");
  std::string type = trimmed(description.substr(0, first));
  const std::string rank_text = trimmed(description.substr(first + 1, second - first - 1));
  const std::string delay_text = trimmed(description.substr(second + 1));
  if (type != "rank_hung" && type != "rank_killed" && type != "random")
    throw std::invalid_argument("FT_SIM_FAULT_DESC: unknown fault type '" + type +
                                "'; use rank_hung, rank_killed or random");
  // Megatron reads the rank with int() and the delay with float().
  const auto base_delay = config::parse_python_float(delay_text);
  if (!base_delay || !(*base_delay >= 0))
    throw std::invalid_argument("FT_SIM_FAULT_DESC: the delay '" + delay_text + "' is not a number of seconds");
  std::mt19937_64 draw(seed);
  simulated_fault f;
  const int drawn_rank = std::uniform_int_distribution<int>(0, world_size - 1)(draw);
  if (rank_text.empty()) {
    f.rank = drawn_rank;
  } else {
    const auto rank = config::parse_python_int(rank_text);
    if (!rank) throw std::invalid_argument("FT_SIM_FAULT_DESC: the rank '" + rank_text + "' is not a number");
    if (*rank < 0 || *rank >= world_size)
      throw std::invalid_argument("FT_SIM_FAULT_DESC: rank " + rank_text + " is not in this job of " +
                                  std::to_string(world_size) + " ranks");
    f.rank = static_cast<int>(*rank);
  }
  if (type == "random") type = std::uniform_int_distribution<int>(0, 1)(draw) ? "rank_hung" : "rank_killed";
  f.type = type;
  f.delay_s = *base_delay + 0.2 * std::uniform_real_distribution<double>(0, 1)(draw) * *base_delay;
  return f;
}

void arm_simulated_fault(const simulated_fault& fault) {
  std::thread([fault] {
    std::this_thread::sleep_for(std::chrono::duration<double>(fault.delay_s));
    for (std::FILE* out : {stdout, stderr}) {
      std::fprintf(out, "\n####\nFT: Simulating fault: %s; rank to fail: %d\n####\n", fault.type.c_str(), fault.rank);
      std::fflush(out);
    }
    ::kill(::getpid(), fault.type == "rank_hung" ? SIGSTOP : SIGKILL);
  }).detach();
}

}  // namespace mactor::training
