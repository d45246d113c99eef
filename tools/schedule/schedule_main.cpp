// `mactor schedule`: prints each pipeline rank's op order as Megatron-Core would run it, by driving
// the real schedule coroutines through the trace port; then the warmup counts and the ideal bubble.
// The Megatron flags go through config/'s parser, validation and derived values, as pretrain_gpt's
// do, so a user can paste a training script's flags; the model flags a schedule does not depend on
// get small defaults when absent, and none needs to be built in mactor's training.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/parser.hpp"
#include "config/pipeline_split.hpp"
#include "config/resolve.hpp"
#include "schedules/shape_from_args.hpp"
#include "config/validate.hpp"
#include "schedules/schedule.hpp"
#include "schedules/trace_port.hpp"
#include "tools/subcommands.hpp"

namespace mactor::tools {
namespace {

namespace sch = mactor::schedules;
constexpr const char* prog = "mactor schedule";

constexpr const char* usage =
    "usage: mactor schedule [PRETRAIN_GPT FLAGS ...] [--world-size W | --data-parallel-size DP]\n"
    "         [--num-microbatches M] [--schedule megatron|1f1b|interleaved-1f1b|gpipe|no-pipelining|zb-h1|zbv|dualpipev]\n"
    "         [--forward-only] [--with-p2p]\n";

constexpr const char* help_text =
    "Print each pipeline rank's forward/backward order (F3.1 = forward of microbatch 3 on local model\n"
    "chunk 1) as Megatron-Core runs it.\n\n"
    "Takes a training script's pretrain_gpt (Megatron) flags as they are, checked by pretrain_gpt's\n"
    "parser and Megatron's rules. The pipeline comes from --pipeline-model-parallel-size,\n"
    "--num-layers-per-virtual-pipeline-stage / --num-virtual-stages-per-pipeline-rank,\n"
    "--microbatch-group-size-per-virtual-pipeline-stage, --no-overlap-p2p-communication and\n"
    "--overlap-moe-expert-parallel-comm (Megatron's combined 1F1B order); the number of\n"
    "microbatches from --global-batch-size, --micro-batch-size and the data-parallel size (tp, pp and cp\n"
    "divide the world size). With --rampup-batch-size it is the schedule at the full global batch size.\n"
    "Flags the schedule does not depend on need not be implemented by mactor's training (--fp16,\n"
    "--use-flash-attn, ...). The layers each stage holds come first, from --num-layers and the\n"
    "uneven/layout flags (--decoder-first/last-pipeline-num-layers,\n"
    "--account-for-embedding/loss-in-pipeline-split, --pipeline-model-parallel-layout), as Megatron prints a layout. Flags pretrain_gpt requires but a\n"
    "schedule does not depend on may be left out: --num-layers defaults to pp x vp (or what the layout\n"
    "and uneven flags place), --num-attention-heads to tp, --hidden-size to 64 x heads,\n"
    "--seq-length and --max-position-embeddings to 64 x cp, --micro-batch-size and --train-iters to 1,\n"
    "--lr to 1e-4. --dump-config prints the resolved config, these defaults included, as JSON.\n\n"
    "mactor schedule's own flags:\n"
    "  --world-size W          ranks in the job (default: tp x pp x cp, one data-parallel replica)\n"
    "  --data-parallel-size DP the data-parallel size instead of a world size\n"
    "  --num-microbatches M    microbatches per iteration (sets --global-batch-size to M x mbs x dp)\n"
    "  --virtual-pipeline-model-parallel-size VP\n"
    "                          --num-virtual-stages-per-pipeline-rank under its older name\n"
    "  --schedule S            megatron (Megatron's choice, default), 1f1b, interleaved-1f1b, gpipe,\n"
    "                          no-pipelining, zb-h1 (zero bubble: W = a deferred weight-gradient pass),\n"
    "                          zbv (zero bubble, two chunks per rank in a V: chunk 1 runs stage 2pp-1-rank),\n"
    "                          dualpipev (DeepSeek's DualPipeV on the same V, m >= 2pp);\n"
    "                          pretrain_gpt's --pipeline-schedule is read too\n"
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
  if (auto kind = sch::schedule_kind_named(name); kind && !name.empty()) return *kind;
  fail("argument --schedule: invalid choice: '" + name +
       "' (choose from 'megatron', '1f1b', 'interleaved-1f1b', 'gpipe', 'no-pipelining', 'zb-h1', 'zbv', 'dualpipev')");
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

// A --num-layers that fits the pipeline flags given: the layout's 't's, or every (virtual) stage
// one layer (two with the embedding/loss accounted as layers), uneven first/last counts kept.
std::int64_t default_num_layers(const config::megatron_args& a, const schedule_flags& f) {
  const auto& d = a.distributed;
  const std::int64_t pp = d.pipeline_model_parallel_size;
  const std::int64_t vp = d.num_virtual_stages_per_pipeline_rank.value_or(f.virtual_size.value_or(1));
  if (d.pipeline_model_parallel_layout) {
    std::int64_t layers = 0;
    for (const auto& stage : config::parse_pipeline_layout(*d.pipeline_model_parallel_layout))
      layers += std::count(stage.begin(), stage.end(), 't');
    return layers;
  }
  if (d.decoder_first_pipeline_num_layers || d.decoder_last_pipeline_num_layers) {
    const std::int64_t ends = int(d.decoder_first_pipeline_num_layers.has_value()) + int(d.decoder_last_pipeline_num_layers.has_value());
    return d.decoder_first_pipeline_num_layers.value_or(0) + d.decoder_last_pipeline_num_layers.value_or(0) + (pp - ends) * vp;
  }
  if (d.account_for_embedding_in_pipeline_split || d.account_for_loss_in_pipeline_split)
    return 2 * pp * vp - int(d.account_for_embedding_in_pipeline_split) - int(d.account_for_loss_in_pipeline_split);
  return pp * vp;
}

// The Megatron flags, with --virtual-pipeline-model-parallel-size under its Megatron name and small
// defaults for the flags pretrain_gpt requires but a schedule does not depend on.
std::vector<std::string> completed_flags(const schedule_flags& f, const config::parsed_command_line& parsed) {
  const auto& a = parsed.args;
  const auto& d = a.distributed;
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
  if (!d.num_layers_per_virtual_pipeline_stage) add("num_layers", "--num-layers", default_num_layers(a, f));
  const std::int64_t heads = given(parsed, "num_attention_heads") ? *a.network_size.num_attention_heads : d.tensor_model_parallel_size;
  add("num_attention_heads", "--num-attention-heads", heads);
  add("hidden_size", "--hidden-size", 64 * heads);
  const std::int64_t seq = given(parsed, "seq_length") ? *a.data.seq_length : 64 * d.context_parallel_size;
  add("seq_length", "--seq-length", seq);
  add("max_position_embeddings", "--max-position-embeddings", seq);
  add("micro_batch_size", "--micro-batch-size", 1);
  if (!given(parsed, "train_samples")) add("train_iters", "--train-iters", 1);
  if (!given(parsed, "lr")) out.insert(out.end(), {"--lr", "1e-4"});
  if (f.num_microbatches && given(parsed, "global_batch_size"))
    fail("give either --num-microbatches or --global-batch-size, not both");
  if (!f.num_microbatches && !given(parsed, "global_batch_size") && !given(parsed, "micro_batch_size"))
    fail("the number of microbatches is unknown: give --num-microbatches M, or --global-batch-size with "
         "--micro-batch-size (and --data-parallel-size or --world-size)");
  return out;
}

// The Megatron flags through config/'s parser, validation and derived values, as pretrain_gpt's.
config::resolution resolved(const schedule_flags& f) {
  const auto parsed = config::parse_command_line(f.megatron, prog);  // throws config::usage_error
  auto flags = completed_flags(f, parsed);
  const std::int64_t replica = config::replica_size(parsed.args);
  const std::int64_t world = f.world_size.value_or(f.data_parallel_size.value_or(1) * replica);
  if (f.num_microbatches) {
    const std::int64_t dp = replica > 0 && world % replica == 0 ? world / replica : 1;  // else config says why
    const std::int64_t mbs = parsed.args.training.micro_batch_size.value_or(1);
    flags.insert(flags.end(), {"--global-batch-size", std::to_string(*f.num_microbatches * mbs * dp)});
  }
  // The schedules model every Megatron flag that changes Megatron-Core's op order
  // (--overlap-moe-expert-parallel-comm included): no flag is held to mactor's support table.
  return config::resolve(flags, prog, {0, world}, config::no_flag);
}

sch::schedule_shape shape_from(const config::megatron_args& a, const schedule_flags& f) {
  sch::schedule_shape s = sch::shape_from_args(a);
  s.forward_only = f.forward_only;
  // --schedule, else pretrain_gpt's --pipeline-schedule among the Megatron flags.
  if (f.kind != sch::schedule_kind::megatron) s.kind = f.kind;
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
    case sch::schedule_kind::zero_bubble_h1:
      if (s.forward_only) break;
      return "(pp-1)/(3m+pp-1) = " + std::to_string(pp - 1) + "/" + std::to_string(3 * m + pp - 1) +
             " with F, B and W of equal time";
    case sch::schedule_kind::dual_pipe_v:
      if (s.forward_only) break;
      return "(pp-1)/(6m+pp-1) = " + std::to_string(pp - 1) + "/" + std::to_string(6 * m + pp - 1) +
             " with each chunk's F, B and W of equal time and a pair's F and B not overlapped";
    case sch::schedule_kind::zero_bubble_v: {
      if (s.forward_only) break;
      const int idle = sch::zero_bubble_v_idle_passes(pp, m);
      return "max(pp-1, 4pp-2m-2)/(6m+max(...)) = " + std::to_string(idle) + "/" + std::to_string(6 * m + idle) +
             " with each chunk's F, B and W of equal time";
    }
    default: break;
  }
  // 1F1B, GPipe, and the split-backward schedules' evaluation (forward-only).
  return "(pp-1)/(m+pp-1) = " + std::to_string(pp - 1) + "/" + std::to_string(m + pp - 1);
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

// config/'s messages carry pretrain_gpt's usage line (after any warnings); mactor schedule prints its own.
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

}  // namespace

int schedule_main(int argc, char** argv) {
  try {
    const auto flags = split_flags(argc, argv);
    if (flags.help) {
      std::printf("%s\n%s", usage, help_text);
      return 0;
    }
    const auto r = resolved(flags);
    if (r.exit_status == 2) {
      std::fprintf(stderr, "%s%s", usage, without_usage_line(r.err).c_str());
      return 2;
    }
    std::fputs(r.out.c_str(), stdout);  // --dump-config's JSON
    std::fputs(r.err.c_str(), stderr);  // Megatron's warnings and notices, as pretrain_gpt prints them
    if (r.exit_status) return *r.exit_status;
    if (r.args.training.rampup_batch_size)
      std::fprintf(stderr, "%s: note: the schedule at the full --global-batch-size=%lld; the --rampup-batch-size "
                           "iterations before it run fewer microbatches\n",
                   prog, static_cast<long long>(r.args.training.global_batch_size.value_or(0)));
    const auto shape = shape_from(r.args, flags);
    auto settings = config::pipeline_split_settings::of(r.args);
    settings.placement = sch::placement(shape);  // --schedule zbv folds the stages into a V
    std::printf("layers per stage (--num-layers %lld):\n%s", static_cast<long long>(r.args.network_size.num_layers.value_or(0)),
                config::describe_pipeline_split(config::split_pipeline_layers(settings)).c_str());
    print_schedule(shape, flags.with_p2p);
    return 0;
  } catch (const usage_error& e) {
    std::fputs(usage, stderr);
    for (const auto& m : e.messages) std::fprintf(stderr, "%s: error: %s\n", prog, m.c_str());
  } catch (const config::usage_error& e) {
    std::fprintf(stderr, "%s%s\n", usage, without_usage_line(e.what()).c_str());
  }
  return 2;
}

}  // namespace mactor::tools
