// Carries ranks' stdout/stderr to mactor's when output is tagged, timestamped or saved to files:
// whole lines, each with its "[job,rank]<stdout>:" prefix, as Open MPI's --tag-output writes.
#pragma once

#include <poll.h>

#include <cstdio>
#include <string>
#include <vector>

namespace mactor::tools {

class output_relay {
 public:
  output_relay(bool tag, bool timestamp, std::string output_dir);
  ~output_relay();
  output_relay(const output_relay&) = delete;
  output_relay& operator=(const output_relay&) = delete;

  /// True when ranks' output must pass through mactor (any of the three options given).
  bool active() const { return tag_ || timestamp_ || !dir_.empty(); }

  /// Makes the pipes for one rank; returns the write ends {stdout, stderr} for spawn_rank (the
  /// caller closes them once the rank is started). Throws on a file it cannot create.
  std::pair<int, int> add_rank(int rank);

  /// The read ends still open, for poll().
  std::vector<pollfd> poll_fds() const;
  /// Reads what `fd` has and writes out every complete line.
  void on_readable(int fd);
  /// Writes out partial lines and closes everything (call when the job is over).
  void flush_all();
  bool open_streams() const;

 private:
  struct stream {
    int fd = -1;
    int rank = 0;
    bool is_err = false;
    std::string partial;
    std::FILE* file = nullptr;
  };
  void emit(stream& s, const std::string& line);
  void close_stream(stream& s);

  bool tag_, timestamp_;
  std::string dir_;
  std::vector<stream> streams_;
};

}  // namespace mactor::tools
