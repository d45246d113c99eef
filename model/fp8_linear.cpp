// A linear layer's GEMMs with their operands rounded through fp8 (Transformer Engine's Linear
// under fp8_autocast), computed by the fp32 GEMM kernels.
#include "model/fp8_linear.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>

#include "kernels/convert.hpp"
#include "kernels/fp8.hpp"
#include "kernels/gemm.hpp"
#include "kernels/reductions.hpp"
#include "model/activation.hpp"

namespace mactor::model {
namespace {

// How many forwards a linear remembers for their backward: more than any schedule keeps in
// flight; an evaluation forward (never back-propagated) ages out.
constexpr std::size_t max_records = 64;

// A 64-bit fingerprint of a tensor's bytes: a recomputed forward sees the very same input. A
// device's tensor is not copied to the host for it: the device's sum of its squares (in fp32 for a
// 16-bit tensor), a deterministic reduction, stands for its bytes.
std::uint64_t fingerprint(tensor::const_tensor_view v) {
  if (v.where != tensor::cpu) {
    tensor::tensor wide;
    if (tensor::is_half_precision(v.type)) {
      wide = tensor::tensor({v.numel()}, tensor::dtype::float32, tensor::memory_kind::activations, v.where);
      kernels::convert(wide.view(), v);
    }
    const double squares = kernels::sum_of_squares(wide.defined() ? wide.view() : v);
    return (std::bit_cast<std::uint64_t>(squares) ^ std::uint64_t(v.numel())) * 0xff51afd7ed558ccdull;
  }
  const auto* bytes = static_cast<const unsigned char*>(v.data);
  const std::size_t n = v.nbytes();
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, bytes + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  for (; i < n; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  return h;
}

float max_of(fp8_format f, gemm_operand o) { return kernels::fp8_max(operand_type(f, o)); }

}  // namespace

gpt_model_config with_layer_fp8(const gpt_model_config& c, int layer) {
  gpt_model_config out = c;
  out.fp8.enabled = c.fp8.layer_in_fp8(layer, c.num_layers);
  return out;
}

fp8_linear::fp8_linear(const fp8_settings& s)
    : settings_(s),
      input_(s.fp8_amax_history_len, s.amax_compute_algo, s.fp8_margin, max_of(s.fp8, gemm_operand::input)),
      weight_(s.fp8_amax_history_len, s.amax_compute_algo, s.fp8_margin, max_of(s.fp8, gemm_operand::weight)),
      grad_output_(s.fp8_amax_history_len, s.amax_compute_algo, s.fp8_margin,
                   max_of(s.fp8, gemm_operand::grad_output)) {}

std::vector<float> fp8_linear::state() const {
  std::vector<float> s;
  if (settings_.recipe != fp8_recipe::delayed) return s;
  for (const auto* d : {&input_, &weight_, &grad_output_}) d->append_state(s);
  return s;
}

void fp8_linear::set_state(const std::vector<float>& s) {
  if (settings_.recipe != fp8_recipe::delayed) return;
  if (s.size() % 3 != 0 || s.size() < 6) throw std::invalid_argument("not an fp8 state of three scalings");
  const std::size_t history = s.size() / 3 - 1;
  const float* p = s.data();
  for (auto* d : {&input_, &weight_, &grad_output_}) p = d->restore(p, history);
}

std::optional<fp8_linear::forward_record> fp8_linear::take_record(std::uint64_t fingerprint, bool erase) {
  for (auto it = forwards_.begin(); it != forwards_.end(); ++it)
    if (it->fingerprint == fingerprint) {
      const forward_record r = *it;
      if (erase) forwards_.erase(it);
      return r;
    }
  return std::nullopt;
}

tensor::tensor_view fp8_linear::rounded(tensor::tensor& scratch, tensor::const_tensor_view v, int rows,
                                        int cols, gemm_operand operand, gemm_usage usage, float scale) {
  auto out = ensure_activation(scratch, rows, cols, tensor::dtype::float32);
  round_through_recipe(out, v, rows, cols, settings_.recipe, operand_type(settings_.fp8, operand), operand,
                       usage, scale, 1.0f / scale);
  return out;
}

void fp8_linear::use_primary_weight(const std::uint8_t* bytes, const float* scale_inv) {
  if (settings_.recipe != fp8_recipe::delayed && settings_.recipe != fp8_recipe::tensorwise)
    throw std::invalid_argument("fp8 primary weights need a per-tensor recipe (delayed or tensorwise)");
  primary_bytes_ = bytes;
  primary_scale_inv_ = scale_inv;
}

// The fp8 weight as the GEMM multiplies it: each e4m3 value times the weight's scale_inv (one
// scale per tensor, so the row-wise and column-wise uses are the same values).
tensor::tensor_view fp8_linear::primary_weight(int out, int in) {
  auto w = ensure_activation(w_, out, in, tensor::dtype::float32);
  kernels::dequantize_fp8(w, primary_bytes_, *primary_scale_inv_, kernels::fp8_type::e4m3);
  return w;
}

void fp8_linear::forward(tensor::const_tensor_view x, tensor::const_tensor_view w, tensor::tensor_view y,
                         int rows, int in, int out) {
  const bool delayed = settings_.recipe == fp8_recipe::delayed;
  std::optional<forward_record> seen;
  if (delayed) seen = take_record(fingerprint(elements(x, 0, std::int64_t(rows) * in)), false);
  const float xs = seen ? seen->input_scale : input_.scale();
  const float ws = seen ? seen->weight_scale : weight_.scale();
  const auto xq = rounded(x_, x, rows, in, gemm_operand::input, gemm_usage::rowwise, xs);
  const auto wq = primary_bytes_ ? primary_weight(out, in)
                                 : rounded(w_, w, out, in, gemm_operand::weight, gemm_usage::rowwise, ws);
  kernels::linear_forward(xq, wq, y, rows, in, out);
  if (!delayed || seen) return;
  forwards_.push_back({fingerprint(elements(x, 0, std::int64_t(rows) * in)), xs, ws});
  if (forwards_.size() > max_records) forwards_.pop_front();
  input_.record(kernels::amax(elements(x, 0, std::int64_t(rows) * in)));
  if (!primary_bytes_) weight_.record(kernels::amax(w));
  forward_recorded_ = true;
  if (deferred_) return;
  input_.update();
  weight_.update();
  forward_recorded_ = false;
}

void fp8_linear::backward(tensor::const_tensor_view dy, tensor::const_tensor_view x, tensor::const_tensor_view w,
                          tensor::tensor_view dw, tensor::tensor_view dx, int rows, int in, int out) {
  const auto at_once = [&](tensor::const_tensor_view a, tensor::const_tensor_view b) {
    kernels::linear_backward_weight(a, b, dw, rows, in, out);
  };
  backward(dy, x, w, at_once, dx, rows, in, out);
}

void fp8_linear::backward(tensor::const_tensor_view dy, tensor::const_tensor_view x,
                          tensor::const_tensor_view w, const weight_grad_gemm& dw, tensor::tensor_view dx,
                          int rows, int in, int out) {
  const bool delayed = settings_.recipe == fp8_recipe::delayed;
  std::optional<forward_record> seen;
  if (delayed) seen = take_record(fingerprint(elements(x, 0, std::int64_t(rows) * in)), true);
  const float xs = seen ? seen->input_scale : input_.scale();
  const float ws = seen ? seen->weight_scale : weight_.scale();
  const float gs = grad_output_.scale();
  // Weight gradient: the GEMM sums over the rows (tokens), so x and dy are quantized column-wise.
  if (delayed && !settings_.fp8_wgrad) {
    dw(dy, x);
  } else {
    const auto dyq = rounded(dy_, dy, rows, out, gemm_operand::grad_output, gemm_usage::columnwise, gs);
    const auto xq = rounded(x_, x, rows, in, gemm_operand::input, gemm_usage::columnwise, xs);
    dw(dyq, xq);
  }
  // Input gradient: the GEMM sums over the output features: dy row-wise, W column-wise.
  const auto dyq = rounded(dy_, dy, rows, out, gemm_operand::grad_output, gemm_usage::rowwise, gs);
  const auto wq = primary_bytes_ ? primary_weight(out, in)
                                 : rounded(w_, w, out, in, gemm_operand::weight, gemm_usage::columnwise, ws);
  kernels::linear_backward_input(dyq, wq, dx, rows, in, out);
  if (!delayed) return;
  grad_output_.record(kernels::amax(elements(dy, 0, std::int64_t(rows) * out)));
  backward_recorded_ = true;
  if (deferred_) return;
  grad_output_.update();
  backward_recorded_ = false;
}

void fp8_linear::amax_of(pass p, std::vector<float>& out) const {
  // A recorded amax is never negative (fmax passes over NaN from 0), so -1 marks "none".
  if (p == pass::forward) {
    out.push_back(forward_recorded_ ? input_.history()[0] : -1.0f);
    out.push_back(forward_recorded_ ? weight_.history()[0] : -1.0f);
  } else {
    out.push_back(backward_recorded_ ? grad_output_.history()[0] : -1.0f);
  }
}

const float* fp8_linear::update_from(pass p, const float* amaxes) {
  auto apply = [](delayed_scaling& s, float amax) {
    if (amax >= 0.0f) s.update_with(amax);
  };
  if (p == pass::forward) {
    apply(input_, amaxes[0]);
    apply(weight_, amaxes[1]);
    forward_recorded_ = false;
    return amaxes + 2;
  }
  apply(grad_output_, amaxes[0]);
  backward_recorded_ = false;
  return amaxes + 1;
}

}  // namespace mactor::model
