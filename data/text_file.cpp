// Reading a flag's text file whole, with an error that names the flag and the path.
#include "data/text_file.hpp"

#include <fstream>
#include <sstream>

#include "data/data_error.hpp"

namespace mactor::data {

std::string read_text_file(const std::string& path, std::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw data_error(std::string(flag) + " " + path + ": cannot open it; give the path of an existing, readable file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace mactor::data
