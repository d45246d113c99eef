// Randomized configs for round-trip tests: every field gets a random value of its own type.
#pragma once

#include <cmath>
#include <random>

#include "config/megatron_args.hpp"

namespace mactor::config::testing {

// Fills every field with a random value of its type, so round trips see more than defaults.
struct randomizer {
  std::mt19937_64& rng;
  template <class T>
  void fill(T& v) {
    if constexpr (std::is_same_v<T, bool>) v = rng() & 1;
    else if constexpr (std::is_same_v<T, std::int64_t>) v = static_cast<std::int64_t>(rng() % 100000) - 500;
    else if constexpr (std::is_same_v<T, double>) v = rng() & 1 ? std::ldexp(static_cast<double>(rng() % 1000000), -static_cast<int>(rng() % 40))
                                                                   : std::uniform_real_distribution<double>(-1e6, 1e6)(rng) / 3.0;
    else if constexpr (std::is_same_v<T, std::string>) v = "s" + std::to_string(rng() % 1000) + (rng() & 1 ? " \"q\"" : "");
    else fill_compound(v);
  }
  template <class T>
  void fill_compound(std::optional<T>& v) {
    if (rng() % 3 == 0) { v.reset(); return; }
    T inner{};
    fill(inner);
    v = inner;
  }
  template <class T>
  void fill_compound(std::vector<T>& v) {
    v.resize(rng() % 4);
    for (auto& x : v) fill(x);
  }
  template <class A, class B>
  void fill_compound(std::variant<A, B>& v) {
    if (rng() & 1) { A a{}; fill(a); v = a; }
    else { B b{}; fill(b); v = b; }
  }
};


inline megatron_args random_config(std::mt19937_64& rng, int round) {
  megatron_args a;
  randomizer r{rng};
  for_each_flag_field([&](std::string_view, auto& field) { r.fill(field); }, static_cast<flag_args&>(a));
  a.derived.data_parallel_size = round + 1;
  a.derived.virtual_pipeline_model_parallel_size = round % 2 ? std::optional<std::int64_t>(round) : std::nullopt;
  a.derived.params_dtype = round % 3 ? "bfloat16" : "float32";
  return a;
}

/// True when every flag field and derived value of a and b are equal.
inline bool same_config(const megatron_args& a, const megatron_args& b) {
  bool equal = true;
  for_each_flag_field([&](std::string_view, const auto& x, const auto& y) { equal = equal && x == y; },
                      static_cast<const flag_args&>(a), static_cast<const flag_args&>(b));
  const auto& d = a.derived;
  const auto& e = b.derived;
  return equal && d.rank == e.rank && d.world_size == e.world_size && d.data_parallel_size == e.data_parallel_size &&
         d.virtual_pipeline_model_parallel_size == e.virtual_pipeline_model_parallel_size &&
         d.num_microbatches == e.num_microbatches && d.params_dtype == e.params_dtype;
}

}  // namespace mactor::config::testing
