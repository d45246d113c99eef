// The stall report on real 4-rank jobs (`mactor -np 4 pretrain_gpt`): one rank made to stall by
// the test hook MACTOR_TEST_STALL_RANK (actors/inspection.hpp), and the others' waits named by
// `mactor inspect` and the coordinator's report, with the rank they wait for: a pipeline peer, the
// members of a data-parallel collective (in line or in the background), a ring attention's
// previous rank.
#include <catch2/catch.hpp>

#include <regex>

#include "live_job.hpp"

using namespace mactor::inspector::testing;

TEST_CASE("a stalled stage is named by mactor inspect and by the coordinator's stall report") {
  // Rank 2 sleeps 6 s before iteration 3; a wait of more than 1 s is a stall.
  live_job job("stall", pipeline_flags(80),  // long enough after the stall for "stall over"
               {{"MACTOR_TEST_STALL_RANK", "2"}, {"MACTOR_TEST_STALL_AT_ITERATION", "3"},
                {"MACTOR_TEST_STALL_SECONDS", "6"}, {"MACTOR_STALL_THRESHOLD", "1"}});
  const std::regex named(R"(STALLED:\n(.|\n)*rank 3 stage waits [0-9.]+ s: awaiting recv_forward mb 0 chunk 0 from rank 2 )");
  const std::string view = job.inspect_until(named);
  INFO("mactor inspect said:\n" << view << "\njob stderr:\n" << job.err());
  REQUIRE(std::regex_search(view, named));
  std::printf("mactor inspect during the stall:\n%s\n", view.c_str());
  // The pair: rank 3 waits on rank 2, which is the one stalled; rank 1 waits on it for gradients.
  CHECK(view.find("(rank 2 stage is: stalled by the test hook MACTOR_TEST_STALL_RANK: sleeping 6 s before iteration 3") !=
        std::string::npos);
  CHECK(std::regex_search(view, std::regex(R"(\nstage +2 +stalled by the test hook)")));
  // Rank 1 starts its wait a little later than rank 3 (after its own forwards): look again.
  const std::regex rank1(R"(rank 1 stage waits [0-9.]+ s: awaiting recv_backward mb \d+ chunk 0 from rank 2 )");
  CHECK(std::regex_search(job.inspect_until(rank1, 4), rank1));

  REQUIRE(job.wait() == 0);
  const std::string err = job.err();
  INFO("job stderr:\n" << err);
  const std::regex report(
      R"(mactor: stall: rank 3 stage waits [0-9.]+ s: awaiting recv_forward mb 0 chunk 0 from rank 2 \(virtual stage 2\) \(rank 2 stage is: stalled by the test hook)");
  CHECK(std::regex_search(err, report));
  CHECK(std::regex_search(err, std::regex(R"(mactor: stall: rank 1 stage waits [0-9.]+ s: awaiting recv_backward [^\n]*from rank 2 )")));
  CHECK(err.find("mactor: stall over: rank 3 stage goes on") != std::string::npos);
  // The report names this stall once, when it passes the threshold (not every refresh).
  CHECK(std::distance(std::sregex_iterator(err.begin(), err.end(), report), std::sregex_iterator()) == 1);
  // Training went on after it: all 80 iterations logged.
  CHECK(std::regex_search(job.out(), std::regex(R"(iteration +80/ +80 \|)")));
}

TEST_CASE("a rank that stalls before a data-parallel all-reduce is named by the others' stall report") {
  // Four data-parallel replicas; rank 2 sleeps 6 s before iteration 3, so the other three wait
  // for it inside the gradient all-reduce.
  live_job job("stall_dp", pipeline_flags(80) + " --pipeline-model-parallel-size 1",
               {{"MACTOR_TEST_STALL_RANK", "2"}, {"MACTOR_TEST_STALL_AT_ITERATION", "3"},
                {"MACTOR_TEST_STALL_SECONDS", "6"}, {"MACTOR_STALL_THRESHOLD", "1"}});
  const std::regex named(R"(STALLED:\n(.|\n)*rank 0 stage waits [0-9.]+ s: awaiting data-parallel all-reduce of [0-9.]+ (KiB|MiB) with ranks 1, 2, 3 )");
  const std::string view = job.inspect_until(named);
  INFO("mactor inspect said:\n" << view << "\njob stderr:\n" << job.err());
  REQUIRE(std::regex_search(view, named));
  std::printf("mactor inspect during the data-parallel stall:\n%s\n", view.c_str());
  // Each waiting rank names rank 2 (and only rank 2) as the member it waits for. Under load the
  // ranks reach the all-reduce at different times: look again for each.
  for (int r : {0, 1, 3}) {
    const std::regex names_rank2("rank " + std::to_string(r) +
                                 R"( stage waits [0-9.]+ s: awaiting data-parallel all-reduce [^\n]*\(rank 2 stage is: stalled by the test hook MACTOR_TEST_STALL_RANK: sleeping 6 s before iteration 3[^;\n]*\)\n)");
    CHECK(std::regex_search(job.inspect_until(names_rank2, 4), names_rank2));
  }
  // The stage rows count the collectives' bytes (no pipeline here: only data-parallel traffic).
  CHECK(std::regex_search(view, std::regex(R"(\nstage +0 +[^\n]* [0-9.]+ (KiB|MiB) +[0-9.]+ (KiB|MiB))")));

  REQUIRE(job.wait() == 0);
  const std::string err = job.err();
  INFO("job stderr:\n" << err);
  CHECK(std::regex_search(err, std::regex(R"(mactor: stall: rank [013] stage waits [0-9.]+ s: awaiting data-parallel all-reduce of [0-9.]+ (KiB|MiB) with ranks [0-9, ]+ \(rank 2 stage is: stalled by the test hook)")));
  CHECK(std::regex_search(err, std::regex(R"(mactor: stall over: rank [013] stage goes on)")));
  CHECK(std::regex_search(job.out(), std::regex(R"(iteration +80/ +80 \|)")));
}

TEST_CASE("with --overlap-grad-reduce the stall report names the background all-reduce the training thread waits for") {
  live_job job("stall_dp_overlap", pipeline_flags(30) + " --pipeline-model-parallel-size 1 --overlap-grad-reduce",
               {{"MACTOR_TEST_STALL_RANK", "2"}, {"MACTOR_TEST_STALL_AT_ITERATION", "3"},
                {"MACTOR_TEST_STALL_SECONDS", "5"}, {"MACTOR_STALL_THRESHOLD", "1"}});
  const std::regex named(
      R"(rank 0 stage waits [0-9.]+ s: awaiting data-parallel all-reduce of [0-9.]+ (B|KiB|MiB) with ranks 1, 2, 3 \(the overlapped gradient reduction\) \(rank 2 stage is: stalled by the test hook)");
  const std::string view = job.inspect_until(named);
  INFO("mactor inspect said:\n" << view << "\njob stderr:\n" << job.err());
  CHECK(std::regex_search(view, named));
  REQUIRE(job.wait() == 0);
  CHECK(std::regex_search(job.err(), std::regex(R"(mactor: stall: rank [013] stage waits [0-9.]+ s: awaiting data-parallel all-reduce [^\n]*\(the overlapped gradient reduction\) \(rank 2 stage is: stalled)")));
}


TEST_CASE("a rank that stalls before ring attention is named as the one a KV block awaits") {
  // CP2 x DP2: the context-parallel pairs are ranks {0, 1} and {2, 3}. Rank 1 sleeps 6 s before
  // iteration 3, so rank 0's ring attention waits for the KV block rank 1 would pass it.
  live_job job("stall_cp", pipeline_flags(40) + " --pipeline-model-parallel-size 1 --context-parallel-size 2",
               {{"MACTOR_TEST_STALL_RANK", "1"}, {"MACTOR_TEST_STALL_AT_ITERATION", "3"},
                {"MACTOR_TEST_STALL_SECONDS", "6"}, {"MACTOR_STALL_THRESHOLD", "1"}});
  const std::regex named(
      R"(rank 0 stage waits [0-9.]+ s: awaiting KV block 1 of 1 from rank 1 in ring attention \(rank 1 stage is: stalled by the test hook)");
  const std::string view = job.inspect_until(named);
  INFO("mactor inspect said:\n" << view << "\njob stderr:\n" << job.err());
  REQUIRE(std::regex_search(view, named));
  std::printf("mactor inspect during the context-parallel stall:\n%s\n", view.c_str());
  REQUIRE(job.wait() == 0);
  const std::string err = job.err();
  INFO("job stderr:\n" << err);
  CHECK(std::regex_search(err, std::regex(R"(mactor: stall: rank 0 stage waits [0-9.]+ s: awaiting KV block 1 of 1 from rank 1 in ring attention \(rank 1 stage is: stalled)")));
  CHECK(std::regex_search(job.out(), std::regex(R"(iteration +40/ +40 \|)")));
}
