// The UCX transport's insides, shared by its three files: ucx_transport.cpp (the public
// class), ucx_connection.cpp (context, endpoints, dead peers, closing) and ucx_progress.cpp
// (issuing operations, the progress thread, waiting). Private to comm/: nothing else includes it.
#pragma once

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <source_location>
#include <thread>
#include <unordered_set>

#include "comm/ucx_transport.hpp"

namespace mactor::comm {
namespace ucx_detail {

// The wire tag: the user's 40-bit tag above the sender's 24-bit rank.
constexpr int rank_bits = 24;
constexpr std::uint64_t shutdown_tag = max_tag + 1;
constexpr auto watchdog_period = std::chrono::milliseconds(200);
// How long the progress thread stays parked after the last waiter left while only future
// operations (which their owners wait for) are outstanding: a loop of post-then-wait keeps the
// progress thread asleep, and a future nobody waits on through wait_for still completes.
constexpr auto waiter_linger = std::chrono::milliseconds(2);
// How long a waiting thread polls before it checks whether it has its core to itself.
constexpr auto shared_core_check = std::chrono::microseconds(40);

inline std::chrono::nanoseconds thread_cpu_time() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

inline std::uint64_t wire_tag(std::uint64_t tag, int sender) {
  return (tag << rank_bits) | static_cast<std::uint64_t>(sender);
}

inline void check_ucx(ucs_status_t s, const char* call,
               std::source_location where = std::source_location::current()) {
  if (s == UCS_OK) return;
  throw comm_error(-1, std::string("UCX call ") + call + " failed: " + ucs_status_string(s) +
                           " (" + where.file_name() + ":" + std::to_string(where.line()) +
                           "); check that `ucx_info -d` lists a usable transport");
}

// What a rank publishes: who and where it is, then its UCX worker address.
struct host_identity {
  std::uint32_t magic = 0x6d616374;  // "mact"
  std::int32_t pid = 0;
  std::uint64_t pid_namespace = 0;
  char boot_id[40] = {};

  static host_identity mine() {
    host_identity h;
    h.pid = static_cast<std::int32_t>(::getpid());
    struct stat st {};
    if (::stat("/proc/self/ns/pid", &st) == 0) h.pid_namespace = st.st_ino;
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    in >> id;
    std::strncpy(h.boot_id, id.c_str(), sizeof h.boot_id - 1);
    return h;
  }
  bool same_host_as(const host_identity& o) const {
    return boot_id[0] != 0 && std::strncmp(boot_id, o.boot_id, sizeof boot_id) == 0 &&
           pid_namespace == o.pid_namespace;
  }
};

// False once `pid` has exited (gone, or a zombie nobody has reaped yet).
inline bool process_alive(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::string stat;
  try {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    stat.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    // libstdc++'s filebuf throws on a failed read(2) even without the stream's exception mask:
    // a process that exits between the open and the read gives ESRCH. It is gone.
    return false;
  }
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;
  const char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace ucx_detail

struct ucx_transport::impl {
  traffic_counters* traffic = nullptr;  // the transport's (transport.hpp)
  int local_ranks = 0;                  // ranks on this host, this one included
  comm::wait_spin spin;                 // wait_spin_policy's choice, adapting
  struct op {
    impl* self;
    int peer;
    bool is_recv;
    completion done;
    const void* send_data = nullptr;
    void* recv_data = nullptr;
    std::size_t size = 0;
    std::uint64_t tag = 0;
    void* request = nullptr;
    bool waited = false;      // a future operation: its owner drives it through wait_for
    bool registered = false;  // the poster has stored `request` in pending
    bool completed = false;   // the callback ran before the poster stored it
  };
  struct peer_info {
    impl* self = nullptr;
    int rank = -1;
    int pid = 0;
    bool same_host = false;  // watched by pid, not by UCX error handling
  };

  int rank;
  int world_size;
  ucx_options options;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int event_fd = -1;                // the worker's, for ucp_worker_arm + poll
  std::vector<ucp_ep_h> endpoints;  // by rank; null once closed
  std::vector<peer_info> peers;

  // Touched only by the thread holding worker_mu.
  std::unordered_set<op*> pending;
  std::atomic<int> unwaited_pending{0};  // entries of pending that no wait_for drives
  std::vector<int> newly_failed;
  std::vector<void*> closing;
  std::chrono::steady_clock::time_point last_watchdog{};

  // Serializes every use of the worker (UCS_THREAD_MODE_SERIALIZED). Recursive because a
  // completion that runs inside ucp_worker_progress may post the next operation.
  std::recursive_mutex worker_mu;
  std::mutex mu;  // guards posted, failure, stop and the parking state below
  std::vector<std::function<void()>> posted;
  // Parking: while threads wait in wait_for (and until linger_until after the last one left)
  // the progress thread sleeps on `unparked`, not on the worker's event fd.
  std::condition_variable unparked;
  int waiters = 0;
  bool parked = false;
  bool wake_requested = false;
  std::chrono::steady_clock::time_point linger_until{};
  std::vector<std::string> failure;  // empty while the peer is healthy
  bool stop = false;
  std::thread progress_thread;

  impl(int r, int n, ucx_options o) : rank(r), world_size(n), options(std::move(o)) {
    failure.assign(n, {});
  }

  // --- connections, dead peers and closing (ucx_connection.cpp) ----------------------------

  void init_context();
  std::vector<std::byte> published_blob();
  void connect_one(int peer, const std::vector<std::byte>& blob, const ucx_detail::host_identity& me);
  void connect_all(address_exchange& exchange);
  void check_peer(int peer, std::uint64_t tag) const;

  // Runs inside ucp_worker_progress; the real work waits until progress returns.
  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t s);
  void mark_failed(int peer, const std::string& why);
  std::string failure_of(int peer);
  void watch_same_host_peers();
  // Receives are posted on the worker, not an endpoint, so UCX never fails them when a peer
  // dies: cancel those waiting on a failed peer. With peer error handling, force-closing the
  // endpoint fails its sends. Without it (same-host peers) UCX keeps a rendezvous send waiting
  // forever, so report the failure now and leave the idle request to the worker's teardown.
  void handle_failures();

  void close_endpoint(int peer, bool force);
  // After the progress thread stopped: cancel what is pending, close every endpoint (flushing
  // live ones, which the shutdown barrier made idle) and wait a bounded time for the closes.
  void close_all();

  // --- operations, the progress thread and waiting (ucx_progress.cpp) -----------------------

  static void finish(op* o, ucs_status_t s, std::size_t bytes);
  static void complete_request(void* request, ucs_status_t s, op* o, std::size_t bytes);
  static void on_send(void* request, ucs_status_t s, void* user);
  static void on_recv(void* request, ucs_status_t s, const ucp_tag_recv_info_t* info,
                      void* user);
  // Issues `o`. A send may return NULL: UCX finished it inline and will not call back.
  void issue(op* o);

  // When the worker is free (the progress thread is asleep), the caller issues the operation
  // itself, saving a thread hop per message; otherwise it queues it for the progress thread.
  // Either way the queue is drained first, so operations reach UCX in posting order.
  // `waited`: the work is a future operation whose owner will drive it through wait_for, so a
  // parked progress thread may stay parked.
  void post(std::function<void()> work, bool waited = false);
  // Issues everything queued so far, in order. Caller holds worker_mu.
  bool drain_posted();

  void progress_loop();
  // The progress thread's sleep while wait_for drives the worker: a second thread woken by
  // every event of the worker's fd would only queue on worker_mu behind the waiter (and
  // preempt it on a machine with few cores). Returns when the progress thread is needed again.
  void park_while_waited();
  // Caller holds mu: the progress thread must look at the worker now.
  void unpark_locked();
  // After another thread used the worker (caller holds worker_mu): the sleeping progress
  // thread hears of new network events only through an armed worker, so arm it, or wake the
  // progress thread when events are already pending.
  void hand_back_to_progress_thread();

  static bool ready(std::future<status>& f);
  // Becomes the progress engine while the worker is free: progress, arm, sleep on the event
  // fd, all under worker_mu so no event is consumed by a thread that then fails to look.
  bool wait_for(std::future<status>& f, std::chrono::steady_clock::time_point deadline);
  // The last waiter to leave hands the worker back to the progress thread, now or after
  // waiter_linger.
  void waiter_left();
  // transport::progress: one non-blocking round on the worker when no other thread holds it.
  bool progress();
  // wait_for's poll before it sleeps, at most `spin_for`; caller holds worker_mu.
  void poll_before_sleep(std::future<status>& f, std::chrono::microseconds spin_for);
};

}  // namespace mactor::comm
