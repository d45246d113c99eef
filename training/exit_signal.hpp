// --exit-signal-handler: SIGTERM is remembered instead of ending the process; each rank reports it
// with its iteration, and the coordinator saves and stops at that iteration's end, as Megatron's
// DistributedSignalHandler and checkpoint_and_decide_exit do.
#pragma once

namespace mactor::training {

/// Installs the handler for SIGTERM (Megatron's exit signal). Safe to call more than once.
void install_exit_signal_handler();

/// Whether the signal arrived since the handler was installed.
bool exit_signal_received();

}  // namespace mactor::training
