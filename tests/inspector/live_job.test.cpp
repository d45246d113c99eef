// The inspector on a real job: `mactor -np 4 pretrain_gpt` with a 4-stage pipeline, inspected by
// `mactor inspect`, its web page loaded in headless Chromium, its logger and evaluator swapped mid-
// run (the stall report's cases are in live_stall.test.cpp).
// Each job runs a few seconds; the scratch folders stay in BUILD/tests/inspector/live/.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "live_job.hpp"

using namespace mactor::inspector::testing;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// How many times each match of `pattern`'s first group occurs in `text`.
std::map<int, int> count_matches(const std::string& text, const std::regex& pattern) {
  std::map<int, int> counts;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern); it != std::sregex_iterator(); ++it)
    ++counts[std::stoi((*it)[1].str())];
  return counts;
}

bool has_events_file(const fs::path& dir) {
  if (!fs::is_directory(dir)) return false;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0 && fs::file_size(e.path()) > 0) return true;
  return false;
}

}  // namespace

TEST_CASE("mactor inspect on a live 4-rank pipeline job shows every rank's stage, what it does and the timeline") {
  live_job job("inspect", pipeline_flags(5000));  // killed once checked
  // The timeline appears once every rank has sent the same iteration's share.
  const std::string view = job.inspect_until(std::regex(R"(rank 3 +\|.*F)"));
  INFO("mactor inspect said:\n" << view << "\njob stderr:\n" << job.err());
  REQUIRE(std::regex_search(view, std::regex(R"(rank 3 +\|.*F)")));
  std::printf("mactor inspect against the live job:\n%s\n", view.c_str());
  CHECK(std::regex_search(view, std::regex(R"(mactor job: iteration \d+ / 5000)")));
  CHECK(job.address().rfind("127.0.0.1:", 0) == 0);  // localhost unless MACTOR_INSPECT says otherwise
  // Every rank's stage, with what its schedule is doing (or waiting for) and its pipeline bytes; the
  // world all-reduce is result validation's agreement on rerunning the iteration.
  const std::regex activity(
      R"(awaiting recv_(forward|backward) mb \d+ chunk 0 from rank [0-3] \(virtual stage [0-3]\)|(forward|backward) mb \d+ chunk 0|idle|optimizer step|flushing send of mb \d+ chunk 0 to rank [0-3]|)"
      R"(awaiting (model-parallel|embedding|world) all-reduce of [0-9.]+ (B|KiB|MiB) with ranks? [0-3](, [0-3])*)");
  for (int r = 0; r < 4; ++r) {
    std::smatch row;
    const std::regex stage_row("\\nstage +" + std::to_string(r) + " +([^\\n]*)");
    REQUIRE(std::regex_search(view, row, stage_row));
    INFO("rank " << r << " row: " << row[1].str());
    CHECK(std::regex_search(row[1].str(), activity));
    CHECK(std::regex_search(row[1].str(), std::regex(R"([0-9.]+ (KiB|MiB) +[0-9.]+ (KiB|MiB))")));
    // Then the rank's memory: allocated, max allocated and reserved, none of them empty.
    CHECK(std::regex_search(row[1].str(), std::regex(R"(( +[0-9.]+ (KiB|MiB|GiB)){5}\s*$)")));
    CHECK(std::regex_search(view, std::regex("\\nagent +" + std::to_string(r) + " ")));
    // The timeline row of every rank has forward and backward ops.
    std::smatch line;
    REQUIRE(std::regex_search(view, line, std::regex("rank " + std::to_string(r) + " +\\|([^\\n]*)\\|")));
    CHECK(line[1].str().find('F') != std::string::npos);
    CHECK(line[1].str().find('B') != std::string::npos);
  }
  for (const char* kind : {"coordinator", "logger", "evaluator", "replica"})
    CHECK(std::regex_search(view, std::regex(std::string("\\n") + kind + " +0 ")));

  SECTION("a wrong token is refused with 403; the token file is the user's alone") {
    const auto wrong = run_process(mactor_program() + " inspect " + job.address() + " --once --token " +
                                   std::string(64, '0'));
    INFO(wrong.err);
    CHECK(wrong.status == 2);
    CHECK(wrong.err.find("HTTP 403") != std::string::npos);
    CHECK(wrong.out.empty());
    struct stat st {};
    REQUIRE(::stat(job.token_file().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    // The token the job printed is the file's.
    CHECK(job.err().find(read_text(job.token_file()).substr(0, 64)) != std::string::npos);
  }
}

TEST_CASE("the web page of a live 4-rank job shows its pipeline timeline in headless Chromium") {
  REQUIRE(run_process("command -v chromium").status == 0);  // Debian `chromium`: scripts/setup.sh
  live_job job("web_page", pipeline_flags(5000));
  const std::string view = job.inspect_until(std::regex(R"(rank 3 +\|.*F)"));
  INFO("mactor inspect said:\n" << view << "\njob stderr:\n" << job.err());
  REQUIRE(std::regex_search(view, std::regex(R"(rank 3 +\|.*F)")));
  const std::string token = read_text(job.token_file()).substr(0, 64);
  const fs::path png = job.dir() / "live_page.png";
  const auto shot = run_process("timeout 90 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
                                "--no-first-run --user-data-dir='" + (job.dir() / "chromium_profile").string() +
                                "' --screenshot='" + png.string() + "' --window-size=1200,800 "
                                "--virtual-time-budget=3000 'http://" + job.address() + "/?token=" + token + "'");
  INFO("chromium said: " << shot.err);
  REQUIRE(shot.status == 0);
  REQUIRE(fs::exists(png));
  CHECK(fs::file_size(png) > 20000);
  // The chart's colours (web_page.cpp): forward, backward and optimizer ops drawn in rows. On a
  // busy machine a rank's ops can be thinner than a pixel next to its waits, so each colour must
  // show in at least two rows, and the three together in a row for each rank.
  const char* forward = "#4c78a8";
  const char* backward = "#f58518";
  const char* optimizer = "#54a24b";
  const auto analysis = run_process(std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR +
                                    "/tests/inspector/png_colours.py '" + png.string() + "' '" + forward + "' '" +
                                    backward + "' '" + optimizer + "'");
  INFO(analysis.err);
  REQUIRE(analysis.status == 0);
  const json colours = json::parse(analysis.out);
  CHECK(colours["distinct"].get<int>() > 50);
  std::set<int> rank_rows;  // the rows' middles, 30 px apart
  for (const char* colour : {forward, backward, optimizer}) {
    int rows = 0;
    for (const auto& band : colours["colours"][colour]["bands"])
      if (band[1].get<int>() - band[0].get<int>() + 1 >= 15) {  // a chart row, not the legend swatch
        ++rows;
        rank_rows.insert(((band[0].get<int>() + band[1].get<int>()) / 2 + 15) / 30);
      }
    INFO(colour << " " << colours["colours"][colour].dump());
    CHECK(rows >= 2);
  }
  CHECK(rank_rows.size() == 4);
  std::printf("screenshot of the live job's page: %s (%zu bytes)\n", png.c_str(),
              static_cast<std::size_t>(fs::file_size(png)));
}

TEST_CASE("swapping the logger and the evaluator mid-run: every record printed exactly once, refusals keep the old") {
  const std::string tb = (fs::path(MACTOR_BINARY_DIR) / "tests/inspector/live/swap_tb").string();
  fs::remove_all(tb);
  // Rank 1 pauses 2 s before iteration 30, so the job is surely still running when the swaps land.
  live_job job("swap", pipeline_flags(60) + " --eval-interval 5 --tensorboard-dir " + tb + "/1",
               {{"MACTOR_TEST_STALL_RANK", "1"}, {"MACTOR_TEST_STALL_AT_ITERATION", "30"},
                {"MACTOR_TEST_STALL_SECONDS", "2"}});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::regex_search(job.out(), std::regex(R"(iteration +3/)")) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));

  const auto logger = job.mactor("swap logger", "-- --log-interval 1 --tensorboard-dir " + tb + "/2");
  INFO("swap logger: " << logger.out << logger.err);
  CHECK(logger.status == 0);
  CHECK(logger.out.find("the job took the new logger") != std::string::npos);
  const auto eval = job.mactor("swap eval", "-- --eval-interval 3");
  INFO("swap eval: " << eval.out << eval.err);
  CHECK(eval.status == 0);
  // A new logger that cannot start, and flags a logger does not take: refused, the old one stays.
  const auto unwritable = job.mactor("swap logger", "-- --tensorboard-dir /proc/mactor-cannot-write");
  INFO("unwritable: " << unwritable.err);
  CHECK(unwritable.status == 1);
  CHECK(unwritable.err.find("/proc/mactor-cannot-write") != std::string::npos);
  CHECK(unwritable.err.find("the old one keeps running") != std::string::npos);
  const auto model_flag = job.mactor("swap logger", "-- --hidden-size 64");
  CHECK(model_flag.status == 1);
  CHECK(model_flag.err.find("--hidden-size cannot be changed by swapping the logger") != std::string::npos);
  const auto unknown = job.mactor("swap eval", "-- --no-such-flag 1");
  CHECK(unknown.status == 1);
  CHECK(unknown.err.find("unrecognized arguments: --no-such-flag") != std::string::npos);
  // A second swap of the logger, from the swapped-in one.
  const auto again = job.mactor("swap logger", "-- --tensorboard-dir " + tb + "/3");
  INFO("second swap: " << again.err);
  CHECK(again.status == 0);

  REQUIRE(job.wait() == 0);
  const std::string out = job.out(), err = job.err();
  INFO("job stderr:\n" << err);
  CHECK(std::regex_search(err, std::regex("mactor: the logger was swapped[^\\n]*\\n(.|\\n)*mactor: the evaluator was swapped"
                                          "(.|\\n)*mactor: the logger was swapped")));
  // Every iteration's line exactly once.
  const auto lines = count_matches(out, std::regex(R"(\] iteration +(\d+)/ +60 \|)"));
  CHECK(lines.size() == 60);
  for (int i = 1; i <= 60; ++i) {
    INFO("iteration " << i);
    CHECK(lines.count(i) == 1);
    if (lines.count(i)) CHECK(lines.at(i) == 1);
  }
  // Every validation block exactly once: every 5 iterations before the evaluator's swap, every 3
  // after (so some at multiples of 3 only), then the final validation and test blocks.
  const auto blocks = count_matches(out, std::regex(R"(validation loss at iteration (\d+) \|)"));
  bool every_three = false;
  for (const auto& [iteration, n] : blocks) {
    INFO("validation block of iteration " << iteration);
    CHECK(n == 1);
    CHECK((iteration % 5 == 0 || iteration % 3 == 0));
    every_three = every_three || (iteration % 3 == 0 && iteration % 5 != 0);
  }
  CHECK(every_three);
  CHECK(blocks.count(57) == 1);  // the last multiple of 3
  CHECK(count_matches(out, std::regex(R"(validation loss at iteration (60) on validation set)")).at(60) == 1);
  CHECK(count_matches(out, std::regex(R"(validation loss at iteration (60) on test set)")).at(60) == 1);
  // Each logger wrote its own TensorBoard events.
  for (const char* d : {"/1", "/2", "/3"}) {
    INFO(tb << d);
    CHECK(has_events_file(tb + d));
  }
}

TEST_CASE("mactor inspect shows every rank's checkpointer while it writes an asynchronous save") {
  // Each save is held 3 s before its first byte (the test hook), while training goes on.
  const std::string save = (std::filesystem::path(MACTOR_BINARY_DIR) / "tests/inspector/live/checkpointer_save").string();
  std::filesystem::remove_all(save);
  live_job job("checkpointer", pipeline_flags(12) + " --save " + save + " --save-interval 4 --async-save",
               {{"MACTOR_TEST_CHECKPOINT_WRITE_DELAY_MS", "3000"}});
  const std::regex writing(R"(\ncheckpointer +3 +writing iteration 4 \([0-9.]+ MiB\) to )");
  const std::string view = job.inspect_until(writing);
  INFO("mactor inspect said:\n" << view << "\njob stderr:\n" << job.err());
  REQUIRE(std::regex_search(view, writing));
  std::printf("mactor inspect during an asynchronous save:\n%s\n", view.c_str());
  // Each rank's checkpointer gets its snapshot when its own stage has captured it: on a loaded
  // machine rank 3 can be writing before rank 0's write has arrived, so each row is awaited.
  for (int r = 0; r < 4; ++r) {
    const std::regex row("\\ncheckpointer +" + std::to_string(r) +
                         R"( +(writing iteration 4 \([0-9.]+ MiB\) to /|idle \(iteration 4 saved in [0-9.]+ s\)))");
    const std::string seen = job.inspect_until(row);
    INFO("rank " << r << ": mactor inspect said:\n" << seen);
    CHECK(std::regex_search(seen, row));
  }
  REQUIRE(job.wait() == 0);
  CHECK(read_text(std::filesystem::path(save) / "latest_checkpointed_iteration.txt") == "12");
}

TEST_CASE("MACTOR_INSPECT=off serves nothing, and a bad setting ends the job with exit status 2 naming it") {
  const std::string job = std::string(MACTOR_BINARY_DIR) + "/bin/pretrain_gpt " + pipeline_flags(2) +
                          " --pipeline-model-parallel-size 1 --eval-iters 0";
  const auto off = run_process("MACTOR_INSPECT=off " + job);
  INFO(off.err);
  CHECK(off.status == 0);
  CHECK(off.err.find("mactor inspector") == std::string::npos);
  CHECK(off.out.find("iteration        2/       2 |") != std::string::npos);
  const auto bad = run_process("MACTOR_INSPECT=127.0.0.1:http " + job);
  INFO(bad.err);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("MACTOR_INSPECT='127.0.0.1:http': 'http' is not a port") != std::string::npos);
  const auto threshold = run_process("MACTOR_STALL_THRESHOLD=soon " + job);
  INFO(threshold.err);
  CHECK(threshold.status == 2);
  CHECK(threshold.err.find("MACTOR_STALL_THRESHOLD='soon' is not a number of seconds") != std::string::npos);
  const auto queue = run_process("MACTOR_LOGGER_QUEUE=0 " + job);
  INFO(queue.err);
  CHECK(queue.status == 2);
  CHECK(queue.err.find("MACTOR_LOGGER_QUEUE='0' is not a positive number of messages (e.g. MACTOR_LOGGER_QUEUE=1000)") !=
        std::string::npos);
}

TEST_CASE("a slow logger does not hold training back and its mailbox stays within MACTOR_LOGGER_QUEUE") {
  // The test hook makes the logger take 600 ms over each iteration record (20x an iteration here);
  // it may have 4 waiting.
  live_job job("slow_logger", pipeline_flags(100), {{"MACTOR_TEST_SLOW_LOGGER_MS", "600"}, {"MACTOR_LOGGER_QUEUE", "4"}});
  const std::regex row(R"(mactor job: iteration (\d+) /(.|\n)*\nlogger +0 +printing the records it is sent +[0-9.]+ +(\d+) )");
  std::smatch m;
  std::int64_t most_trained = 0, most_queued = 0, views = 0;
  while (!job.ended()) {
    const auto view = job.mactor("inspect", "--once --width 200");
    // While training runs, only iteration records flow to the logger (the final evaluation's
    // blocks and lines come after the last iteration and are never left out).
    if (std::regex_search(view.out, m, row) && std::stoll(m[1].str()) < 100) {
      ++views;
      most_trained = std::max<std::int64_t>(most_trained, std::stoll(m[1].str()));
      most_queued = std::max<std::int64_t>(most_queued, std::stoll(m[3].str()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(job.wait() == 0);
  const std::string out = job.out(), err = job.err();
  INFO("job stdout:\n" << out << "\njob stderr:\n" << err);
  std::printf("slow logger: %lld views while training (up to iteration %lld), the logger's mailbox held at most %lld\n",
              static_cast<long long>(views), static_cast<long long>(most_trained), static_cast<long long>(most_queued));
  CHECK(views >= 1);  // a fast machine trains the 100 iterations in about a second
  CHECK(most_queued <= 4);
  // Training ran ahead: iterations went unlogged, said on stderr when it began.
  CHECK(std::regex_search(err, std::regex(R"(mactor: the logger has 4 messages waiting \(MACTOR_LOGGER_QUEUE=4\): iteration \d+ and later ones go unlogged)")));
  // Every iteration is either logged once or named once in a notice in the log, in order.
  std::map<int, int> seen = count_matches(out, std::regex(R"(\] iteration +(\d+)/ +100 \|)"));
  const std::size_t logged = seen.size();
  const std::regex notice(R"(mactor: the logger fell behind \(MACTOR_LOGGER_QUEUE=4\): (\d+) iteration records? \(iterations? (\d+)(-(\d+))?\) w)");
  std::int64_t notices = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), notice); it != std::sregex_iterator(); ++it) {
    ++notices;
    const int first = std::stoi((*it)[2].str()), last = (*it)[4].matched ? std::stoi((*it)[4].str()) : first;
    CHECK(std::stoi((*it)[1].str()) == last - first + 1);
    for (int i = first; i <= last; ++i) ++seen[i];
  }
  std::printf("slow logger: 100 iterations trained, %zu logged, the rest named in %lld notices\n", logged,
              static_cast<long long>(notices));
  CHECK(notices >= 1);
  CHECK(logged < 100);
  CHECK(seen.size() == 100);
  for (int i = 1; i <= 100; ++i) {
    INFO("iteration " << i);
    CHECK(seen[i] == 1);
  }
  // The final validation and test blocks are never left out.
  CHECK(out.find("validation loss at iteration 100 on test set") != std::string::npos);
}

TEST_CASE("mactor inspect shows a live MoE job's tokens per expert, summed over its expert-parallel ranks and stages") {
  // 4 layers (the last 3 MoE, 8 experts, top-2) over 2 stages, the experts over 2 expert-parallel
  // ranks: each rank counts what its own routers kept, the coordinator sums one iteration's.
  live_job job("expert_load",
               "--num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
               "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 16 --lr 1e-3 --mock-data "
               "--tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-iters 1 --train-iters 5000 "
               "--disable-bias-linear --swiglu --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 32 "
               "--moe-layer-freq '([0]*1+[1]*3)' --moe-aux-loss-coeff 0.1 --moe-token-dispatcher-type alltoall "
               "--expert-model-parallel-size 2 --pipeline-model-parallel-size 2");
  const std::regex header(R"(tokens per expert, iteration (\d+) )");
  const std::string view = job.inspect_until(header);
  INFO("mactor inspect said:\n" << view << "\njob stderr:\n" << job.err());
  REQUIRE(std::regex_search(view, header));
  std::printf("mactor inspect against the live MoE job:\n%s\n", view.c_str());
  const std::regex row(R"(\ndecoder\.layers\.(\d+) +([0-9.]+)  ([0-9 ]+))");
  std::set<int> layers;
  for (auto it = std::sregex_iterator(view.begin(), view.end(), row); it != std::sregex_iterator(); ++it) {
    const int layer = std::stoi((*it)[1].str());
    layers.insert(layer);
    std::istringstream counts((*it)[3].str());
    std::vector<double> tokens;
    for (double t; counts >> t;) tokens.push_back(t);
    INFO("layer " << layer << ": " << (*it)[3].str());
    REQUIRE(tokens.size() == 8);
    // Every token of the global batch (16 samples of 32) chose 2 experts, and none was dropped.
    double total = 0, most = 0;
    for (double t : tokens) total += t, most = std::max(most, t);
    CHECK(total == 16 * 32 * 2);
    char ratio[16];
    std::snprintf(ratio, sizeof ratio, "%.2f", most / (total / 8));
    CHECK((*it)[2].str() == ratio);
  }
  CHECK(layers == std::set<int>{1, 2, 3});  // layer 0 is dense; layers 1 and 3 live on different stages
}
