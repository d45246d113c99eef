// One training step of a GPT chunk on a given device, its results brought to the host: shared by
// the pseudo-device tests (bit for bit against the host) and the CUDA ones (within tolerances).
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <vector>

#include "model/gpt_chunk.hpp"
#include "model/grad_clip.hpp"
#include "model/optimizer.hpp"
#include "tensor/default_device.hpp"
#include "tensor/transfer.hpp"
#include "tests/model/model_fixtures.hpp"

namespace mactor::test {

// One training step's loss, its optimizer statistics and the parameters' values and gradients
// after it, as host bytes.
struct step_result {
  double loss_sum = 0, num_tokens = 0;
  double grad_norm = 0, zeros = 0, params_norm = 0;
  std::vector<std::vector<std::byte>> values, grads;
};

// The chunk's fp32 parameters as the optimizer sees them (where they are).
inline std::vector<model::optim_param> optimizer_view(model::gpt_chunk& chunk) {
  std::vector<model::optim_param> out;
  for (auto& p : chunk.parameters()) {
    model::optim_param o;
    o.name = p.name;
    o.value = static_cast<float*>(p.value.data), o.grad = static_cast<float*>(p.grad.data);
    o.numel = p.numel, o.no_weight_decay = p.no_weight_decay, o.where = p.value.where;
    out.push_back(o);
  }
  return out;
}

inline std::vector<std::byte> bytes_of(tensor::const_tensor_view v) {
  std::vector<std::byte> out(v.nbytes());
  tensor::copy_between(tensor::tensor_view{out.data(), {v.numel()}, v.type, tensor::cpu}, v);
  return out;
}

// Two micro-batches through one chunk holding the whole model (both in flight, so the second
// forward stashes the first's activations), with dropout on; with `optimizer`, two steps of
// `kind` (clipped, zeros counted) on those gradients, Adam's moments stored as `moments`.
inline step_result train_step(const model::gpt_model_config& c, tensor::device where, bool optimizer = false,
                              model::state_dtype moments = model::state_dtype::fp32,
                              model::optimizer_kind kind = model::optimizer_kind::adam) {
  tensor::default_device_scope scope(where);
  model::single_group tp;
  model::gpt_chunk chunk(c, tp, {0, c.num_layers, true, true});
  step_result r;
  std::vector<test::batch_data> batches{test::make_batch(2, c.seq_length, c.padded_vocab_size, 5),
                                        test::make_batch(2, c.seq_length, c.padded_vocab_size, 6)};
  for (int i = 0; i < 2; ++i) {
    const auto l = chunk.forward(i, batches[std::size_t(i)].view(), {}, {}, true, true, 0.5, 40 + i);
    r.loss_sum += l.loss_sum, r.num_tokens += l.num_tokens;
  }
  for (int i = 1; i >= 0; --i) chunk.backward(i, {}, {});
  if (optimizer) {
    model::optimizer_options options;
    options.lr = 0.05, options.weight_decay = 0.1, options.adam_beta2 = 0.95;
    options.exp_avg_dtype = options.exp_avg_sq_dtype = moments;
    options.optimizer = kind;
    auto adam = model::make_optimizer(optimizer_view(chunk), options);
    for (int step = 0; step < 2; ++step) {
      const auto result = model::clip_and_step(*adam, 0.5, true);
      r.grad_norm += *result.grad_norm, r.zeros += *result.num_zeros_in_grad;
    }
    r.params_norm = model::params_norm(adam->params());
  }
  for (auto& p : chunk.parameters()) {
    INFO(p.name);
    CHECK(p.value.where == where);
    CHECK(p.grad.where == where);
    r.values.push_back(bytes_of(p.value));
    r.grads.push_back(bytes_of(p.grad));
  }
  return r;
}

/// A byte copy of an fp32 tensor as floats.
inline std::vector<float> floats_of_bytes(const std::vector<std::byte>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

}  // namespace mactor::test
