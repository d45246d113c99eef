// File-based address exchange: write to a temporary name, then rename, so readers never see a
// half-written address.
#include "comm/file_address_exchange.hpp"

#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <unistd.h>

namespace mactor::comm {

file_address_exchange::file_address_exchange(std::filesystem::path directory)
    : directory_(std::move(directory)) {
  if (!std::filesystem::is_directory(directory_))
    throw comm_error(-1, "address exchange directory " + directory_.string() +
                             " does not exist; create it before starting the ranks");
}

std::filesystem::path file_address_exchange::file_of(int rank) const {
  return directory_ / ("rank_" + std::to_string(rank) + ".addr");
}

void file_address_exchange::publish(int rank, const std::vector<std::byte>& address) {
  const auto final_path = file_of(rank);
  auto temp = final_path;
  temp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(address.data()),
              static_cast<std::streamsize>(address.size()));
    if (!out) throw comm_error(rank, "cannot write the address file " + temp.string());
  }
  std::filesystem::rename(temp, final_path);
}

std::vector<std::byte> file_address_exchange::fetch(int rank, std::chrono::milliseconds timeout) {
  const auto path = file_of(rank);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline)
      throw comm_error(rank, "rank " + std::to_string(rank) + " did not publish its address in " +
                                 path.string() + " within " + std::to_string(timeout.count()) +
                                 " ms; is it running and using the same directory?");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace mactor::comm
