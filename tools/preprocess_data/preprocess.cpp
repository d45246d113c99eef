// preprocess(): reads jsonl lines in batches, tokenizes each batch on `workers` threads (each with
// its own tokenizer, as Megatron's worker processes have), and appends documents in input order.
#include "tools/preprocess_data/preprocess.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "data/data_error.hpp"
#include "data/dataset_tokenizer.hpp"
#include "data/indexed_dataset.hpp"

namespace mactor::tools {
namespace {

using clock_type = std::chrono::steady_clock;

struct encoded_doc {
  std::vector<std::vector<std::int64_t>> ids;   // per key
  std::vector<std::vector<std::int32_t>> lens;  // per key
};

// Megatron counts len(json_line) in characters: count UTF-8 lead bytes.
std::size_t char_count(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

encoded_doc encode_line(const std::string& line, std::int64_t line_no, const preprocess_options& o,
                        const data::tokenizer& tok) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw input_error(o.input + ":" + std::to_string(line_no) + ": malformed JSON (" + e.what() +
                      "); each line must be one JSON object");
  }
  encoded_doc d;
  for (const auto& key : o.json_keys) {
    if (!j.is_object() || !j.contains(key))
      throw input_error(o.input + ":" + std::to_string(line_no) + ": no key \"" + key +
                        "\"; pass the right --json-keys");
    const auto& v = j[key];
    std::vector<std::string> sentences;
    if (v.is_string()) {
      sentences.push_back(v.get<std::string>());
    } else if (v.is_array() && std::all_of(v.begin(), v.end(), [](auto& e) { return e.is_string(); })) {
      for (const auto& e : v) sentences.push_back(e.get<std::string>());
    } else {
      throw input_error(o.input + ":" + std::to_string(line_no) + ": key \"" + key +
                        "\" must hold a string or a list of strings");
    }
    std::vector<std::int64_t> ids;
    std::vector<std::int32_t> lens;
    for (const auto& s : sentences) {
      auto t = tok.tokenize(s);
      if (t.empty()) continue;
      ids.insert(ids.end(), t.begin(), t.end());
      lens.push_back(static_cast<std::int32_t>(t.size()));
    }
    if (!ids.empty() && o.append_eod) {
      ids.push_back(tok.eod());
      ++lens.back();
    }
    d.ids.push_back(std::move(ids));
    d.lens.push_back(std::move(lens));
  }
  return d;
}

}  // namespace

preprocess_result preprocess(const preprocess_options& o, const std::function<void(const std::string&)>& log) {
  const auto t0 = clock_type::now();
  const int workers = std::max(1, o.workers);
  std::vector<std::unique_ptr<data::tokenizer>> toks;
  for (int w = 0; w < workers; ++w) toks.push_back(data::make_library_tokenizer(o.tokenizer));
  std::ifstream in(o.input, std::ios::binary);
  if (!in) throw input_error("--input=" + o.input + ": cannot open the file; check the path");
  log("Opening " + o.input);
  const data::dtype dt = data::optimal_dtype(toks[0]->vocab_size());
  preprocess_result r;
  std::vector<std::unique_ptr<data::indexed_dataset_builder>> builders;
  for (const auto& key : o.json_keys) {
    const std::string p = o.output_prefix + "_" + key + "_document";
    r.output_prefixes.push_back(p);
    builders.push_back(std::make_unique<data::indexed_dataset_builder>(data::bin_path(p), dt));
  }
  const auto t1 = clock_type::now();
  r.startup_seconds = std::chrono::duration<double>(t1 - t0).count();
  log("Time to startup: " + std::to_string(r.startup_seconds));

  const std::size_t batch_size = 256 * static_cast<std::size_t>(workers);
  std::vector<std::string> lines;
  std::vector<std::int64_t> line_nos;
  std::vector<encoded_doc> docs;
  std::int64_t line_no = 0;
  std::size_t chars = 0;
  std::string line;
  bool eof = false;
  char buf[256];
  while (!eof) {
    lines.clear();
    line_nos.clear();
    while (lines.size() < batch_size) {
      if (!std::getline(in, line)) { eof = true; break; }
      ++line_no;
      chars += char_count(line) + (in.eof() ? 0 : 1);  // the newline Python keeps on each line
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
      lines.push_back(std::move(line));
      line_nos.push_back(line_no);
    }
    docs.assign(lines.size(), {});
    auto work = [&](int w) {
      for (std::size_t k = static_cast<std::size_t>(w); k < lines.size(); k += static_cast<std::size_t>(workers))
        docs[k] = encode_line(lines[k], line_nos[k], o, *toks[static_cast<std::size_t>(w)]);
    };
    if (workers == 1 || lines.size() < 2) {
      work(0);
    } else {
      std::vector<std::thread> pool;
      std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
      for (int w = 0; w < workers; ++w)
        pool.emplace_back([&, w] {
          try { work(w); } catch (...) { errors[static_cast<std::size_t>(w)] = std::current_exception(); }
        });
      for (auto& th : pool) th.join();
      // Report the earliest bad line, as a sequential run would.
      std::exception_ptr first;
      for (auto& e : errors) if (e && !first) first = e;
      if (first) {
        for (std::size_t k = 0; k < lines.size(); ++k) encode_line(lines[k], line_nos[k], o, *toks[0]);
        std::rethrow_exception(first);
      }
    }
    for (auto& d : docs) {
      for (std::size_t k = 0; k < builders.size(); ++k) {
        builders[k]->add_document(d.ids[k], d.lens[k]);
        r.tokens += static_cast<std::int64_t>(d.ids[k].size());
      }
      ++r.documents;
      if (o.log_interval > 0 && r.documents % o.log_interval == 0) {
        const double el = std::chrono::duration<double>(clock_type::now() - t1).count();
        std::snprintf(buf, sizeof buf, "Processed %lld documents (%.6f docs/s, %.6f MB/s).",
                      static_cast<long long>(r.documents), r.documents / el,
                      static_cast<double>(chars) / el / 1024 / 1024);
        log(buf);
      }
    }
  }
  for (std::size_t k = 0; k < builders.size(); ++k) builders[k]->finalize(data::idx_path(r.output_prefixes[k]));
  r.seconds = std::chrono::duration<double>(clock_type::now() - t1).count();
  r.input_mb = static_cast<double>(chars) / 1024 / 1024;
  return r;
}

}  // namespace mactor::tools
