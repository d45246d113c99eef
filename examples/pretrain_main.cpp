// The main of pretrain_gpt and pretrain_mamba: Megatron-LM's pretrain_gpt.py / pretrain_mamba.py
// command line, run by mactor (the program's name picks the model its builder makes).
#include "examples/pretrain_main.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/torch_layout.hpp"
#include "training/torch_checkpointing.hpp"
#include "training/compute_device.hpp"
#include "training/exit_signal.hpp"
#include "comm/launch_env.hpp"
#include "comm/restart_in_place.hpp"
#include "config/config_json.hpp"
#include "config/resolve.hpp"
#include "data/data_error.hpp"
#include "kernels/blas_kernels.hpp"
#include "comm/transport.hpp"
#include "config/memory_size.hpp"
#include "tensor/memory_ledger.hpp"
#include "training/parallel_context.hpp"
#include "actors/job.hpp"

namespace {

void print_layout(const mactor::config::megatron_args& a) {
  const auto& d = a.distributed;
  std::printf("using world size: %lld, data-parallel size: %lld, context-parallel size: %lld, "
              "hierarchical context-parallel sizes: None, tensor-model-parallel size: %lld, "
              "pipeline-model-parallel size: %lld\n",
              static_cast<long long>(a.derived.world_size), static_cast<long long>(a.derived.data_parallel_size),
              static_cast<long long>(d.context_parallel_size), static_cast<long long>(d.tensor_model_parallel_size),
              static_cast<long long>(d.pipeline_model_parallel_size));
}

// --use-checkpoint-args: the arguments --load's latest checkpoint saved.
std::optional<std::string> saved_arguments(const std::string& load_dir) {
  const auto iteration = mactor::checkpoint::read_tracker(load_dir);
  if (!iteration) return std::nullopt;
  const auto dir = mactor::checkpoint::iteration_dir(load_dir, *iteration);
  std::error_code missing;
  if (std::filesystem::is_directory(dir, missing) &&
      mactor::checkpoint::detect_format(dir) == mactor::checkpoint::stored_format::torch)
    return mactor::training::torch_checkpoint_args(dir);
  const mactor::checkpoint::checkpoint_reader reader(load_dir);
  const auto& common = reader.common();
  if (!common.contains("args"))
    throw std::runtime_error(reader.directory().string() + " has no saved arguments");
  return common["args"].dump();
}

// How long a rank that lost a peer waits for the launcher's in-job restart (--inprocess-hard-timeout).
std::chrono::milliseconds hard_timeout(const mactor::config::megatron_args& a) {
  return std::chrono::milliseconds(static_cast<long long>(a.inprocess_restart.inprocess_hard_timeout * 1000));
}

// A rank that lost its peer (rank 0's coordinator gone, a transfer's peer gone) fails because of
// another rank's failure: it waits for an in-place restart, and when none takes it, a moment
// more before it exits, so that the rank whose failure caused its own is the first the launcher
// sees exit and that rank's status is the job's (2 for bad input, not this rank's 1). The
// launcher stops it sooner.
void after_losing_a_peer(const mactor::config::megatron_args& a) {
  mactor::comm::await_restart_in_place(hard_timeout(a));
  std::this_thread::sleep_for(std::chrono::seconds(1));
}

// mactor --device-memory (MACTOR_DEVICE_MEMORY): each rank's device memory, enforced by the
// ledger as a GPU of that size would. False (after printing why) for a bad value.
bool apply_device_memory(const char* prog) {
  const char* text = std::getenv("MACTOR_DEVICE_MEMORY");
  if (!text || !*text) return true;
  const auto bytes = mactor::config::parse_memory_size(text);
  if (!bytes) {
    std::fprintf(stderr, "%s: error: MACTOR_DEVICE_MEMORY=%s is not a memory size: give bytes or a number with "
                 "K, M, G or T (e.g. 512M, 1.5G), as mactor --device-memory takes it\n", prog, text);
    return false;
  }
  mactor::tensor::memory_ledger::host().set_limit(*bytes, std::string("MACTOR_DEVICE_MEMORY=") + text);
  return true;
}

// MACTOR_DEVICE's device, checked before the job starts: a bad value, a build without the GPU
// backend, a missing GPU or a flag with no device path yet is bad input (status 2) named here,
// not a failure of training.
bool check_compute_device(const char* prog, int local_rank, const mactor::config::megatron_args& a) {
  try {
    if (mactor::training::compute_device(local_rank) == mactor::tensor::cpu) return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog, e.what());
    return false;
  }
  const auto gaps = mactor::training::device_gaps(a);
  if (gaps.empty()) return true;
  std::fprintf(stderr, "%s: error: %s\n", prog, gaps.c_str());
  return false;
}

}  // namespace

int pretrain_main(int argc, char** argv, const char* prog) {
  // libgomp reads OMP_WAIT_POLICY once, when it loads. Ranks that share cores must sleep rather than
  // spin between kernels (spinning made a step 1.6-2.2x slower here: README, "Notes for users"),
  // so unless the user chose a policy, set it and start this program again before any OpenMP code
  // runs. OpenBLAS reads OPENBLAS_CORETYPE the same way: where it took this CPU for an old one
  // (kernels/blas_kernels.hpp), the kernels the CPU's features call for, in the same restart.
  // OpenBLAS runs single-threaded (kernels/cpu/gemm.cpp), but its pthreads build starts a pool of
  // nproc - 1 threads when it loads unless OPENBLAS_NUM_THREADS says 1, and they spin on
  // sched_yield for about 0.1 s first: 17% of a small one-rank run's CPU. It is said here too.
  bool restart = false;
  if (!std::getenv("OMP_WAIT_POLICY")) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    restart = true;
  }
  if (!std::getenv("OPENBLAS_NUM_THREADS")) {
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    restart = true;
  }
  if (const auto core = mactor::kernels::better_blas_coretype()) {
    ::setenv("OPENBLAS_CORETYPE", core->c_str(), 1);
    restart = true;
  }
  if (restart) ::execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
  // In-job restart (--inprocess-restart under mactor): the launcher may signal this rank from now on.
  mactor::comm::watch_for_restart_in_place(argv);
  // A spare process (mactor --spares) waits to be made the rank it replaces.
  if (mactor::comm::spare_id() > 0 && mactor::comm::restart_in_place_watched()) mactor::comm::wait_as_spare();
  mactor::comm::launch_env env;
  try {
    env = mactor::comm::detect_launch_env(mactor::comm::process_env());
  } catch (const mactor::comm::launch_env_error& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog, e.what());
    return 2;
  }
  if (!apply_device_memory(prog)) return 2;
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  auto r = mactor::config::resolve(arguments, prog, {env.rank, env.world_size}, mactor::config::every_flag,
                                   saved_arguments);
  std::fputs(r.err.c_str(), stderr);
  std::fputs(r.out.c_str(), stdout);
  if (r.exit_status) return *r.exit_status;
  if (r.args.training.exit_signal_handler) mactor::training::install_exit_signal_handler();
  if (!check_compute_device(prog, env.local_rank, r.args)) return 2;
  if (env.rank == 0) {
    print_layout(r.args);
    std::fputs(mactor::config::arguments_block(r.args).c_str(), stdout);
    std::fflush(stdout);
  }
  // Megatron's _set_one_logger: the last rank imports NVIDIA's internal one_logger package (not
  // on PyPI); where it is missing Megatron prints this and trains on, as mactor always does.
  if (r.args.one_logger.enable_one_logger && env.rank == env.world_size - 1) {
    std::puts("WARNING: one_logger package is required to enable e2e metrics tracking. please go to "
              "https://confluence.nvidia.com/display/MLWFO/Package+Repositories for details to install it");
    std::fflush(stdout);
  }
  try {
    mactor::training::parallel_context ctx(r.args, env);
    const auto outcome = mactor::actors::run_job(r.args, env, ctx, stdout);
    if (outcome.exit_code != 0) {
      // A stage may still be blocked in a collective: end the process without waiting for it.
      std::fflush(stdout);
      std::fprintf(stderr, "%s: error: %s\n", prog, outcome.error.c_str());
      std::fflush(stderr);
      if (outcome.lost_peer) after_losing_a_peer(r.args);
      std::_Exit(outcome.exit_code);
    }
    // A multi-rank job leaves its actor system up (see actors/job.hpp): end here, output flushed.
    std::fflush(stdout);
    std::fflush(stderr);
    if (env.world_size > 1) std::_Exit(0);
  } catch (const mactor::comm::comm_error& e) {
    std::fprintf(stderr, "%s: error: rank %d: communication with rank %d failed: %s\n", prog, env.rank, e.rank(), e.what());
    std::fflush(stderr);
    after_losing_a_peer(r.args);
    return 1;
  } catch (const mactor::data::data_error& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: training failed: %s\n", prog, e.what());
    return 1;
  }
  return 0;
}
