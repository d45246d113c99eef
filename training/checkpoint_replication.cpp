// The checkpointer's half of --replication: one exchange of committed local checkpoints with the
// clique's peers per non-persistent save.
#include "training/checkpoint_replication.hpp"

#include <future>
#include <memory>

#include "checkpoint/layout.hpp"
#include "checkpoint/local_checkpoint.hpp"
#include "checkpoint/non_persistent.hpp"
#include "checkpoint/replication.hpp"
#include "comm/pipeline_tags.hpp"

namespace mactor::training {

checkpoint_replicator::checkpoint_replicator(comm::transport& transport, std::string local_dir, int rank,
                                             std::vector<int> clique, std::chrono::milliseconds timeout)
    : transport_(transport), local_dir_(std::move(local_dir)), rank_(rank), clique_(std::move(clique)), timeout_(timeout) {}

replication_report checkpoint_replicator::replicate(std::int64_t iteration, bool committed) {
  const auto start = std::chrono::steady_clock::now();
  replication_report report;
  std::vector<int> peers;
  for (int r : clique_)
    if (r != rank_) peers.push_back(r);
  if (peers.empty()) return report;
  std::string& packed = packed_;
  if (committed)
    checkpoint::pack_iteration(checkpoint::iteration_dir(checkpoint::local_rank_dir(local_dir_, rank_), iteration), packed);
  else
    packed.clear();
  const std::uint64_t size = packed.size();  // 0: no copy this time
  const auto size_tag = comm::checkpoint_replica_tag(iteration, 0), bytes_tag = comm::checkpoint_replica_tag(iteration, 1);
  const auto wait = [&](std::future<comm::status>& f, int peer, const char* what) {
    if (!transport_.wait_for(f, timeout_))
      throw comm::comm_error(peer, "rank " + std::to_string(rank_) + ": rank " + std::to_string(peer) + " did not " + what +
                                       " the checkpoint replica of iteration " + std::to_string(iteration) + " within " +
                                       std::to_string(timeout_.count() / 1000) + " s");
    const auto s = f.get();
    if (!s.ok) throw comm::comm_error(peer, s.message);
  };
  // Every size and copy goes out at once; the peers' sizes come back before their copies' buffers exist.
  std::vector<std::future<comm::status>> sends;
  std::vector<std::uint64_t> sizes(peers.size(), 0);
  std::vector<std::future<comm::status>> size_recvs;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    sends.push_back(transport_.send_future(peers[i], size_tag, &size, sizeof size));
    if (size > 0) sends.push_back(transport_.send_future(peers[i], bytes_tag, packed.data(), packed.size()));
    size_recvs.push_back(transport_.recv_future(peers[i], size_tag, &sizes[i], sizeof sizes[i]));
  }
  std::vector<std::string>& copies = copies_;
  copies.resize(peers.size());
  std::vector<std::future<comm::status>> copy_recvs(peers.size());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    wait(size_recvs[i], peers[i], "send the size of");
    if (sizes[i] == 0) continue;
    copies[i].resize(sizes[i]);
    copy_recvs[i] = transport_.recv_future(peers[i], bytes_tag, copies[i].data(), copies[i].size());
  }
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (sizes[i] == 0) {
      report.peers_without_copy.push_back(peers[i]);
      continue;
    }
    wait(copy_recvs[i], peers[i], "send");
    const auto root = checkpoint::replica_dir(local_dir_, rank_, peers[i]);
    checkpoint::unpack_iteration(copies[i], root, iteration);
    checkpoint::remove_old_iterations(root, checkpoint::local_checkpoints_kept);
    report.bytes_received += static_cast<std::int64_t>(sizes[i]);
  }
  std::size_t k = 0;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    wait(sends[k++], peers[i], "receive");
    if (size > 0) wait(sends[k++], peers[i], "receive");
  }
  report.bytes_sent = static_cast<std::int64_t>(size * peers.size());
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace mactor::training
