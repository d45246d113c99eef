// bench_save_stall: what a checkpoint costs the training, end to end. Runs the same job under
// `mactor` without saves and with a save every K iterations: persistent (--save-interval K, then
// with --async-save), and local non-persistent ones in memory (--non-persistent-ckpt-type local in
// --memory-dir, a tmpfs, with --async-save), alone and with --replication to a peer rank. Prints the training stall
// per save (extra wall time over the run without saves, divided by the saves), that extra time as
// a share of the job's, the training's step time (Megatron's elapsed time per iteration over the
// whole run: start-up left out, a save after the last logged iteration too) against the run's
// without saves, the checkpoint's size, and the disk's own write speed (dd with fsync). Each
// variant's best of --repeats runs, the variants interleaved.
// Usage: mactor's build dir: build/bin/bench_save_stall [--ranks N] [--iters I] [--interval K]
//        [--hidden H] [--layers L] [--dir DIR] [--memory-dir DIR (default /dev/shm)] [--repeats R]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  int ranks = 2, iters = 12, interval = 3, hidden = 512, layers = 4, repeats = 2;
  fs::path dir = "bench_save_stall.tmp";
  fs::path memory_dir = "/dev/shm";
};

struct run_result {
  double seconds = 0;
  double step_ms = 0;  // Megatron's "elapsed time per iteration" over the whole run (one log line)
  double cpu_seconds = 0;  // user + system time of every process of the job
  std::vector<double> save_ms;  // the save-checkpoint timer's max over ranks, per save
};

// CPU time of the waited-for descendants so far: the shell, mactor and every rank it waited for.
double children_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

run_result run(const std::string& command, const fs::path& log) {
  run_result r;
  const auto start = clock_type::now();
  const double cpu_before = children_cpu_seconds();
  const int status = std::system((command + " > " + log.string() + " 2>&1").c_str());
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  r.cpu_seconds = children_cpu_seconds() - cpu_before;
  if (status != 0) {
    std::fprintf(stderr, "bench_save_stall: failed (status %d): %s\n(see %s)\n", status, command.c_str(), log.c_str());
    std::exit(1);
  }
  std::ifstream in(log);
  const std::string step_field = "elapsed time per iteration (ms): ";
  for (std::string line; std::getline(in, line);) {
    if (const auto at = line.find("save-checkpoint ...."); at != std::string::npos) {
      const auto comma = line.find(", ", at);
      r.save_ms.push_back(std::stod(line.substr(comma + 2)));
    }
    if (const auto at = line.find(step_field); at != std::string::npos) r.step_ms = std::stod(line.substr(at + step_field.size()));
  }
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

std::uintmax_t directory_bytes(const fs::path& dir) {
  std::uintmax_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) total += e.file_size();
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--ranks") o.ranks = std::stoi(v);
    else if (k == "--iters") o.iters = std::stoi(v);
    else if (k == "--interval") o.interval = std::stoi(v);
    else if (k == "--hidden") o.hidden = std::stoi(v);
    else if (k == "--layers") o.layers = std::stoi(v);
    else if (k == "--repeats") o.repeats = std::stoi(v);
    else if (k == "--dir") o.dir = v;
    else if (k == "--memory-dir") o.memory_dir = v;
    else {
      std::fprintf(stderr, "bench_save_stall: unknown option %s (--ranks --iters --interval --hidden --layers --dir --memory-dir --repeats)\n",
                   k.c_str());
      return 2;
    }
  }
  const fs::path bin = fs::canonical("/proc/self/exe").parent_path();
  const std::string job = (bin / "mactor").string() + " -np " + std::to_string(o.ranks) + " --oversubscribe " +
                          (bin / "pretrain_gpt").string() + " --mock-data --tokenizer-type NullTokenizer --vocab-size 8191" +
                          " --num-layers " + std::to_string(o.layers) + " --hidden-size " + std::to_string(o.hidden) +
                          " --num-attention-heads 8 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 1" +
                          " --global-batch-size " + std::to_string(o.ranks) + " --train-iters " + std::to_string(o.iters) +
                          " --lr 1e-4 --log-interval " + std::to_string(o.iters) + " --eval-iters 0";
  fs::remove_all(o.dir);
  fs::create_directories(o.dir);
  const int saves = o.iters / o.interval;
  const std::string save = " --save " + (o.dir / "ckpt").string() + " --save-interval " + std::to_string(o.interval);

  const fs::path memory = o.memory_dir / ("bench_save_stall_" + std::to_string(::getpid()));
  const std::string local = " --save " + (o.dir / "ckpt").string() + " --save-interval 1000000 --non-persistent-save-interval " +
                            std::to_string(o.interval) + " --non-persistent-ckpt-type local --non-persistent-local-ckpt-dir " +
                            memory.string() + " --async-save";
  struct variant {
    std::string name, flags;
    run_result best{};       // the shortest job
    run_result best_step{};  // the shortest step time
    std::vector<double> cpu{};  // every run's CPU seconds
  };
  std::vector<variant> variants = {{"no --save", ""},
                                   {"--save", save},
                                   {"--save --async-save", save + " --async-save"},
                                   {"local async, in memory", local},
                                   {"... + --replication", local + " --replication --replication-jump 1"}};
  if (o.ranks % 2 != 0) variants.pop_back();  // the cliques are pairs of ranks
  // Best of `repeats` for each variant, interleaved so drifts in machine load hit all alike.
  const fs::path log = o.dir / "job.log";
  for (auto& v : variants) v.best.seconds = v.best_step.step_ms = 1e30;
  for (int r = 0; r < o.repeats; ++r)
    for (auto& v : variants) {
      auto got = run(job + v.flags, log);
      v.cpu.push_back(got.cpu_seconds);
      if (got.step_ms < v.best_step.step_ms) v.best_step = got;
      if (got.seconds < v.best.seconds) v.best = std::move(got);
      if (&v != &variants.back()) fs::remove_all(o.dir / "ckpt");
      fs::remove_all(memory);
    }
  // The last variant's directory is gone with the memory one; the size is a persistent save's.
  run(job + save, log);
  const auto iteration_dir = o.dir / "ckpt" / ("iter_" + std::string(7 - std::to_string(o.iters).size(), '0') + std::to_string(o.iters));
  const double mib = static_cast<double>(directory_bytes(iteration_dir)) / (1 << 20);
  const auto dd = o.dir / "dd.bin";
  const double dd_seconds = run("dd if=/dev/zero of=" + dd.string() + " bs=1M count=" + std::to_string(static_cast<long>(mib + 1)) +
                                " conv=fsync", log).seconds;
  fs::remove_all(o.dir);

  const double none = variants[0].best.seconds;
  std::printf("job: %d ranks, %d layers x hidden %d, %d iterations, a save every %d (%d saves), checkpoint %.1f MiB\n",
              o.ranks, o.layers, o.hidden, o.iters, o.interval, saves, mib);
  const double none_step = variants[0].best_step.step_ms, none_cpu = median(variants[0].cpu);
  std::printf("%-24s %12s %22s %14s %10s %13s %26s %10s %20s\n", "variant", "job wall (s)", "wall added per save (ms)",
              "added to job", "step (ms)", "step vs none", "save-checkpoint timer (ms)", "CPU (s)", "CPU per save (ms)");
  for (const auto& v : variants) {
    const double cpu = median(v.cpu);
    if (v.flags.empty()) {
      std::printf("%-24s %12.2f %22s %14s %10.1f %13s %26s %10.2f %20s\n", v.name.c_str(), none, "-", "-", none_step, "-", "-",
                  cpu, "-");
      continue;
    }
    std::printf("%-24s %12.2f %22.1f %13.1f%% %10.1f %12.1f%% %26.1f %10.2f %20.1f\n", v.name.c_str(), v.best.seconds,
                1e3 * (v.best.seconds - none) / saves, 100.0 * (v.best.seconds - none) / none, v.best_step.step_ms,
                100.0 * (v.best_step.step_ms - none_step) / none_step, mean(v.best_step.save_ms), cpu,
                1e3 * (cpu - none_cpu) / saves);
  }
  std::printf("(CPU: user + system seconds of every process of the job, median of the runs; a job's CPU over its "
              "iterations' is the share of the machine a save costs where training keeps every core busy)\n");
  std::printf("(the timer is the longest time a rank waited per save; with --async-save and local saves the job's end also "
              "waits for the last write)\n");
  std::printf("synchronous save: %.0f MiB/s (checkpoint size / timer); dd of %.0f MiB with fsync on the same disk: %.0f MiB/s\n",
              mib / std::max(1e-9, mean(variants[1].best.save_ms) / 1e3), mib, (mib + 1) / dd_seconds);
  return 0;
}
