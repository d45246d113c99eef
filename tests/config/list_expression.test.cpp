// The layer-pattern evaluator agrees with Python's eval on Megatron's grammar.
#include <catch2/catch.hpp>

#include "config/list_expression.hpp"

using namespace mactor::config;
using list = std::vector<std::int64_t>;

TEST_CASE("list arithmetic repeats and concatenates") {
  CHECK(std::get<list>(*evaluate_list_expression("([1]*3+[0]*1)*3")) == list{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0});
  CHECK(std::get<list>(*evaluate_list_expression("[0]+[1]*2")) == list{0, 1, 1});
  CHECK(std::get<list>(*evaluate_list_expression("2*[1,0]")) == list{1, 0, 1, 0});
  CHECK(std::get<list>(*evaluate_list_expression("[1,2,]")) == list{1, 2});
  CHECK(std::get<list>(*evaluate_list_expression("[1]*0")).empty());
  CHECK(std::get<list>(*evaluate_list_expression("[1+1,3*2]")) == list{2, 6});
}

TEST_CASE("integer arithmetic follows precedence") {
  CHECK(std::get<std::int64_t>(*evaluate_list_expression("2+3*4")) == 14);
}

TEST_CASE("what Python rejects is rejected") {
  for (const char* bad : {"[1]*[2]", "[1]+2", "[1", "(1,2)", "[1] * 2", "x", "", "01", "[[1]]", "[1]*99999999999"})
    CHECK_FALSE(evaluate_list_expression(bad));
}
