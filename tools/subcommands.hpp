// Entry points of the `mactor` program's subcommands; each lives in its own folder under tools/.
#pragma once

namespace mactor::tools {

/// `mactor [mpirun-style options] PROGRAM ARGS...`: starts a job. Returns the process exit status.
int launch_main(int argc, char** argv);

/// `mactor schedule [flags]`: prints each pipeline rank's op order. argv[0] is "schedule".
int schedule_main(int argc, char** argv);

/// `mactor simulate --system FILE [flags]`: predicts a layout's iteration on a machine. argv[0] is
/// "simulate". Exit 0; 2 for bad flags, a refused layout or a bad system file.
int simulate_main(int argc, char** argv);

/// `mactor inspect ADDR [--token T | --token-file F] [--once] [--interval S]`: a running job's
/// live view. Exit 0; 1 when the job cannot be reached; 2 for bad flags or a refused token.
int inspect_main(int argc, char** argv);

/// `mactor swap logger|eval ADDR [--token..] -- FLAGS...`: hot-swaps the job's logger or
/// evaluator. Exit 0 when taken, 1 when refused or unreachable, 2 for bad flags or token.
int swap_main(int argc, char** argv);

}  // namespace mactor::tools
