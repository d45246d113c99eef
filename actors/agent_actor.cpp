// The agent: the part of a rank that is never blocked, so an abort or the coordinator's loss ends
// the process even while its stage waits inside a collective.
#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/spawn.hpp"

namespace mactor::actors {
namespace {

caf::behavior agent(caf::event_based_actor* self, std::shared_ptr<job_control> control, int rank, caf::actor coordinator) {
  if (coordinator) {
    self->monitor(coordinator);
    self->set_down_handler([=](caf::down_msg&) {
      control->fail(1, "rank " + std::to_string(rank) + ": communication with rank 0 failed: the coordinator is gone "
                        "(its process exited or the connection broke)", true);
      self->quit();
    });
  }
  return {
      [=](abort_job& a) {
        control->fail(a.exit_code, a.message, a.lost_peer);
        self->quit();
      },
      [=](stop_message&) {
        control->finish(job_outcome{});
        self->quit();
      },
  };
}

}  // namespace

caf::actor spawn_agent(caf::actor_system& sys, std::shared_ptr<job_control> control, int rank, const caf::actor& coordinator) {
  return sys.spawn(agent, std::move(control), rank, coordinator);
}

}  // namespace mactor::actors
