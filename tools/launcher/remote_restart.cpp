// The remote supervisor's half of in-job restart: the control-store keys and their watch.
#include "tools/launcher/remote_restart.hpp"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <vector>

#include "comm/rendezvous_client.hpp"
#include "comm/rendezvous_wire.hpp"
#include "comm/restart_in_place.hpp"
#include "tools/launcher/in_job_restart.hpp"
#include "tools/launcher/rank_process.hpp"

namespace mactor::tools {

std::string remote_restart_key(int rank, int generation) {
  return "mactor/restart/" + std::to_string(generation) + "/rank_" + std::to_string(rank);
}

void watch_remote_restarts(std::string control_addr, int rank, int generation, std::string env_dir,
                           const std::atomic<pid_t>& child) {
  try {
    comm::rendezvous_client store(comm::parse_host_port(control_addr), std::chrono::seconds(30));
    for (int next = generation + 1;; ++next) {
      std::string text;
      for (;;) {
        try {
          text = store.get(remote_restart_key(rank, next), std::chrono::hours(1));
          break;
        } catch (const comm::rendezvous_error& e) {
          if (std::string(e.what()).find("lost the connection") != std::string::npos) return;  // the job is over
        }
      }
      std::vector<std::string> lines;
      std::istringstream in(text);
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      write_env_file(env_dir + "/rank_" + std::to_string(rank) + ".env", lines);
      const pid_t pid = child.load();
      if (pid <= 0) continue;
      if (is_stopped(pid)) {
        std::fprintf(stderr, "mactor: rank %d is stopped and cannot restart in place; killing it to be started again\n",
                     rank);
        signal_group(pid, SIGKILL);
      } else {
        ::kill(pid, comm::restart_in_place_signal());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mactor: remote supervisor of rank %d: in-job restart watch: %s\n", rank, e.what());
  }
}

}  // namespace mactor::tools
