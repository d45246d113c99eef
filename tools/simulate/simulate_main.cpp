// `mactor simulate`: predicts what a training layout does on a machine described by a system file
// (iteration time, tokens/s, MFU, bubble, exposed communication, memory per rank) by driving the
// real schedule coroutines of every pipeline rank on a virtual clock. Megatron flags pass
// through pretrain_gpt's parser and Megatron's rules, so a layout pretrain_gpt refuses is refused
// here with the same message.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/parser.hpp"
#include "simulate/cost_model.hpp"
#include "simulate/simulation.hpp"
#include "simulate/simulation_report.hpp"
#include "simulate/timeline_json.hpp"
#include "simulate/training_run.hpp"
#include "tools/simulate/simulate_options.hpp"
#include "tools/subcommands.hpp"

namespace mactor::tools {
namespace {

namespace cli = simulate_cli;
constexpr const char* prog = "mactor simulate";

constexpr const char* usage =
    "usage: mactor simulate --system FILE [PRETRAIN_GPT FLAGS ...] [--world-size W | --data-parallel-size DP]\n"
    "         [--timeline FILE]\n";

constexpr const char* help_text =
    "Simulate one training iteration of a layout on the machine a system file describes: every pipeline\n"
    "rank's real schedule (the coroutines mactor trains with) runs on a virtual clock; compute takes\n"
    "Megatron's model FLOPs / (peak x efficiency), communication the alpha-beta time of its ring on the\n"
    "link its group's placement crosses. Prints iteration time, tokens/s, model TFLOP/s per GPU and MFU\n"
    "(Megatron's FLOPs formula, as --log-throughput computes it), the bubble, exposed communication per\n"
    "group and each pipeline rank's memory (weights, gradients, optimizer state, peak activations); then\n"
    "one line per run phase (--train-iters / --train-samples, grouped by --rampup-batch-size's batches)\n"
    "with Megatron's log-line fields and the run's total simulated time.\n\n"
    "  --system FILE           the machine (simulate/systems/*.json)\n"
    "  --world-size W          ranks in the job (default: tp x pp x cp, one data-parallel replica)\n"
    "  --data-parallel-size DP the data-parallel size instead of a world size\n"
    "  --timeline FILE         write the simulated timeline as a trace-event JSON (ui.perfetto.dev)\n"
    "The vocabulary is --vocab-size (GPT-2's 50257 when absent) padded as Megatron pads it.\n";

// config/'s messages carry pretrain_gpt's usage line; mactor simulate prints its own.
std::string without_usage_line(const std::string& text) {
  std::size_t start = 0;
  if (text.rfind("usage: ", 0) != 0) {
    start = text.find("\nusage: ");
    if (start == std::string::npos) return text;
    ++start;
  }
  const auto end = text.find('\n', start);
  return text.substr(0, start) + (end == std::string::npos ? std::string() : text.substr(end + 1));
}

int run(const cli::simulate_flags& flags) {
  const auto r = cli::resolved(flags, prog);
  if (r.exit_status == 2) {
    std::fprintf(stderr, "%s%s", usage, without_usage_line(r.err).c_str());
    return 2;
  }
  std::fputs(r.out.c_str(), stdout);
  std::fputs(r.err.c_str(), stderr);
  if (r.exit_status) return *r.exit_status;
  if (auto refused = simulate::unsupported_flags(r.args); !refused.empty()) throw cli::usage_error{refused};
  simulate::simulation result;
  std::vector<simulate::run_phase> phases;
  try {
    const auto system = simulate::read_system_file(*flags.system);
    result = simulate::simulate_config(r.args, system, flags.timeline.has_value());
    phases = simulate::simulate_run(r.args, system);
  } catch (const std::invalid_argument& e) {
    throw cli::usage_error{{e.what()}};
  }
  std::fputs(simulate::report_text(result).c_str(), stdout);
  std::fputs(simulate::run_text(phases).c_str(), stdout);
  if (flags.timeline) {
    simulate::write_timeline(*flags.timeline, result.iteration.timeline);
    std::printf("timeline: %s\n", flags.timeline->c_str());
  }
  return 0;
}

}  // namespace

int simulate_main(int argc, char** argv) {
  try {
    const auto flags = cli::split_flags(argc, argv);
    if (flags.help) {
      std::printf("%s\n%s", usage, help_text);
      return 0;
    }
    return run(flags);
  } catch (const cli::usage_error& e) {
    std::fputs(usage, stderr);
    for (const auto& m : e.messages) std::fprintf(stderr, "%s: error: %s\n", prog, m.c_str());
  } catch (const config::usage_error& e) {
    std::fprintf(stderr, "%s%s\n", usage, without_usage_line(e.what()).c_str());
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog, e.what());
    return 1;
  }
  return 2;
}

}  // namespace mactor::tools
