// Vocab-sharded cross-entropy: two shards combined as the model combines them equal the
// unsharded log-softmax loss, and the backward matches finite differences.
#include "kernels/cross_entropy.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

namespace {

// Loss of rows [n] over vocabulary split at `split`, combining the shards by max and sum.
// On return, exps holds both shards' exp(logit - max) back in [n, v] layout.
std::vector<double> sharded_loss(const std::vector<double>& logits, const std::vector<int>& labels,
                                 int n, int v, int split, std::vector<double>& row_max,
                                 std::vector<double>& sum_exp, std::vector<double>& exps) {
  std::vector<double> a(n * split), b(n * (v - split));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < v; ++j)
      (j < split ? a[i * split + j] : b[i * (v - split) + j - split]) = logits[i * v + j];
  std::vector<double> ma(n), mb(n), sa(n), sb(n), ta(n), tb(n), loss(n);
  kernels::cross_entropy_row_max<double>(ma.data(), a.data(), n, split);
  kernels::cross_entropy_row_max<double>(mb.data(), b.data(), n, v - split);
  for (int i = 0; i < n; ++i) row_max[i] = std::max(ma[i], mb[i]);
  kernels::cross_entropy_shard_sums<double>(sa.data(), ta.data(), a.data(), row_max.data(),
                                            labels.data(), n, split, 0);
  kernels::cross_entropy_shard_sums<double>(sb.data(), tb.data(), b.data(), row_max.data(),
                                            labels.data(), n, v - split, split);
  for (int i = 0; i < n; ++i) sum_exp[i] = sa[i] + sb[i], ta[i] += tb[i];
  kernels::cross_entropy_loss<double>(loss.data(), sum_exp.data(), row_max.data(), ta.data(), n);
  exps.resize(n * v);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < v; ++j)
      exps[i * v + j] = j < split ? a[i * split + j] : b[i * (v - split) + j - split];
  return loss;
}

}  // namespace

TEST_CASE("sharded cross-entropy equals minus the log-softmax of the label") {
  const int n = 3, v = 7;
  const auto logits = test::random_vector(n * v, 1, 3.0);
  const std::vector<int> labels = {0, 6, 3};
  std::vector<double> row_max(n), sum_exp(n), exps;
  const auto loss = sharded_loss(logits, labels, n, v, 3, row_max, sum_exp, exps);
  for (int i = 0; i < n; ++i) {
    double z = 0;
    for (int j = 0; j < v; ++j) z += std::exp(logits[i * v + j]);
    CHECK(loss[i] == Approx(std::log(z) - logits[i * v + labels[i]]).epsilon(1e-12));
  }
}

TEST_CASE("cross-entropy backward matches finite differences of the scaled loss") {
  const int n = 3, v = 7;
  auto logits = test::random_vector(n * v, 2, 2.0);
  const std::vector<int> labels = {5, 1, 2};
  const std::vector<double> scale = {0.5, 0.0, 2.0};  // a masked row gets no gradient
  std::vector<double> row_max(n), sum_exp(n), grad;
  auto loss = [&] {
    std::vector<double> exps;
    return test::dot(scale, sharded_loss(logits, labels, n, v, 4, row_max, sum_exp, exps));
  };
  sharded_loss(logits, labels, n, v, 4, row_max, sum_exp, grad);
  kernels::cross_entropy_backward<double>(grad.data(), sum_exp.data(), labels.data(),
                                          scale.data(), n, v, 0);
  const auto numeric = test::numeric_gradient(loss, logits);
  CHECK(test::relative_error(grad, numeric) < 1e-8);
}
