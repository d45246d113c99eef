// Test helper: one rank exits with a code or kills itself with a signal; the others sleep.
// usage: rank_exit [--rank R|none] [--code C] [--signal S] [--after-ms T] [--sleep-s S]
//                  [--pid-dir DIR [--setsid-child]] [--ignore-term]
// --pid-dir makes every rank write its pid and that of a child it forks (which sleeps too), so a
// test can check that nothing outlives the job; --setsid-child moves that child out of the rank's
// process group and session, as a daemon would.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  int target = -1, code = 0, sig = 0, after_ms = 0;
  double sleep_s = 60;
  std::string pid_dir;
  bool ignore_term = false, setsid_child = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "rank_exit: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--rank") {
      std::string v = next();
      target = v == "none" ? -2 : std::atoi(v.c_str());  // none: every rank just sleeps
    }
    else if (a == "--code") code = std::atoi(next());
    else if (a == "--signal") sig = std::atoi(next());
    else if (a == "--after-ms") after_ms = std::atoi(next());
    else if (a == "--sleep-s") sleep_s = std::atof(next());
    else if (a == "--pid-dir") pid_dir = next();
    else if (a == "--ignore-term") ignore_term = true;
    else if (a == "--setsid-child") setsid_child = true;
    else {
      std::fprintf(stderr, "rank_exit: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const char* r = std::getenv("MACTOR_RANK");
  if (!r) r = std::getenv("OMPI_COMM_WORLD_RANK");
  int rank = r ? std::atoi(r) : 0;
  if (!pid_dir.empty()) {
    pid_t child = fork();
    if (child == 0) {
      if (setsid_child) ::setsid();
      ::sleep(static_cast<unsigned>(sleep_s) + 1);
      ::_exit(0);
    }
    // Written aside, then renamed: a reader never sees the file half-written.
    std::string file = pid_dir + "/rank" + std::to_string(rank) + ".pids";
    std::ofstream(file + ".tmp") << getpid() << " " << child << "\n";
    std::rename((file + ".tmp").c_str(), file.c_str());
  }
  if (ignore_term) ::signal(SIGTERM, SIG_IGN);
  if (target == -1 || rank == target) {
    std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
    if (sig) ::kill(getpid(), sig);
    return code;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
  return 0;
}
