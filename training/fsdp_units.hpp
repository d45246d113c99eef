// ZeRO-3 unit by unit (Megatron FSDP's per-module all-gathers): one chunk's FSDP units
// (model/parameter_units.hpp) are gathered just before the chunk uses them, bound, and freed when
// it is done with them, while the next unit in the compute's direction is gathered on the
// collective thread during this one's compute (prefetch). At most the unit in use, the one
// prefetched and the word table the output layer shares are whole at a time, not the chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <vector>

#include "model/gpt_chunk.hpp"
#include "model/parameter_units.hpp"
#include "tensor/tensor.hpp"
#include "training/comm_worker.hpp"
#include "training/grad_sync.hpp"

namespace mactor::training {

/// One FSDP unit's parameters in its buffer (of gathered values or of gradients, laid out alike:
/// grad_sync::unit_place): their ids, each one's place, and the buffer's elements (0: a unit with
/// no parameters here).
struct unit_layout {
  std::vector<int> params;
  std::vector<std::size_t> places;
  std::int64_t length = 0;
};
/// Every unit's layout of chunk `index` of grad sync.
std::vector<unit_layout> unit_layouts(model::gpt_chunk& chunk, std::size_t index, const grad_sync& sync);

/// The gather buffers: freed ones dropped, or with --fsdp-double-buffer up to two kept for reuse.
class fsdp_buffers {
 public:
  explicit fsdp_buffers(bool keep) : keep_(keep) {}
  /// One of the kept buffers when one fits, else a new one (communication memory: the
  /// parameters a rank owns are its shard).
  tensor::tensor take(std::int64_t numel, tensor::dtype type, tensor::device where);
  void give_back(tensor::tensor buffer);

 private:
  bool keep_;
  std::vector<tensor::tensor> spare_;
};

class fsdp_units final : public model::parameter_units {
 public:
  /// Chunk `index` of grad sync; `worker` runs the gathers in posting order. The chunk, sync,
  /// worker and buffers must outlive this, and the worker must be drained (end_pass) before
  /// this goes.
  fsdp_units(model::gpt_chunk& chunk, std::size_t index, grad_sync& sync, comm_worker& worker, fsdp_buffers& buffers,
             bool reshard_after_forward);

  /// Before a forward (or a backward) of the chunk.
  void begin_pass(bool forward);
  void use(int unit, bool forward) override;
  void done(int unit, bool forward) override;
  /// After the pass: every gather finished; each unit freed, except after a forward without
  /// resharding (FSDP2's --torch-fsdp2-no-reshard-after-forward keeps them for the backward).
  void end_pass(bool keep_gathered);

 private:
  struct unit_state : unit_layout {
    tensor::tensor values;  // while gathered or being gathered
    std::shared_future<void> gathered;
    bool posted = false, bound = false, visited = false;
  };
  void post_gather(int unit, bool prefetch);
  void release(int unit);
  int num_units() const { return static_cast<int>(units_.size()); }

  model::gpt_chunk& chunk_;
  std::size_t index_;
  grad_sync& sync_;
  comm_worker& worker_;
  fsdp_buffers& buffers_;
  bool reshard_after_forward_, forward_pass_ = true;
  std::vector<unit_state> units_;
};

}  // namespace mactor::training
