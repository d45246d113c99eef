// The front end shared by pretrain_gpt and the tools that take Megatron's flags.
#include "config/resolve.hpp"

#include "config/checkpoint_args.hpp"
#include "config/config_json.hpp"
#include "config/flag_status.hpp"
#include "config/layer_spec.hpp"
#include "config/parser.hpp"

namespace mactor::config {
namespace {

resolution fail(std::string_view prog, const std::vector<std::string>& errors, std::string err = {}) {
  resolution r;
  r.exit_status = 2;
  r.err = std::move(err) + usage_line(prog) + "\n";
  for (const auto& e : errors) r.err += std::string(prog) + ": error: " + e + "\n";
  return r;
}

}  // namespace

resolution resolve(std::span<const std::string> arguments, std::string_view prog, const process_placement& placement,
                   const support_scope& scope, const checkpoint_args_reader& checkpoint_args) {
  parsed_command_line parsed;
  try {
    parsed = parse_command_line(arguments, prog);
  } catch (const usage_error& e) {
    resolution r;
    r.exit_status = 2;
    r.err = e.what();
    return r;
  }
  resolution r;
  if (parsed.program.help || parsed.program.flag_status) {
    r.exit_status = 0;
    r.out = parsed.program.help ? help_text(prog) : flag_status_table();
    return r;
  }
  // Support is judged on the flags as given, before validation fills in derived values.
  const auto support = check_support(parsed.args, scope);
  if (!parsed.program.dump_config && !support.errors.empty()) return fail(prog, support.errors);
  r.args = std::move(parsed.args);
  std::string warnings;
  if (r.args.checkpointing.use_checkpoint_args) {  // Megatron: before validate_args
    if (!r.args.checkpointing.load) return fail(prog, {"--use-checkpoint-args needs --load (the checkpoint to take them from)"});
    std::optional<std::string> saved;
    try {
      if (checkpoint_args) saved = checkpoint_args(*r.args.checkpointing.load);
      if (saved) {
        for (const auto& line : apply_checkpoint_args(r.args, *saved))
          if (placement.rank == 0) warnings += line + "\n";
      } else if (placement.rank == 0) {
        warnings += "Checkpoint not found to provide arguments, using provided arguments.\n";
      }
    } catch (const std::exception& e) {
      return fail(prog, {"--use-checkpoint-args: " + std::string(e.what())});
    }
  }
  const auto report = validate(r.args, placement);
  if (placement.rank == 0) {
    for (const auto& w : report.warnings) warnings += w + "\n";
    for (const auto& w : support.warnings) warnings += w + "\n";
  }
  if (!report.ok()) return fail(prog, report.errors, warnings);
  // What the program's model builder refuses (--spec, the hybrid allocation and its limits).
  if (const auto errors = model_spec_errors(prog, r.args); !parsed.program.dump_config && !errors.empty())
    return fail(prog, errors, warnings);
  r.err = warnings;
  if (placement.rank == 0)
    for (const auto& n : report.notices) r.err += n + "\n";
  if (parsed.program.dump_config) {
    r.exit_status = 0;
    r.out = to_json(r.args) + "\n";
  }
  return r;
}

}  // namespace mactor::config
