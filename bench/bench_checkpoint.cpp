// bench_checkpoint: write throughput of checkpoint::save() next to dd's on the same disk, read
// throughput of checkpoint_reader, and the caller-visible stall of a snapshot with and without
// save() (with --async-save the checkpointer actor writes it: bench_save_stall measures a job's).
// Usage: bench_checkpoint [DIR (default: ./bench_checkpoint.tmp)] [MiB (default 256)] [ranks (default 1)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/save.hpp"

namespace ck = mactor::checkpoint;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The "model" of one rank: tensors of 16 MiB each (row blocks of [rows, 1024] matrices).
struct rank_model {
  std::vector<std::vector<float>> tensors;
};

ck::rank_state snapshot(const rank_model& m, int rank, int ranks) {
  ck::rank_state s;
  for (std::size_t i = 0; i < m.tensors.size(); ++i) {
    const std::int64_t rows = std::int64_t(m.tensors[i].size() / 1024);
    ck::tensor_piece p;
    p.name = "layer." + std::to_string(i) + ".weight";
    p.global_shape = {rows * ranks, 1024};
    p.offset = {rows * rank, 0};
    p.shape = {rows, 1024};
    p.data = m.tensors[i];  // the copy a training loop makes before handing the state over
    s.pieces.push_back(std::move(p));
  }
  if (rank == 0) s.common = nlohmann::json{{"bench", true}};
  return s;
}

void save_all_ranks(const std::string& dir, std::int64_t it, const std::vector<rank_model>& models) {
  const int ranks = int(models.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] { ck::save(dir, it, r, ranks, snapshot(models[r], r, ranks)); });
  for (auto& t : threads) t.join();
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path dir = argc > 1 && argv[1][0] ? fs::path(argv[1]) : fs::current_path() / "bench_checkpoint.tmp";
  const int mib = argc > 2 ? std::atoi(argv[2]) : 256;
  const int ranks = argc > 3 ? std::atoi(argv[3]) : 1;
  if (mib < 16 || ranks < 1) {
    std::fprintf(stderr, "error: MiB must be >= 16 and ranks >= 1\n");
    return 2;
  }
  fs::remove_all(dir);
  fs::create_directories(dir);
  const double bytes = double(mib) * (1 << 20);
  std::vector<rank_model> models(ranks);
  const int tensors_per_rank = std::max(1, mib / 16 / ranks);
  for (int r = 0; r < ranks; ++r)
    for (int i = 0; i < tensors_per_rank; ++i)
      models[r].tensors.emplace_back(std::size_t(4) << 20, float(r * 100 + i) + 0.5f);
  const double real_bytes = double(ranks) * tensors_per_rank * (16 << 20);
  const int repeats = 3;

  std::vector<double> dd, save_s, read_s, snap_s, sync_stall;
  const std::string dd_cmd = "dd if=/dev/zero of=" + (dir / "dd.bin").string() + " bs=1M count=" +
                             std::to_string(mib) + " conv=fsync status=none";
  for (int k = 0; k < repeats; ++k) {
    auto t = clock_type::now();
    if (std::system(dd_cmd.c_str()) != 0) std::fprintf(stderr, "warning: dd failed\n");
    dd.push_back(seconds_since(t));
    fs::remove(dir / "dd.bin");

    t = clock_type::now();
    save_all_ranks((dir / "sync").string(), k, models);
    save_s.push_back(seconds_since(t));

    t = clock_type::now();
    {
      ck::checkpoint_reader reader((dir / "sync").string());
      for (const auto& name : reader.names()) reader.read_whole(name);
    }
    read_s.push_back(seconds_since(t));
    fs::remove_all(dir / "sync");
  }
  // Stall seen by the training loop of rank 0 (one rank): snapshot copy + the save call.
  for (int k = 0; k < repeats; ++k) {
    auto t = clock_type::now();
    auto state = snapshot(models[0], 0, 1);
    snap_s.push_back(seconds_since(t));
    ck::save((dir / "stall").string(), k, 0, 1, std::move(state));
    sync_stall.push_back(seconds_since(t));
  }
  fs::remove_all(dir);

  const double mb = real_bytes / 1e6;
  const double one_rank_mb = double(tensors_per_rank) * (16 << 20) / 1e6;
  std::printf("bench_checkpoint: %s, %.0f MB in %d rank(s), median of %d\n", dir.string().c_str(),
              mb, ranks, repeats);
  std::printf("%-44s %10s %10s\n", "what", "seconds", "MB/s");
  std::printf("%-44s %10.3f %10.0f\n", "dd bs=1M conv=fsync (the disk)", median(dd), bytes / 1e6 / median(dd));
  std::printf("%-44s %10.3f %10.0f\n", "save(), all ranks, fsync + commit", median(save_s), mb / median(save_s));
  std::printf("%-44s %10.3f %10.0f\n", "checkpoint_reader, every tensor + CRC", median(read_s), mb / median(read_s));
  std::printf("%-44s %10.3f %10.0f\n", "stall: snapshot only (--async-save, rank 0)", median(snap_s), one_rank_mb / median(snap_s));
  std::printf("%-44s %10.3f %10s\n", "stall: snapshot + save() (rank 0)", median(sync_stall), "");
  return 0;
}
