// Building the snapshot dict from the recorder's blocks and events.
#include "training/memory_snapshot.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "tensor/memory_history.hpp"
#include "training/pickle_writer.hpp"

namespace mactor::training {
namespace {

void frames(pickle_writer& w, tensor::memory_kind kind) {
  w.begin_list().begin_dict();
  w.key("filename").text("mactor").key("line").integer(0).key("name").text(tensor::name(kind));
  w.end_dict().end_list();
}

void segment(pickle_writer& w, const tensor::memory_block& b, bool active) {
  const std::int64_t used = active ? b.bytes : 0;
  w.begin_dict();
  w.key("device").integer(0).key("address").unsigned_integer(b.address);
  w.key("total_size").integer(b.bytes).key("allocated_size").integer(used);
  w.key("active_size").integer(used).key("requested_size").integer(used);
  w.key("stream").integer(0).key("segment_type").text(b.bytes > (1 << 20) ? "large" : "small");
  w.key("segment_pool_id").begin_tuple().integer(0).integer(0).end_tuple();
  w.key("is_expandable").boolean(false);
  w.key("frames").begin_list().end_list();
  w.key("blocks").begin_list().begin_dict();
  w.key("address").unsigned_integer(b.address).key("size").integer(b.bytes);
  w.key("requested_size").integer(b.bytes);
  w.key("state").text(active ? "active_allocated" : "inactive");
  w.key("frames");
  frames(w, b.kind);
  w.end_dict().end_list();
  w.end_dict();
}

void trace_entry(pickle_writer& w, const tensor::memory_event& e, const char* action) {
  w.begin_dict();
  w.key("action").text(action).key("addr").unsigned_integer(e.address).key("size").integer(e.bytes);
  w.key("stream").integer(0).key("time_us").integer(e.time_us).key("frames");
  frames(w, e.kind);
  w.end_dict();
}

}  // namespace

std::string memory_snapshot_pickle() {
  const auto s = tensor::take_memory_history_snapshot();
  std::vector<std::pair<tensor::memory_block, bool>> blocks;
  for (const auto& b : s.active) blocks.emplace_back(b, true);
  for (const auto& b : s.cached) blocks.emplace_back(b, false);
  std::sort(blocks.begin(), blocks.end(),
            [](const auto& a, const auto& b) { return a.first.address < b.first.address; });
  pickle_writer w;
  w.begin_dict();
  w.key("segments").begin_list();
  for (const auto& [block, active] : blocks) segment(w, block, active);
  w.end_list();
  // One device; a free is requested and completed at once on the host, as PyTorch records both.
  w.key("device_traces").begin_list().begin_list();
  for (const auto& e : s.trace) {
    if (e.alloc) {
      trace_entry(w, e, "alloc");
    } else {
      trace_entry(w, e, "free_requested");
      trace_entry(w, e, "free_completed");
    }
  }
  w.end_list().end_list();
  w.end_dict();
  return w.finish();
}

void write_memory_snapshot(const std::filesystem::path& path) {
  const std::string bytes = memory_snapshot_pickle();
  auto temporary = path;
  temporary += ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out.flush())
      throw std::runtime_error("cannot write the memory snapshot " + temporary.string() +
                               "; check --memory-snapshot-path and that its folder exists");
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error)
    throw std::runtime_error("cannot move the memory snapshot to " + path.string() + ": " +
                             error.message());
}

}  // namespace mactor::training
