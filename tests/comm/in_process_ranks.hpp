// Runs a test body as `world` ranks of one process: a thread per rank, each with its own
// in-process transport on one fabric; the failures the bodies report (or throw) are collected.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/local_transport.hpp"

namespace mactor::comm::testing {

/// body(rank, transport) returns "" on success or what went wrong; the transport is shut down
/// after a body that returned. Returns "rank R: ..." for every failure.
inline std::vector<std::string> run_on_ranks(int world, const std::function<std::string(int, transport&)>& body) {
  local_fabric fabric(world);
  std::vector<std::string> failures;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      auto t = fabric.connect(r);
      std::string failure;
      try {
        failure = body(r, *t);
        t->shutdown();
      } catch (const std::exception& e) {
        failure = std::string("exception: ") + e.what();
      }
      if (!failure.empty()) {
        std::lock_guard lock(mu);
        failures.push_back("rank " + std::to_string(r) + ": " + failure);
      }
    });
  for (auto& t : threads) t.join();
  return failures;
}

}  // namespace mactor::comm::testing
