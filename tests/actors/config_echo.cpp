// Test helper: publishes an actor that answers every config_message with itself, prints the port, and
// exits when its standard input closes.
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "actors/config_message.hpp"
#include "actors/inspect.hpp"
#include "actors/type_ids.hpp"

int main() {
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  mactor::actors::register_message_types(cfg);
  caf::actor_system sys{cfg};
  auto echo = sys.spawn([]() -> caf::behavior {
    return {[](mactor::actors::config_message& m) { return m; }};
  });
  auto port = sys.middleman().publish(echo, 0, "127.0.0.1");
  if (!port) {
    std::fprintf(stderr, "config_echo: cannot publish: %s\n", sys.render(port.error()).c_str());
    return 1;
  }
  std::printf("%u\n", static_cast<unsigned>(*port));
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  return 0;
}
