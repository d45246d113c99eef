// mactor --max-restarts: a rank killed with SIGKILL mid-training, the job started again by the
// launcher, resumed from its newest checkpoint (a persistent one on disk, or a replicated local one
// in memory whose owner's copy died with it), and its losses from there on equal to an
// uninterrupted run's, bit for bit.
#include <catch2/catch.hpp>

#include "tests/training/restart_support.hpp"

using namespace mactor::test;
using namespace mactor::test::restart;

TEST_CASE("mactor max-restarts starts a job again after a rank is killed and it resumes from its checkpoint") {
  const fs::path dir = scratch_dir("job_restart", "kill");
  fs::create_directories(dir);
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 20")).out);
  REQUIRE(reference.size() == 300);
  const auto job = kill_and_restart(dir, "--max-restarts 1", flags(dir / "restarted", " --save-interval 20"), [] {});
  check_recovered(job, reference, 40, whole_job_restart);
  std::printf("disk checkpoints: killed a rank after iteration %d; restarted from the checkpoint of iteration %d; the "
              "first iteration after it logged %.2f s after the kill\n", job.killed_after, job.resumed_from, job.recovered_s);
  fs::remove_all(dir);
}

TEST_CASE("mactor max-restarts: the killed rank's memory is gone and it resumes from its peer's replica") {
  const fs::path dir = scratch_dir("job_restart", "replica");
  fs::create_directories(dir);
  // The local checkpoints live in memory (tmpfs), as on a node's /dev/shm; rank 1's vanish with it.
  const fs::path memory = node_memory(dir, "replica");
  const std::string local = replicated_in_memory(memory);
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 1000")).out);
  REQUIRE(reference.size() == 300);
  const auto job = kill_and_restart(dir, "--max-restarts 1", flags(dir / "restarted", local),
                                    [&] { fs::remove_all(mactor::checkpoint::local_rank_dir(memory.string(), 1)); });
  CHECK(job.out.find("rank 1: restored its local checkpoint of iteration " + std::to_string(job.resumed_from) +
                     " from rank 0's replica") != std::string::npos);
  check_recovered(job, reference, 40, whole_job_restart);
  std::printf("replicated memory checkpoints: killed a rank after iteration %d; restarted from the replica of iteration %d; "
              "the first iteration after it logged %.2f s after the kill\n", job.killed_after, job.resumed_from, job.recovered_s);
  fs::remove_all(memory);
  fs::remove_all(dir);
}
