// The inspection endpoint on cpp-httplib: token check before routing, JSON in and out, and the
// listening loop on a thread of its own (see server.hpp for the endpoints).
#include "inspector/server.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "inspector/access_token.hpp"
#include "inspector/web_page.hpp"

namespace mactor::inspector {
namespace {

using json = nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// The token from `Authorization: Bearer T`, else from `?token=T`.
std::string presented_token(const httplib::Request& req) {
  const std::string header = req.get_header_value("Authorization");
  const std::string bearer = "Bearer ";
  if (header.rfind(bearer, 0) == 0) return header.substr(bearer.size());
  return req.get_param_value("token");
}

// Reads {"flags": ["--a", "1", ...]}; an empty body means no flags.
std::vector<std::string> parse_flags(const std::string& body) {
  if (body.empty()) return {};
  json j = json::parse(body);
  if (!j.is_object() || !j.contains("flags") || !j["flags"].is_array())
    throw std::invalid_argument(R"(the body must be a JSON object {"flags": ["--flag", "value", ...]})");
  std::vector<std::string> flags;
  for (const auto& f : j["flags"]) {
    if (!f.is_string()) throw std::invalid_argument("every entry of \"flags\" must be a string");
    flags.push_back(f.get<std::string>());
  }
  return flags;
}

}  // namespace

struct server::impl {
  snapshot_fn snapshot;
  swap_fn swap;
  std::string host;
  int port = 0;
  std::string token;
  httplib::Server http;
  std::thread thread;
  std::atomic<bool> loop_ended{false};
  bool stopped = false;

  void route();
  void answer_swap(const std::string& target, const httplib::Request& req, httplib::Response& res);
};

void server::impl::route() {
  http.new_task_queue = [] { return new httplib::ThreadPool(4); };
  http.set_keep_alive_timeout(2);
  http.set_tcp_nodelay(true);  // headers and body go out in two writes: no Nagle delay between
  http.set_payload_max_length(1 << 20);
  // httplib's default adds SO_REUSEPORT, which would let a second job bind the same port and
  // take half the connections; a busy port must be an error instead.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (tokens_equal(presented_token(req), token)) return httplib::Server::HandlerResponse::Unhandled;
    send_json(res, 403, {{"error", "missing or wrong inspector token; pass the token the job "
                                   "printed at start (Authorization: Bearer TOKEN or ?token=TOKEN)"}});
    return httplib::Server::HandlerResponse::Handled;
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(std::string(web_page()), "text/html; charset=utf-8");
  });
  http.Get("/api/snapshot", [this](const httplib::Request&, httplib::Response& res) {
    try {
      res.set_header("Cache-Control", "no-store");
      res.set_content(to_json_text(snapshot()), "application/json");
    } catch (const std::exception& e) {
      send_json(res, 500, {{"error", std::string("the job could not produce a snapshot: ") + e.what()}});
    }
  });
  http.Post("/api/swap/logger", [this](const httplib::Request& req, httplib::Response& res) {
    answer_swap("logger", req, res);
  });
  http.Post("/api/swap/eval", [this](const httplib::Request& req, httplib::Response& res) {
    answer_swap("eval", req, res);
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404)
      send_json(res, 404, {{"error", "no such endpoint: " + req.method + " " + req.path +
                                         "; try GET /api/snapshot, POST /api/swap/logger or "
                                         "/api/swap/eval, or GET /"}});
  });
}

void server::impl::answer_swap(const std::string& target, const httplib::Request& req,
                               httplib::Response& res) {
  std::vector<std::string> flags;
  try {
    flags = parse_flags(req.body);
  } catch (const std::exception& e) {
    send_json(res, 400, {{"ok", false}, {"message", std::string("bad swap request: ") + e.what()}});
    return;
  }
  try {
    swap_result r = swap(target, std::move(flags));
    send_json(res, r.ok ? 200 : 409, {{"ok", r.ok}, {"message", r.message}});
  } catch (const std::exception& e) {
    send_json(res, 500, {{"ok", false}, {"message", "the " + target + " swap failed: " + e.what()}});
  }
}

server::server(snapshot_fn snapshot, swap_fn swap, server_options options)
    : impl_(std::make_unique<impl>()) {
  impl_->snapshot = std::move(snapshot);
  impl_->swap = std::move(swap);
  impl_->host = options.bind_host;
  impl_->token = make_access_token();
  impl_->route();
  if (options.port == 0) {
    impl_->port = impl_->http.bind_to_any_port(options.bind_host);
  } else if (impl_->http.bind_to_port(options.bind_host, options.port)) {
    impl_->port = options.port;
  } else {
    impl_->port = -1;
  }
  if (impl_->port <= 0)
    throw std::runtime_error("inspector: cannot listen on " + options.bind_host + ":" +
                             std::to_string(options.port) +
                             "; the port may be in use or the host not an address of this "
                             "machine (port 0 picks a free port)");
  if (!options.token_file.empty()) write_token_file(options.token_file, impl_->token);
  impl_->thread = std::thread([this] {
    impl_->http.listen_after_bind();
    impl_->loop_ended = true;
  });
  // stop() only takes effect once the loop runs, so do not hand out a server that is not.
  while (!impl_->http.is_running() && !impl_->loop_ended)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

server::~server() { stop(); }

std::string server::address() const {
  const std::string& h = impl_->host;
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(impl_->port);
}

const std::string& server::token() const { return impl_->token; }

std::string server::page_url() const { return "http://" + address() + "/?token=" + impl_->token; }

void server::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace mactor::inspector
