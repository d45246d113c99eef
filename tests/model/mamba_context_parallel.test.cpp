// The Mamba mixer under context parallelism (Megatron's MambaContextParallel): cp ranks, threads
// of this process, each hold their load-balanced positions of the sequence; their outputs and
// input gradients, placed back in sequence order, and their parameter gradients summed over the
// ranks (as the data x context-parallel reduction sums them) equal one rank's on the whole
// sequence. Covered: groups split over the ranks, groups replicated over them (fewer groups
// than ranks), cp 2 and 4, fp64 and fp32, and Megatron's refusals.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <thread>

#include "kernels/convert.hpp"
#include "model/activation.hpp"
#include "model/local_group.hpp"
#include "model/mamba_mixer.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

constexpr int seq = 16, batch = 2;

std::vector<double> doubles(tensor::const_tensor_view v) {
  std::vector<double> out(std::size_t(v.numel()));
  kernels::convert(test::view(out), v);
  return out;
}

struct mixer_result {
  std::vector<double> out, dx;  // [seq * batch, hidden] in sequence order
  std::vector<std::vector<double>> grads;
};

mixer_result run(const model::mamba_mixer_config& c, int cp, tensor::dtype type) {
  const int h = c.hidden_size;
  const auto x_all = test::random_vector(std::size_t(seq) * batch * h, 11);
  const auto dout_all = test::random_vector(std::size_t(seq) * batch * h, 12);
  mixer_result total{std::vector<double>(x_all.size()), std::vector<double>(x_all.size()), {}};
  std::vector<std::vector<std::vector<double>>> grads(static_cast<std::size_t>(cp));
  auto groups = model::make_local_groups(cp);
  std::vector<std::thread> ranks;
  for (int r = 0; r < cp; ++r)
    ranks.emplace_back([&, r] {
      const auto grad_type = type == tensor::dtype::float64 ? type : tensor::dtype::float32;
      model::parameter_store store(type, grad_type);
      const model::sequence_shard shard{seq, cp, r};
      model::mamba_mixer mixer(store, "mixer", c, 1, groups[std::size_t(r)].get(), shard);
      store.allocate(5, 0, 1);
      mixer.initialize(store, 5);
      for (auto& p : store.all())  // D and the norm weight away from their ones
        if (p.name.ends_with(".D") || p.name.ends_with("norm.weight")) {
          auto v = doubles(p.value);
          const auto noise = test::random_vector(v.size(), p.offset + 3, 0.3);
          for (std::size_t i = 0; i < v.size(); ++i) v[i] += noise[i];
          kernels::convert(p.value, test::view(v));
        }
      const auto positions = shard.positions();
      const std::int64_t rows = std::int64_t(positions.size()) * batch;
      std::vector<double> x(std::size_t(rows) * h), dout(x.size()), out(x.size()), dx(x.size());
      const auto each_row = [&](auto&& f) {
        for (std::size_t i = 0; i < positions.size(); ++i)
          for (int b = 0; b < batch; ++b)
            f((i * batch + b) * h, (std::size_t(positions[i]) * batch + b) * h);
      };
      each_row([&](std::size_t local, std::size_t global) {
        std::copy_n(x_all.begin() + global, h, x.begin() + local);
        std::copy_n(dout_all.begin() + global, h, dout.begin() + local);
      });
      tensor::tensor xt, doutt, outt, dxt;
      auto xv = model::ensure_activation(xt, rows, h, type), dov = model::ensure_activation(doutt, rows, h, type);
      auto ov = model::ensure_activation(outt, rows, h, type), dxv = model::ensure_activation(dxt, rows, h, type);
      kernels::convert(xv, test::view(x)), kernels::convert(dov, test::view(dout));
      model::single_group tp;
      mixer.forward(store, tp, xv, ov, int(positions.size()), batch);
      mixer.backward(store, tp, dov, xv, dxv);
      kernels::convert(test::view(out), ov), kernels::convert(test::view(dx), dxv);
      each_row([&](std::size_t local, std::size_t global) {
        std::copy_n(out.begin() + local, h, total.out.begin() + global);
        std::copy_n(dx.begin() + local, h, total.dx.begin() + global);
      });
      for (auto& p : store.all()) grads[std::size_t(r)].push_back(doubles(p.grad));
    });
  for (auto& t : ranks) t.join();
  total.grads = grads[0];
  for (int r = 1; r < cp; ++r)
    for (std::size_t p = 0; p < total.grads.size(); ++p)
      for (std::size_t i = 0; i < total.grads[p].size(); ++i) total.grads[p][i] += grads[std::size_t(r)][p][i];
  return total;
}

model::mamba_mixer_config small_mixer(int heads, int groups) {
  model::mamba_mixer_config c;
  c.hidden_size = 12, c.state_dim = 3, c.head_dim = 2, c.num_heads = heads, c.num_groups = groups;
  c.chunk_size = 5, c.init_method_std = 0.3, c.num_layers = 2;
  return c;
}

void check_equal(const model::mamba_mixer_config& c, int cp, tensor::dtype type, double tol) {
  CAPTURE(cp, c.num_heads, c.num_groups, tensor::short_name(type));
  const auto one = run(c, 1, type), many = run(c, cp, type);
  CHECK(test::relative_error(many.out, one.out) < tol);
  CHECK(test::relative_error(many.dx, one.dx) < tol);
  REQUIRE(many.grads.size() == one.grads.size());
  for (std::size_t p = 0; p < one.grads.size(); ++p) {
    CAPTURE(p);
    CHECK(test::relative_error(many.grads[p], one.grads[p]) < tol);
  }
}

}  // namespace

TEST_CASE("mamba mixer with context parallelism equals one rank on the whole sequence in fp64") {
  check_equal(small_mixer(8, 4), 2, tensor::dtype::float64, 1e-12);  // groups split over the ranks
  check_equal(small_mixer(8, 4), 4, tensor::dtype::float64, 1e-12);
  check_equal(small_mixer(8, 2), 4, tensor::dtype::float64, 1e-12);  // each group on two ranks
  check_equal(small_mixer(4, 1), 2, tensor::dtype::float64, 1e-12);
}

TEST_CASE("mamba mixer with context parallelism equals one rank in fp32") {
  check_equal(small_mixer(8, 2), 4, tensor::dtype::float32, 1e-5);
}

TEST_CASE("mamba mixer refuses context-parallel sizes Megatron's MambaContextParallel refuses") {
  model::parameter_store store(tensor::dtype::float64, tensor::dtype::float64);
  auto groups = model::make_local_groups(1);
  const auto build = [&](int heads, int num_groups, int cp) {
    model::mamba_mixer(store, "m" + std::to_string(heads) + std::to_string(num_groups), small_mixer(heads, num_groups),
                       1, groups[0].get(), model::sequence_shard{seq, cp, 0});
  };
  CHECK_THROWS_WITH(build(4, 2, 8), Catch::Contains("nheads must be evenly divisible by tp_size * cp_size"));
  CHECK_THROWS_WITH(build(6, 3, 2), Catch::Contains("must divide --context-parallel-size 2"));
}
