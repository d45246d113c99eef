// Registration of mactor's message types with CAF.
#include "actors/type_ids.hpp"

#include <caf/all.hpp>

#include "actors/inspect.hpp"
#include "actors/inspection_messages.hpp"
#include "actors/messages.hpp"

namespace mactor::actors {

void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<config_message>("mactor::config_message");
  cfg.add_message_type<hello_message>("mactor::hello");
  cfg.add_message_type<stage_ready>("mactor::stage_ready");
  cfg.add_message_type<replica_setup>("mactor::replica_setup");
  cfg.add_message_type<run_iteration>("mactor::run_iteration");
  cfg.add_message_type<run_evaluation>("mactor::run_evaluation");
  cfg.add_message_type<save_checkpoint>("mactor::save_checkpoint");
  cfg.add_message_type<checkpoint_captured>("mactor::checkpoint_captured");
  cfg.add_message_type<checkpoint_saved>("mactor::checkpoint_saved");
  cfg.add_message_type<resume_message>("mactor::resume");
  cfg.add_message_type<stop_message>("mactor::stop");
  cfg.add_message_type<abort_job>("mactor::abort_job");
  cfg.add_message_type<log_line>("mactor::log_line");
  cfg.add_message_type<log_iteration>("mactor::log_iteration");
  cfg.add_message_type<log_validation>("mactor::log_validation");
  cfg.add_message_type<log_timers>("mactor::log_timers");
  cfg.add_message_type<log_drop_tensorboard>("mactor::log_drop_tb");
  cfg.add_message_type<iteration_done>("mactor::iteration_done");
  cfg.add_message_type<evaluation_plan>("mactor::evaluation_plan");
  cfg.add_message_type<evaluation_result>("mactor::evaluation_result");
  cfg.add_message_type<training::iteration_report>("mactor::iteration_report");
  cfg.add_message_type<training::evaluation_report>("mactor::evaluation_report");
  // The inspector's (inspection.hpp).
  cfg.add_message_type<stage_status>("mactor::stage_status");
  cfg.add_message_type<swap_request>("mactor::swap_request");
  cfg.add_message_type<swap_answer>("mactor::swap_answer");
  cfg.add_message_type<logger_successor_request>("mactor::logger_successor_request");
  cfg.add_message_type<logger_handover>("mactor::logger_handover");
}

}  // namespace mactor::actors
