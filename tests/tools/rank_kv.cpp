// Test helper: joins the job's rendezvous store and exchanges data with the other ranks, through
// the store (an all-gather of each rank's address) and through a TCP socket that rank 0 publishes
// in the store; prints what it received so a test can check ranks on different hosts talked.
// usage: rank_kv [--absent R] [--timeout-ms T]   (rank R leaves without joining)
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "comm/launch_env.hpp"
#include "comm/rendezvous.hpp"

namespace {

std::string my_ipv4() {
  ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (::getifaddrs(&list) != 0) return found;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    auto* sin = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    if (::inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text)) found = text;
    break;
  }
  ::freeifaddrs(list);
  return found;
}

std::string read_line(int fd) {
  std::string s;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') s.push_back(c);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mactor::comm;
  int absent = -1;
  std::chrono::milliseconds timeout(20000);
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--absent") absent = std::atoi(argv[i + 1]);
    else if (a == "--timeout-ms") timeout = std::chrono::milliseconds(std::atoi(argv[i + 1]));
  }
  try {
    launch_env env = detect_launch_env(process_env());
    if (env.rank == absent) return 0;
    rendezvous rdzv = open_rendezvous(env, timeout);
    auto& kv = *rdzv.client;
    std::string ip = my_ipv4();
    auto all = kv.all_gather("ip", env.rank, env.world_size, ip, timeout);
    std::string line = "rank " + std::to_string(env.rank) + " ips:";
    for (auto& a : all) line += " " + a;
    std::printf("%s\n", line.c_str());

    // Data over a socket: rank 0 serves, every other rank sends a line and reads the echo.
    if (env.rank == 0) {
      int port = 0;
      int lfd = listen_tcp(port);
      kv.set("tcp", ip + ":" + std::to_string(port));
      for (int k = 1; k < env.world_size; ++k) {
        sockaddr_in peer{};
        socklen_t len = sizeof peer;
        int fd = ::accept(lfd, reinterpret_cast<sockaddr*>(&peer), &len);
        char text[INET_ADDRSTRLEN];
        ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text);
        std::string msg = read_line(fd);
        std::printf("rank 0 got '%s' from %s\n", msg.c_str(), text);
        std::string reply = "echo " + msg + "\n";
        [[maybe_unused]] auto w = ::write(fd, reply.data(), reply.size());
        ::close(fd);
      }
      ::close(lfd);
    } else {
      host_port hp = parse_host_port(kv.get("tcp", timeout));
      int fd = connect_with_retry(hp, timeout);
      std::string msg = "hello from rank " + std::to_string(env.rank) + " at " + ip + "\n";
      [[maybe_unused]] auto w = ::write(fd, msg.data(), msg.size());
      std::printf("rank %d got '%s' from %s\n", env.rank, read_line(fd).c_str(), hp.host.c_str());
      ::close(fd);
    }
    std::fflush(stdout);
    kv.barrier("done", env.rank, env.world_size, timeout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank_kv: %s\n", e.what());
    return 3;
  }
}
