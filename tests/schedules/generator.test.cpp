// Tests for schedules/generator.hpp: laziness, order, exceptions, ownership of the frame.
#include "schedules/generator.hpp"

#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <vector>

using mactor::schedules::generator;

namespace {

generator<int> count_to(int n, int* resumed) {
  for (int i = 0; i < n; ++i) {
    ++*resumed;
    co_yield i;
  }
}

struct destruction_counter {
  int* count;
  ~destruction_counter() { ++*count; }
};

generator<int> endless(int* destroyed) {
  destruction_counter guard{destroyed};
  for (int i = 0;; ++i) co_yield i;
}

generator<int> throws_after(int n) {
  for (int i = 0; i < n; ++i) co_yield i;
  throw std::runtime_error("schedule broke");
}

// A yielded value with a heap member must survive until the consumer reads it (the GCC 12
// aggregate pitfall of PLATFORM_NOTES.md is about such members).
generator<std::vector<std::string>> words(int n) {
  for (int i = 0; i < n; ++i) co_yield std::vector<std::string>(3, std::string(40, char('a' + i)));
}

}  // namespace

TEST_CASE("generator runs its body only when the next value is pulled") {
  int resumed = 0;
  auto g = count_to(3, &resumed);
  CHECK(resumed == 0);
  CHECK(g.next() == 0);
  CHECK(resumed == 1);
  CHECK(g.next() == 1);
  CHECK(g.next() == 2);
  CHECK(resumed == 3);
  CHECK_FALSE(g.next().has_value());
  CHECK_FALSE(g.next().has_value());
}

TEST_CASE("generator works in a range-for and yields values in order") {
  int resumed = 0;
  std::vector<int> got;
  for (int v : count_to(5, &resumed)) got.push_back(v);
  CHECK(got == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("destroying an unfinished generator destroys its frame and locals") {
  int destroyed = 0;
  {
    auto g = endless(&destroyed);
    CHECK(g.next() == 0);
    CHECK(g.next() == 1);
    CHECK(destroyed == 0);
  }
  CHECK(destroyed == 1);
}

TEST_CASE("a moved-from generator is empty and the frame is destroyed once") {
  int destroyed = 0;
  {
    auto a = endless(&destroyed);
    CHECK(a.next() == 0);
    auto b = std::move(a);
    CHECK_FALSE(a.next().has_value());
    CHECK(b.next() == 1);
    generator<int> c;
    c = std::move(b);
    CHECK(c.next() == 2);
  }
  CHECK(destroyed == 1);
}

TEST_CASE("an exception thrown by the coroutine body reaches the caller of next") {
  auto g = throws_after(2);
  CHECK(g.next() == 0);
  CHECK(g.next() == 1);
  CHECK_THROWS_WITH(g.next(), "schedule broke");
}

TEST_CASE("yielded values that own heap memory stay valid after the coroutine moves on") {
  std::vector<std::vector<std::string>> got;
  for (const auto& w : words(4)) got.push_back(w);
  REQUIRE(got.size() == 4);
  CHECK(got[3][2] == std::string(40, 'd'));
  CHECK(got[0][0] == std::string(40, 'a'));
}
