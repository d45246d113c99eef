// Python's int()/float() parsing and float repr, checked on cases Python itself decides.
#include <catch2/catch.hpp>

#include <limits>

#include "config/python_text.hpp"

using namespace mactor::config;

TEST_CASE("int() accepts whitespace, signs and single underscores between digits") {
  CHECK(parse_python_int(" 42 ") == 42);
  CHECK(parse_python_int("+7") == 7);
  CHECK(parse_python_int("-1_000") == -1000);
  CHECK_FALSE(parse_python_int("1__0"));
  CHECK_FALSE(parse_python_int("_1"));
  CHECK_FALSE(parse_python_int("1.0"));
  CHECK_FALSE(parse_python_int(""));
  CHECK_FALSE(parse_python_int("0x10"));
}

TEST_CASE("float() accepts exponents, leading dots and inf/nan words") {
  CHECK(parse_python_float(".5") == 0.5);
  CHECK(parse_python_float("1e-3") == 1e-3);
  CHECK(parse_python_float("-Infinity") == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(*parse_python_float("NaN")));
  CHECK(parse_python_float("1e999") == std::numeric_limits<double>::infinity());
  CHECK_FALSE(parse_python_float("1e"));
  CHECK_FALSE(parse_python_float("abc"));
}

TEST_CASE("float repr matches Python's shortest round-trip form") {
  CHECK(python_float_repr(1e-05) == "1e-05");
  CHECK(python_float_repr(0.0001) == "0.0001");
  CHECK(python_float_repr(3.0) == "3.0");
  CHECK(python_float_repr(0.1) == "0.1");
  CHECK(python_float_repr(1e16) == "1e+16");
  CHECK(python_float_repr(123456789012345.6) == "123456789012345.6");
  CHECK(python_float_repr(-2.5e-7) == "-2.5e-07");
  CHECK(python_float_repr(0.0) == "0.0");
}

TEST_CASE("str repr picks the quote Python picks") {
  CHECK(python_str_repr("abc") == "'abc'");
  CHECK(python_str_repr("it's") == "\"it's\"");
}
