// Entry points of the `mactor` program's subcommands; each lives in its own folder under tools/.
#pragma once

namespace mactor::tools {

/// `mactor [mpirun-style options] PROGRAM ARGS...`: starts a job. Returns the process exit status.
int launch_main(int argc, char** argv);

/// `mactor schedule [flags]`: prints each pipeline rank's op order. argv[0] is "schedule".
int schedule_main(int argc, char** argv);

}  // namespace mactor::tools
