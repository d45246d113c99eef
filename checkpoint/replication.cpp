// Replication cliques, replica directories, packed iterations and the resume plan.
#include "checkpoint/replication.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/durable_file.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/local_checkpoint.hpp"

namespace mactor::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view packed_magic = "mactor replica 1\n";

void put_u64(std::string& out, std::uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

// Appends the file's bytes straight into `out`'s tail (one read per chunk, no stream buffers: a
// replica is the rank's whole state, and the checkpointer shares its cores with training).
void append_file(std::string& out, const fs::path& path, std::uintmax_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw checkpoint_error("cannot open " + path.string() + " to replicate it: " + std::strerror(errno));
  const std::size_t at = out.size();
  out.resize(at + size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out.data() + at + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw checkpoint_error("cannot read " + path.string() + " to replicate it (it changed while it was read)");
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

// Reads packed bytes front to back; every short read is the same error.
struct packed_reader {
  std::string_view rest;
  const fs::path& root;

  std::string_view take(std::size_t n) {
    if (n > rest.size())
      throw checkpoint_error("the replica received for " + root.string() + " is cut short; the peer's copy is damaged");
    const auto part = rest.substr(0, n);
    rest.remove_prefix(n);
    return part;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    std::memcpy(&v, take(sizeof v).data(), sizeof v);
    return v;
  }
};

// A relative path inside the iteration: no absolute paths, no "..", so a damaged replica cannot
// write outside its directory.
bool safe_relative(const fs::path& p) {
  if (p.empty() || p.is_absolute()) return false;
  return std::none_of(p.begin(), p.end(), [](const fs::path& part) { return part == ".."; });
}

}  // namespace

std::vector<int> replication_clique(int rank, int jump, int factor, int world_size) {
  if (jump <= 0 || factor <= 0 || world_size % (jump * factor) != 0 || rank < 0 || rank >= world_size)
    throw checkpoint_error("replication cliques need a world size (" + std::to_string(world_size) +
                           ") divisible by --replication-jump (" + std::to_string(jump) + ") times --replication-factor (" +
                           std::to_string(factor) + ")");
  const int block = jump * factor;
  const int first = rank / block * block + rank % jump;
  std::vector<int> clique;
  for (int k = 0; k < factor; ++k) clique.push_back(first + k * jump);
  return clique;
}

std::string replica_dir(const std::string& local_dir, int holder, int owner) {
  return (fs::path(local_rank_dir(local_dir, holder)) / "replicas" / ("rank_" + std::to_string(owner))).string();
}

void pack_iteration(const fs::path& iteration_dir, std::string& out) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(iteration_dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec)) files.push_back(it->path());
  if (ec) throw checkpoint_error("cannot list " + iteration_dir.string() + " to replicate it: " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<std::uintmax_t> sizes;
  std::size_t total = packed_magic.size() + sizeof(std::uint64_t);
  for (const auto& f : files) {
    sizes.push_back(fs::file_size(f));
    total += 2 * sizeof(std::uint64_t) + f.native().size() + sizes.back();
  }
  out.clear();  // its capacity stays: a replicator packs into the same memory every save
  out.reserve(total);
  out += packed_magic;
  put_u64(out, files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string name = fs::relative(files[i], iteration_dir).generic_string();
    put_u64(out, name.size());
    out += name;
    put_u64(out, sizes[i]);
    append_file(out, files[i], sizes[i]);
  }
}

std::string pack_iteration(const fs::path& iteration_dir) {
  std::string out;
  pack_iteration(iteration_dir, out);
  return out;
}

void unpack_iteration(std::string_view packed, const fs::path& root, std::int64_t iteration) {
  if (packed.substr(0, packed_magic.size()) != packed_magic)
    throw checkpoint_error("the replica received for " + root.string() + " is not a packed checkpoint iteration");
  packed_reader in{packed.substr(packed_magic.size()), root};
  const fs::path tmp = temporary_iteration_dir(root, iteration, "replica");
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw checkpoint_error("cannot create " + tmp.string() + " for a checkpoint replica: " + ec.message());
  const std::uint64_t count = in.u64();
  for (std::uint64_t i = 0; i < count; ++i) {
    const fs::path name(std::string(in.take(in.u64())));
    if (!safe_relative(name))
      throw checkpoint_error("the replica received for " + root.string() + " names a file outside its directory: " +
                             name.string());
    const auto bytes = in.take(in.u64());
    fs::create_directories((tmp / name).parent_path(), ec);
    durable_file f(tmp / name);
    f.write(bytes.data(), bytes.size());
    f.close();
  }
  fsync_directory(tmp);
  const fs::path final_dir = iteration_dir(root, iteration);
  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  if (ec) throw checkpoint_error("cannot rename " + tmp.string() + " to " + final_dir.string() + ": " + ec.message());
  fsync_directory(root);
  write_tracker(root.string(), iteration);
}

replica_resume_plan plan_replica_resume(const replica_holdings& held, int jump, int factor) {
  const int world = static_cast<int>(held.size());
  replica_resume_plan plan;
  if (world == 0) return plan;
  // Each owner's clique and its place in it, and what each rank can have: its own iterations and
  // every clique peer's copies of them.
  std::vector<std::vector<int>> cliques(static_cast<std::size_t>(world));
  std::vector<std::size_t> slots(static_cast<std::size_t>(world));
  std::vector<std::vector<std::int64_t>> available(static_cast<std::size_t>(world));
  for (int owner = 0; owner < world; ++owner) {
    const auto o = static_cast<std::size_t>(owner);
    cliques[o] = replication_clique(owner, jump, factor, world);
    slots[o] = static_cast<std::size_t>(std::find(cliques[o].begin(), cliques[o].end(), owner) - cliques[o].begin());
    for (int holder : cliques[o]) {
      const auto& h = held.at(static_cast<std::size_t>(holder));
      if (slots[o] < h.size()) available[o].insert(available[o].end(), h[slots[o]].begin(), h[slots[o]].end());
    }
  }
  plan.iteration = newest_common_iteration(available);
  if (!plan.iteration) return plan;
  for (int owner = 0; owner < world; ++owner) {
    const auto o = static_cast<std::size_t>(owner);
    const auto has = [&](int holder) {
      const auto& h = held.at(static_cast<std::size_t>(holder));
      return slots[o] < h.size() && std::count(h[slots[o]].begin(), h[slots[o]].end(), *plan.iteration) > 0;
    };
    if (has(owner)) continue;
    for (int holder : cliques[o])
      if (holder != owner && has(holder)) {
        plan.transfers.push_back({holder, owner});
        break;
      }
  }
  return plan;
}

}  // namespace mactor::checkpoint
