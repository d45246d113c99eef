// The inspector token: its randomness and the token file's permission rules.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "inspector/access_token.hpp"

using namespace mactor::inspector;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests" / "inspector" / "scratch";
  fs::create_directories(dir);
  fs::path p = dir / (name + "_" + std::to_string(::getpid()));
  fs::remove(p);
  return p;
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("tokens are 256 random bits written as 64 hex digits") {
  std::set<std::string> seen;
  std::set<char> digits;
  for (int i = 0; i < 64; ++i) {
    std::string t = make_access_token();
    CHECK(t.size() == 64);
    CHECK(t.find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(t);
    digits.insert(t.begin(), t.end());
  }
  CHECK(seen.size() == 64);
  CHECK(digits.size() == 16);
}

TEST_CASE("the token file is created with mode 0600 even under a permissive umask") {
  const auto p = scratch("token_new");
  mode_t old = ::umask(0);
  write_token_file(p, "abc123");
  ::umask(old);
  CHECK(mode_of(p) == 0600);
  CHECK(read_token_file(p) == "abc123");
  fs::remove(p);
}

TEST_CASE("a private token file is reused and a readable one refused naming the file") {
  const auto p = scratch("token_reuse");
  write_token_file(p, "first-token-that-is-long");
  write_token_file(p, "second");
  CHECK(read_token_file(p) == "second");  // truncated, not appended

  ::chmod(p.c_str(), 0644);
  CHECK_THROWS_WITH(write_token_file(p, "third"),
                    Catch::Contains(p.string()) && Catch::Contains("chmod 600"));
  CHECK(read_token_file(p) == "second");
  fs::remove(p);
}

TEST_CASE("a symbolic link at the token file's path is refused") {
  const auto target = scratch("token_link_target"), link = scratch("token_link");
  { std::ofstream(target) << "x"; }
  ::chmod(target.c_str(), 0600);
  fs::create_symlink(target, link);
  CHECK_THROWS_WITH(write_token_file(link, "secret"), Catch::Contains(link.string()));
  CHECK(read_token_file(target) == "x");
  fs::remove(link);
  fs::remove(target);
}

TEST_CASE("a job's default token files are removed by job id and nothing else is") {
  const fs::path home = scratch("home");
  const fs::path dir = home / ".mactor/inspector";
  fs::create_directories(dir);
  CHECK(default_token_path(home.string(), "ab12-3f") == (dir / "ab12-3f.token").string());
  const std::vector<std::string> gone = {"ab12-3f.token", "ab12-3f-r1.token", "ab12-3f-r12.token"};
  const std::vector<std::string> kept = {"ab12-3f-rx.token", "ab12-3f0.token", "ab12-3f-r1.token.bak", "cd34-3f.token",
                                         "ab12-3f-r.token"};
  for (const auto& names : {gone, kept})
    for (const auto& n : names) std::ofstream(dir / n) << "t\n";
  CHECK(remove_job_token_files(home.string(), "ab12-3f") == 3);
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.insert(e.path().filename().string());
  CHECK(left == std::set<std::string>(kept.begin(), kept.end()));
  CHECK(remove_job_token_files(home.string(), "../x") == 0);
  CHECK(remove_job_token_files("", "ab12-3f") == 0);
  fs::remove_all(home);
}

TEST_CASE("tokens_equal compares whole strings") {
  CHECK(tokens_equal("abcd", "abcd"));
  CHECK_FALSE(tokens_equal("abcd", "abce"));
  CHECK_FALSE(tokens_equal("abcd", "abc"));
  CHECK_FALSE(tokens_equal("", "a"));
}
