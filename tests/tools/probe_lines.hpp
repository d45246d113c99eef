// Test utility: parses rank_probe's "key=value ..." lines into one map per rank.
#pragma once

#include <map>
#include <sstream>
#include <string>

#include "run_command.hpp"

namespace mactor::test {

using probe_map = std::map<int, std::map<std::string, std::string>>;

inline probe_map parse_probe(const std::string& text) {
  probe_map by_rank;
  for (auto& line : lines_of(text)) {
    std::map<std::string, std::string> kv;
    std::stringstream in(line);
    for (std::string tok; in >> tok;) {
      auto eq = tok.find('=');
      if (eq != std::string::npos) kv[tok.substr(0, eq)] = tok.substr(eq + 1);
    }
    if (kv.count("rank")) by_rank[std::stoi(kv["rank"])] = kv;
  }
  return by_rank;
}

}  // namespace mactor::test
