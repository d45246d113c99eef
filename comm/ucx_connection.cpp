// The UCX transport's connections: the context and worker, endpoints to every rank, what a
// dead peer does to its operations, and closing.
#include "comm/ucx_transport_impl.hpp"

namespace mactor::comm {

using namespace ucx_detail;

void ucx_transport::impl::init_context() {
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
  check_ucx(ucp_worker_get_efd(worker, &event_fd), "ucp_worker_get_efd");
}

std::vector<std::byte> ucx_transport::impl::published_blob() {
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

void ucx_transport::impl::on_ep_error(void* arg, ucp_ep_h, ucs_status_t s) {
  auto* p = static_cast<peer_info*>(arg);
  p->self->mark_failed(p->rank, std::string("UCX: ") + ucs_status_string(s));
}

void ucx_transport::impl::mark_failed(int peer, const std::string& why) {
  {
    std::lock_guard lock(mu);
    if (!failure[peer].empty()) return;
    failure[peer] = "rank " + std::to_string(peer) + " is unreachable (" + why +
                    "); that process probably died: see rank " + std::to_string(peer) +
                    "'s own log";
  }
  newly_failed.push_back(peer);
}

std::string ucx_transport::impl::failure_of(int peer) {
  std::lock_guard lock(mu);
  return failure[peer];
}

void ucx_transport::impl::connect_one(int peer, const std::vector<std::byte>& blob, const host_identity& me) {
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
  const ucs_status_t s = ucp_ep_create(worker, &ep, &endpoints[peer]);
  if (s != UCS_OK)
    throw comm_error(peer, "rank " + std::to_string(rank) + " cannot connect to rank " +
                               std::to_string(peer) + ": " + ucs_status_string(s));
}

void ucx_transport::impl::connect_all(address_exchange& exchange) {
  endpoints.assign(world_size, nullptr);
  peers.assign(world_size, {});
  const host_identity me = host_identity::mine();
  for (int p = 0; p < world_size; ++p) {
    const int peer = (rank + p) % world_size;  // stagger the fetches across ranks
    connect_one(peer, exchange.fetch(peer, options.connect_timeout), me);
  }
}

void ucx_transport::impl::close_endpoint(int peer, bool force) {
  if (!endpoints[peer]) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t r = ucp_ep_close_nbx(endpoints[peer], &param);
  if (r && !UCS_PTR_IS_ERR(r)) closing.push_back(r);
  endpoints[peer] = nullptr;
}

void ucx_transport::impl::handle_failures() {
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

void ucx_transport::impl::watch_same_host_peers() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_watchdog < watchdog_period) return;
  last_watchdog = now;
  for (const peer_info& p : peers)
    if (p.same_host && p.rank != rank && failure_of(p.rank).empty() && !process_alive(p.pid))
      mark_failed(p.rank, "its process " + std::to_string(p.pid) + " on this host has exited");
}

void ucx_transport::impl::check_peer(int peer, std::uint64_t tag) const {
  if (peer < 0 || peer >= world_size)
    throw comm_error(peer, "peer rank " + std::to_string(peer) + " is outside the world of " +
                               std::to_string(world_size) + " ranks");
  if (tag > max_tag + 1)
    throw comm_error(peer, "tag " + std::to_string(tag) + " exceeds the transport's 40 bits");
}

void ucx_transport::impl::close_all() {
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

}  // namespace mactor::comm
