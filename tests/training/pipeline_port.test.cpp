// The pipeline port against the schedules' own action streams on the in-process transport: every
// send is matched by one receive under a unique tag, what arrives is what the neighbour computed,
// out-of-order arrivals reach the right receive, and a failed transfer names its peer.
#include "training/pipeline_port.hpp"

#include <catch2/catch.hpp>
#include <set>

#include "comm/local_transport.hpp"
#include "schedules/schedule.hpp"

using namespace mactor;
using schedules::action;
using schedules::op;

namespace {

// A transport that records every posted send and receive, then forwards it.
class recording_transport final : public comm::transport {
 public:
  struct posted {
    int from, to;
    std::uint64_t tag;
    friend auto operator<=>(const posted&, const posted&) = default;
  };
  recording_transport(std::unique_ptr<comm::transport> inner, std::vector<posted>& sends, std::vector<posted>& recvs)
      : inner_(std::move(inner)), sends_(sends), recvs_(recvs) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  void send(int peer, std::uint64_t tag, const void* data, std::size_t size, comm::completion done) override {
    sends_.push_back({rank(), peer, tag});
    inner_->send(peer, tag, data, size, std::move(done));
  }
  void recv(int peer, std::uint64_t tag, void* data, std::size_t capacity, comm::completion done) override {
    recvs_.push_back({peer, rank(), tag});
    inner_->recv(peer, tag, data, capacity, std::move(done));
  }
  void shutdown() override { inner_->shutdown(); }

 private:
  std::unique_ptr<comm::transport> inner_;
  std::vector<posted>& sends_;
  std::vector<posted>& recvs_;
};

constexpr std::int64_t activation_numel = 5;

// The value virtual stage v's forward of micro-batch mb produces (and its backward's gradient).
float produced(bool gradient, int virtual_stage, int mb) { return (gradient ? -1.0f : 1.0f) * (1000 * virtual_stage + mb + 1); }

struct pipeline_run {
  int pp, vp, microbatches;
  bool forward_only;
  std::vector<recording_transport::posted> sends, recvs;
  std::vector<std::string> errors;

  // Drives every rank's schedule through its port in one thread, round robin, with a fake
  // compute that checks its input and produces a value naming its virtual stage.
  void run() {
    comm::local_fabric fabric(pp);
    std::vector<std::unique_ptr<comm::transport>> transports;
    std::vector<std::unique_ptr<training::pipeline_port>> ports;
    std::vector<schedules::generator<action>> schedules_;
    std::vector<std::optional<action>> pending(pp);
    std::vector<bool> finished(pp, false);
    std::vector<int> stage_ranks;
    for (int r = 0; r < pp; ++r) stage_ranks.push_back(r);
    for (int r = 0; r < pp; ++r) {
      transports.push_back(std::make_unique<recording_transport>(fabric.connect(r), sends, recvs));
      ports.push_back(std::make_unique<training::pipeline_port>(transports.back().get(),
                                                                training::pipeline_position{pp, r, vp, stage_ranks}, nullptr));
      ports.back()->begin(forward_only);
      schedules::schedule_shape s;
      s.pipeline_model_parallel_size = pp;
      s.pipeline_rank = r;
      s.virtual_pipeline_model_parallel_size = vp;
      s.num_microbatches = microbatches;
      s.forward_only = forward_only;
      schedules_.push_back(schedules::make_schedule(s));
    }
    for (int round = 0; round < 100000; ++round) {
      bool progress = false, all_done = true;
      for (int r = 0; r < pp; ++r) {
        if (finished[r]) continue;
        all_done = false;
        while (true) {
          if (!pending[r]) pending[r] = schedules_[r].next();
          if (!pending[r]) break;
          if (!step(*ports[r], r, *pending[r])) break;
          pending[r].reset();
          progress = true;
        }
        if (!pending[r] && !ports[r]->unfinished_send()) finished[r] = true, progress = true;
      }
      if (all_done) return;
      if (!progress) {
        errors.push_back("no rank can make progress");
        return;
      }
    }
  }

  bool step(training::pipeline_port& port, int rank, const action& a) {
    const int v = a.chunk * pp + rank, stages = pp * vp;
    switch (a.kind) {
      case op::recv_forward:
      case op::recv_backward: port.post_recv(a, {activation_numel}, tensor::dtype::float32); return true;
      case op::send_forward:
      case op::send_backward: port.post_send(a); return true;
      default: break;
    }
    const bool forward = a.kind == op::forward;
    const bool needs_input = forward ? v > 0 : v < stages - 1;
    if (needs_input) {
      auto* in = port.input(a);
      if (!in) return false;
      const float want = produced(!forward, forward ? v - 1 : v + 1, a.microbatch);
      for (float x : in->host<float>())
        if (x != want)
          errors.push_back(schedules::to_string(a) + " on rank " + std::to_string(rank) + " got " + std::to_string(x) +
                           ", expected " + std::to_string(want));
      port.release_input(a);
    }
    const bool has_output = forward ? v < stages - 1 : v > 0;
    if (has_output) {
      tensor::tensor out({activation_numel}, tensor::dtype::float32, tensor::memory_kind::activations);
      for (float& x : out.host<float>()) x = produced(!forward, v, a.microbatch);
      port.keep_output(a, std::move(out));
    }
    return true;
  }
};

}  // namespace

TEST_CASE("every pipeline send is matched by one receive under a unique tag, for 1F1B and interleaved schedules") {
  for (int pp : {2, 4})
    for (int vp : {1, 2})
      for (bool forward_only : {false, true}) {
        pipeline_run run{pp, vp, 2 * pp, forward_only, {}, {}, {}};
        INFO("pp " << pp << ", vp " << vp << (forward_only ? ", forward only" : ""));
        run.run();
        for (const auto& e : run.errors) FAIL_CHECK(e);
        CHECK(run.errors.empty());
        const std::set<recording_transport::posted> sends(run.sends.begin(), run.sends.end());
        const std::set<recording_transport::posted> recvs(run.recvs.begin(), run.recvs.end());
        CHECK(sends.size() == run.sends.size());  // no tag used twice between one pair
        CHECK(recvs.size() == run.recvs.size());
        CHECK(sends == recvs);
        // Each micro-batch crosses every stage boundary once forward (and once backward).
        const std::size_t boundaries = static_cast<std::size_t>(pp * vp - 1);
        CHECK(run.sends.size() == boundaries * run.microbatches * (forward_only ? 1 : 2));
      }
}

TEST_CASE("an activation that arrives before its receive is posted reaches that receive") {
  comm::local_fabric fabric(2);
  auto t0 = fabric.connect(0), t1 = fabric.connect(1);
  training::pipeline_port first(t0.get(), {2, 0, 1, {0, 1}}, nullptr), second(t1.get(), {2, 1, 1, {0, 1}}, nullptr);
  first.begin(false);
  second.begin(false);
  for (int mb : {0, 1, 2}) {
    tensor::tensor out({3}, tensor::dtype::float32, tensor::memory_kind::activations);
    for (float& x : out.host<float>()) x = 10.0f * (mb + 1);
    first.keep_output({op::forward, mb, 0}, std::move(out));
    first.post_send({op::send_forward, mb, 0});
  }
  // The second stage asks for them in another order than they were sent.
  for (int mb : {2, 0, 1}) second.post_recv({op::recv_forward, mb, 0}, {3}, tensor::dtype::float32);
  for (int mb : {1, 2, 0}) {
    auto* in = second.input({op::forward, mb, 0});
    REQUIRE(in != nullptr);
    CHECK(in->host<float>()[2] == 10.0f * (mb + 1));
    second.release_input({op::forward, mb, 0});
  }
  CHECK_FALSE(first.unfinished_send());
  CHECK_FALSE(second.unfinished_send());
}

TEST_CASE("a compute action without its receive, or a send before its compute, is a schedule error") {
  comm::local_fabric fabric(2);
  auto t0 = fabric.connect(0);
  training::pipeline_port port(t0.get(), {2, 0, 1, {0, 1}}, nullptr);
  port.begin(false);
  CHECK_THROWS_WITH(port.input({op::backward, 3, 0}), Catch::Contains("without receiving its input"));
  CHECK_THROWS_WITH(port.post_send({op::send_forward, 4, 0}), Catch::Contains("before computing it"));
  port.post_recv({op::recv_backward, 1, 0}, {2}, tensor::dtype::float32);
  CHECK_THROWS_WITH(port.unfinished_send(), Catch::Contains("1 receives and 0 sends unmatched"));
}

TEST_CASE("a pipeline transfer with a dead rank fails naming that rank and the micro-batch") {
  comm::local_fabric fabric(3);
  auto t1 = fabric.connect(1);
  training::pipeline_port port(t1.get(), {3, 1, 1, {0, 1, 2}}, nullptr);
  port.begin(false);
  port.post_recv({op::recv_forward, 5, 0}, {4}, tensor::dtype::float32);
  fabric.fail_rank(0);
  try {
    while (!port.input({op::forward, 5, 0})) {
    }
    FAIL("the receive from a dead rank succeeded");
  } catch (const comm::comm_error& e) {
    CHECK(e.rank() == 0);
    CHECK_THAT(e.what(), Catch::Contains("recv_forward of micro-batch 5 chunk 0 with rank 0 failed"));
  }
  CHECK(port.awaited({op::forward, 5, 0}) == "recv_forward mb 5 chunk 0 from rank 0 (virtual stage 0)");
}

TEST_CASE("pipeline tags tell gradients, evaluation, virtual stages and micro-batches apart") {
  using training::pipeline_port;
  std::set<std::uint64_t> tags;
  for (bool gradient : {false, true})
    for (bool forward_only : {false, true})
      for (int v : {0, 1, 7})
        for (int mb : {0, 1, 1000}) tags.insert(pipeline_port::tag(gradient, forward_only, v, mb));
  CHECK(tags.size() == 2 * 2 * 3 * 3);
  CHECK(*tags.rbegin() < (std::uint64_t{1} << 39));  // below the collectives' tag bit
}
