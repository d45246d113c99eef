// Serves the fake 4-rank job of fake_job.hpp for a while, for trying `mactor inspect` and the web
// page by hand: prints the address and token, then serves for the given seconds (default 60).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "fake_job.hpp"
#include "inspector/server.hpp"

int main(int argc, char** argv) {
  using namespace mactor::inspector;
  const double seconds = argc > 1 ? std::atof(argv[1]) : 60;
  const auto start = std::chrono::steady_clock::now();
  server s(
      [&] {
        job_snapshot job = testing::fake_job();
        job.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return job;
      },
      [](std::string target, std::vector<std::string> flags) {
        return swap_result{true, "fake job: would start a new " + target + " with " +
                                     std::to_string(flags.size()) + " flags"};
      });
  std::printf("inspector at %s token %s\n", s.address().c_str(), s.token().c_str());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}
