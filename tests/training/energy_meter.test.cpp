// --log-energy: the RAPL meter over a powercap tree the test writes (packages summed, subzones
// left out, a wrapped counter unwrapped), and a job logging Megatron's energy fields from it, or
// warning once when no counter can be read.
#include "training/energy_meter.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "tests/training/launch_support.hpp"

using namespace mactor;
using namespace mactor::test;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/training/energy" / (name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& p, std::uint64_t v) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << v << "\n";
}

}  // namespace

TEST_CASE("the energy meter sums the packages' counters since the last lap and unwraps a wrapped one") {
  const auto root = scratch("meter");
  write(root / "intel-rapl:0/energy_uj", 1'000'000);
  write(root / "intel-rapl:0/max_energy_range_uj", 10'000'000);
  write(root / "intel-rapl:1/energy_uj", 9'500'000);
  write(root / "intel-rapl:1/max_energy_range_uj", 10'000'000);
  write(root / "intel-rapl:0:0/energy_uj", 123);  // a subzone: already inside its package
  training::energy_meter m(root.string());
  REQUIRE(m.available());
  write(root / "intel-rapl:0/energy_uj", 3'500'000);  // +2.5 J
  write(root / "intel-rapl:1/energy_uj", 500'000);    // wrapped: +0.5 + 0.5 J
  write(root / "intel-rapl:0:0/energy_uj", 99'000'000);
  CHECK(m.lap() == Approx(3.5));
  CHECK(m.lap() == 0.0);
  CHECK_FALSE(training::energy_meter((root / "nothing").string()).available());
}

TEST_CASE("a job with --log-energy logs Megatron's energy and power fields, or warns once without counters") {
  const std::string flags =
      "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
      "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --tokenizer-type NullTokenizer "
      "--vocab-size 4095 --log-interval 1 --eval-iters 0 --seed 7 --train-iters 3 --log-energy";
  const auto root = scratch("job");
  write(root / "intel-rapl:0/energy_uj", 42);
  const auto with = run_shell("MACTOR_POWERCAP_ROOT=" + root.string() + " " + mactor_bin() + " -np 2 " + bin_dir() +
                              "/pretrain_gpt " + flags);
  INFO(with.out << with.err);
  REQUIRE(with.status == 0);
  // The fake counter does not move: the fields are there, with zero energy.
  CHECK_THAT(with.out, Catch::Contains("| energy per GPU (J/iter/GPU): 0.0 | power per GPU (W/GPU): 0.0 | learning rate:"));
  CHECK_THAT(with.out, Catch::Contains("Total training energy (GPU): 0.0 MJ"));
  const auto without = run_shell("MACTOR_POWERCAP_ROOT=" + (root / "none").string() + " " + bin_dir() + "/pretrain_gpt " + flags);
  INFO(without.out << without.err);
  REQUIRE(without.status == 0);
  CHECK_THAT(without.out, Catch::Contains("WARNING: --log-energy: a host has no readable RAPL package counter"));
  CHECK_THAT(without.out, !Catch::Contains("energy per GPU") && !Catch::Contains("Total training energy"));
  const std::string warning = "WARNING: --log-energy";
  CHECK(without.out.find(warning) == without.out.rfind(warning));  // once, not per iteration
}
