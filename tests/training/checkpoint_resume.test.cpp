// Checkpoints in training, launched with `mactor`: a resumed run continues exactly (bitwise in the
// same layout, including dropout and the validation position), a checkpoint saved under TP2 x PP2
// loads under TP1 x PP4 and under DP2 with the distributed optimizer, a job killed in the middle
// of a save leaves the previous checkpoint loadable, and bad --load/--save input is refused.
#include <catch2/catch.hpp>

#include <bit>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>
#include <unistd.h>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/layout.hpp"
#include "tests/training/launch_support.hpp"

namespace fs = std::filesystem;
using namespace mactor::test;
using namespace std::chrono_literals;

namespace {

// 4 layers (PP4 gets one each), dropout on, vocabulary 4096 for every TP size; the LR decays over
// 6 iterations whatever --train-iters says, so a run cut at 3 has the full run's schedule.
std::string model_flags() {
  return "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr-decay-iters 6 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 "
         "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 --hidden-dropout 0.1 "
         "--attention-dropout 0.1 --log-interval 1 --eval-interval 2 --eval-iters 1 --seed 11";
}

const std::string tp2_pp2 = " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2";

fs::path scratch(const std::string& name) { return scratch_dir("checkpoints", name); }

// Every "validation loss at iteration N" block's text, by its prefix.
std::map<std::string, std::string> validation_lines(const std::string& log) {
  static const std::regex line(R"(validation loss at (iteration \d+[a-z ]*) \| (lm loss value: [^|]+\|))");
  std::map<std::string, std::string> out;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
    out[(*it)[1].str()] = (*it)[2].str();
  return out;
}

double logged_loss(const std::string& fields) {
  static const std::regex loss(R"(lm loss: ([-+0-9.eE]+))");
  std::smatch m;
  REQUIRE(std::regex_search(fields, m, loss));
  return std::stod(m[1].str());
}

// Both checkpoints hold the same tensors with the same bytes (and the same LR schedule state,
// unless a load took the checkpoint's schedule and reports its own weight-decay fields).
void check_same_tensors(const fs::path& a_dir, const fs::path& b_dir, std::int64_t iteration, bool same_schedule = true) {
  mactor::checkpoint::checkpoint_reader a(a_dir.string(), iteration), b(b_dir.string(), iteration);
  REQUIRE(a.names() == b.names());
  int optimizer_tensors = 0;
  for (const auto& name : a.names()) {
    INFO(name);
    REQUIRE(a.global_shape(name) == b.global_shape(name));
    const auto x = a.read_whole(name), y = b.read_whole(name);
    REQUIRE(x.size() == y.size());
    CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
    optimizer_tensors += name.rfind("optimizer.state.", 0) == 0;
  }
  CHECK(optimizer_tensors > 0);  // exp_avg and exp_avg_sq of every parameter
  CHECK(a.common()["args"]["consumed_train_samples"] == b.common()["args"]["consumed_train_samples"]);
  if (same_schedule) CHECK(a.common()["opt_param_scheduler"] == b.common()["opt_param_scheduler"]);
  CHECK(a.common()["opt_param_scheduler"]["num_steps"] == b.common()["opt_param_scheduler"]["num_steps"]);
  CHECK(a.common()["optimizer"]["step"] == b.common()["optimizer"]["step"]);
}

// The uninterrupted TP2 x PP2 run (6 iterations, saved at 6) and the first half of the cut one
// (saved at 3 as it exits), shared by the tests below.
struct reference_runs {
  fs::path full_dir = scratch("full"), cut_dir = scratch("cut");
  run_result full = launch(4, model_flags() + tp2_pp2 + " --save " + full_dir.string() + " --save-interval 6");
  run_result first_half =
      launch(4, model_flags() + tp2_pp2 + " --save " + cut_dir.string() + " --save-interval 6 --exit-interval 3");
};

const reference_runs& reference() {
  static const reference_runs r;
  return r;
}

}  // namespace

// One test case, so the reference runs are made once for all its sections.
TEST_CASE("a TP2 x PP2 checkpoint resumes exactly and reshards on load") {
  const auto& ref = reference();
  SECTION("saved at iteration 3 and resumed, it equals the uninterrupted run bitwise") {
  CHECK(ref.first_half.out.find("saving checkpoint at iteration       3 to " + ref.cut_dir.string() + " in torch_dist format") !=
        std::string::npos);
  CHECK(ref.first_half.out.find("[exiting program at iteration 3]") != std::string::npos);
  REQUIRE(mactor::checkpoint::read_tracker(ref.cut_dir.string()) == 3);

  const auto resumed = launch(4, model_flags() + tp2_pp2 + " --load " + ref.cut_dir.string() + " --save " +
                                     ref.cut_dir.string() + " --save-interval 6");
  CHECK(resumed.out.find(" successfully loaded checkpoint from " + ref.cut_dir.string() + " [ t 1/2, p 1/2 ] at iteration 3") !=
        std::string::npos);
  const auto want = iteration_lines(ref.full.out), got = iteration_lines(resumed.out);
  REQUIRE(want.size() == 6);
  REQUIRE(got.size() == 3);
  REQUIRE(got.begin()->first == 4);
  for (const auto& [iteration, fields] : got) {
    INFO("iteration " << iteration);
    CHECK(fields == want.at(iteration));  // loss, learning rate, grad norm: the same digits
  }
  // Validation resumes at the same position of the validation data.
  const auto want_valid = validation_lines(ref.full.out), got_valid = validation_lines(resumed.out);
  for (const auto* prefix : {"iteration 4", "iteration 6", "iteration 6 on validation set", "iteration 6 on test set"}) {
    INFO(prefix);
    REQUIRE(got_valid.count(prefix) == 1);
    CHECK(got_valid.at(prefix) == want_valid.at(prefix));
  }
  // Model, Adam moments, scheduler and position after iteration 6: bit for bit.
  check_same_tensors(ref.full_dir, ref.cut_dir, 6);
  }

  SECTION("it resumes under TP1 x PP4, an uneven PP2 layout (vp 2) with an empty stage, and DP2 with the distributed optimizer") {
  const auto want = iteration_lines(ref.full.out);
  REQUIRE(want.size() == 6);
  const std::pair<int, std::string> layouts[] = {
      {4, " --pipeline-model-parallel-size 4"},
      {2, " --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Ettt||t|L'"},
      {2, " --use-distributed-optimizer"},
  };
  for (const auto& [ranks, layout] : layouts) {
    INFO("layout: " << layout);
    const auto r = launch(ranks, model_flags() + layout + " --load " + ref.cut_dir.string() + " --ckpt-step 3");
    const auto got = iteration_lines(r.out);
    REQUIRE(got.size() == 3);
    double worst = 0;
    for (const auto& [iteration, fields] : got) {
      const double rel = std::abs(logged_loss(fields) - logged_loss(want.at(iteration))) / logged_loss(want.at(iteration));
      INFO("iteration " << iteration << ": " << fields << " vs " << want.at(iteration));
      CHECK(rel <= 1e-6);
      worst = std::max(worst, rel);
    }
    std::printf("resumed with%s: max relative lm loss difference %.3g\n", layout.c_str(), worst);
  }
  }

  SECTION("loaded under DP2 with the distributed optimizer and saved again, it is the same bytes") {
  // Resharding in both directions at once: TP slices and pipeline stages in, flat ranges of the
  // distributed optimizer out (and read back whole by the reader).
  const auto dir = scratch("resaved");
  const auto r = launch(2, model_flags() + " --use-distributed-optimizer --train-iters 3 --use-checkpoint-opt-param-scheduler"
                                           " --load " + ref.cut_dir.string() + " --ckpt-step 3 --save " + dir.string() +
                               " --save-interval 100");
  CHECK(iteration_lines(r.out).empty());  // already at --train-iters: nothing to train
  REQUIRE(mactor::checkpoint::read_tracker(dir.string()) == 3);
  check_same_tensors(ref.cut_dir, dir, 3, /*same_schedule=*/false);
  }
}

TEST_CASE("a job killed while it saves leaves the previous checkpoint loadable and a resumed run goes on from it") {
  const auto dir = scratch("killed");
  const fs::path log = dir.string() + ".log";
  // Every save waits 1.5 s before writing (a test hook), so the kill lands inside the second one.
  const std::string command = "MACTOR_TEST_CHECKPOINT_WRITE_DELAY_MS=1500 exec " +
                              launch_command(2, model_flags() + " --train-iters 12 --save " + dir.string() +
                                                    " --save-interval 2 --async-save") +
                              " > " + log.string() + " 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();  // its own process group: the launcher and both ranks die together
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  bool second_save_started = false;
  while (!second_save_started && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    second_save_started = slurp(log.string()).find("saving checkpoint at iteration       4") != std::string::npos;
  }
  std::this_thread::sleep_for(300ms);  // inside the 1.5 s before the second save's first byte
  kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO(slurp(log.string()));
  REQUIRE(second_save_started);
  REQUIRE(mactor::checkpoint::read_tracker(dir.string()) == 2);
  CHECK_FALSE(fs::exists(dir / "iter_0000004"));
  mactor::checkpoint::checkpoint_reader(dir.string()).verify_all();

  const auto resumed =
      launch(2, model_flags() + " --train-iters 12 --load " + dir.string() + " --save " + dir.string() + " --save-interval 2");
  const auto lines = iteration_lines(resumed.out);
  REQUIRE(lines.size() == 10);
  CHECK(lines.begin()->first == 3);
  CHECK(mactor::checkpoint::read_tracker(dir.string()) == 12);
  for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("bad --load and --save input ends with exit status 2 and names the file and the fix") {
  const std::string one = model_flags() + " --train-iters 2 --eval-iters 0";
  const auto dir = scratch("damaged");
  launch(1, one + " --save " + dir.string() + " --save-interval 2");
  SECTION("a truncated shard") {
    const auto shard = dir / "iter_0000002" / "__0_0.distcp";
    fs::resize_file(shard, fs::file_size(shard) - 7);
    const auto r = run_shell(launch_command(1, one + " --load " + dir.string()));
    INFO("exit status " << r.status << ", stderr:\n" << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(shard.filename().string()) != std::string::npos);
    CHECK(r.err.find("--ckpt-step") != std::string::npos);
  }
  SECTION("a missing checkpoint with --exit-on-missing-checkpoint") {
    const auto r = run_shell(launch_command(1, one + " --load " + (dir / "nothing").string() + " --exit-on-missing-checkpoint"));
    INFO("exit status " << r.status << ", stderr:\n" << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("latest_checkpointed_iteration.txt") != std::string::npos);
  }
  SECTION("a missing checkpoint without it: Megatron's warning, then training from scratch") {
    const auto r = launch(1, one + " --load " + (dir / "nothing").string());
    CHECK(r.out.find("WARNING: could not find the metadata file " + (dir / "nothing").string() + "/latest_checkpointed_iteration.txt") !=
          std::string::npos);
    CHECK(iteration_lines(r.out).size() == 2);
  }
  SECTION("another optimizer's state") {
    const auto r = run_shell(launch_command(1, one + " --optimizer sgd --load " + dir.string()));
    INFO("exit status " << r.status << ", stderr:\n" << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("--no-load-optim") != std::string::npos);
  }
  SECTION("a layout that pads the vocabulary differently") {
    // 8193 tokens pad to 8448 under TP2 (multiples of 256) and to 8320 under TP1.
    const auto tp2 = scratch("tp2_vocabulary");
    launch(2, one + " --vocab-size 8192 --tensor-model-parallel-size 2 --save " + tp2.string() + " --save-interval 2");
    const auto r = run_shell(launch_command(1, one + " --vocab-size 8192 --load " + tp2.string()));
    INFO("exit status " << r.status << ", stderr:\n" << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("embedding.word_embeddings.weight as [8448, 32] but this model has [8320, 32]") != std::string::npos);
    CHECK(r.err.find("pass --make-vocab-size-divisible-by 256") != std::string::npos);
    // Which the fix makes load.
    const auto fixed = launch(1, one + " --vocab-size 8192 --make-vocab-size-divisible-by 256 --load " + tp2.string() +
                                     " --train-iters 3 --use-checkpoint-opt-param-scheduler");
    CHECK(iteration_lines(fixed.out).size() == 1);
  }
  SECTION("an unwritable --save") {
    const auto r = run_shell(launch_command(1, one + " --save /proc/mactor_cannot_write --save-interval 1"));
    INFO("exit status " << r.status << ", stderr:\n" << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("--save /proc/mactor_cannot_write") != std::string::npos);
  }
}

TEST_CASE("with --finetune or --no-load-optim the model alone is loaded") {
  const std::string one = model_flags() + " --eval-iters 0";
  const auto dir = scratch("model_only");
  const auto scratch_run = launch(1, one + " --save " + dir.string() + " --save-interval 3 --exit-interval 3");
  const auto fresh = iteration_lines(scratch_run.out);
  REQUIRE(fresh.size() == 3);
  static const std::regex lr(R"(learning rate: ([-+0-9.eE]+))");
  auto learning_rate = [](const std::string& fields) {
    std::smatch m;
    REQUIRE(std::regex_search(fields, m, lr));
    return m[1].str();
  };
  SECTION("--finetune: iteration 1 with the checkpoint's weights and a new schedule") {
    const auto r = launch(1, one + " --load " + dir.string() + " --finetune --exit-interval 1");
    const auto lines = iteration_lines(r.out);
    REQUIRE(lines.size() == 1);
    REQUIRE(lines.begin()->first == 1);
    CHECK(learning_rate(lines.at(1)) == learning_rate(fresh.at(1)));
    CHECK(logged_loss(lines.at(1)) < logged_loss(fresh.at(1)));  // the same batch, on trained weights
  }
  SECTION("--no-load-optim: the saved position with a new schedule") {
    const auto r = launch(1, one + " --load " + dir.string() + " --no-load-optim --exit-interval 4");
    const auto lines = iteration_lines(r.out);
    REQUIRE(lines.size() == 1);
    REQUIRE(lines.begin()->first == 4);
    CHECK(learning_rate(lines.at(4)) == learning_rate(fresh.at(1)));
  }
}

TEST_CASE("a bf16 checkpoint holds fp32 main parameters, resumes bitwise, and crosses to and from fp32 runs") {
  // PP2 x DP2 with the distributed optimizer: the fp32 main parameters are sharded over replicas.
  const std::string bf16 = model_flags() + " --bf16 --pipeline-model-parallel-size 2 --use-distributed-optimizer";
  const auto full_dir = scratch("bf16_full"), cut_dir = scratch("bf16_cut");
  const auto full = launch(4, bf16 + " --save " + full_dir.string() + " --save-interval 6");
  launch(4, bf16 + " --save " + cut_dir.string() + " --save-interval 6 --exit-interval 3");
  const auto resumed = launch(4, bf16 + " --load " + cut_dir.string() + " --save " + cut_dir.string() + " --save-interval 6");
  const auto want = iteration_lines(full.out), got = iteration_lines(resumed.out);
  REQUIRE(got.size() == 3);
  for (const auto& [iteration, fields] : got) {
    INFO("iteration " << iteration);
    CHECK(fields == want.at(iteration));
  }
  check_same_tensors(full_dir, cut_dir, 6);  // main parameters and Adam moments, bit for bit

  // The saved model is the fp32 main parameters: not all of them are bf16 values (a checkpoint
  // of the rounded weights would be).
  mactor::checkpoint::checkpoint_reader saved(full_dir.string(), 6);
  std::size_t not_bf16 = 0;
  for (float v : saved.read_whole("decoder.layers.0.mlp.linear_fc1.weight"))
    not_bf16 += (std::bit_cast<std::uint32_t>(v) & 0xffffu) != 0;
  CHECK(not_bf16 > 0);

  // An fp32 run goes on from the bf16 checkpoint, and a bf16 run from an fp32 one; each first
  // loss is close to the uninterrupted run's (the weights are the same up to bf16 rounding).
  const auto fp32_from_bf16 = launch(1, model_flags() + " --load " + cut_dir.string() + " --ckpt-step 3 --exit-interval 4");
  const auto fp32_dir = scratch("fp32_for_bf16");
  launch(1, model_flags() + " --save " + fp32_dir.string() + " --save-interval 3 --exit-interval 3");
  const auto bf16_from_fp32 = launch(1, model_flags() + " --bf16 --load " + fp32_dir.string() + " --exit-interval 4");
  for (const auto* r : {&fp32_from_bf16, &bf16_from_fp32}) {
    const auto lines = iteration_lines(r->out);
    REQUIRE(lines.size() == 1);
    REQUIRE(lines.begin()->first == 4);
    const double rel = std::abs(logged_loss(lines.at(4)) - logged_loss(want.at(4))) / logged_loss(want.at(4));
    CHECK(rel <= 1e-2);
  }
}

TEST_CASE("a bf16 run with bf16 Adam moments (precision-aware optimizer) and a bf16 gradient buffer resumes bitwise") {
  // Megatron saves the moments unscaled in fp32 and rounds them back on load: bf16 ones exactly.
  const std::string flags = model_flags() + " --bf16 --pipeline-model-parallel-size 2 --use-distributed-optimizer "
                            "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --grad-reduce-in-bf16";
  const auto full_dir = scratch("pao_full"), cut_dir = scratch("pao_cut");
  const auto full = launch(4, flags + " --save " + full_dir.string() + " --save-interval 6");
  launch(4, flags + " --save " + cut_dir.string() + " --save-interval 6 --exit-interval 3");
  const auto resumed = launch(4, flags + " --load " + cut_dir.string() + " --save " + cut_dir.string() + " --save-interval 6");
  const auto want = iteration_lines(full.out), got = iteration_lines(resumed.out);
  REQUIRE(got.size() == 3);
  for (const auto& [iteration, fields] : got) {
    INFO("iteration " << iteration);
    CHECK(fields == want.at(iteration));
  }
  check_same_tensors(full_dir, cut_dir, 6);
  // The saved moments are bf16 values (widened), the main parameters are not.
  mactor::checkpoint::checkpoint_reader saved(full_dir.string(), 6);
  const auto low_bits = [&](const std::string& name) {
    std::size_t n = 0;
    for (float v : saved.read_whole(name)) n += (std::bit_cast<std::uint32_t>(v) & 0xffffu) != 0;
    return n;
  };
  const std::string fc1 = "decoder.layers.0.mlp.linear_fc1.weight";
  CHECK(low_bits("optimizer.state.exp_avg." + fc1) == 0);
  CHECK(low_bits("optimizer.state.exp_avg_sq." + fc1) == 0);
  CHECK(low_bits(fc1) > 0);
}
