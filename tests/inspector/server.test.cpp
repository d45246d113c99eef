// The inspection server over real HTTP (cpp-httplib's own client): token checks, the snapshot
// endpoint, the swap endpoints and the token file.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <httplib.h>
#include <mutex>
#include <nlohmann/json.hpp>

#include "fake_job.hpp"
#include "inspector/access_token.hpp"
#include "inspector/server.hpp"

using namespace mactor::inspector;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct swap_log {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::vector<std::string>>> calls;
};

int port_of(const server& s) { return std::stoi(s.address().substr(s.address().rfind(':') + 1)); }

httplib::Client connect_to(const server& s) {
  httplib::Client c("127.0.0.1", port_of(s));
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  return c;
}

}  // namespace

TEST_CASE("the snapshot endpoint answers the provider's snapshot as JSON to the right token") {
  const job_snapshot job = testing::fake_job();
  server s([&] { return job; }, nullptr);
  CHECK(s.address().rfind("127.0.0.1:", 0) == 0);
  CHECK(s.page_url() == "http://" + s.address() + "/?token=" + s.token());
  auto c = connect_to(s);
  c.set_bearer_token_auth(s.token());
  auto res = c.Get("/api/snapshot");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->get_header_value("Content-Type") == "application/json");
  CHECK(res->body == to_json_text(job));
  const auto back = snapshot_from_json_text(res->body);
  CHECK(back.actors.size() == job.actors.size());
  CHECK(back.last_iteration_timeline.size() == job.last_iteration_timeline.size());

  auto by_query = connect_to(s).Get("/api/snapshot?token=" + s.token());
  REQUIRE(by_query);
  CHECK(by_query->status == 200);
}

TEST_CASE("a missing or wrong token gets 403 with a JSON error on every endpoint") {
  int snapshots = 0, swaps = 0;
  server s([&] { ++snapshots; return job_snapshot{}; },
           [&](std::string, std::vector<std::string>) { ++swaps; return swap_result{true, "swapped"}; });
  std::string wrong = s.token();
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  for (const std::string& presented : {std::string(), wrong, s.token().substr(0, 32)}) {
    auto c = connect_to(s);
    if (!presented.empty()) c.set_bearer_token_auth(presented);
    std::vector<std::function<httplib::Result()>> requests = {
        [&] { return c.Get("/"); }, [&] { return c.Get("/api/snapshot"); },
        [&] { return c.Get("/api/snapshot?token=" + wrong); },
        [&] { return c.Post("/api/swap/logger", R"({"flags":[]})", "application/json"); },
        [&] { return c.Post("/api/swap/eval", R"({"flags":[]})", "application/json"); }};
    for (const auto& request : requests) {
      auto res = request();
      REQUIRE(res);
      CHECK(res->status == 403);
      CHECK(json::parse(res->body)["error"].get<std::string>().find("token") != std::string::npos);
    }
  }
  CHECK(snapshots == 0);
  CHECK(swaps == 0);
}

TEST_CASE("the token file holds the server's token with mode 0600") {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests" / "inspector" / "scratch";
  fs::create_directories(dir);
  const fs::path file = dir / ("server_token_" + std::to_string(::getpid()));
  fs::remove(file);
  server s([] { return job_snapshot{}; }, nullptr, {.token_file = file.string()});
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(read_token_file(file.string()) == s.token());
  CHECK(s.token().size() >= 32);  // >= 128 bits in hex
  fs::remove(file);
}

TEST_CASE("two servers have different tokens and ports") {
  server a([] { return job_snapshot{}; }, nullptr), b([] { return job_snapshot{}; }, nullptr);
  CHECK(a.token() != b.token());
  CHECK(a.address() != b.address());
  auto c = connect_to(b);
  c.set_bearer_token_auth(a.token());
  auto res = c.Get("/api/snapshot");
  REQUIRE(res);
  CHECK(res->status == 403);
}

TEST_CASE("a swap request calls the callback with the target and the flags") {
  swap_log log;
  server s([] { return job_snapshot{}; }, [&](std::string target, std::vector<std::string> flags) {
    std::lock_guard lock(log.mutex);
    log.calls.emplace_back(target, flags);
    return swap_result{true, "new " + target + " took over at iteration 7"};
  });
  auto c = connect_to(s);
  c.set_bearer_token_auth(s.token());
  auto res = c.Post("/api/swap/logger", R"({"flags":["--log-interval","5","--timing-log-level=2"]})",
                    "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(json::parse(res->body) == json{{"ok", true}, {"message", "new logger took over at iteration 7"}});
  res = c.Post("/api/swap/eval", R"({"flags":["--eval-iters","3"]})", "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  REQUIRE(log.calls.size() == 2);
  CHECK(log.calls[0].first == "logger");
  CHECK(log.calls[0].second == std::vector<std::string>{"--log-interval", "5", "--timing-log-level=2"});
  CHECK(log.calls[1].first == "eval");
  CHECK(log.calls[1].second == std::vector<std::string>{"--eval-iters", "3"});
}

TEST_CASE("a refused or failing swap reaches the caller as a 4xx/5xx with the message") {
  server s([] { return job_snapshot{}; }, [](std::string target, std::vector<std::string> flags) -> swap_result {
    if (target == "eval") throw std::runtime_error("evaluator did not start: no validation data");
    return {false, "new logger failed: unknown flag " + flags.at(0) + "; the old logger keeps running"};
  });
  auto c = connect_to(s);
  c.set_bearer_token_auth(s.token());
  auto res = c.Post("/api/swap/logger", R"({"flags":["--bogus"]})", "application/json");
  REQUIRE(res);
  CHECK(res->status == 409);
  CHECK(json::parse(res->body)["ok"] == false);
  CHECK(json::parse(res->body)["message"] == "new logger failed: unknown flag --bogus; the old logger keeps running");
  res = c.Post("/api/swap/eval", R"({"flags":[]})", "application/json");
  REQUIRE(res);
  CHECK(res->status == 500);
  CHECK(json::parse(res->body)["message"].get<std::string>().find("no validation data") != std::string::npos);
  for (const char* body : {"{not json", R"({"flags": "--x"})", R"({"flags": [1, 2]})", "[]"}) {
    res = c.Post("/api/swap/logger", body, "application/json");
    REQUIRE(res);
    CHECK(res->status == 400);
    CHECK(json::parse(res->body)["message"].get<std::string>().find("bad swap request") != std::string::npos);
  }
}

TEST_CASE("an unknown endpoint gets 404 naming the endpoints there are") {
  server s([] { return job_snapshot{}; }, nullptr);
  auto c = connect_to(s);
  c.set_bearer_token_auth(s.token());
  auto res = c.Get("/api/nothing");
  REQUIRE(res);
  CHECK(res->status == 404);
  CHECK(json::parse(res->body)["error"].get<std::string>().find("/api/snapshot") != std::string::npos);
}

TEST_CASE("the page is served as HTML and polls the snapshot endpoint") {
  server s([] { return job_snapshot{}; }, nullptr);
  auto res = connect_to(s).Get("/?token=" + s.token());
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->get_header_value("Content-Type").rfind("text/html", 0) == 0);
  CHECK(res->body.find("/api/snapshot") != std::string::npos);
  CHECK(res->body.find("<script src") == std::string::npos);  // self-contained
  CHECK(res->body.find("http://") == res->body.find("http://www.w3.org/2000/svg"));
}

TEST_CASE("a port already in use is refused naming the host and port") {
  server a([] { return job_snapshot{}; }, nullptr);
  const int port = port_of(a);
  server_options taken;
  taken.port = port;
  CHECK_THROWS_WITH(server([] { return job_snapshot{}; }, nullptr, taken),
                    Catch::Contains("127.0.0.1:" + std::to_string(port)));
}

TEST_CASE("stop ends serving and can be called twice") {
  server s([] { return job_snapshot{}; }, nullptr);
  const int port = port_of(s);
  s.stop();
  s.stop();
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(1);
  auto res = c.Get("/api/snapshot");
  CHECK_FALSE(res);
}

TEST_CASE("a failed bind leaves no token file behind") {
  server a([] { return job_snapshot{}; }, nullptr);
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests" / "inspector" / "scratch";
  fs::create_directories(dir);
  const fs::path file = dir / ("unbound_token_" + std::to_string(::getpid()));
  fs::remove(file);
  server_options taken;
  taken.port = port_of(a);
  taken.token_file = file.string();
  CHECK_THROWS(server([] { return job_snapshot{}; }, nullptr, taken));
  CHECK_FALSE(fs::exists(file));
}

TEST_CASE("an IPv6 bind address is written in brackets and the client reaches it") {
  server_options v6;
  v6.bind_host = "::1";
  std::unique_ptr<server> s;
  try {
    s = std::make_unique<server>([] { return testing::fake_job(); }, nullptr, v6);
  } catch (const std::runtime_error& e) {
    WARN("no IPv6 loopback here: " << e.what());
    return;
  }
  CHECK(s->address().rfind("[::1]:", 0) == 0);
  httplib::Client c("::1", port_of(*s));
  c.set_bearer_token_auth(s->token());
  auto res = c.Get("/api/snapshot");
  REQUIRE(res);
  CHECK(res->status == 200);
}
