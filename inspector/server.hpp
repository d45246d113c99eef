// The inspection endpoint the coordinator serves: the job's snapshot as JSON, the hot-swap
// requests, and a live web page, all behind a random token. Runs on its own thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "inspector/job_snapshot.hpp"

namespace mactor::inspector {

/// What a swap request came to: ok, or refused with the reason (shown to whoever asked).
struct swap_result {
  bool ok = false;
  std::string message;
};

struct server_options {
  std::string bind_host = "127.0.0.1";  ///< localhost unless the user asks otherwise
  int port = 0;                         ///< 0: a free port chosen by the system
  std::string token_file;               ///< where to write the token (mode 0600); empty: nowhere
};

/// Endpoints (every request needs `Authorization: Bearer TOKEN` or `?token=TOKEN`, else 403
/// with {"error": ...}):
///   GET  /                  the web page (live actor table and pipeline-timeline chart)
///   GET  /api/snapshot      job_snapshot as JSON
///   POST /api/swap/logger   body {"flags": [...]}: swap(target "logger", flags)
///   POST /api/swap/eval     body {"flags": [...]}: swap(target "eval", flags)
/// A swap answers {"ok": bool, "message": ...}: 200 when ok, 409 when swap refused, 400 for a
/// malformed body, 500 when the callback threw. The callbacks run on the server's threads, so
/// they must be thread-safe; snapshot must be cheap (a browser polls it every 500 ms).
class server {
 public:
  using snapshot_fn = std::function<job_snapshot()>;
  using swap_fn = std::function<swap_result(std::string target, std::vector<std::string> flags)>;

  /// Binds and starts serving before returning. Throws std::runtime_error naming the host and
  /// port when it cannot bind, or the token file when it cannot be written safely.
  server(snapshot_fn snapshot, swap_fn swap, server_options options = {});
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// "HOST:PORT" as bound, e.g. "127.0.0.1:40123".
  std::string address() const;
  const std::string& token() const;
  /// The web page's address with the token: "http://HOST:PORT/?token=TOKEN".
  std::string page_url() const;
  /// Stops serving and joins the thread; idempotent (the destructor calls it).
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace mactor::inspector
