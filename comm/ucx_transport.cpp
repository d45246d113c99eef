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
#include "comm/ucx_transport_impl.hpp"

namespace mactor::comm {

using namespace ucx_detail;

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
void ucx_transport::start(int peer, std::uint64_t tag, bool is_recv, const void* send_data,
                          void* recv_data, std::size_t size, completion done, bool waited) {
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

bool ucx_transport::progress() { return impl_->progress(); }

const wait_spin& ucx_transport::spin() const { return impl_->spin; }

std::string ucx_transport::describe_lanes() const {
  auto out = std::make_shared<std::promise<std::string>>();
  impl_->post([out, self = impl_.get()] {
    std::string text;
    for (int p = 0; p < self->world_size; ++p) {
      char* buffer = nullptr;
      std::size_t length = 0;
      FILE* f = open_memstream(&buffer, &length);
      if (self->endpoints[p]) ucp_ep_print_info(self->endpoints[p], f);
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
