// straggler_control: the StragglerDetector's toggle server on cpp-httplib (see straggler_control.hpp).
#include "inspector/straggler_control.hpp"

#include <sys/socket.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <utility>

#include <httplib.h>

namespace mactor::inspector {

struct straggler_control::impl {
  httplib::Server http;
  std::thread thread;
  std::atomic<bool> loop_ended{false};
};

straggler_control::straggler_control(int port, bool on) : impl_(std::make_unique<impl>()), on_(on) {
  auto answer = [this](const httplib::Request&, httplib::Response& res) {
    toggle_ = true;
    // Megatron's message names the state the toggle leads to from the current one.
    const std::string msg = std::string("Will turn StragglerDetector ") + (on_.load() ? "OFF" : "ON") +
                            " at next logging interval";
    res.set_content(msg, "text/plain");
    std::lock_guard lock(mu_);
    messages_.push_back(msg);
  };
  impl_->http.Get(".*", answer);
  impl_->http.Post(".*", answer);
  impl_->http.Put(".*", answer);
  impl_->http.new_task_queue = [] { return new httplib::ThreadPool(1); };
  impl_->http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  if (!impl_->http.bind_to_port("0.0.0.0", port))
    throw std::runtime_error("cannot listen on 0.0.0.0:" + std::to_string(port) +
                             " (--straggler-ctrlr-port): the port may be in use");
  impl_->thread = std::thread([this] {
    impl_->http.listen_after_bind();
    impl_->loop_ended = true;
  });
  while (!impl_->http.is_running() && !impl_->loop_ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

straggler_control::~straggler_control() {
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool straggler_control::apply_toggle() {
  if (!toggle_.exchange(false)) return false;
  on_ = !on_.load();
  return true;
}

std::vector<std::string> straggler_control::take_messages() {
  std::lock_guard lock(mu_);
  return std::exchange(messages_, {});
}

}  // namespace mactor::inspector
