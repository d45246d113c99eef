// Global grad-norm clipping against torch.nn.utils.clip_grad_norm_, the zero count and params
// norm against torch, and the norm reduced over a simulated two-rank group.
#include "model/grad_clip.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <random>

#include "optimizer_python_reference.hpp"

using namespace mactor::model;
using mactor::test::close;
using mactor::test::run_python_reference;

namespace {

struct buffers {
  std::vector<std::vector<float>> values, grads;
  std::vector<optim_param> params;

  explicit buffers(std::vector<std::size_t> sizes, float grad_scale, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> pick(0, 7);
    for (std::size_t n : sizes) {
      values.emplace_back(n);
      grads.emplace_back(n);
      for (float& v : values.back()) v = normal(rng);
      for (float& g : grads.back()) g = pick(rng) == 0 ? (pick(rng) < 4 ? 0.0f : -0.0f)
                                                       : normal(rng) * grad_scale;
    }
    for (std::size_t i = 0; i < sizes.size(); ++i)
      params.push_back({"p" + std::to_string(i), values[i].data(), grads[i].data(), sizes[i]});
  }
};

struct clip_case {
  buffers b;
  double max_norm;
  bool expect_clip;
  double zeros = 0, pnorm = 0, total = 0;
  nlohmann::json job;

  clip_case(float grad_scale, double max_norm_, bool expect_clip_)
      : b({1000, 37, 1, 256}, grad_scale, 42), max_norm(max_norm_), expect_clip(expect_clip_) {
    job = {{"mode", "clip"}, {"values", b.values}, {"grads", b.grads}, {"max_norm", max_norm}};
    zeros = count_zeros_in_grads(b.params);
    pnorm = params_norm(b.params);
    total = clip_grad_norm(b.params, max_norm);
  }

  void check(const nlohmann::json& ref) {
    const double ref_norm = ref["total_norm"].get<double>();
    const double ref_pnorm = ref["params_norm"].get<double>();
    double max_rel = 0.0;
    for (std::size_t p = 0; p < b.grads.size(); ++p)
      for (std::size_t i = 0; i < b.grads[p].size(); ++i) {
        const double want = ref["grads"][p][i].get<double>();
        const double got = b.grads[p][i];
        if (want != 0.0) max_rel = std::max(max_rel, std::abs(got - want) / std::abs(want));
        else CHECK(got == 0.0);
      }
    std::printf("clip at %g: norm %.9g vs torch %.9g (rel %.2g), clipped grads max rel %.2g, "
                "params norm rel %.2g\n",
                max_norm, total, ref_norm, std::abs(total - ref_norm) / total, max_rel,
                std::abs(pnorm - ref_pnorm) / pnorm);
    CHECK(close(total, ref_norm, 1e-6));
    CHECK(zeros == ref["num_zeros"].get<double>());
    CHECK(close(pnorm, ref_pnorm, 1e-12));
    CHECK(max_rel < 1e-6);
    CHECK(close(grad_norm(b.params), expect_clip ? max_norm : total, 1e-5));
  }
};

}  // namespace

TEST_CASE("clipping matches torch clip_grad_norm_ above and below the limit") {
  clip_case above(3.0f, 1.0, true);   // norm ~100: scaled down to 1
  clip_case below(1e-3f, 1.0, false);  // norm ~0.03: left alone, norm still reported
  const nlohmann::json ref = run_python_reference("optimizer_reference.py", "batch",
                                                  {{"jobs", {above.job, below.job}}});
  above.check(ref["results"][0]);
  below.check(ref["results"][1]);
}

TEST_CASE("the norm of a group is the sqrt of the reduced local sums of squares") {
  buffers all({300, 20, 7, 90}, 1.0f, 5);
  const double single = grad_norm(all.params);
  // Two "ranks" hold two params each; the reducer adds the other rank's local sum.
  const std::span<const optim_param> rank0(all.params.data(), 2), rank1(all.params.data() + 2, 2);
  const double local1 = local_grad_sum_of_squares(rank1);
  const double zeros1 = local_grad_zeros(rank1);
  int calls = 0;
  sum_reducer add_rank1 = [&](std::span<double> v) {
    ++calls;
    v[0] += calls == 1 ? local1 : zeros1;
  };
  CHECK(close(grad_norm(rank0, add_rank1), single, 1e-14));
  CHECK(count_zeros_in_grads(rank0, add_rank1) == count_zeros_in_grads(all.params));
  CHECK(calls == 2);
}

TEST_CASE("params left out of grad stats are still clipped but not counted") {
  buffers b({50, 50}, 1.0f, 9);
  b.params[1].in_grad_stats = false;
  const double counted = grad_norm(std::span<const optim_param>(b.params.data(), 1));
  const std::vector<float> second_before = b.grads[1];
  const double total = clip_grad_norm(b.params, counted / 4);
  CHECK(total == counted);
  const float coeff = static_cast<float>((counted / 4) / (counted + 1e-6));
  for (std::size_t i = 0; i < second_before.size(); ++i)
    CHECK(b.grads[1][i] == second_before[i] * coeff);
}

TEST_CASE("a NaN grad norm is reported and does not clip, as in Megatron") {
  buffers b({10}, 1.0f, 3);
  b.grads[0][3] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> before = b.grads[0];
  CHECK(std::isnan(clip_grad_norm(b.params, 1.0)));
  CHECK(b.grads[0][0] == before[0]);
}
