// The jsonl -> .bin/.idx pipeline behind `preprocess_data` (Megatron's tools/preprocess_data.py),
// as a function so the benchmark can time it without a subprocess.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer.hpp"

namespace mactor::tools {

struct preprocess_options {
  std::string input;                          // --input (a .jsonl file)
  std::string output_prefix;                  // --output-prefix
  std::vector<std::string> json_keys{"text"}; // --json-keys
  data::tokenizer_options tokenizer;          // --tokenizer-type and its files
  bool append_eod = false;                    // --append-eod
  int workers = 1;                            // --workers (threads here)
  std::int64_t log_interval = 1000;           // --log-interval
};

struct preprocess_result {
  std::int64_t documents = 0;
  std::int64_t tokens = 0;
  double input_mb = 0;   // MiB of JSON text read (Megatron counts characters of each line)
  double seconds = 0;    // processing time, start-up excluded
  double startup_seconds = 0;
  std::vector<std::string> output_prefixes;  // <prefix>_<key>_document per key
  double mb_per_s() const { return seconds > 0 ? input_mb / seconds : 0; }
};

/// Thrown for bad input (malformed JSON line, missing key); the message names file and line.
struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Tokenizes every line of o.input into one indexed dataset per json key. `log` receives
/// Megatron's progress lines. Throws input_error or data::data_error.
preprocess_result preprocess(const preprocess_options& o, const std::function<void(const std::string&)>& log);

}  // namespace mactor::tools
