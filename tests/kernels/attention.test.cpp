// Attention core against a naive reference (GQA, fused QKV layout) and its backward against
// finite differences, with and without attention dropout, a sliding window and a sink logit.
#include "kernels/attention.hpp"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "kernels/dropout.hpp"
#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

namespace {

kernels::attention_dims small_dims() {
  kernels::attention_dims d;
  d.seq = 4, d.batch = 2, d.heads = 4, d.groups = 2, d.head_dim = 3;
  d.head_offset = 0, d.total_heads = 4;
  return d;
}

// Long enough for several causal row blocks, small elsewhere to keep finite differences quick.
kernels::attention_dims long_dims() {
  kernels::attention_dims d;
  d.seq = 150, d.batch = 1, d.heads = 2, d.groups = 1, d.head_dim = 2;
  d.head_offset = 0, d.total_heads = 2;
  return d;
}

// Straight from the definition: out[s, b, h] = sum_t softmax_t(q_s . k_t * scale, t <= s) v_t,
// over t >= s - window with a window, and with exp(sink[h]) added to the denominator.
std::vector<double> naive_attention(const std::vector<double>& qkv,
                                    const kernels::attention_dims& d, double scale,
                                    const double* sink = nullptr) {
  const int pg = d.heads / d.groups, w = int(d.qkv_width());
  std::vector<double> out(std::size_t(d.seq) * d.batch * d.heads * d.head_dim);
  auto at = [&](int s, int b, int g, int slot, int c) {
    return qkv[(std::size_t(s) * d.batch + b) * w + (g * (pg + 2) + slot) * d.head_dim + c];
  };
  for (int b = 0; b < d.batch; ++b)
    for (int h = 0; h < d.heads; ++h) {
      const int g = h / pg, j = h % pg;
      for (int s = 0; s < d.seq; ++s) {
        std::vector<double> score(s + 1, 0.0);
        const int first = d.window < 0 ? 0 : std::max(0, s - d.window);
        double mx = -1e300, sum = 0;
        for (int t = first; t <= s; ++t) {
          double dotp = 0;
          for (int c = 0; c < d.head_dim; ++c) dotp += at(s, b, g, j, c) * at(t, b, g, pg, c);
          score[t] = dotp * scale;
          mx = std::max(mx, score[t]);
        }
        for (int t = first; t <= s; ++t) sum += (score[t] = std::exp(score[t] - mx));
        if (sink) sum += std::exp(sink[h] - mx);
        for (int c = 0; c < d.head_dim; ++c) {
          double acc = 0;
          for (int t = first; t <= s; ++t) acc += score[t] / sum * at(t, b, g, pg + 1, c);
          out[((std::size_t(s) * d.batch + b) * d.heads + h) * d.head_dim + c] = acc;
        }
      }
    }
  return out;
}

}  // namespace

TEST_CASE("attention forward with grouped queries matches a naive causal softmax attention") {
  for (const auto& d : {small_dims(), long_dims()}) {
    const auto qkv = test::random_vector(std::size_t(d.seq) * d.batch * d.qkv_width(), 1);
    std::vector<double> out(std::size_t(d.seq) * d.batch * d.heads * d.head_dim);
    std::vector<double> probs(std::size_t(d.batch) * d.heads * d.seq * d.seq);
    kernels::attention_forward<double>(out.data(), probs.data(), qkv.data(), d, 0.5, 0.0f, 0);
    CHECK(test::relative_error(out, naive_attention(qkv, d, 0.5)) < 1e-13);
  }
}

TEST_CASE("attention backward matches finite differences with and without dropout") {
  for (const auto& d : {small_dims(), long_dims()})
    for (float p : {0.0f, 0.3f}) {
      const auto stream = kernels::dropout_stream(11, 0, 0, 0);
      auto qkv = test::random_vector(std::size_t(d.seq) * d.batch * d.qkv_width(), 2);
      const auto probe =
          test::random_vector(std::size_t(d.seq) * d.batch * d.heads * d.head_dim, 3);
      std::vector<double> out(probe.size()), probs(std::size_t(d.batch) * d.heads * d.seq * d.seq);
      auto loss = [&] {
        kernels::attention_forward<double>(out.data(), probs.data(), qkv.data(), d, 0.7, p, stream);
        return test::dot(probe, out);
      };
      loss();
      std::vector<double> dqkv(qkv.size(), 123.0);  // must be overwritten
      kernels::attention_backward<double>(dqkv.data(), probe.data(), qkv.data(), probs.data(), d,
                                          0.7, p, stream);
      CHECK(test::relative_error(dqkv, test::numeric_gradient(loss, qkv)) < 1e-7);
    }
}

// A window shorter than the sequence and a long one spanning causal row blocks.
std::vector<kernels::attention_dims> windowed_dims() {
  auto small = small_dims(), longer = long_dims();
  small.window = 1, longer.window = 70;
  return {small, longer};
}

TEST_CASE("sliding-window attention and the softmax sink match the naive definition") {
  std::vector<kernels::attention_dims> cases = windowed_dims();
  cases.push_back(small_dims());
  for (const auto& d : cases)
    for (bool with_sink : {false, true}) {
      INFO("window " << d.window << ", sink " << with_sink);
      const auto qkv = test::random_vector(std::size_t(d.seq) * d.batch * d.qkv_width(), 1);
      const auto sink = test::random_vector(std::size_t(d.heads), 5);
      const double* s = with_sink ? sink.data() : nullptr;
      std::vector<double> out(std::size_t(d.seq) * d.batch * d.heads * d.head_dim);
      std::vector<double> probs(std::size_t(d.batch) * d.heads * d.seq * d.seq);
      kernels::attention_forward<double>(out.data(), probs.data(), qkv.data(), d, 0.5, 0.0f, 0, s);
      CHECK(test::relative_error(out, naive_attention(qkv, d, 0.5, s)) < 1e-13);
      auto full = d;
      full.window = -1;
      if (d.window >= 0) CHECK(test::relative_error(out, naive_attention(qkv, full, 0.5, s)) > 1e-3);
    }
}

TEST_CASE("attention backward with a window and a sink matches finite differences, sink included") {
  for (const auto& d : windowed_dims())
    for (float p : {0.0f, 0.3f}) {
      INFO("window " << d.window << ", dropout " << p);
      const auto stream = kernels::dropout_stream(11, 0, 0, 0);
      auto qkv = test::random_vector(std::size_t(d.seq) * d.batch * d.qkv_width(), 2);
      auto sink = test::random_vector(std::size_t(d.heads), 6);
      const auto probe =
          test::random_vector(std::size_t(d.seq) * d.batch * d.heads * d.head_dim, 3);
      std::vector<double> out(probe.size()), probs(std::size_t(d.batch) * d.heads * d.seq * d.seq);
      auto loss = [&] {
        kernels::attention_forward<double>(out.data(), probs.data(), qkv.data(), d, 0.7, p, stream,
                                           sink.data());
        return test::dot(probe, out);
      };
      loss();
      std::vector<double> dqkv(qkv.size(), 123.0);
      std::vector<double> dsink(sink.size(), 0.25);  // accumulated into
      kernels::attention_backward<double>(dqkv.data(), probe.data(), qkv.data(), probs.data(), d,
                                          0.7, p, stream, sink.data(), dsink.data());
      CHECK(test::relative_error(dqkv, test::numeric_gradient(loss, qkv)) < 1e-7);
      auto want = test::numeric_gradient(loss, sink);
      for (auto& v : want) v += 0.25;
      CHECK(test::relative_error(dsink, want) < 1e-7);
    }
}

namespace {

// Megatron's reset_attention_mask (GPTDataset's _get_ltor_masks_and_position_ids): a lower
// triangle, then for each EOD at i the rows after it lose the keys up to it. allowed[s * seq + t].
std::vector<std::uint8_t> megatron_document_mask(const std::vector<int>& eods, int seq) {
  std::vector<std::uint8_t> allowed(std::size_t(seq) * seq, 0);
  for (int s = 0; s < seq; ++s)
    for (int t = 0; t <= s; ++t) allowed[std::size_t(s) * seq + t] = 1;
  for (int i : eods)
    for (int s = i + 1; s < seq; ++s)
      for (int t = 0; t <= i; ++t) allowed[std::size_t(s) * seq + t] = 0;
  return allowed;
}

// The softmax attention over a boolean mask per batch row, from the definition.
std::vector<double> naive_masked_attention(const std::vector<double>& qkv, const kernels::attention_dims& d,
                                           double scale, const std::vector<std::vector<std::uint8_t>>& allowed) {
  const int pg = d.heads / d.groups, w = int(d.qkv_width());
  std::vector<double> out(std::size_t(d.seq) * d.batch * d.heads * d.head_dim);
  auto at = [&](int s, int b, int g, int slot, int c) {
    return qkv[(std::size_t(s) * d.batch + b) * w + (g * (pg + 2) + slot) * d.head_dim + c];
  };
  for (int b = 0; b < d.batch; ++b)
    for (int h = 0; h < d.heads; ++h)
      for (int s = 0; s < d.seq; ++s) {
        const int g = h / pg, j = h % pg;
        std::vector<double> e(d.seq, 0.0);
        double mx = -1e300, sum = 0;
        for (int t = 0; t < d.seq; ++t) {
          if (!allowed[b][std::size_t(s) * d.seq + t]) continue;
          double dotp = 0;
          for (int c = 0; c < d.head_dim; ++c) dotp += at(s, b, g, j, c) * at(t, b, g, pg, c);
          e[t] = dotp * scale;
          mx = std::max(mx, e[t]);
        }
        for (int t = 0; t < d.seq; ++t)
          if (allowed[b][std::size_t(s) * d.seq + t]) sum += (e[t] = std::exp(e[t] - mx));
          else e[t] = 0;
        for (int c = 0; c < d.head_dim; ++c) {
          double acc = 0;
          for (int t = 0; t < d.seq; ++t) acc += e[t] / sum * at(t, b, g, pg + 1, c);
          out[((std::size_t(s) * d.batch + b) * d.heads + h) * d.head_dim + c] = acc;
        }
      }
  return out;
}

}  // namespace

TEST_CASE("attention with a document mask matches Megatron's reset-attention-mask mask, forward and backward") {
  auto shortd = small_dims(), longd = long_dims(), blocks = long_dims();
  shortd.seq = 6;
  longd.batch = 2;
  blocks.seq = 70;  // two row blocks; the second's rows start in different documents
  struct case_t {
    kernels::attention_dims d;
    std::vector<std::vector<int>> eods;  // per batch row
  };
  for (auto c : {case_t{shortd, {{1, 3}, {}}}, case_t{longd, {{10, 70, 71, 130}, {149}}}, case_t{blocks, {{10, 64, 65}}}}) {
    auto& d = c.d;
    std::vector<std::vector<std::uint8_t>> allowed;
    std::vector<std::int32_t> starts(std::size_t(d.batch) * d.seq);
    for (int b = 0; b < d.batch; ++b) {
      allowed.push_back(megatron_document_mask(c.eods[b], d.seq));
      for (int s = 0, start = 0; s < d.seq; ++s) {  // the first key after the last EOD before s
        starts[std::size_t(b) * d.seq + s] = start;
        if (std::find(c.eods[b].begin(), c.eods[b].end(), s) != c.eods[b].end()) start = s + 1;
      }
    }
    d.document_start = starts.data();
    INFO("seq " << d.seq);
    const auto qkv0 = test::random_vector(std::size_t(d.seq) * d.batch * d.qkv_width(), 4);
    std::vector<double> out(std::size_t(d.seq) * d.batch * d.heads * d.head_dim);
    std::vector<double> probs(std::size_t(d.batch) * d.heads * d.seq * d.seq);
    kernels::attention_forward<double>(out.data(), probs.data(), qkv0.data(), d, 0.5, 0.0f, 0);
    CHECK(test::relative_error(out, naive_masked_attention(qkv0, d, 0.5, allowed)) < 1e-13);
    auto causal = d;
    causal.document_start = nullptr;
    CHECK(test::relative_error(out, naive_attention(qkv0, causal, 0.5)) > 1e-3);
    if (d.seq > 100) continue;  // finite differences: the short case and the two blocks
    for (float p : {0.0f, 0.3f}) {
      if (p > 0 && d.seq > 10) continue;
      const auto stream = kernels::dropout_stream(11, 0, 0, 0);
      auto qkv = qkv0;
      const auto probe = test::random_vector(out.size(), 3);
      auto loss = [&] {
        kernels::attention_forward<double>(out.data(), probs.data(), qkv.data(), d, 0.7, p, stream);
        return test::dot(probe, out);
      };
      loss();
      std::vector<double> dqkv(qkv.size(), 123.0);
      kernels::attention_backward<double>(dqkv.data(), probe.data(), qkv.data(), probs.data(), d, 0.7, p, stream);
      CHECK(test::relative_error(dqkv, test::numeric_gradient(loss, qkv)) < 1e-7);
    }
  }
}
