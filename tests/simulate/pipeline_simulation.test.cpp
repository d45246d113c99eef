// The virtual clock driving the real schedules: with equal stages and free transfers the bubble
// equals the closed forms (1F1B: (p-1)/(m+p-1); interleaved: (p-1)/(v m + p-1)); a transfer time
// c adds 2 (p-1) c to a one-microbatch pipeline; 1F1B rank r never holds more than min(p-r, m)
// microbatches' activations.
#include <catch2/catch.hpp>
#include <tuple>

#include "schedules/schedule.hpp"
#include "schedules/schedule_shape.hpp"
#include "simulate/pipeline_simulation.hpp"

namespace sim = mactor::simulate;
namespace sch = mactor::schedules;

namespace {

// Every chunk of every rank: forward tf / vp, backward tb / vp, `activation` bytes per microbatch.
sim::cost_model equal_stages(int pp, int vp, double tf, double tb, double p2p_seconds, double activation = 0) {
  sim::cost_model m;
  m.pipeline = pp;
  m.virtual_stages = vp;
  m.p2p_seconds = p2p_seconds;
  for (int r = 0; r < pp; ++r) {
    std::vector<sim::chunk_cost> chunks(static_cast<std::size_t>(vp));
    for (auto& c : chunks) {
      c.layers = 1;
      c.forward_s = tf / vp;
      c.backward_s = tb / vp;
      c.activation_bytes = activation;
    }
    m.chunks.push_back(chunks);
    m.optimizer_s.push_back(0);
  }
  return m;
}

sch::schedule_shape shape(int pp, int vp, int m) {
  sch::schedule_shape s;
  s.pipeline_model_parallel_size = pp;
  s.virtual_pipeline_model_parallel_size = vp;
  s.num_microbatches = m;
  return s;
}

}  // namespace

TEST_CASE("simulated 1F1B with free transfers has the bubble (p-1)/(m+p-1) on every rank") {
  for (int pp : {2, 3, 4, 8})
    for (int m : {1, 2, pp, 3 * pp + 1}) {
      const auto result = sim::simulate_iteration(shape(pp, 1, m), equal_stages(pp, 1, 1.0, 2.0, 0), {}, false);
      const double expected = double(pp - 1) / (m + pp - 1);
      INFO("pp " << pp << " m " << m);
      for (const auto& r : result.ranks) {
        CHECK(r.bubble_fraction == Approx(expected).margin(1e-12));
        CHECK(r.pipeline.exposed_pp_s == 0);
      }
      CHECK(result.pipeline_makespan_s == Approx((m + pp - 1) * 3.0));
    }
}

TEST_CASE("simulated interleaved 1F1B with free transfers has the bubble (p-1)/(v m+p-1)") {
  for (int pp : {2, 4})
    for (int vp : {2, 3})
      for (int m : {pp, 2 * pp, 3 * pp}) {
        const auto result = sim::simulate_iteration(shape(pp, vp, m), equal_stages(pp, vp, 1.0, 2.0, 0), {}, false);
        // Relative to the ideal time: ((p-1)/v) / m; as a share of the makespan as below.
        const double expected = double(pp - 1) / (vp * m + pp - 1);
        INFO("pp " << pp << " vp " << vp << " m " << m);
        for (const auto& r : result.ranks) CHECK(r.bubble_fraction == Approx(expected).margin(1e-12));
      }
}

TEST_CASE("a transfer time c lengthens a one-microbatch 1F1B pipeline by 2 (p-1) c") {
  const double tf = 1.0, tb = 2.0, c = 0.25;
  for (int pp : {2, 3, 5}) {
    const auto result = sim::simulate_iteration(shape(pp, 1, 1), equal_stages(pp, 1, tf, tb, c), {}, false);
    CHECK(result.pipeline_makespan_s == Approx(pp * (tf + tb) + 2 * (pp - 1) * c));
    CHECK(result.ranks.front().pipeline.exposed_pp_s > 0);
  }
}

TEST_CASE("simulated 1F1B rank r holds at most the smaller of p - r and m microbatches of activations") {
  const int pp = 4;
  for (int m : {2, 8}) {
    const auto result = sim::simulate_iteration(shape(pp, 1, m), equal_stages(pp, 1, 1.0, 2.0, 0.1, 1.0), {}, false);
    for (int r = 0; r < pp; ++r)
      CHECK(result.ranks[std::size_t(r)].pipeline.peak_activation_bytes == std::min(pp - r, m));
  }
}

TEST_CASE("the gradient sync overlaps the last backward only with overlap_grad_reduce") {
  auto costs = equal_stages(2, 1, 1.0, 2.0, 0);
  for (auto& rank : costs.chunks) rank[0].dp_sync_s = 1.0, rank[0].layers = 4;
  const auto plain = sim::simulate_iteration(shape(2, 1, 4), costs, {false, false}, false);
  const auto overlapped = sim::simulate_iteration(shape(2, 1, 4), costs, {true, false}, false);
  CHECK(plain.ranks[0].exposed_dp_s == Approx(1.0));
  // Four buckets of 0.25 s, ready every 0.5 s of the last 2 s backward: only the last one shows.
  CHECK(overlapped.ranks[0].exposed_dp_s == Approx(0.25));
  CHECK(overlapped.iteration_s < plain.iteration_s);
}

TEST_CASE("a schedule drops in through the factory: GPipe keeps every microbatch in flight") {
  const int pp = 4, m = 6;
  const sim::schedule_factory gpipe = [](sch::schedule_shape s) {
    s.kind = sch::schedule_kind::gpipe;
    return sch::make_schedule(s);
  };
  const auto result = sim::simulate_iteration(shape(pp, 1, m), equal_stages(pp, 1, 1.0, 2.0, 0, 1.0), {}, false, gpipe);
  for (const auto& r : result.ranks) {
    CHECK(r.bubble_fraction == Approx(double(pp - 1) / (m + pp - 1)).margin(1e-12));
    CHECK(r.pipeline.peak_activation_bytes == m);  // all forwards before any backward
  }
}

TEST_CASE("simulated ZB-H1 with free transfers has the paper's bubble (p-1)(F+B-W) and beats 1F1B on the same costs") {
  for (int pp : {2, 4, 8})
    for (int m : {pp, 2 * pp, 4 * pp}) {
      // Backward 2 of which the weight gradients take 1 (F = B = W, the paper's setting), and W = 0.5.
      for (double tw : {1.0, 0.5}) {
        auto costs = equal_stages(pp, 1, 1.0, 2.0, 0);
        for (auto& rank : costs.chunks) rank[0].weight_grad_s = tw;
        auto s = shape(pp, 1, m);
        s.kind = sch::schedule_kind::zero_bubble_h1;
        const auto zb = sim::simulate_iteration(s, costs, {}, false);
        const auto one_f_one_b = sim::simulate_iteration(shape(pp, 1, m), costs, {}, false);
        INFO("pp " << pp << " m " << m << " W " << tw);
        const double expected = sch::zero_bubble_h1_bubble_fraction(pp, m, 1.0, 2.0 - tw, tw);
        for (const auto& r : zb.ranks) CHECK(r.bubble_fraction == Approx(expected).margin(1e-12));
        CHECK(zb.pipeline_makespan_s == Approx(m * 3.0 + (pp - 1) * (3.0 - 2 * tw)));
        CHECK(zb.pipeline_makespan_s < one_f_one_b.pipeline_makespan_s);
      }
    }
}

TEST_CASE("simulated ZB-V with free transfers has the replayed bubble, half of ZB-H1's, at 1F1B's peak activations") {
  for (int pp : {2, 4, 8})
    for (int m : {pp, 2 * pp, 4 * pp}) {
      INFO("pp " << pp << " m " << m);
      // Each chunk: forward 1, backward 2 of which the weight gradients take 1 (F = B = W per chunk).
      auto v_costs = equal_stages(pp, 2, 2.0, 4.0, 0, 1.0);
      for (auto& rank : v_costs.chunks)
        for (auto& c : rank) c.weight_grad_s = 1.0;
      auto s = shape(pp, 2, m);
      s.kind = sch::schedule_kind::zero_bubble_v;
      const auto zbv = sim::simulate_iteration(s, v_costs, {}, false);
      for (const auto& r : zbv.ranks) {
        CHECK(r.bubble_fraction == Approx(sch::zero_bubble_v_bubble_fraction(pp, m)).margin(1e-12));
        CHECK(r.pipeline.peak_activation_bytes <= 2 * pp);  // chunk micro-batches: 1F1B's pp whole ones
      }
      // ZB-H1 on the same model, one chunk per rank (passes twice as long).
      auto h1_costs = equal_stages(pp, 1, 2.0, 4.0, 0, 2.0);
      for (auto& rank : h1_costs.chunks) rank[0].weight_grad_s = 2.0;
      auto h1 = shape(pp, 1, m);
      h1.kind = sch::schedule_kind::zero_bubble_h1;
      const auto zb = sim::simulate_iteration(h1, h1_costs, {}, false);
      if (m >= 2 * pp - 1) CHECK(zbv.pipeline_makespan_s - 6.0 * m == Approx((zb.pipeline_makespan_s - 6.0 * m) / 2));
      CHECK(zbv.pipeline_makespan_s <= zb.pipeline_makespan_s);
    }
}

TEST_CASE("the combined 1F1B order holds one more chunk micro-batch of activations per rank, same bubble") {
  // --overlap-moe-expert-parallel-comm: interleaved with one more warmup forward; without
  // pipelining F0 F1 B0 ...: two micro-batches in flight instead of one.
  for (auto [pp, vp, m] : {std::tuple{2, 2, 4}, {4, 2, 8}, {1, 1, 4}}) {
    auto s = shape(pp, vp, m);
    const auto costs = equal_stages(pp, vp, 1.0, 2.0, 0, 1.0);
    const auto plain = sim::simulate_iteration(s, costs, {}, false);
    s.combined_1f1b = true;
    const auto combined = sim::simulate_iteration(s, costs, {}, false);
    INFO("pp " << pp << " vp " << vp << " m " << m);
    for (int r = 0; r < pp; ++r) {
      const auto& c = combined.ranks[std::size_t(r)];
      CHECK(c.pipeline.peak_activation_bytes == plain.ranks[std::size_t(r)].pipeline.peak_activation_bytes + 1);
      CHECK(c.bubble_fraction == Approx(plain.ranks[std::size_t(r)].bubble_fraction).margin(1e-12));
    }
  }
}
