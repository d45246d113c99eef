// A rank's training state as checkpoint pieces, and back: the model's parameters under their
// global (tp=1) names, the optimizer's state (whole, or the distributed optimizer's flat ranges),
// and on rank 0 the common document (iteration, consumed samples, LR scheduler, optimizer step,
// the args). Any layout reads any other's checkpoint: each rank asks for exactly its own slices.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/snapshot_buffers.hpp"
#include "checkpoint/tensor_piece.hpp"
#include "config/megatron_args.hpp"
#include "model/lr_scheduler.hpp"
#include "training/parallel_context.hpp"
#include "training/stage_engine.hpp"

namespace mactor::training {

/// Where training stands when a checkpoint is taken, and where a loaded one resumes.
struct training_position {
  std::int64_t iteration = 0;
  std::int64_t consumed_train_samples = 0;
  std::int64_t skipped_train_samples = 0;  ///< passed over by --iterations-to-skip
  std::int64_t consumed_valid_samples = 0;
  double floating_point_operations = 0;  ///< Megatron's num_floating_point_operations_so_far
};

/// This rank's snapshot for checkpoint::save: every tensor copied, so training may go on at once.
/// Model tensors are saved once per layout (data-parallel rank 0; replicated tensor-parallel
/// tensors from tensor-parallel rank 0; the tied embedding from the first stage); optimizer
/// state likewise, or per data-parallel rank with the distributed optimizer. --no-save-optim
/// leaves the optimizer out. `whole_rank` (a local non-persistent checkpoint): everything this rank
/// would load, the common document included, in the torch_dist pieces whatever --ckpt-format says.
/// `buffers`: where the parameters and optimizer state are copied (null: fresh memory).
checkpoint::rank_state capture_checkpoint(const config::megatron_args& args, parallel_context& ctx,
                                          stage_engine& engine, const model::lr_scheduler& scheduler,
                                          const training_position& at, std::int64_t padded_vocab_size,
                                          bool whole_rank = false, checkpoint::snapshot_buffers* buffers = nullptr);

/// Where a job loads from: --load, or (Megatron's finetuning fallback) --pretrained-checkpoint
/// when --load holds no checkpoint, which then loads as --finetune does.
struct load_source {
  std::string directory;
  bool finetune = false;         ///< --finetune, or loading --pretrained-checkpoint
  bool pretrained = false;       ///< the directory is --pretrained-checkpoint's
};
/// nullopt when neither flag is given. Throws checkpoint::checkpoint_error when
/// --pretrained-checkpoint is the fallback and holds no checkpoint either.
std::optional<load_source> load_source_of(const config::megatron_args& args);

/// What --load found.
struct loaded_checkpoint {
  std::string directory;            ///< the iteration's directory
  std::int64_t saved_iteration = 0; ///< the checkpoint's own iteration
  training_position position;       ///< where training resumes (zero with --finetune)
  bool optimizer_loaded = false;
};

/// --load: reads the tracker's iteration (or --ckpt-step) into the engine's model and, unless
/// --finetune or --no-load-optim, its optimizer and the scheduler. nullopt when the directory
/// has no tracker (Megatron then starts from random; --exit-on-missing-checkpoint makes that a
/// checkpoint_error). Throws checkpoint::checkpoint_error naming the file or tensor at fault.
std::optional<loaded_checkpoint> load_checkpoint(const config::megatron_args& args, parallel_context& ctx,
                                                 stage_engine& engine, model::lr_scheduler& scheduler);

}  // namespace mactor::training
