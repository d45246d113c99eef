// The support table: every flag has a status, and setting an unsupported one is an error naming it.
#include <catch2/catch.hpp>

#include "config/flag_status.hpp"
#include "config/flag_table.hpp"
#include "config/parser.hpp"

using namespace mactor::config;

TEST_CASE("the table lists every flag once with a status and a reason") {
  const auto table = flag_status_table();
  std::size_t lines = 0;
  for (char c : table) lines += c == '\n';
  CHECK(lines == flag_specs().size() + 1);
  CHECK(flag_specs().size() == 565);
  CHECK(table.rfind("flag\tgroup\tstatus\treason\n", 0) == 0);
  CHECK(table.find("--use-flash-attn\ttraining\taccepted without effect\t") != std::string::npos);
}

TEST_CASE("a not-implemented flag at a non-default value is an error naming it") {
  REQUIRE(support_of("retro_add_retriever").status == support::not_implemented);
  const std::vector<std::string> words{"--retro-add-retriever"};
  auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  REQUIRE(report.errors.size() == 1);
  CHECK(report.errors[0] == "--retro-add-retriever is recognized but not implemented by mactor yet");
}

TEST_CASE("a flag given at its default value is no error") {
  const std::vector<std::string> words{"--retro-num-neighbors", "2"};  // Megatron's default is 2
  CHECK(check_support(parse_command_line(words, "pretrain_gpt").args).errors.empty());
}

TEST_CASE("an accepted-without-effect flag gives one warning line") {
  const std::vector<std::string> words{"--use-flash-attn", "--no-masked-softmax-fusion"};
  auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  CHECK(report.errors.empty());
  REQUIRE(report.warnings.size() == 2);
  CHECK(report.warnings[0].rfind("WARNING: --no-masked-softmax-fusion is accepted without effect", 0) == 0);
}

TEST_CASE("the wandb flags are refused with the reason and the alternative") {
  const std::vector<std::string> words{"--wandb-project", "p", "--wandb-exp-name", "e"};
  auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  REQUIRE(report.errors.size() == 2);
  for (const auto& e : report.errors) {
    CHECK(e.find(" is recognized but not implemented by mactor yet: Weights & Biases logging") != std::string::npos);
    CHECK(e.find("--tensorboard-dir") != std::string::npos);
  }
  CHECK(support_of("wandb_save_dir").status == support::not_implemented);
}

TEST_CASE("the timing flags are implemented") {
  const std::vector<std::string> words{"--timing-log-level", "2", "--timing-log-option", "all", "--log-timers-to-tensorboard"};
  const auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  CHECK(report.errors.empty());
  CHECK(report.warnings.empty());
}

TEST_CASE("a program holding only some flags to the table hears nothing of the others") {
  const std::vector<std::string> words{"--retro-add-retriever", "--use-flash-attn", "--num-experts", "8"};
  const auto args = parse_command_line(words, "pretrain_gpt").args;
  const auto report = check_support(args, [](std::string_view dest) { return dest == "num_experts"; });
  REQUIRE(report.errors.size() == 1);
  CHECK(report.errors[0] == "--num-experts is recognized but not implemented by mactor yet");
  CHECK(report.warnings.empty());
  CHECK(check_support(args).errors.size() == 2);
}

TEST_CASE("the rerun state machine's flags are implemented, report_stats and --check-for-large-grads refused") {
  const std::vector<std::string> words{"--rerun-mode", "disabled", "--error-injection-rate", "100", "--error-injection-type",
                                       "persistent_error", "--check-for-spiky-loss", "--no-check-for-nan-in-loss-and-grad",
                                       "--result-rejected-tracker-filename", "t.txt"};
  const auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  CHECK(report.errors.empty());
  CHECK(report.warnings.empty());
  const std::vector<std::string> stats{"--rerun-mode", "report_stats", "--check-for-large-grads"};
  const auto refused = check_support(parse_command_line(stats, "pretrain_gpt").args);
  REQUIRE(refused.errors.size() == 2);
  CHECK(refused.errors[0] == "--check-for-large-grads is recognized but not implemented by mactor yet");
  CHECK(refused.errors[1] ==
        "--rerun-mode report_stats is recognized but not implemented by mactor yet (implemented: disabled, validate_results)");
}
