// Reading the data-argument files of --data-args-path and --per-split-data-args-path.
#include "data/data_args_file.hpp"

#include <sstream>

#include <nlohmann/json.hpp>

#include "data/data_error.hpp"
#include "data/text_file.hpp"

namespace mactor::data {
namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Python's str() of a JSON number in a weight list: 30 -> "30", 0.5 -> "0.5".
std::string number_text(const nlohmann::json& v) {
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  std::ostringstream s;
  s.precision(17);
  s << v.get<double>();
  return s.str();
}

std::optional<std::vector<std::string>> split_words(const nlohmann::json& v, const std::string& where) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return words_of(v.get<std::string>());
  if (!v.is_array())
    throw data_error(where + " must be a string of words, a list of words or null, not " + std::string(v.type_name()));
  std::vector<std::string> words;
  for (const auto& w : v) {
    if (w.is_string()) words.push_back(w.get<std::string>());
    else if (w.is_number()) words.push_back(number_text(w));
    else throw data_error(where + " lists a " + std::string(w.type_name()) + "; give dataset prefixes and numeric weights only");
  }
  return words;
}

}  // namespace

std::vector<std::string> data_args_file_words(const std::string& path) {
  auto words = words_of(read_text_file(path, "--data-args-path"));
  if (words.empty())
    throw data_error("--data-args-path " + path + ": the file is empty; list the --data-path words in it (prefixes, or weight prefix pairs)");
  return words;
}

std::array<std::optional<std::vector<std::string>>, 3> per_split_data_args_file(const std::string& path) {
  const char* flag = "--per-split-data-args-path";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(path, flag));
  } catch (const nlohmann::json::parse_error& e) {
    throw data_error(std::string(flag) + " " + path + ": not valid JSON (" + e.what() + "); give an object with train, valid and test");
  }
  if (!j.is_object()) throw data_error(std::string(flag) + " " + path + ": give a JSON object with train, valid and test keys");
  std::array<std::optional<std::vector<std::string>>, 3> out;
  const char* keys[3] = {"train", "valid", "test"};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string where = std::string(flag) + " " + path + ": \"" + keys[i] + "\"";
    if (!j.contains(keys[i])) throw data_error(where + " is missing; give all of train, valid and test (null for none)");
    out[i] = split_words(j[keys[i]], where);
  }
  return out;
}

}  // namespace mactor::data
