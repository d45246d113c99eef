// --main-params-dtype fp16 against a second implementation written here: after store() each
// tensor's main values are TE FusedAdam's fp16 master loaded back, fp16(x * (1 / s)) * s with
// s = absmax / (65504 / 2) per tensor, and the next store() of those values changes nothing.
#include "training/fp16_main_params.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "tensor/half_float.hpp"

using namespace mactor;

TEST_CASE("fp16 master weights hold each tensor as scaled fp16, loaded back into the fp32 working copy") {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> a(300), b(17);
  for (auto& v : a) v = normal(gen);
  for (auto& v : b) v = 100.0f * normal(gen);
  const std::vector<float> a0 = a, b0 = b;
  std::vector<model::optim_param> params(2);
  params[0].value = a.data(), params[0].numel = a.size();
  params[1].value = b.data(), params[1].numel = b.size();
  training::fp16_main_params masters;
  masters.store(params);
  CHECK(masters.bytes() == 2 * (a.size() + b.size()));
  for (const auto& [got, was] : {std::pair{&a, &a0}, std::pair{&b, &b0}}) {
    float absmax = 0;
    for (float v : *was) absmax = std::max(absmax, std::fabs(v));
    const float s = absmax / (65504.0f / 2.0f);
    std::size_t changed = 0;
    for (std::size_t i = 0; i < was->size(); ++i) {
      const float want = tensor::to_float(tensor::to_float16((*was)[i] * (1.0f / s))) * s;
      CHECK((*got)[i] == Approx(want).epsilon(1e-6));
      changed += (*got)[i] != (*was)[i];
    }
    CHECK(changed > 0);  // the rounding is visible
  }
  // Storing the loaded values again keeps them within fp16's precision (the scale barely moves).
  const std::vector<float> once = a;
  masters.store(params);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(once[i]).epsilon(1e-3).margin(1e-9));
}
