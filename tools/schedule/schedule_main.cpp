// `mactor schedule`: prints each pipeline rank's op order as Megatron-Core would run it, by driving
// the real schedule coroutines through the trace port; then the warmup counts and the ideal bubble.
// The Megatron flags go through config/'s parser, validation and derived values, as pretrain_gpt's
// do, so a user can paste a training script's flags; the model flags a schedule does not depend on
// get small defaults when absent.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "config/parser.hpp"
#include "config/resolve.hpp"
#include "schedules/schedule.hpp"
#include "schedules/trace_port.hpp"
#include "tools/subcommands.hpp"

namespace mactor::tools {
namespace {

namespace sch = mactor::schedules;
constexpr const char* prog = "mactor schedule";

constexpr const char* usage =
    "usage: mactor schedule [PRETRAIN_GPT FLAGS ...] [--world-size W | --data-parallel-size DP]\n"
    "         [--num-microbatches M] [--schedule megatron|1f1b|interleaved-1f1b|gpipe|no-pipelining]\n"
    "         [--forward-only] [--with-p2p]\n";

constexpr const char* help_text =
    "Print each pipeline rank's forward/backward order (F3.1 = forward of microbatch 3 on local model\n"
    "chunk 1) as Megatron-Core runs it.\n\n"
    "Any pretrain_gpt (Megatron) flags: the pipeline layout comes from --pipeline-model-parallel-size,\n"
    "--virtual-pipeline-model-parallel-size / --num-virtual-stages-per-pipeline-rank /\n"
    "--num-layers-per-virtual-pipeline-stage, --microbatch-group-size-per-virtual-pipeline-stage and\n"
    "--no-overlap-p2p-communication; the number of microbatches from --global-batch-size,\n"
    "--micro-batch-size and the data-parallel size, all checked by Megatron's rules. Model flags the\n"
    "schedule does not depend on may be left out (--num-layers defaults to pp x vp, --micro-batch-size\n"
    "and --train-iters to 1, a small model otherwise).\n\n"
    "mactor schedule's own flags:\n"
    "  --world-size W          ranks in the job; dp = W / (tp x pp x cp) (default: dp = 1)\n"
    "  --data-parallel-size DP the data-parallel size instead of a world size\n"
    "  --context-parallel-size CP\n"
    "                          divides the world size only (mactor does not train with context\n"
    "                          parallelism yet)\n"
    "  --num-microbatches M    microbatches per iteration (sets --global-batch-size to M x mbs x dp)\n"
    "  --virtual-pipeline-model-parallel-size VP\n"
    "                          --num-virtual-stages-per-pipeline-rank under its older name\n"
    "  --schedule S            megatron (Megatron's choice, default), 1f1b, interleaved-1f1b, gpipe,\n"
    "                          no-pipelining\n"
    "  --forward-only          forward passes only (evaluation)\n"
    "  --with-p2p              also print the transfers: RF/SF = recv/send activation, RB/SB = gradient\n";

// A user error: the messages go to stderr argparse-style and the exit status is 2.
struct usage_error {
  std::vector<std::string> messages;
};

[[noreturn]] void fail(std::string message) { throw usage_error{{std::move(message)}}; }

// mactor schedule's own flags; everything else is a Megatron flag.
struct schedule_flags {
  std::optional<int> world_size, data_parallel_size, num_microbatches;
  std::optional<int> virtual_size;  // --virtual-pipeline-model-parallel-size (Megatron's older name)
  int context_parallel_size = 1;    // only to derive dp: mactor does not train with it yet
  sch::schedule_kind kind = sch::schedule_kind::megatron;
  bool forward_only = false, with_p2p = false, help = false;
  std::vector<std::string> megatron;
};

int positive(const std::string& flag, const std::string& value) {
  try {
    std::size_t used = 0;
    const int v = std::stoi(value, &used);
    if (used == value.size() && v >= 1) return v;
  } catch (const std::exception&) {
  }
  fail("argument " + flag + ": expected a whole number of at least 1, got '" + value + "'");
}

sch::schedule_kind parse_kind(const std::string& name) {
  for (auto kind : {sch::schedule_kind::megatron, sch::schedule_kind::one_f_one_b,
                    sch::schedule_kind::interleaved_one_f_one_b, sch::schedule_kind::gpipe,
                    sch::schedule_kind::no_pipelining})
    if (name == sch::to_string(kind)) return kind;
  fail("argument --schedule: invalid choice: '" + name +
       "' (choose from 'megatron', '1f1b', 'interleaved-1f1b', 'gpipe', 'no-pipelining')");
}

schedule_flags split_flags(int argc, char** argv) {
  schedule_flags f;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    const auto eq = flag.find('=');
    const bool inline_value = flag.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inline_value) value = flag.substr(eq + 1), flag = flag.substr(0, eq);
    auto take = [&] {
      if (inline_value) return value;
      if (i + 1 >= argc) fail("argument " + flag + ": expected one argument");
      return std::string(argv[++i]);
    };
    if (flag == "--world-size") f.world_size = positive(flag, take());
    else if (flag == "--data-parallel-size") f.data_parallel_size = positive(flag, take());
    else if (flag == "--num-microbatches") f.num_microbatches = positive(flag, take());
    else if (flag == "--virtual-pipeline-model-parallel-size") f.virtual_size = positive(flag, take());
    else if (flag == "--context-parallel-size") f.context_parallel_size = positive(flag, take());
    else if (flag == "--schedule") f.kind = parse_kind(take());
    else if (flag == "--forward-only") f.forward_only = true;
    else if (flag == "--with-p2p") f.with_p2p = true;
    else if (flag == "-h" || flag == "--help") f.help = true;
    else f.megatron.push_back(argv[i]);
  }
  if (f.world_size && f.data_parallel_size) fail("give --data-parallel-size or --world-size, not both");
  return f;
}

bool given(const config::parsed_command_line& p, const char* dest) {
  for (const auto& d : p.given)
    if (d == dest) return true;
  return false;
}

// The Megatron flags, with defaults for what the schedule does not depend on and the global batch
// from --num-microbatches; and the world size they imply.
std::vector<std::string> completed_flags(const schedule_flags& f, std::int64_t& world) {
  const auto parsed = config::parse_command_line(f.megatron, prog);  // throws config::usage_error
  const auto& a = parsed.args;
  const auto& d = a.distributed;
  // The world config/ checks holds tp x pp x dp ranks: context parallelism only divides it here.
  const std::int64_t model = d.tensor_model_parallel_size * d.pipeline_model_parallel_size;
  const std::int64_t dp = f.data_parallel_size.value_or(1);
  const int cp = f.context_parallel_size;
  if (f.world_size && *f.world_size % cp != 0)
    fail("--world-size=" + std::to_string(*f.world_size) + " is not divisible by --context-parallel-size=" +
         std::to_string(cp));
  world = f.world_size ? *f.world_size / cp : dp * model;
  std::vector<std::string> out = f.megatron;
  if (f.virtual_size) {
    if (d.num_virtual_stages_per_pipeline_rank && *d.num_virtual_stages_per_pipeline_rank != *f.virtual_size)
      fail("--virtual-pipeline-model-parallel-size=" + std::to_string(*f.virtual_size) +
           " and --num-virtual-stages-per-pipeline-rank=" + std::to_string(*d.num_virtual_stages_per_pipeline_rank) +
           " disagree; they name the same thing, give one");
    out.insert(out.end(), {"--num-virtual-stages-per-pipeline-rank", std::to_string(*f.virtual_size)});
  }
  auto add = [&](const char* dest, const char* flag, std::int64_t value) {
    if (!given(parsed, dest)) out.insert(out.end(), {flag, std::to_string(value)});
  };
  const std::int64_t vp = d.num_virtual_stages_per_pipeline_rank.value_or(f.virtual_size.value_or(1));
  if (!d.num_layers_per_virtual_pipeline_stage) add("num_layers", "--num-layers", d.pipeline_model_parallel_size * vp);
  const std::int64_t heads = given(parsed, "num_attention_heads") ? *a.network_size.num_attention_heads : d.tensor_model_parallel_size;
  add("num_attention_heads", "--num-attention-heads", heads);
  add("hidden_size", "--hidden-size", 64 * heads);
  add("seq_length", "--seq-length", 64);
  add("max_position_embeddings", "--max-position-embeddings", given(parsed, "seq_length") ? *a.data.seq_length : 64);
  add("micro_batch_size", "--micro-batch-size", 1);
  add("train_iters", "--train-iters", 1);
  if (!given(parsed, "lr")) out.insert(out.end(), {"--lr", "1e-4"});
  if (f.num_microbatches) {
    if (given(parsed, "global_batch_size"))
      fail("give either --num-microbatches or --global-batch-size, not both");
    const std::int64_t mbs = a.training.micro_batch_size.value_or(1);
    const std::int64_t replicas = f.world_size ? (model > 0 && *f.world_size % model == 0 ? *f.world_size / model : 1) : dp;
    out.insert(out.end(), {"--global-batch-size", std::to_string(*f.num_microbatches * mbs * replicas)});
  } else if (!given(parsed, "global_batch_size") && !given(parsed, "micro_batch_size")) {
    fail("the number of microbatches is unknown: give --num-microbatches M, or --global-batch-size with "
         "--micro-batch-size (and --data-parallel-size or --world-size)");
  }
  return out;
}

sch::schedule_shape shape_from(const schedule_flags& f) {
  std::int64_t world = 1;
  const auto flags = completed_flags(f, world);
  auto r = config::resolve(flags, prog, {0, world});
  if (r.exit_status) throw r;
  const auto& a = r.args;
  sch::schedule_shape s;
  s.pipeline_model_parallel_size = static_cast<int>(a.distributed.pipeline_model_parallel_size);
  s.virtual_pipeline_model_parallel_size = static_cast<int>(a.derived.virtual_pipeline_model_parallel_size.value_or(1));
  s.num_microbatches = static_cast<int>(a.derived.num_microbatches);
  if (a.distributed.microbatch_group_size_per_vp_stage)
    s.microbatch_group_size_per_vp_stage = static_cast<int>(*a.distributed.microbatch_group_size_per_vp_stage);
  s.overlap_p2p_comm = a.distributed.overlap_p2p_comm;
  s.forward_only = f.forward_only;
  s.kind = f.kind;
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

// config/'s messages open with pretrain_gpt's usage line; mactor schedule prints its own.
std::string without_usage_line(const std::string& text) {
  if (text.rfind("usage:", 0) != 0) return text;
  const auto newline = text.find('\n');
  return newline == std::string::npos ? std::string() : text.substr(newline + 1);
}

}  // namespace

int schedule_main(int argc, char** argv) {
  try {
    const auto flags = split_flags(argc, argv);
    if (flags.help) {
      std::printf("%s\n%s", usage, help_text);
      return 0;
    }
    print_schedule(shape_from(flags), flags.with_p2p);
    return 0;
  } catch (const usage_error& e) {
    std::fputs(usage, stderr);
    for (const auto& m : e.messages) std::fprintf(stderr, "%s: error: %s\n", prog, m.c_str());
  } catch (const config::usage_error& e) {
    std::fprintf(stderr, "%s%s\n", usage, without_usage_line(e.what()).c_str());
  } catch (const config::resolution& r) {
    std::fprintf(stderr, "%s%s", usage, without_usage_line(r.err).c_str());
  }
  return 2;
}

}  // namespace mactor::tools
