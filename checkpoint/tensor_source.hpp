// Where a loader reads named global tensors from: a saved checkpoint (checkpoint_reader), or a
// view computed from one (training/moe_upcycling.hpp turns a dense model's tensors into a MoE
// model's).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/tensor_piece.hpp"

namespace mactor::checkpoint {

class tensor_source {
 public:
  virtual ~tensor_source() = default;
  virtual std::vector<std::string> names() const = 0;
  virtual bool has(const std::string& name) const = 0;
  /// checkpoint_error when the tensor is absent.
  virtual std::vector<std::int64_t> global_shape(const std::string& name) const = 0;
  /// Resizes req.data and fills it with req's slice (and flat range) of tensor req.name.
  virtual void read(tensor_piece& req) const = 0;
};

}  // namespace mactor::checkpoint
