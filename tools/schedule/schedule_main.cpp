// `mactor schedule`: prints each pipeline rank's op order as Megatron-Core would run it, by driving
// the real schedule coroutines through the trace port; then the warmup counts and the ideal bubble.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "schedules/schedule.hpp"
#include "schedules/trace_port.hpp"
#include "tools/subcommands.hpp"

namespace mactor::tools {
namespace {

namespace sch = mactor::schedules;

constexpr const char* usage =
    "usage: mactor schedule --pipeline-model-parallel-size PP\n"
    "         [--virtual-pipeline-model-parallel-size VP | --num-virtual-stages-per-pipeline-rank VP\n"
    "          | --num-layers L --num-layers-per-virtual-pipeline-stage K]\n"
    "         [--microbatch-group-size-per-virtual-pipeline-stage G]\n"
    "         (--num-microbatches M | --micro-batch-size MBS [--global-batch-size GBS]\n"
    "           (--data-parallel-size DP | --world-size W [--tensor-model-parallel-size TP]\n"
    "            [--context-parallel-size CP]))\n"
    "         [--schedule megatron|1f1b|interleaved-1f1b|gpipe|no-pipelining]\n"
    "         [--no-overlap-p2p-communication] [--forward-only] [--with-p2p]\n";

// A user error: the messages go to stderr argparse-style and the exit status is 2.
struct usage_error {
  std::vector<std::string> messages;
};

[[noreturn]] void fail(std::string message) { throw usage_error{{std::move(message)}}; }

cxxopts::Options make_options() {
  cxxopts::Options options("mactor schedule",
                           "Print each pipeline rank's forward/backward order (F3.1 = forward of "
                           "microbatch 3 on local model chunk 1) as Megatron-Core runs it.");
  options.add_options()
      ("pipeline-model-parallel-size", "pipeline stages (pp)", cxxopts::value<int>()->default_value("1"))
      ("virtual-pipeline-model-parallel-size", "model chunks per rank (vp)", cxxopts::value<int>())
      ("num-virtual-stages-per-pipeline-rank", "Megatron's name for vp", cxxopts::value<int>())
      ("num-layers-per-virtual-pipeline-stage", "vp = num-layers / pp / this", cxxopts::value<int>())
      ("num-layers", "transformer layers, with --num-layers-per-virtual-pipeline-stage",
       cxxopts::value<int>())
      ("microbatch-group-size-per-virtual-pipeline-stage", "g; default pp", cxxopts::value<int>())
      ("num-microbatches", "microbatches per iteration (m)", cxxopts::value<int>())
      ("global-batch-size", "samples per iteration", cxxopts::value<int>())
      ("micro-batch-size", "samples per microbatch", cxxopts::value<int>())
      ("data-parallel-size", "data-parallel replicas (dp)", cxxopts::value<int>())
      ("world-size", "ranks in the job; dp = W / (tp * pp * cp)", cxxopts::value<int>())
      ("tensor-model-parallel-size", "tp, to derive dp", cxxopts::value<int>()->default_value("1"))
      ("context-parallel-size", "cp, to derive dp", cxxopts::value<int>()->default_value("1"))
      ("schedule", "megatron (Megatron's choice), 1f1b, interleaved-1f1b, gpipe, no-pipelining",
       cxxopts::value<std::string>()->default_value("megatron"))
      ("no-overlap-p2p-communication", "interleaving: batched p2p instead of overlapped")
      ("forward-only", "forward passes only (evaluation)")
      ("with-p2p", "also print the transfers: RF/SF = recv/send activation, RB/SB = gradient")
      ("h,help", "show this help");
  return options;
}

std::optional<int> get_int(const cxxopts::ParseResult& args, const char* name) {
  if (!args.count(name)) return std::nullopt;
  return args[name].as<int>();
}

sch::schedule_kind parse_kind(const std::string& name) {
  for (auto kind : {sch::schedule_kind::megatron, sch::schedule_kind::one_f_one_b,
                    sch::schedule_kind::interleaved_one_f_one_b, sch::schedule_kind::gpipe,
                    sch::schedule_kind::no_pipelining})
    if (name == sch::to_string(kind)) return kind;
  fail("argument --schedule: invalid choice: '" + name +
       "' (choose from 'megatron', '1f1b', 'interleaved-1f1b', 'gpipe', 'no-pipelining')");
}

// Megatron's validate_args: vp from at most one of the virtual-stage flags; 1 means no interleaving.
int virtual_size(const cxxopts::ParseResult& args, int pp) {
  auto vp = get_int(args, "virtual-pipeline-model-parallel-size");
  auto stages = get_int(args, "num-virtual-stages-per-pipeline-rank");
  auto layers_per_stage = get_int(args, "num-layers-per-virtual-pipeline-stage");
  if (vp && stages && *vp != *stages)
    fail("--virtual-pipeline-model-parallel-size=" + std::to_string(*vp) +
         " and --num-virtual-stages-per-pipeline-rank=" + std::to_string(*stages) +
         " disagree; they name the same thing, give one");
  if (stages) vp = stages;
  if (!layers_per_stage) return vp.value_or(1);
  if (vp)
    fail("--num-layers-per-virtual-pipeline-stage and the number of virtual stages "
         "(--num-virtual-stages-per-pipeline-rank / --virtual-pipeline-model-parallel-size) "
         "cannot both be set (Megatron allows at most one); give one");
  auto layers = get_int(args, "num-layers");
  if (!layers)
    fail("--num-layers-per-virtual-pipeline-stage needs --num-layers to derive the number of "
         "virtual stages");
  const int k = *layers_per_stage;
  if (k < 1 || pp < 1 || *layers < 1)
    fail("--num-layers, --num-layers-per-virtual-pipeline-stage and "
         "--pipeline-model-parallel-size must be at least 1");
  if (*layers % pp != 0)
    fail("--num-layers=" + std::to_string(*layers) +
         " is not divisible by --pipeline-model-parallel-size=" + std::to_string(pp) +
         " (Megatron: number of layers of the model must be divisible pipeline model parallel "
         "size)");
  if ((*layers / pp) % k != 0)
    fail("--num-layers=" + std::to_string(*layers) + " / --pipeline-model-parallel-size=" +
         std::to_string(pp) + " = " + std::to_string(*layers / pp) +
         " layers per stage is not divisible by --num-layers-per-virtual-pipeline-stage=" +
         std::to_string(k) + "; use a divisor of " + std::to_string(*layers / pp));
  return *layers / pp / k;
}

int data_parallel_size(const cxxopts::ParseResult& args, int pp) {
  if (auto dp = get_int(args, "data-parallel-size")) {
    if (args.count("world-size"))
      fail("give --data-parallel-size or --world-size, not both");
    if (*dp < 1) fail("--data-parallel-size=" + std::to_string(*dp) + " must be at least 1");
    return *dp;
  }
  auto world = get_int(args, "world-size");
  if (!world)
    fail("--micro-batch-size needs the data-parallel size: give --data-parallel-size, or "
         "--world-size (with --tensor-model-parallel-size and --context-parallel-size)");
  const int tp = args["tensor-model-parallel-size"].as<int>();
  const int cp = args["context-parallel-size"].as<int>();
  const int model = tp * pp * cp;
  if (tp < 1 || cp < 1 || pp < 1)
    fail("--tensor-model-parallel-size, --context-parallel-size and "
         "--pipeline-model-parallel-size must be at least 1");
  if (*world < model || *world % model != 0)
    fail("--world-size=" + std::to_string(*world) +
         " is not divisible by --tensor-model-parallel-size=" + std::to_string(tp) +
         " x --pipeline-model-parallel-size=" + std::to_string(pp) +
         " x --context-parallel-size=" + std::to_string(cp) + " = " + std::to_string(model) +
         "; use a world size that is a multiple of " + std::to_string(model));
  return *world / model;
}

// Megatron's ConstantNumMicroBatchesCalculator: m = gbs / (mbs * dp), gbs defaulting to mbs * dp.
int num_microbatches(const cxxopts::ParseResult& args, int pp) {
  auto m = get_int(args, "num-microbatches");
  auto mbs = get_int(args, "micro-batch-size");
  if (m) {
    if (mbs || args.count("global-batch-size"))
      fail("give either --num-microbatches or --global-batch-size/--micro-batch-size, not both");
    return *m;
  }
  if (!mbs)
    fail("the number of microbatches is unknown: give --num-microbatches M, or "
         "--micro-batch-size with --global-batch-size and --data-parallel-size (or --world-size)");
  if (*mbs < 1) fail("--micro-batch-size=" + std::to_string(*mbs) + " must be at least 1");
  const int dp = data_parallel_size(args, pp);
  const int per_step = *mbs * dp;
  const int gbs = get_int(args, "global-batch-size").value_or(per_step);
  if (gbs < 1) fail("--global-batch-size=" + std::to_string(gbs) + " must be at least 1");
  if (gbs % per_step != 0) {
    const int below = gbs / per_step * per_step;
    fail("--global-batch-size=" + std::to_string(gbs) + " is not divisible by --micro-batch-size=" +
         std::to_string(*mbs) + " x data-parallel size=" + std::to_string(dp) + " = " +
         std::to_string(per_step) + "; try " +
         (below > 0 ? std::to_string(below) + " or " : std::string()) +
         std::to_string(below + per_step));
  }
  return gbs / per_step;
}

sch::schedule_shape shape_from(const cxxopts::ParseResult& args) {
  if (!args.unmatched().empty()) fail("unrecognized arguments: " + args.unmatched().front());
  sch::schedule_shape s;
  s.pipeline_model_parallel_size = args["pipeline-model-parallel-size"].as<int>();
  s.virtual_pipeline_model_parallel_size = virtual_size(args, s.pipeline_model_parallel_size);
  s.num_microbatches = num_microbatches(args, s.pipeline_model_parallel_size);
  if (auto g = get_int(args, "microbatch-group-size-per-virtual-pipeline-stage")) {
    if (*g < 1)
      fail("--microbatch-group-size-per-virtual-pipeline-stage=" + std::to_string(*g) +
           " must be at least 1");
    s.microbatch_group_size_per_vp_stage = *g;
  }
  s.overlap_p2p_comm = !args.count("no-overlap-p2p-communication");
  s.forward_only = args.count("forward-only") > 0;
  s.kind = parse_kind(args["schedule"].as<std::string>());
  if (auto errors = sch::validate(s); !errors.empty()) throw usage_error{errors};
  return s;
}

std::string bubble_formula(const sch::schedule_shape& s) {
  const int pp = s.pipeline_model_parallel_size;
  const int m = s.num_microbatches;
  const int vp = s.virtual_pipeline_model_parallel_size;
  switch (sch::resolved_kind(s)) {
    case sch::schedule_kind::no_pipelining: return "no pipeline, no bubble";
    case sch::schedule_kind::interleaved_one_f_one_b:
      return "(pp-1)/(vp*m+pp-1) = " + std::to_string(pp - 1) + "/" +
             std::to_string(vp * m + pp - 1);
    default: return "(pp-1)/(m+pp-1) = " + std::to_string(pp - 1) + "/" + std::to_string(m + pp - 1);
  }
}

void print_schedule(const sch::schedule_shape& shape, bool with_p2p) {
  std::string warmups;
  for (int r = 0; r < shape.pipeline_model_parallel_size; ++r) {
    sch::schedule_shape s = shape;
    s.pipeline_rank = r;
    sch::trace_port port;
    sch::run_schedule(sch::make_schedule(s), port);
    std::printf("rank %d: %s\n", r, port.text(with_p2p).c_str());
    warmups += (r ? " " : "") + std::to_string(sch::warmup_microbatches(s));
  }
  std::printf("warmup forwards per rank: %s\n", warmups.c_str());
  std::printf("ideal bubble fraction: %.6f (%s, %s schedule)\n",
              sch::ideal_bubble_fraction(shape), bubble_formula(shape).c_str(),
              sch::to_string(sch::resolved_kind(shape)));
}

}  // namespace

int schedule_main(int argc, char** argv) {
  auto options = make_options();
  try {
    auto args = options.parse(argc, argv);
    if (args.count("help")) {
      std::printf("%s", options.help().c_str());
      return 0;
    }
    const sch::schedule_shape shape = shape_from(args);
    print_schedule(shape, args.count("with-p2p") > 0);
    return 0;
  } catch (const usage_error& e) {
    std::fputs(usage, stderr);
    for (const auto& m : e.messages) std::fprintf(stderr, "mactor schedule: error: %s\n", m.c_str());
    return 2;
  } catch (const cxxopts::exceptions::exception& e) {
    std::fprintf(stderr, "%smactor schedule: error: %s\n", usage, e.what());
    return 2;
  }
}

}  // namespace mactor::tools
