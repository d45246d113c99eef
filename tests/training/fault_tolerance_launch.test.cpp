// --enable-ft-package and --calc-ft-timeouts through pretrain_gpt and the launcher: a run writes
// <save>/ft_state.json with the sections Megatron's rules allow (step and checkpointing on a first
// run; setup once a persistent checkpoint was loaded, and out of section at the end), the next run
// loads it; --async-save leaves checkpointing alone; a rank SIGSTOPped in training ends the job
// when the step section passes the launcher's timeout (exit 18), long before the distributed
// timeout; --enable-ft-package without --save, or a bad timeout, is a user error (exit 2).
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/training/background_job.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using mactor::test::launch;

namespace {

const std::string model_flags =
    "--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 "
    "--micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --lr-decay-iters 1000 --mock-data "
    "--tokenizer-type NullTokenizer --vocab-size 8192 --log-interval 5 --eval-iters 0 --enable-ft-package";

nlohmann::json state_of(const fs::path& save) {
  std::ifstream in(save / "ft_state.json");
  REQUIRE(in);
  return nlohmann::json::parse(in).at("current_timeouts").at("section");
}

}  // namespace

TEST_CASE("ft: --calc-ft-timeouts saves the sections Megatron's rules allow, and the next run loads them") {
  const auto dir = mactor::test::scratch_dir("fault_tolerance", "calc");
  const std::string save = (dir / "ckpt").string();
  const std::string flags = model_flags + " --calc-ft-timeouts --save " + save + " --load " + save + " --save-interval 20";
  const auto first = launch(1, flags + " --train-iters 20");
  CHECK(first.out.find("FT: initialized.") != std::string::npos);
  CHECK(first.out.find("FT: can't update the setup section timeout until persistent checkpoint is loaded") != std::string::npos);
  auto s = state_of(save);
  CHECK(s.at("calculated_sections") == nlohmann::json::array({"checkpointing", "step"}));
  CHECK(s.at("section").at("step").get<double>() > 0);
  CHECK(s.at("section").at("setup").is_null());
  CHECK(s.at("is_out_of_section_calculated") == false);

  // As if an earlier calculation had given 60 s (a tiny model's step of milliseconds x 5 would
  // trip on a loaded machine): this run averages its own with them.
  s["section"]["step"] = 60.0;
  s["section"]["checkpointing"] = 60.0;
  std::ofstream(fs::path(save) / "ft_state.json") << nlohmann::json{{"current_timeouts", {{"section", s}}}}.dump();
  const auto second = launch(2, flags + " --train-iters 40 --use-checkpoint-opt-param-scheduler");
  CHECK(second.out.find("FT: loaded timeouts from " + save + "/ft_state.json") != std::string::npos);
  CHECK(second.out.find("FT: updating timeouts for: [setup, step, checkpointing] update out-of-section: True") !=
        std::string::npos);
  s = state_of(save);
  CHECK(s.at("calculated_sections") == nlohmann::json::array({"checkpointing", "setup", "step"}));
  CHECK(s.at("section").at("setup").get<double>() > 0);
  // Each update averages the timeout in force with 5 x this run's longest, as NVRx's, here twice
  // (after the save at 40 and at the end): 60 / 4 + 3/4 x 5 x a step of milliseconds or a save.
  CHECK(s.at("section").at("step").get<double>() > 15);
  CHECK(s.at("section").at("step").get<double>() < 17);
  CHECK(s.at("section").at("checkpointing").get<double>() > 15);
  CHECK(s.at("section").at("checkpointing").get<double>() < 22);
  CHECK(s.at("is_out_of_section_calculated") == true);
  CHECK(s.at("out_of_section").get<double>() > 0);
  fs::remove_all(dir);
}

TEST_CASE("ft: with --async-save the checkpointing timeout is not calculated") {
  const auto dir = mactor::test::scratch_dir("fault_tolerance", "async");
  const std::string save = (dir / "ckpt").string();
  const auto r = launch(1, model_flags + " --calc-ft-timeouts --async-save --save " + save + " --save-interval 10 --train-iters 20");
  CHECK(r.out.find("FT: can't update the checkpointing section timeout with async checkpointing") != std::string::npos);
  CHECK(state_of(save).at("calculated_sections") == nlohmann::json::array({"step"}));
  fs::remove_all(dir);
}

TEST_CASE("ft: a rank stopped in training ends the job when the step section passes its timeout") {
  const auto dir = mactor::test::scratch_dir("fault_tolerance", "stopped");
  const std::string command = mactor::test::mactor_bin() +
                              " -np 2 --oversubscribe --ft-param-rank_section_timeouts=setup:none,step:3,checkpointing:none " +
                              mactor::test::bin_dir() + "/pretrain_gpt " + model_flags + " --log-interval 1 --save " +
                              (dir / "ckpt").string() + " --save-interval 100000 --train-iters 100000";
  auto j = mactor::test::start_command(command, "fault_tolerance", "stopped_job");
  const auto pids = mactor::test::wait_for_training(j, 2, 3);
  REQUIRE(kill(pids[1], SIGSTOP) == 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  const int status = mactor::test::wait_job(j, 90s);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  const std::string err = j.err();
  INFO("stderr:\n" << err);
  CHECK(status == 18);
  CHECK(seconds >= 2.5);
  CHECK(seconds < 40);  // the distributed timeout is Megatron's default, 10 minutes
  CHECK(err.find("fault tolerance: the step section has been open") != std::string::npos);
  CHECK(err.find("past its timeout of 3.0 s (configured)") != std::string::npos);
  for (pid_t p : pids) CHECK_FALSE(mactor::test::process_alive(p));
  fs::remove_all(j.dir);
  fs::remove_all(dir);
}

TEST_CASE("ft: Megatron's simulated hang (FT_SIM_FAULT_DESC) is found by the sections' timeouts") {
  const auto dir = mactor::test::scratch_dir("fault_tolerance", "simulated");
  const std::string command = "env FT_SIM_FAULT_DESC='rank_hung;1;5' " + mactor::test::mactor_bin() +
                              " -np 2 --oversubscribe --ft-param-rank_section_timeouts=setup:30,step:3,checkpointing:none " +
                              mactor::test::bin_dir() + "/pretrain_gpt " + model_flags + " --save " +
                              (dir / "ckpt").string() + " --save-interval 100000 --train-iters 100000";
  auto j = mactor::test::start_command(command, "fault_tolerance", "simulated_job");
  const int status = mactor::test::wait_job(j, 120s);
  const std::string out = j.out(), err = j.err();
  INFO("stdout tail:\n" << out.substr(out.size() > 2000 ? out.size() - 2000 : 0) << "\nstderr:\n" << err);
  CHECK(status == 18);
  CHECK(out.find("FT: Simulated fault: rank_hung, rank to fail: 1") != std::string::npos);
  CHECK(err.find("FT: Simulating fault: rank_hung; rank to fail: 1") != std::string::npos);
  CHECK(err.find("rank 0: fault tolerance: the ") != std::string::npos);
  fs::remove_all(j.dir);
  fs::remove_all(dir);
}

TEST_CASE("ft: --enable-ft-package without --save, or a bad timeout, is a user error") {
  auto r = launch(1, model_flags + " --train-iters 2", 2);
  CHECK(r.err.find("--enable-ft-package needs --save") != std::string::npos);
  const auto dir = mactor::test::scratch_dir("fault_tolerance", "bad");
  r = mactor::test::run_shell("MACTOR_FT_RANK_SECTION_TIMEOUTS=step:soon " + mactor::test::launch_command(1, model_flags + " --train-iters 2 --save-interval 100 --save " + (dir / "ckpt").string()));
  CHECK(r.status == 2);
  CHECK(r.err.find("step") != std::string::npos);
  CHECK(r.err.find("soon") != std::string::npos);
  fs::remove_all(dir);
}
