// The UCX transport's operations: issuing them, the progress thread that drives the worker, and
// a waiting thread that drives it itself.
#include "comm/ucx_transport_impl.hpp"

namespace mactor::comm {

using namespace ucx_detail;

void ucx_transport::impl::finish(op* o, ucs_status_t s, std::size_t bytes) {
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

void ucx_transport::impl::complete_request(void* request, ucs_status_t s, op* o, std::size_t bytes) {
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

void ucx_transport::impl::on_send(void* request, ucs_status_t s, void* user) {
  op* o = static_cast<op*>(user);
  complete_request(request, s, o, o->size);
}

void ucx_transport::impl::on_recv(void* request, ucs_status_t s, const ucp_tag_recv_info_t* info,
                    void* user) {
  complete_request(request, s, static_cast<op*>(user), info ? info->length : 0);
}

void ucx_transport::impl::issue(op* o) {
  if (!failure_of(o->peer).empty() || !endpoints[o->peer]) {
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
    r = ucp_tag_send_nbx(endpoints[o->peer], o->send_data, o->size, wire_tag(o->tag, rank), &param);
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

bool ucx_transport::impl::drain_posted() {
  std::vector<std::function<void()>> work;
  {
    std::lock_guard lock(mu);
    work.swap(posted);
  }
  for (auto& w : work) w();
  return !work.empty();
}

void ucx_transport::impl::park_while_waited() {
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

void ucx_transport::impl::unpark_locked() {
  wake_requested = true;
  if (parked) unparked.notify_one();
}

void ucx_transport::impl::progress_loop() {
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
    pollfd fd{event_fd, POLLIN, 0};
    // The timeout paces the watchdog; posts and network events wake the poll at once.
    ::poll(&fd, 1, static_cast<int>(watchdog_period.count()));
  }
}

void ucx_transport::impl::post(std::function<void()> work, bool waited) {
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

void ucx_transport::impl::hand_back_to_progress_thread() {
  if (ucp_worker_arm(worker) != UCS_OK) ucp_worker_signal(worker);
}

bool ucx_transport::impl::ready(std::future<status>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

bool ucx_transport::impl::wait_for(std::future<status>& f, std::chrono::steady_clock::time_point deadline) {
  {
    std::lock_guard lock(mu);
    ++waiters;
  }
  struct leave {
    impl* self;
    ~leave() { self->waiter_left(); }
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
    poll_before_sleep(f, spin_for);
    watch_same_host_peers();
    handle_failures();
    if (ready(f)) {
      hand_back_to_progress_thread();
      break;
    }
    if (ucp_worker_arm(worker) == UCS_ERR_BUSY) continue;
    pollfd fd{event_fd, POLLIN, 0};
    ::poll(&fd, 1, static_cast<int>(std::min(left, watchdog_period).count()) + 1);
    // Leaving with the worker armed (f timed out) is fine: the progress thread polls again
    // within waiter_linger.
  }
  if (!ready(f)) return false;
  spin.record(std::chrono::steady_clock::now() - began);
  return true;
}

void ucx_transport::impl::waiter_left() {
  std::lock_guard lock(mu);
  if (--waiters > 0) return;
  // Callback operations are outstanding (or the wait timed out on its own): the progress
  // thread takes over now. Otherwise the next wait_for most likely follows at once.
  if (unwaited_pending.load(std::memory_order_relaxed) > 0 || !posted.empty())
    unpark_locked();
  else
    linger_until = std::chrono::steady_clock::now() + waiter_linger;
}

bool ucx_transport::impl::progress() {
  {
    std::lock_guard lock(mu);
    linger_until = std::max(linger_until, std::chrono::steady_clock::now() + waiter_linger);
  }
  std::unique_lock worker_lock(worker_mu, std::try_to_lock);
  if (!worker_lock.owns_lock()) return false;  // the progress thread or a waiter is driving it
  bool did_work = drain_posted();
  while (ucp_worker_progress(worker) != 0) did_work = true;
  watch_same_host_peers();
  handle_failures();
  hand_back_to_progress_thread();
  return did_work;
}

// Poll a little before sleeping: the next event often comes within a wake-up's cost. An idle
// poll yields the core. When this thread got less than 3/4 of the time it polled, another thread
// wants this core (another rank's kernel thread, or the rank this one waits for, put on the same
// core by the scheduler): polling on would only take turns with it, so the wait sleeps instead.
void ucx_transport::impl::poll_before_sleep(std::future<status>& f, std::chrono::microseconds spin_for) {
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
}

}  // namespace mactor::comm
