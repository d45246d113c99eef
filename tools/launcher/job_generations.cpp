// A job's generations under in-job restart: stores, identities and the ranks' variable files.
#include "tools/launcher/job_generations.hpp"

#include <unistd.h>

#include <filesystem>

#include "comm/rendezvous_wire.hpp"
#include "comm/restart_in_place.hpp"
#include "comm/store_address_exchange.hpp"
#include "tools/launcher/in_job_restart.hpp"
#include "tools/launcher/rank_env.hpp"

namespace mactor::tools {

job_generations::job_generations(const job_plan& plan, comm::rendezvous_server& first_store)
    : plan_(plan), identity_(plan.identity), first_store_(first_store), store_(&first_store) {}

job_generations::~job_generations() {
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

void job_generations::enable() {
  if (dir_.empty()) dir_ = make_restart_dir();
}

void job_generations::next(const std::vector<int>& slot_of) {
  ++number_;
  later_stores_.push_back(std::make_unique<comm::rendezvous_server>(0));
  store_ = later_stores_.back().get();
  const auto colon = identity_.rdzv_addr.rfind(':');
  identity_.rdzv_addr = identity_.rdzv_addr.substr(0, colon) + ":" + std::to_string(store_->port());
  identity_.job_id = plan_.identity.job_id + "-r" + std::to_string(number_);
  identity_.restart_count = plan_.identity.restart_count + number_;
  int port = 0;
  ::close(comm::listen_tcp(port));
  identity_.master_port = port;
  for (int r = 0; r < plan_.layout.world_size(); ++r)
    write_env_file(dir_ + "/rank_" + std::to_string(r) + ".env", env_lines(r, slot_of));
}

std::vector<std::string> job_generations::env_lines(int rank, const std::vector<int>& slot_of) const {
  std::vector<std::string> lines;
  for (const auto& [k, v] : rank_env(plan_.layout, plan_.opts, identity_, rank, slot_of)) lines.push_back(k + "=" + v);
  lines.push_back(std::string(comm::spare_variable) + "=0");  // a spare taking the rank over is one no more
  return lines;
}

bool job_generations::joined(int rank) const {
  return number_ == 0 || store_->try_get(comm::transport_address_prefix + std::to_string(rank)).has_value();
}

}  // namespace mactor::tools
