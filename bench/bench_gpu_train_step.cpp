// bench_gpu_train_step: a bf16 training step of a 1.3-billion-parameter Llama-style GPT at
// sequence 4096 on one GPU. pretrain_gpt trains it as a user would run it (MACTOR_DEVICE=cuda,
// --bf16, mock data, Adam, fp32 main parameters and gradients); PyTorch trains the same model in
// the same run (bench_gpu_train_step_torch.py: bf16 autocast over fp32 weights, scaled-dot-product
// attention, fused AdamW). Prints each one's step time, tokens/s, TFLOP/s and MFU: Megatron's
// FLOPs of a step (training/flops.hpp on the same flags, the same for both) over the GPU's dense
// bf16 peak. The first --warmup iterations are left out of the times.
//   bench_gpu_train_step [--model 1.3b|tiny] [--device cuda|cpu] [--iters N] [--warmup W]
//                        [--global-batch B] [--keep-logs DIR]
// --model tiny --device cpu runs the same harness on the host in seconds (the CI smoke test).
// The runs' logs go to --keep-logs DIR (else a temporary folder, removed).
// Exit status 3: --device cuda and no GPU (nvidia-smi finds none).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "config/resolve.hpp"
#include "training/flops.hpp"

namespace fs = std::filesystem;

namespace {

struct model_shape {
  int layers, hidden, ffn, heads, seq, vocab;
};
const std::map<std::string, model_shape> models = {
    {"1.3b", {24, 2048, 5632, 16, 4096, 32000}},
    {"tiny", {2, 64, 176, 4, 64, 4096}},
};

struct options {
  std::string model = "1.3b", device = "cuda";
  int iters = 6, warmup = 2, global_batch = 8;
  std::optional<fs::path> keep_logs;
};

struct timing {
  bool ok = false;
  double step_ms = 0;  // mean over the measured iterations
  double peak_memory_gb = 0;
  std::string error;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `command` with its output into `log`; the exit status.
int run(const std::string& command, const fs::path& log) {
  const int status = std::system((command + " > '" + log.string() + "' 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string last_lines(const std::string& text, int n) {
  std::size_t at = text.size();
  for (int i = 0; i <= n && at != std::string::npos && at > 0; ++i) at = text.rfind('\n', at - 1);
  return at == std::string::npos ? text : text.substr(at + 1);
}

// pretrain_gpt's iteration lines: elapsed time per iteration, after the warm-up.
timing mactor_timing(const std::string& log, int warmup) {
  timing t;
  static const std::regex line(R"(iteration\s+(\d+)/.*elapsed time per iteration \(ms\): ([0-9.]+) \|)");
  int measured = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) {
    if (std::stoi((*it)[1]) <= warmup) continue;
    t.step_ms += std::stod((*it)[2]);
    ++measured;
  }
  if (measured == 0) {
    t.error = "no iteration after the warm-up was logged:\n" + last_lines(log, 12);
    return t;
  }
  t.step_ms /= measured;
  static const std::regex memory(R"(max allocated: ([0-9.]+))");
  std::smatch m;
  if (std::regex_search(log, m, memory)) t.peak_memory_gb = std::stod(m[1]) / 1024.0;
  t.ok = true;
  return t;
}

// The PyTorch script's RESULT line.
timing torch_timing(const std::string& log) {
  timing t;
  static const std::regex result(R"(RESULT ms_per_iter=([0-9.]+) peak_memory_gb=([0-9.]+))");
  std::smatch m;
  if (!std::regex_search(log, m, result)) {
    t.error = "no RESULT line:\n" + last_lines(log, 12);
    return t;
  }
  t.step_ms = std::stod(m[1]), t.peak_memory_gb = std::stod(m[2]);
  t.ok = true;
  return t;
}

// The GPU's name and its dense bf16 peak in TFLOP/s (0: not in the table), from nvidia-smi.
std::optional<std::pair<std::string, double>> gpu() {
  FILE* pipe = popen("nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null", "r");
  if (!pipe) return std::nullopt;
  char buffer[256] = {};
  const bool read = std::fgets(buffer, sizeof buffer, pipe) != nullptr;
  if (pclose(pipe) != 0 || !read) return std::nullopt;
  std::string name(buffer);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  // NVIDIA's datasheets, dense (no sparsity), SXM parts.
  const std::pair<const char*, double> peaks[] = {{"H200", 989.4}, {"H100", 989.4}, {"H800", 989.4}, {"A100", 312.0},
                                                  {"L40S", 362.1}, {"B200", 2250.0}, {"GH200", 989.4}};
  for (const auto& [key, peak] : peaks)
    if (name.find(key) != std::string::npos) return std::pair{name, peak};
  return std::pair{name, 0.0};
}

std::string python() {
  const fs::path venv = fs::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return fs::exists(venv) ? venv.string() : "python3";
}

int usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_gpu_train_step: %s\nusage: bench_gpu_train_step [--model 1.3b|tiny] [--device cuda|cpu] "
               "[--iters N] [--warmup W] [--global-batch B] [--keep-logs DIR]\n",
               why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    try {
      if (flag == "--model") o.model = value;
      else if (flag == "--device") o.device = value;
      else if (flag == "--iters") o.iters = std::stoi(value);
      else if (flag == "--warmup") o.warmup = std::stoi(value);
      else if (flag == "--global-batch") o.global_batch = std::stoi(value);
      else if (flag == "--keep-logs") o.keep_logs = value;
      else return usage("unknown option " + flag);
    } catch (const std::exception&) {
      return usage(flag + " " + value + " is not a number");
    }
  }
  if (!models.count(o.model)) return usage("--model " + o.model + ": use 1.3b or tiny");
  if (o.device != "cuda" && o.device != "cpu") return usage("--device " + o.device + ": use cuda or cpu");
  if (o.iters <= o.warmup || o.warmup < 1) return usage("--iters must exceed --warmup, and --warmup be at least 1");
  const auto& m = models.at(o.model);

  std::string device_name = "the host's CPU";
  double peak = 0;
  if (o.device == "cuda") {
    const auto found = gpu();
    if (!found) {
      std::printf("NO DEVICE: nvidia-smi finds no GPU\n");
      return 3;
    }
    std::tie(device_name, peak) = *found;
  }
  const fs::path logs = o.keep_logs ? *o.keep_logs : fs::temp_directory_path() / ("bench_gpu_train_step." + std::to_string(::getpid()));
  fs::create_directories(logs);
  const fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();

  std::ostringstream flags;
  flags << "--num-layers " << m.layers << " --hidden-size " << m.hidden << " --ffn-hidden-size " << m.ffn
        << " --num-attention-heads " << m.heads << " --seq-length " << m.seq << " --max-position-embeddings " << m.seq
        << " --normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear"
        << " --untie-embeddings-and-output-weights --attention-dropout 0 --hidden-dropout 0"
        << " --micro-batch-size 1 --global-batch-size " << o.global_batch << " --train-iters " << o.iters
        << " --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --weight-decay 0.1 --clip-grad 1.0 --bf16"
        << " --mock-data --tokenizer-type NullTokenizer --vocab-size " << m.vocab - 1 << " --make-vocab-size-divisible-by 128"
        << " --eval-iters 0 --log-interval 1 --seed 1234";
  const std::string ours_log = (logs / "pretrain_gpt.log").string();
  const int ours_status = run("MACTOR_DEVICE=" + o.device + " " + (bin / "pretrain_gpt").string() + " " + flags.str(), ours_log);
  timing ours = mactor_timing(read_file(ours_log), o.warmup);
  if (ours_status != 0) ours.ok = false, ours.error = "pretrain_gpt exited " + std::to_string(ours_status) + ":\n" + last_lines(read_file(ours_log), 12);

  std::ostringstream torch_cmd;
  torch_cmd << python() << " " << MACTOR_SOURCE_DIR << "/bench/bench_gpu_train_step_torch.py --device " << o.device
            << " --layers " << m.layers << " --hidden " << m.hidden << " --ffn " << m.ffn << " --heads " << m.heads
            << " --seq " << m.seq << " --vocab " << m.vocab << " --global-batch " << o.global_batch << " --iters "
            << o.iters << " --warmup " << o.warmup;
  const std::string torch_log = (logs / "pytorch.log").string();
  const int torch_status = run(torch_cmd.str(), torch_log);
  timing torch = torch_timing(read_file(torch_log));
  if (torch_status != 0) torch.ok = false, torch.error = "PyTorch exited " + std::to_string(torch_status) + ":\n" + last_lines(read_file(torch_log), 12);

  // Megatron's FLOPs of one step (the same step for PyTorch).
  std::vector<std::string> words;
  for (std::istringstream in(flags.str()); in;) {
    std::string w;
    if (in >> w) words.push_back(w);
  }
  const auto config = mactor::config::resolve(words, "pretrain_gpt", {0, 1});
  if (config.exit_status) {
    std::fprintf(stderr, "bench_gpu_train_step: the benchmark's own flags are refused:\n%s", config.err.c_str());
    return 1;
  }
  const double step_flops = mactor::training::num_floating_point_operations(config.args, m.vocab, o.global_batch);
  const double tokens = double(o.global_batch) * m.seq;
  std::printf("train step: %s Llama-style GPT (%d layers, hidden %d, ffn %d, %d heads), sequence %d, "
              "global batch %d (micro-batch 1), bf16, on %s; mean of iterations %d-%d\n",
              o.model == "1.3b" ? "1.3B-parameter" : o.model.c_str(), m.layers, m.hidden, m.ffn, m.heads, m.seq, o.global_batch, device_name.c_str(),
              o.warmup + 1, o.iters);
  std::printf("%-8s %12s %12s %10s %8s %14s\n", "runtime", "ms/step", "tokens/s", "TFLOP/s", "MFU", "peak mem (GB)");
  for (const auto& [label, t] : {std::pair<const char*, const timing&>{"mactor", ours}, {"pytorch", torch}}) {
    if (!t.ok) {
      std::printf("%-8s failed: %s\n", label, t.error.c_str());
      continue;
    }
    const double tflops = step_flops / (t.step_ms * 1e-3) / 1e12;
    char mfu[16] = "n/a";
    if (peak > 0 && tflops > 0) std::snprintf(mfu, sizeof mfu, "%.1f%%", 100 * tflops / peak);
    std::printf("%-8s %12.1f %12.0f %10.3f %8s %14.2f\n", label, t.step_ms, tokens / (t.step_ms * 1e-3), tflops, mfu,
                t.peak_memory_gb);
  }
  if (ours.ok && torch.ok) std::printf("mactor tokens/s over PyTorch's: %.2fx\n", torch.step_ms / ours.step_ms);
  if (o.keep_logs) std::printf("logs: %s\n", logs.c_str());
  else fs::remove_all(logs);
  return ours.ok && torch.ok ? 0 : 1;
}
