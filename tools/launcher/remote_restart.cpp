// The remote supervisor's half of in-job restart: the control-store keys and their watch.
#include "tools/launcher/remote_restart.hpp"

#include <signal.h>

#include <algorithm>
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

std::optional<std::string> await_control_key(comm::rendezvous_client& store, const std::string& key) {
  for (;;) {
    try {
      return store.get(key, std::chrono::hours(1));
    } catch (const comm::rendezvous_error& e) {
      if (std::string(e.what()).find("lost the connection") != std::string::npos) return std::nullopt;
    }
  }
}

std::string remote_restart_key(int slot, int generation) {
  return "mactor/restart/" + std::to_string(generation) + "/place_" + std::to_string(slot);
}

void watch_remote_restarts(std::string control_addr, int slot, int generation, std::string env_dir,
                           const std::atomic<pid_t>& child) {
  try {
    comm::rendezvous_client store(comm::parse_host_port(control_addr), std::chrono::seconds(30));
    for (int next = generation + 1;; ++next) {
      const auto text = await_control_key(store, remote_restart_key(slot, next));
      if (!text) return;  // the job is over
      std::vector<std::string> lines;
      std::istringstream in(*text);
      std::string name;
      std::getline(in, name);
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      write_env_file(env_dir + "/" + name + ".env", lines);
      const pid_t pid = child.load();
      if (pid <= 0) continue;
      if (is_stopped(pid)) {
        std::string shown = name;  // "rank 3", "spare 1"
        std::replace(shown.begin(), shown.end(), '_', ' ');
        std::fprintf(stderr, "mactor: %s is stopped and cannot restart in place; killing it to be started again\n",
                     shown.c_str());
        signal_group(pid, SIGKILL);
      } else {
        ::kill(pid, comm::restart_in_place_signal());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mactor: remote supervisor of place %d: in-job restart watch: %s\n", slot, e.what());
  }
}

}  // namespace mactor::tools
