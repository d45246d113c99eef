// Expert MLPs over contiguous row blocks: one GEMM per expert and linear, one expert after the other
// (SequentialMLP), or every expert at once over the threads under a grouped GEMM.
#include "model/moe_experts.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>

#include "kernels/convert.hpp"
#include "kernels/gemm.hpp"
#include "kernels/moe_permute.hpp"
#include "kernels/squared_relu.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"
#include "model/host_exchange.hpp"
#include "model/linear_gemms.hpp"

namespace mactor::model {
namespace {

std::string weight_name(const std::string& name, bool grouped, int expert, int linear) {
  const std::string fc = "linear_fc" + std::to_string(linear);
  return grouped ? name + "." + fc + ".weight" + std::to_string(expert)
                 : name + ".local_experts." + std::to_string(expert) + "." + fc + ".weight";
}

// Megatron's legacy GroupedMLP gates with glu(x) = activation(gate) * up: --activation-func-clamp-value
// and --glu-linear-offset (read only by the other experts' and the MLP's glu) leave it alone.
gpt_model_config expert_activation_config(gpt_model_config c) {
  if (c.moe.legacy_grouped_gemm) c.activation_func_clamp_value.reset(), c.glu_linear_offset = 0.0f;
  return c;
}

tensor::const_tensor_view block(tensor::const_tensor_view v, std::int64_t row, std::int64_t rows, std::int64_t w) {
  return elements(v, row * w, rows * w);
}
tensor::tensor_view block(tensor::tensor_view v, std::int64_t row, std::int64_t rows, std::int64_t w) {
  return elements(v, row * w, rows * w);
}

// Runs work(e, first_row) for every expert that has rows: one after the other (SequentialMLP's
// loop), or, under a grouped GEMM, all at once over the OpenMP team, each expert's GEMMs whole on
// one thread, as one grouped GEMM launch computes every expert's tiles together. An expert with
// more than a thread's share of the rows would hold one thread while the others idle: it runs
// first, alone, its GEMMs split over the team as in the loop. Then the rest, the largest first,
// so the threads finish close together.
template <class Work>
void for_each_expert(const std::vector<std::int64_t>& counts, bool together, Work&& work) {
  std::vector<std::pair<int, std::int64_t>> busy;  // (expert, its first row)
  std::int64_t row = 0;
  for (int e = 0; e < int(counts.size()); ++e) {
    if (counts[std::size_t(e)] > 0) busy.emplace_back(e, row);
    row += counts[std::size_t(e)];
  }
  const int threads = omp_get_max_threads();
  if (!together || busy.size() < 2 || threads < 2 || omp_in_parallel()) {
    for (auto [e, first] : busy) work(e, first);
    return;
  }
  std::vector<std::pair<int, std::int64_t>> shared;
  for (auto [e, first] : busy)
    if (counts[std::size_t(e)] * threads > row)
      work(e, first);
    else
      shared.emplace_back(e, first);
  busy = std::move(shared);
  std::stable_sort(busy.begin(), busy.end(),
                   [&](auto a, auto b) { return counts[std::size_t(a.first)] > counts[std::size_t(b.first)]; });
  std::exception_ptr failed;
  std::mutex failed_mutex;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::size_t i = 0; i < busy.size(); ++i) {
    try {
      work(busy[i].first, busy[i].second);
    } catch (...) {  // an exception must not leave the parallel region
      std::lock_guard lock(failed_mutex);
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
}

}  // namespace

moe_experts::moe_experts(parameter_store& store, const std::string& name, const gpt_model_config& c)
    : experts_(c.moe.local_experts()), hidden_(c.hidden_size),
      ffn_((c.moe.ffn_hidden_size > 0 ? c.moe.ffn_hidden_size : c.ffn_hidden_size) / c.moe.expert_tensor_parallel_size),
      fc1_width_(c.gated_linear_unit() ? 2 * ffn_ : ffn_), on_input_(c.moe.apply_probs_on_input),
      weighted_squared_relu_(c.fused_weighted_squared_relu && c.squared_relu && c.moe.grouped_gemm),
      grouped_(c.moe.grouped_gemm || c.moe.legacy_grouped_gemm),
      activation_(expert_activation_config(c)) {
  // Megatron registers each expert's fc1 and fc2 together, expert by expert (SequentialMLP) or
  // all fc1 then all fc2 (TEGroupedMLP, and the legacy GroupedMLP's weight1 then weight2); the
  // store's order only matters for the flat layout.
  // An expert-parallel rank holds its block of the experts under their global numbers (the
  // names Megatron's sharded state dict gives them), so any expert-parallel size starts from
  // the same experts and saves the same checkpoint.
  // With --expert-tensor-parallel-size (the tensor-parallel size, on the same ranks) each expert
  // is split as Megatron's expert MLP is: fc1 by rows ([gate; up] halves each split when gated),
  // fc2 by columns.
  const double fc2_std = c.output_layer_init_std();
  const int first = c.moe.first_local_expert();
  const int etp = c.moe.expert_tensor_parallel_size;
  const std::int64_t ffn = std::int64_t(ffn_) * etp;
  const tp_split fc1_split = etp == 1 ? tp_split::replicated : c.gated_linear_unit() ? tp_split::row_halves : tp_split::rows;
  const tp_split fc2_split = etp == 1 ? tp_split::replicated : tp_split::columns;
  auto add = [&](int e, int linear, std::vector<std::int64_t> shape, tp_split split, double std) {
    const int id = store.add(weight_name(name, c.moe.grouped_gemm, first + e, linear), std::move(shape), split,
                             init_kind::normal, std);
    store[id].expert = true;
    return id;
  };
  const std::int64_t fc1_rows = c.gated_linear_unit() ? 2 * ffn : ffn;
  for (int e = 0; e < experts_; ++e) {
    fc1_.push_back(add(e, 1, {fc1_rows, hidden_}, fc1_split, c.init_method_std));
    if (!grouped_) fc2_.push_back(add(e, 2, {hidden_, ffn}, fc2_split, fc2_std));
  }
  if (grouped_)
    for (int e = 0; e < experts_; ++e) fc2_.push_back(add(e, 2, {hidden_, ffn}, fc2_split, fc2_std));
  // The legacy GroupedMLP's gmm is not a Transformer Engine module: its GEMMs stay in 16 bits
  // inside the fp8 autocast.
  if (!c.fp8.enabled || c.moe.legacy_grouped_gemm) return;
  for (int e = 0; e < experts_; ++e) {
    fc1_fp8_.push_back(std::make_unique<fp8_linear>(c.fp8));
    fc2_fp8_.push_back(std::make_unique<fp8_linear>(c.fp8));
    store.add_fp8_linear(fc1_fp8_.back().get(), fc1_[std::size_t(e)]);
    store.add_fp8_linear(fc2_fp8_.back().get(), fc2_[std::size_t(e)]);
  }
}


void moe_experts::forward(const parameter_store& store, tensor::const_tensor_view x,
                          tensor::const_tensor_view probs,
                          const std::vector<std::int64_t>& tokens_per_expert, tensor::tensor_view out) {
  counts_ = tokens_per_expert;
  std::int64_t n = 0;
  for (auto c : counts_) n += c;
  auto p = ensure_activation(probs_, n, 1, probs.type);  // the logits' dtype, maybe wider than x
  kernels::copy(p, elements(probs, 0, n));
  if (on_input_) {
    // --moe-apply-probs-on-input: the experts see probs * x, and the activation's output is
    // then multiplied by ones (Megatron resets the probabilities after applying them).
    auto in = ensure_activation(scaled_input_, n, hidden_, x.type);
    kernels::scale_rows(in, elements(x, 0, n * hidden_), p, n, hidden_);
    x = in;
    auto saved = ensure_activation(input_probs_, n, 1, p.type);
    kernels::copy(saved, p);
    const std::vector<double> ones(std::size_t(n), 1.0);
    convert_across(p, tensor::view_of(std::span<const double>(ones)));
  }
  auto fc1 = ensure_activation(fc1_out_, n, fc1_width_, x.type);
  auto act = weighted_squared_relu_ ? tensor::tensor_view() : ensure_activation(act_, n, ffn_, x.type);
  auto scaled = ensure_activation(scaled_, n, ffn_, x.type);
  for_each_expert(counts_, grouped_, [&](int e, std::int64_t row) {
    const std::int64_t r = counts_[std::size_t(e)];
    auto f = block(fc1, row, r, fc1_width_);
    auto s = block(scaled, row, r, ffn_);
    linear_gemm_forward(fp8_of(fc1_fp8_, e), block(x, row, r, hidden_), store.value(fc1_[e]), f, int(r), hidden_, fc1_width_);
    if (weighted_squared_relu_) {
      kernels::weighted_squared_relu_forward(s, f, elements(p, row, r), r, ffn_);
    } else {
      auto a = block(act, row, r, ffn_);
      activation_.forward(a, f, int(r), ffn_);
      kernels::scale_rows(s, a, elements(p, row, r), r, ffn_);
    }
    linear_gemm_forward(fp8_of(fc2_fp8_, e), s, store.value(fc2_[e]), block(out, row, r, hidden_), int(r), ffn_, hidden_);
  });
}

void moe_experts::backward(parameter_store& store, tensor::const_tensor_view dout,
                           tensor::const_tensor_view x, tensor::tensor_view dx,
                           tensor::tensor_view dprobs) {
  std::int64_t n = 0;
  for (auto c : counts_) n += c;
  // With the probabilities on the input, the GEMMs saw probs * x and its gradient lands in
  // dscaled_input_ first; dx and dprobs follow from it below.
  const tensor::const_tensor_view x_in = on_input_ ? tensor::const_tensor_view(scaled_input_) : x;
  const tensor::tensor_view dx_in = on_input_ ? ensure_activation(dscaled_input_, n, hidden_, dout.type) : dx;
  auto dscaled = ensure_activation(dscaled_, n, ffn_, dout.type);
  auto dact = weighted_squared_relu_ ? tensor::tensor_view() : ensure_activation(dact_, n, ffn_, dout.type);
  auto dfc1 = ensure_activation(dfc1_, n, fc1_width_, dout.type);
  // A zero-bubble schedule's deferred weight pass collects the weight GEMMs in order: one by one then.
  const bool together = grouped_ && !store.weight_grads().collecting();
  for_each_expert(counts_, together, [&](int e, std::int64_t row) {
    const std::int64_t r = counts_[std::size_t(e)];
    auto dy = block(dout, row, r, hidden_);
    auto ds = block(dscaled, row, r, ffn_);
    auto df = block(dfc1, row, r, fc1_width_);
    auto xe = block(x_in, row, r, hidden_);
    linear_gemm_backward(store, fp8_of(fc2_fp8_, e), fc2_[e], dy, block(tensor::const_tensor_view(scaled_), row, r, ffn_),
                         ds, int(r), ffn_, hidden_);
    const auto f = block(tensor::const_tensor_view(fc1_out_), row, r, fc1_width_);
    const auto pe = elements(tensor::const_tensor_view(probs_), row, r);
    if (weighted_squared_relu_) {
      kernels::weighted_squared_relu_backward(df, elements(dprobs, row, r), ds, f, pe, r, ffn_);
    } else {
      // scaled = act * p: dp = rowdot(dscaled, act), dact = dscaled * p.
      kernels::row_dots(elements(dprobs, row, r), ds, block(tensor::const_tensor_view(act_), row, r, ffn_), r, ffn_);
      auto da = block(dact, row, r, ffn_);
      kernels::scale_rows(da, ds, pe, r, ffn_);
      activation_.backward(df, da, f, int(r), ffn_);
    }
    linear_gemm_backward(store, fp8_of(fc1_fp8_, e), fc1_[e], df, xe, block(dx_in, row, r, hidden_), int(r), hidden_,
                         fc1_width_);
  });
  if (!on_input_) return;
  // in = p * x: dp = rowdot(din, x), dx = din * p (the ones' gradient above is dropped).
  kernels::row_dots(elements(dprobs, 0, n), dx_in, elements(x, 0, n * hidden_), n, hidden_);
  kernels::scale_rows(elements(dx, 0, n * hidden_), dx_in, elements(tensor::const_tensor_view(input_probs_), 0, n), n, hidden_);
}

void moe_experts::release() {
  for (auto* t : {&probs_, &fc1_out_, &act_, &scaled_, &dscaled_, &dact_, &dfc1_, &scaled_input_, &input_probs_, &dscaled_input_})
    *t = tensor::tensor();
  for (auto* list : {&fc1_fp8_, &fc2_fp8_})
    for (auto& f : *list) f->release();
}

}  // namespace mactor::model
