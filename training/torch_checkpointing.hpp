// --ckpt-format torch: Megatron's per-rank files iter_N/mp_rank_TT[_PPP]/model_optim_rng.pt, the
// state dict Megatron's save_checkpoint builds (args, checkpoint_version, iteration, model or
// model0/model1/... per virtual stage, optimizer, opt_param_scheduler, rng_state,
// num_floating_point_operations_so_far), written and read by mactor's own zip and pickle code.
#pragma once

#include <cstdint>
#include <filesystem>

#include "checkpoint/pickle_value.hpp"
#include "checkpoint/tensor_piece.hpp"
#include "config/megatron_args.hpp"
#include "model/lr_scheduler.hpp"
#include "training/checkpointing.hpp"
#include "training/parallel_context.hpp"
#include "training/stage_engine.hpp"

namespace mactor::training {

/// This rank's state dict (built on data-parallel rank 0 only; other ranks write no file).
checkpoint::pickle_value torch_state_dict(const config::megatron_args& args, parallel_context& ctx,
                                          stage_engine& engine, const model::lr_scheduler& scheduler,
                                          const training_position& at, std::int64_t padded_vocab_size);

/// The rank's snapshot for checkpoint::save: rank_state::file holds its model_optim_rng.pt.
checkpoint::rank_state capture_torch_checkpoint(const config::megatron_args& args, parallel_context& ctx,
                                                stage_engine& engine, const model::lr_scheduler& scheduler,
                                                const training_position& at, std::int64_t padded_vocab_size);

/// Loads this rank's file of the iteration directory `dir` into the engine (the model, and unless
/// `finetune` or --no-load-optim the optimizer and scheduler). Throws checkpoint_error naming the
/// file, or both layouts when it was saved under another tensor/pipeline split.
loaded_checkpoint load_torch_checkpoint(const config::megatron_args& args, parallel_context& ctx,
                                        stage_engine& engine, model::lr_scheduler& scheduler,
                                        const std::filesystem::path& dir, bool finetune);

/// --use-checkpoint-args: the args of the iteration's first file (Megatron's
/// find_checkpoint_rank_0: mp_rank_00, else mp_rank_00_000) as the JSON object torch_dist keeps.
std::string torch_checkpoint_args(const std::filesystem::path& iteration_dir);

}  // namespace mactor::training
