// Context-parallel attention: each rank's queries (Megatron's load-balanced chunks r and
// 2cp-1-r of the sequence) against the whole sequence's keys and values give the rows of the
// one-rank attention at those positions, forward and backward (query gradients per rank, key and
// value gradients summed over the ranks), with GQA, a sliding window, a sink logit and dropout.
#include <catch2/catch.hpp>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/dropout.hpp"
#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

namespace {

// The sequence positions rank r holds, in its row order (restated from Megatron's
// get_batch_on_this_cp_rank: 2 * cp chunks, rank r keeps chunks r and 2 * cp - 1 - r).
std::vector<int> positions_of(int seq, int cp, int r) {
  const int chunk = seq / (2 * cp);
  std::vector<int> p;
  for (int c : {r, 2 * cp - 1 - r})
    for (int i = 0; i < chunk; ++i) p.push_back(c * chunk + i);
  return p;
}

// Rows [position, batch] of a [seq, batch, width] array, for the given positions.
std::vector<double> rows_at(const std::vector<double>& a, const std::vector<int>& positions,
                            int batch, std::int64_t width) {
  std::vector<double> out;
  for (int s : positions)
    out.insert(out.end(), a.begin() + s * batch * width, a.begin() + (s + 1) * batch * width);
  return out;
}

// Element k of each head's [q..., k, v] slots: true for the key and value parts of a qkv row.
bool is_key_or_value(const kernels::attention_dims& d, std::int64_t column) {
  const int per_group = d.heads / d.groups;
  return (column / d.head_dim) % (per_group + 2) >= per_group;
}

struct variant {
  int window;
  bool sink;
  float dropout;
};

}  // namespace

TEST_CASE("context-parallel attention equals one rank's attention at each rank's positions") {
  for (int cp : {2, 4})
    for (variant v : {variant{-1, false, 0.0f}, variant{5, false, 0.0f}, variant{-1, true, 0.0f},
                      variant{-1, false, 0.25f}, variant{9, true, 0.25f}}) {
      CAPTURE(cp, v.window, v.sink, v.dropout);
      kernels::attention_dims full;
      full.seq = 24, full.batch = 2, full.heads = 4, full.groups = 2, full.head_dim = 3;
      full.total_heads = 4, full.window = v.window;
      const std::int64_t width = full.qkv_width(), out_width = full.heads * full.head_dim;
      const auto stream = kernels::dropout_stream(7, 1, 0, 3);
      const auto qkv = test::random_vector(std::size_t(full.seq) * full.batch * width, 21);
      const auto dout = test::random_vector(std::size_t(full.seq) * full.batch * out_width, 22);
      const auto sink_values = test::random_vector(std::size_t(full.heads), 23);
      const double* sink = v.sink ? sink_values.data() : nullptr;

      std::vector<double> out(dout.size()), probs(std::size_t(full.batch) * full.heads * full.seq * full.seq);
      std::vector<double> dqkv(qkv.size()), dsink(std::size_t(full.heads), 0.0);
      kernels::attention_forward<double>(out.data(), probs.data(), qkv.data(), full, 0.6, v.dropout,
                                         stream, sink);
      kernels::attention_backward<double>(dqkv.data(), dout.data(), qkv.data(), probs.data(), full,
                                          0.6, v.dropout, stream, sink, v.sink ? dsink.data() : nullptr);

      std::vector<double> dkv_sum(qkv.size(), 0.0), dsink_sum(std::size_t(full.heads), 0.0);
      for (int r = 0; r < cp; ++r) {
        CAPTURE(r);
        const auto positions = positions_of(full.seq, cp, r);
        kernels::attention_dims d = full;
        const int chunk = full.seq / (2 * cp);
        d.seq = 2 * chunk, d.kv_seq = full.seq, d.num_runs = 2;
        d.runs = {kernels::query_run{0, r * chunk, chunk},
                  kernels::query_run{chunk, (2 * cp - 1 - r) * chunk, chunk}};
        const auto q_local = rows_at(qkv, positions, full.batch, width);
        const auto dout_local = rows_at(dout, positions, full.batch, out_width);
        std::vector<double> out_local(dout_local.size()),
            probs_local(std::size_t(d.batch) * d.heads * d.seq * d.kv_seq);
        kernels::attention_forward<double>(out_local.data(), probs_local.data(), q_local.data(), d,
                                           0.6, v.dropout, stream, sink, qkv.data());
        CHECK(test::relative_error(out_local, rows_at(out, positions, full.batch, out_width)) < 1e-13);

        std::vector<double> dq(q_local.size(), 0.0), dkv(qkv.size(), 55.0);  // dkv is overwritten
        kernels::attention_backward<double>(dq.data(), dout_local.data(), q_local.data(),
                                            probs_local.data(), d, 0.6, v.dropout, stream, sink,
                                            v.sink ? dsink_sum.data() : nullptr, qkv.data(), dkv.data());
        const auto dq_expected = rows_at(dqkv, positions, full.batch, width);
        std::vector<double> dq_queries, dq_expected_queries;
        for (std::size_t i = 0; i < dq.size(); ++i)
          if (!is_key_or_value(d, std::int64_t(i) % width))
            dq_queries.push_back(dq[i]), dq_expected_queries.push_back(dq_expected[i]);
        CHECK(test::relative_error(dq_queries, dq_expected_queries) < 1e-12);
        for (std::size_t i = 0; i < dkv.size(); ++i)
          if (is_key_or_value(d, std::int64_t(i) % width)) dkv_sum[i] += dkv[i];
      }
      std::vector<double> dkv_expected(qkv.size(), 0.0);
      for (std::size_t i = 0; i < dqkv.size(); ++i)
        if (is_key_or_value(full, std::int64_t(i) % width)) dkv_expected[i] = dqkv[i];
      CHECK(test::relative_error(dkv_sum, dkv_expected) < 1e-12);
      if (v.sink) CHECK(test::relative_error(dsink_sum, dsink) < 1e-12);
    }
}
