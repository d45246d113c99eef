// UCX transport: one worker per process, driven by a progress thread that sleeps on the
// worker's event fd (ucp_worker_arm + poll) and is woken by ucp_worker_signal after a post.
// Posting threads issue directly when the worker is idle; one mutex serializes the worker.
// A thread blocked in wait_for drives the worker itself, and the progress thread parks until it
// leaves (see park_while_waited).
//
// Dead peers: UCX 1.13 offers peer error handling only on TCP here (shared memory and cma
// refuse UCP_ERR_HANDLING_MODE_PEER, and TCP reaches a third of their bandwidth). So peers on
// another host get UCP_ERR_HANDLING_MODE_PEER and UCX's keepalive, while peers on this host
// get the fast transports and a watchdog that checks their process id every 200 ms.
#include "comm/ucx_transport.hpp"

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

namespace mactor::comm {
namespace {

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

std::chrono::nanoseconds thread_cpu_time() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

std::uint64_t wire_tag(std::uint64_t tag, int sender) {
  return (tag << rank_bits) | static_cast<std::uint64_t>(sender);
}

void check_ucx(ucs_status_t s, const char* call,
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
bool process_alive(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;
  const char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace

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
  int efd = -1;
  std::vector<ucp_ep_h> eps;
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

  void init_context() {
    ucp_config_t* config = nullptr;
    check_ucx(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    if (!std::getenv("UCX_KEEPALIVE_INTERVAL") && !options.keepalive_interval.empty())
      ucp_config_modify(config, "KEEPALIVE_INTERVAL", options.keepalive_interval.c_str());
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    const ucs_status_t s = ucp_init(&params, config, &context);
    ucp_config_release(config);
    check_ucx(s, "ucp_init");
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    check_ucx(ucp_worker_create(context, &wp, &worker), "ucp_worker_create");
    check_ucx(ucp_worker_get_efd(worker, &efd), "ucp_worker_get_efd");
  }

  std::vector<std::byte> published_blob() {
    ucp_address_t* address = nullptr;
    std::size_t length = 0;
    check_ucx(ucp_worker_get_address(worker, &address, &length), "ucp_worker_get_address");
    const host_identity me = host_identity::mine();
    std::vector<std::byte> out(sizeof me + length);
    std::memcpy(out.data(), &me, sizeof me);
    std::memcpy(out.data() + sizeof me, address, length);
    ucp_worker_release_address(worker, address);
    return out;
  }

  // Runs inside ucp_worker_progress; the real work waits until progress returns.
  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t s) {
    auto* p = static_cast<peer_info*>(arg);
    p->self->mark_failed(p->rank, std::string("UCX: ") + ucs_status_string(s));
  }

  void mark_failed(int peer, const std::string& why) {
    {
      std::lock_guard lock(mu);
      if (!failure[peer].empty()) return;
      failure[peer] = "rank " + std::to_string(peer) + " is unreachable (" + why +
                      "); that process probably died: see rank " + std::to_string(peer) +
                      "'s own log";
    }
    newly_failed.push_back(peer);
  }

  std::string failure_of(int peer) {
    std::lock_guard lock(mu);
    return failure[peer];
  }

  void connect_one(int peer, const std::vector<std::byte>& blob, const host_identity& me) {
    host_identity them;
    if (blob.size() <= sizeof them)
      throw comm_error(peer, "rank " + std::to_string(peer) + "'s published address is " +
                                 std::to_string(blob.size()) +
                                 " bytes, too short; is it running the same mactor build?");
    std::memcpy(&them, blob.data(), sizeof them);
    if (them.magic != host_identity{}.magic)
      throw comm_error(peer, "rank " + std::to_string(peer) +
                                 "'s published address is not a mactor UCX address");
    peers[peer] = {this, peer, them.pid, options.same_host_fast_path && me.same_host_as(them)};
    if (me.same_host_as(them)) ++local_ranks;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(blob.data() + sizeof them);
    ep.err_mode = peers[peer].same_host ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &impl::on_ep_error;
    ep.err_handler.arg = &peers[peer];
    const ucs_status_t s = ucp_ep_create(worker, &ep, &eps[peer]);
    if (s != UCS_OK)
      throw comm_error(peer, "rank " + std::to_string(rank) + " cannot connect to rank " +
                                 std::to_string(peer) + ": " + ucs_status_string(s));
  }

  void connect_all(address_exchange& exchange) {
    eps.assign(world_size, nullptr);
    peers.assign(world_size, {});
    const host_identity me = host_identity::mine();
    for (int p = 0; p < world_size; ++p) {
      const int peer = (rank + p) % world_size;  // stagger the fetches across ranks
      connect_one(peer, exchange.fetch(peer, options.connect_timeout), me);
    }
  }

  // --- operations, run on the progress thread -------------------------------------------

  static void finish(op* o, ucs_status_t s, std::size_t bytes) {
    if (s == UCS_OK && o->self->traffic)
      (o->is_recv ? o->self->traffic->received : o->self->traffic->sent)
          .fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
    if (!o->done) return;
    status out{s == UCS_OK, o->peer, bytes, {}};
    if (s == UCS_ERR_MESSAGE_TRUNCATED) {
      out.message = "message from rank " + std::to_string(o->peer) + " (tag " +
                    std::to_string(o->tag) + ") is larger than the " + std::to_string(o->size) +
                    "-byte receive buffer; post a larger receive";
    } else if (s != UCS_OK) {
      out.message = o->self->failure_of(o->peer);
      if (out.message.empty())
        out.message = s == UCS_ERR_CANCELED
                          ? "operation with rank " + std::to_string(o->peer) +
                                " was cancelled because the transport is closing"
                          : "operation with rank " + std::to_string(o->peer) +
                                " failed: " + ucs_status_string(s);
    }
    o->done(out);
  }

  static void complete_request(void* request, ucs_status_t s, op* o, std::size_t bytes) {
    finish(o, s, bytes);
    ucp_request_free(request);
    if (o->registered) {
      o->self->pending.erase(o);
      if (!o->waited) o->self->unwaited_pending.fetch_sub(1, std::memory_order_relaxed);
      delete o;
    } else {
      o->completed = true;
    }
  }

  static void on_send(void* request, ucs_status_t s, void* user) {
    op* o = static_cast<op*>(user);
    complete_request(request, s, o, o->size);
  }

  static void on_recv(void* request, ucs_status_t s, const ucp_tag_recv_info_t* info,
                      void* user) {
    complete_request(request, s, static_cast<op*>(user), info ? info->length : 0);
  }

  // Issues `o`. A send may return NULL: UCX finished it inline and will not call back.
  void issue(op* o) {
    if (!failure_of(o->peer).empty() || !eps[o->peer]) {
      finish(o, UCS_ERR_CONNECTION_RESET, 0);
      delete o;
      return;
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.user_data = o;
    ucs_status_ptr_t r;
    if (o->is_recv) {
      // UCX 1.13 leaves recv_info unfilled on inline completion, so receives always take the
      // callback, which carries the received length (it may run before nbx returns).
      param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      param.cb.recv = &impl::on_recv;
      r = ucp_tag_recv_nbx(worker, o->recv_data, o->size, wire_tag(o->tag, o->peer),
                           ~std::uint64_t{0}, &param);
    } else {
      param.cb.send = &impl::on_send;
      r = ucp_tag_send_nbx(eps[o->peer], o->send_data, o->size, wire_tag(o->tag, rank), &param);
    }
    if (r == nullptr) {
      finish(o, UCS_OK, o->size);
      delete o;
    } else if (UCS_PTR_IS_ERR(r)) {
      finish(o, UCS_PTR_STATUS(r), 0);
      delete o;
    } else if (o->completed) {
      delete o;
    } else {
      o->request = r;
      o->registered = true;
      pending.insert(o);
      if (!o->waited) unwaited_pending.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void close_endpoint(int peer, bool force) {
    if (!eps[peer]) return;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = ucp_ep_close_nbx(eps[peer], &param);
    if (r && !UCS_PTR_IS_ERR(r)) closing.push_back(r);
    eps[peer] = nullptr;
  }

  // Receives are posted on the worker, not an endpoint, so UCX never fails them when a peer
  // dies: cancel those waiting on a failed peer. With peer error handling, force-closing the
  // endpoint fails its sends. Without it (same-host peers) UCX keeps a rendezvous send waiting
  // forever, so report the failure now and leave the idle request to the worker's teardown.
  void handle_failures() {
    while (!newly_failed.empty()) {
      const int peer = newly_failed.back();
      newly_failed.pop_back();
      std::vector<void*> to_cancel;
      for (op* o : pending) {
        if (o->peer != peer) continue;
        if (o->is_recv) {
          to_cancel.push_back(o->request);
        } else if (peers[peer].same_host) {
          finish(o, UCS_ERR_CONNECTION_RESET, 0);
          o->done = nullptr;
        }
      }
      for (void* r : to_cancel) ucp_request_cancel(worker, r);
      if (!peers[peer].same_host) close_endpoint(peer, true);
    }
  }

  void watch_same_host_peers() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_watchdog < watchdog_period) return;
    last_watchdog = now;
    for (const peer_info& p : peers)
      if (p.same_host && p.rank != rank && failure_of(p.rank).empty() && !process_alive(p.pid))
        mark_failed(p.rank, "its process " + std::to_string(p.pid) + " on this host has exited");
  }

  // Issues everything queued so far, in order. Caller holds worker_mu.
  bool drain_posted() {
    std::vector<std::function<void()>> work;
    {
      std::lock_guard lock(mu);
      work.swap(posted);
    }
    for (auto& w : work) w();
    return !work.empty();
  }

  // The progress thread's sleep while wait_for drives the worker: a second thread woken by
  // every event of the worker's fd would only queue on worker_mu behind the waiter (and
  // preempt it on a machine with few cores). Returns when the progress thread is needed again.
  void park_while_waited() {
    std::unique_lock lock(mu);
    for (;;) {
      if (stop || wake_requested) break;
      const auto now = std::chrono::steady_clock::now();
      if (waiters == 0 && now >= linger_until) break;
      parked = true;
      unparked.wait_until(lock, waiters > 0 ? now + watchdog_period : linger_until);
    }
    parked = false;
    wake_requested = false;
  }

  // Caller holds mu: the progress thread must look at the worker now.
  void unpark_locked() {
    wake_requested = true;
    if (parked) unparked.notify_one();
  }

  void progress_loop() {
    for (;;) {
      park_while_waited();
      {
        std::unique_lock worker_lock(worker_mu);
        bool stopping;
        {
          std::lock_guard lock(mu);
          stopping = stop;
        }
        const bool did_work = drain_posted();
        while (ucp_worker_progress(worker) != 0) {
        }
        watch_same_host_peers();
        handle_failures();
        if (did_work) continue;
        if (stopping) return;
        if (ucp_worker_arm(worker) == UCS_ERR_BUSY) continue;
      }
      pollfd fd{efd, POLLIN, 0};
      // The timeout paces the watchdog; posts and network events wake the poll at once.
      ::poll(&fd, 1, static_cast<int>(watchdog_period.count()));
    }
  }

  // When the worker is free (the progress thread is asleep), the caller issues the operation
  // itself, saving a thread hop per message; otherwise it queues it for the progress thread.
  // Either way the queue is drained first, so operations reach UCX in posting order.
  // `waited`: the work is a future operation whose owner will drive it through wait_for, so a
  // parked progress thread may stay parked.
  void post(std::function<void()> work, bool waited = false) {
    std::unique_lock worker_lock(worker_mu, std::defer_lock);
    if (options.issue_from_caller && worker_lock.try_lock()) {
      drain_posted();
      work();
      ucp_worker_progress(worker);
      hand_back_to_progress_thread();
      if (!waited) {
        // Nobody else will drive a callback operation: keep the progress thread off its
        // linger (a waiter arriving later parks it again).
        std::lock_guard lock(mu);
        if (waiters == 0) unpark_locked();
      }
      return;
    }
    {
      std::lock_guard lock(mu);
      posted.push_back(std::move(work));
      if (waiters == 0) unpark_locked();
    }
    ucp_worker_signal(worker);
  }

  // After another thread used the worker (caller holds worker_mu): the sleeping progress
  // thread hears of new network events only through an armed worker, so arm it, or wake the
  // progress thread when events are already pending.
  void hand_back_to_progress_thread() {
    if (ucp_worker_arm(worker) != UCS_OK) ucp_worker_signal(worker);
  }

  static bool ready(std::future<status>& f) {
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

  // Becomes the progress engine while the worker is free: progress, arm, sleep on the event
  // fd, all under worker_mu so no event is consumed by a thread that then fails to look.
  bool wait_for(std::future<status>& f, std::chrono::steady_clock::time_point deadline) {
    {
      std::lock_guard lock(mu);
      ++waiters;
    }
    struct leave {
      impl* self;
      ~leave() {
        std::lock_guard lock(self->mu);
        if (--self->waiters > 0) return;
        // Callback operations are outstanding (or the wait timed out on its own): the progress
        // thread takes over now. Otherwise the next wait_for most likely follows at once.
        if (self->unwaited_pending.load(std::memory_order_relaxed) > 0 || !self->posted.empty())
          self->unpark_locked();
        else
          self->linger_until = std::chrono::steady_clock::now() + waiter_linger;
      }
    } on_exit{this};
    const auto began = std::chrono::steady_clock::now();
    const auto spin_for = spin.next();
    for (;;) {
      if (ready(f)) break;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      std::unique_lock worker_lock(worker_mu, std::try_to_lock);
      if (!worker_lock.owns_lock()) {  // the progress thread is at work and will finish f
        f.wait_for(std::min(left, std::chrono::milliseconds(1)));
        continue;
      }
      drain_posted();
      while (ucp_worker_progress(worker) != 0) {
      }
      // Poll a little before sleeping: the next event often comes within a wake-up's cost.
      // An idle poll yields the core. When this thread got less than 3/4 of the time it
      // polled, another thread wants this core (another rank's kernel thread, or the rank this
      // one waits for, put on the same core by the scheduler): polling on would only take
      // turns with it, so the wait sleeps instead.
      const auto spin_start = std::chrono::steady_clock::now();
      const auto cpu_start = thread_cpu_time();
      int idle_polls = 0;
      for (const auto spin_end = spin_start + spin_for;
           !ready(f) && std::chrono::steady_clock::now() < spin_end;) {
        if (ucp_worker_progress(worker) != 0) continue;
        ::sched_yield();
        if (++idle_polls % 16 != 0) continue;
        const auto polled = std::chrono::steady_clock::now() - spin_start;
        if (polled > shared_core_check && (thread_cpu_time() - cpu_start) * 4 < polled * 3) break;
      }
      watch_same_host_peers();
      handle_failures();
      if (ready(f)) {
        hand_back_to_progress_thread();
        break;
      }
      if (ucp_worker_arm(worker) == UCS_ERR_BUSY) continue;
      pollfd fd{efd, POLLIN, 0};
      ::poll(&fd, 1, static_cast<int>(std::min(left, watchdog_period).count()) + 1);
      // Leaving with the worker armed (f timed out) is fine: the progress thread polls again
      // within waiter_linger.
    }
    if (!ready(f)) return false;
    spin.record(std::chrono::steady_clock::now() - began);
    return true;
  }

  void check_peer(int peer, std::uint64_t tag) const {
    if (peer < 0 || peer >= world_size)
      throw comm_error(peer, "peer rank " + std::to_string(peer) + " is outside the world of " +
                                 std::to_string(world_size) + " ranks");
    if (tag > max_tag + 1)
      throw comm_error(peer, "tag " + std::to_string(tag) + " exceeds the transport's 40 bits");
  }

  // After the progress thread stopped: cancel what is pending, close every endpoint (flushing
  // live ones, which the shutdown barrier made idle) and wait a bounded time for the closes.
  void close_all() {
    std::vector<void*> to_cancel;
    for (op* o : pending)
      if (o->is_recv) to_cancel.push_back(o->request);
    for (void* r : to_cancel) ucp_request_cancel(worker, r);
    for (int p = 0; p < world_size; ++p) close_endpoint(p, !failure_of(p).empty());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (void* r : closing) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS &&
             std::chrono::steady_clock::now() < deadline)
        ucp_worker_progress(worker);
      if (ucp_request_check_status(r) != UCS_INPROGRESS) ucp_request_free(r);
    }
    closing.clear();
  }
};

ucx_transport::ucx_transport(int rank, int world_size, address_exchange& exchange,
                             ucx_options options)
    : impl_(std::make_unique<impl>(rank, world_size, std::move(options))) {
  if (world_size < 1 || world_size >= (1 << rank_bits) || rank < 0 || rank >= world_size)
    throw comm_error(rank, "ucx_transport: rank " + std::to_string(rank) + " of world size " +
                               std::to_string(world_size) + " is not a valid layout");
  impl_->traffic = &traffic_;
  impl_->init_context();
  exchange.publish(rank, impl_->published_blob());
  impl_->connect_all(exchange);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int cores = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  impl_->spin = wait_spin_policy(impl_->local_ranks, cores, std::getenv("MACTOR_UCX_SPIN_US"));
  impl_->progress_thread = std::thread([this] { impl_->progress_loop(); });
}

ucx_transport::~ucx_transport() {
  if (impl_->progress_thread.joinable()) {
    {
      std::lock_guard lock(impl_->mu);
      impl_->stop = true;
      impl_->unpark_locked();
    }
    ucp_worker_signal(impl_->worker);
    impl_->progress_thread.join();
  }
  if (impl_->worker) {
    impl_->close_all();
    ucp_worker_destroy(impl_->worker);
  }
  if (impl_->context) ucp_cleanup(impl_->context);
}

int ucx_transport::rank() const { return impl_->rank; }
int ucx_transport::world_size() const { return impl_->world_size; }

namespace {

// A completion that fulfils a promise, and the promise's future.
std::pair<completion, std::future<status>> promised() {
  auto p = std::make_shared<std::promise<status>>();
  auto f = p->get_future();
  return {[p](const status& s) { p->set_value(s); }, std::move(f)};
}

}  // namespace

// Every operation starts here: one op, issued by the caller or the progress thread. `waited`:
// a future operation, driven by its owner's wait_for.
void ucx_transport::start(int peer, std::uint64_t tag, bool is_recv, const void* send_data, void* recv_data,
                          std::size_t size, completion done, bool waited) {
  impl_->check_peer(peer, tag);
  auto* o = new impl::op{impl_.get(), peer, is_recv, std::move(done)};
  o->send_data = send_data;
  o->recv_data = recv_data;
  o->size = size;
  o->tag = tag;
  o->waited = waited;
  impl_->post([o, self = impl_.get()] { self->issue(o); }, waited);
}

void ucx_transport::send(int peer, std::uint64_t tag, const void* data, std::size_t size,
                         completion done) {
  start(peer, tag, false, data, nullptr, size, std::move(done), false);
}

void ucx_transport::recv(int peer, std::uint64_t tag, void* data, std::size_t capacity,
                         completion done) {
  start(peer, tag, true, nullptr, data, capacity, std::move(done), false);
}

std::future<status> ucx_transport::send_future(int peer, std::uint64_t tag, const void* data,
                                               std::size_t size) {
  auto [done, f] = promised();
  start(peer, tag, false, data, nullptr, size, std::move(done), true);
  return std::move(f);
}

std::future<status> ucx_transport::recv_future(int peer, std::uint64_t tag, void* data,
                                               std::size_t capacity) {
  auto [done, f] = promised();
  start(peer, tag, true, nullptr, data, capacity, std::move(done), true);
  return std::move(f);
}

void ucx_transport::shutdown() {
  const int n = impl_->world_size;
  std::vector<unsigned char> in(n, 0);
  static const unsigned char token = 1;  // sends may still read it after a peer has gone
  std::vector<std::future<status>> recvs, sends;
  for (int p = 0; p < n; ++p) {
    if (p == impl_->rank) continue;
    recvs.push_back(recv_future(p, shutdown_tag, &in[p], 1));
    sends.push_back(send_future(p, shutdown_tag, &token, 1));
  }
  const auto deadline = std::chrono::steady_clock::now() + impl_->options.shutdown_timeout;
  for (auto* set : {&recvs, &sends}) {
    for (std::size_t i = 0; i < set->size(); ++i) {
      const int peer = static_cast<int>(i) + (static_cast<int>(i) >= impl_->rank ? 1 : 0);
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (!wait_for((*set)[i], std::max(left, std::chrono::milliseconds(0))))
        throw comm_error(peer, "shutdown barrier: rank " + std::to_string(peer) +
                                   " did not arrive within " +
                                   std::to_string(impl_->options.shutdown_timeout.count()) +
                                   " ms; it is stuck or gone");
      wait_ok((*set)[i]);
    }
  }
  // Second round: every peer has now finished its work (its first token arrived), but a peer
  // that also finished this barrier may exit at once, and a message it sent just before exiting
  // can be lost with its process. So nobody leaves after the first round alone: a peer exits
  // only after it has our second token, which we send only once its first one has arrived.
  // Losses in this round (a peer already gone) are expected and ignored, after a short wait.
  auto* second = new unsigned char[n]();  // left to the process if a late completion may still land
  std::vector<std::future<status>> recvs2, sends2;
  for (int p = 0; p < n; ++p) {
    if (p == impl_->rank) continue;
    recvs2.push_back(recv_future(p, shutdown_tag, &second[p], 1));
    sends2.push_back(send_future(p, shutdown_tag, &token, 1));
  }
  const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  bool all_done = true;
  for (auto* set : {&recvs2, &sends2})
    for (auto& f : *set) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(grace - std::chrono::steady_clock::now());
      all_done = wait_for(f, std::max(left, std::chrono::milliseconds(0))) && all_done;
    }
  if (all_done) delete[] second;
}

bool ucx_transport::wait_for(std::future<status>& f, std::chrono::milliseconds timeout) {
  const auto now = std::chrono::steady_clock::now();
  const auto deadline = timeout > std::chrono::hours(24 * 364) ? now + std::chrono::hours(24 * 364)
                                                              : now + timeout;
  return impl_->wait_for(f, deadline);
}

wait_spin wait_spin_policy(int local_ranks, int cores, const char* setting) {
  if (setting && *setting)  // checked by detect_launch_env
    return wait_spin(std::chrono::microseconds(std::atol(setting)), false);
  // The waiting thread is its rank's one running thread (the progress thread is parked): with
  // a core per rank, polling takes nothing another rank needs.
  return wait_spin(local_ranks <= cores ? default_wait_spin : std::chrono::microseconds(0), true);
}

wait_spin& wait_spin::operator=(const wait_spin& other) {
  base_ = other.base_;
  adaptive_ = other.adaptive_;
  recent_ns_.store(other.recent_ns_.load());
  return *this;
}

std::chrono::microseconds wait_spin::next() const {
  if (!adaptive_) return base_;
  const std::chrono::nanoseconds recent(recent_ns_.load(std::memory_order_relaxed));
  if (recent > max_adaptive_spin) return base_;
  return std::clamp(std::chrono::round<std::chrono::microseconds>(recent * 5 / 4), base_,
                    max_adaptive_spin);
}

void wait_spin::record(std::chrono::nanoseconds waited) {
  if (!adaptive_) return;
  // Average over the last few waits (weight 1/4); a race between two waiters loses one sample.
  const std::int64_t old = recent_ns_.load(std::memory_order_relaxed);
  recent_ns_.store(old + (waited.count() - old) / 4, std::memory_order_relaxed);
}

const wait_spin& ucx_transport::spin() const { return impl_->spin; }

std::string ucx_transport::describe_lanes() const {
  auto out = std::make_shared<std::promise<std::string>>();
  impl_->post([out, self = impl_.get()] {
    std::string text;
    for (int p = 0; p < self->world_size; ++p) {
      char* buffer = nullptr;
      std::size_t length = 0;
      FILE* f = open_memstream(&buffer, &length);
      if (self->eps[p]) ucp_ep_print_info(self->eps[p], f);
      std::fclose(f);
      text += "rank " + std::to_string(p) +
              (self->peers[p].same_host ? " (this host, pid watchdog):\n"
                                        : " (UCX peer error handling):\n") +
              std::string(buffer, length);
      std::free(buffer);
    }
    out->set_value(std::move(text));
  });
  return out->get_future().get();
}

}  // namespace mactor::comm
