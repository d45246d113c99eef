// The model on a device: a GPT chunk built and run under a default_device_scope keeps its
// parameters, gradients and activations in the device's memory and gives the host's loss and
// gradients bit for bit. The device is the strict pseudo-device (tests/kernels/pseudo_device.hpp):
// a host access the port missed fails here, in CI, without a GPU.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "model/fp8_recipe.hpp"
#include "model/gpt_chunk.hpp"
#include "model/grad_clip.hpp"
#include "model/local_group.hpp"
#include "model/optimizer.hpp"
#include "tensor/default_device.hpp"
#include "tensor/transfer.hpp"
#include "tests/kernels/pseudo_device.hpp"
#include "tests/model/device_step.hpp"
#include "tests/model/model_fixtures.hpp"
#include "tests/tools/rank_threads.hpp"

using namespace mactor;

namespace {

using test::step_result;
using test::train_step;
using test::bytes_of;

void check_same_on_device(const model::gpt_model_config& c, bool optimizer = false,
                          model::state_dtype moments = model::state_dtype::fp32,
                          model::optimizer_kind kind = model::optimizer_kind::adam) {
  const auto host = train_step(c, tensor::cpu, optimizer, moments, kind);
  test::pseudo_device device;
  const auto calls_before = device.kernel_calls();
  const auto on_device = train_step(c, device.where, optimizer, moments, kind);
  CHECK(device.kernel_calls() > calls_before);
  CHECK(device.live_bytes() == 0);  // everything the chunk held on the device is given back
  CHECK(on_device.num_tokens == host.num_tokens);
  CHECK(on_device.loss_sum == host.loss_sum);
  CHECK(on_device.grad_norm == host.grad_norm);
  CHECK(on_device.zeros == host.zeros);
  CHECK(on_device.params_norm == host.params_norm);
  if (optimizer) CHECK(host.grad_norm > 0.5);  // the clip scaled the gradients
  REQUIRE(on_device.values.size() == host.values.size());
  for (std::size_t i = 0; i < host.values.size(); ++i) {
    INFO("parameter " << i);
    CHECK(on_device.values[i] == host.values[i]);
    CHECK(on_device.grads[i] == host.grads[i]);
  }
}

// Each rank of an in-process tensor-parallel group (a thread each) trains its shard for two
// micro-batches: its loss and its gradients (after the sequence-parallel all-reduce) as bytes.
struct rank_result {
  double loss_sum = 0;
  std::vector<std::vector<std::byte>> grads;
};

std::vector<rank_result> tensor_parallel_step(const model::gpt_model_config& c, int tp, tensor::device where) {
  auto groups = model::make_local_groups(tp);
  std::vector<rank_result> out(static_cast<std::size_t>(tp));
  test::on_rank_threads(tp, [&](int r) {
    tensor::default_device_scope scope(where);
    auto rc = c;
    rc.tensor_model_parallel_size = tp, rc.tensor_model_parallel_rank = r;
    model::gpt_chunk chunk(rc, *groups[std::size_t(r)], {0, c.num_layers, true, true});
    for (int i = 0; i < 2; ++i) {
      const auto b = test::make_batch(2, c.seq_length, c.padded_vocab_size, 30 + i);
      out[std::size_t(r)].loss_sum += chunk.forward(i, b.view(), {}, {}, true, true, 0.5, 60 + i).loss_sum;
    }
    for (int i = 1; i >= 0; --i) chunk.backward(i, {}, {});
    chunk.all_reduce_sequence_parallel_grads();
    for (auto& p : chunk.parameters()) out[std::size_t(r)].grads.push_back(bytes_of(p.grad));
  });
  return out;
}

void check_tensor_parallel_on_device(const model::gpt_model_config& c) {
  const auto host = tensor_parallel_step(c, 2, tensor::cpu);
  test::pseudo_device device;
  const auto on_device = tensor_parallel_step(c, 2, device.where);
  CHECK(device.live_bytes() == 0);
  for (int r = 0; r < 2; ++r) {
    INFO("tensor-parallel rank " << r);
    CHECK(on_device[std::size_t(r)].loss_sum == host[std::size_t(r)].loss_sum);
    REQUIRE(on_device[std::size_t(r)].grads.size() == host[std::size_t(r)].grads.size());
    for (std::size_t i = 0; i < host[std::size_t(r)].grads.size(); ++i) {
      INFO("parameter " << i);
      CHECK(on_device[std::size_t(r)].grads[i] == host[std::size_t(r)].grads[i]);
    }
  }
}

}  // namespace

TEST_CASE("a Llama-style GPT chunk on the pseudo-device gives the host's loss and gradients bit for bit") {
  auto c = test::llama_style();
  c.hidden_dropout = 0.1f, c.attention_dropout = 0.1f;
  check_same_on_device(c);
}

TEST_CASE("a GPT-2-style GPT chunk on the pseudo-device gives the host's loss and gradients bit for bit") {
  auto c = test::gpt2_style();
  c.hidden_dropout = 0.1f, c.attention_dropout = 0.1f;
  check_same_on_device(c);
}

TEST_CASE("a bf16 Llama-style GPT chunk on the pseudo-device gives the host's loss and gradients bit for bit") {
  auto c = test::llama_style();
  c.params_dtype = tensor::dtype::bfloat16;
  check_same_on_device(c);
}

TEST_CASE("Adam steps with clipping on the pseudo-device give the host's parameters bit for bit") {
  auto c = test::llama_style();
  c.hidden_dropout = 0.1f;
  check_same_on_device(c, true);
}

TEST_CASE("Adam with bf16 moments on the pseudo-device gives the host's parameters bit for bit") {
  auto c = test::llama_style();
  c.hidden_dropout = 0.1f;
  check_same_on_device(c, true, model::state_dtype::bf16);
}

TEST_CASE("fp8 GEMMs on the pseudo-device give the host's loss and gradients bit for bit in every recipe") {
  auto c = test::llama_style();
  c.params_dtype = tensor::dtype::bfloat16;
  c.hidden_dropout = 0.1f;
  c.fp8.enabled = true, c.fp8.fp8 = model::fp8_format::hybrid;
  for (const auto recipe : {model::fp8_recipe::delayed, model::fp8_recipe::tensorwise, model::fp8_recipe::mxfp8,
                            model::fp8_recipe::blockwise}) {
    INFO("recipe " << int(recipe));
    c.fp8.recipe = recipe;
    c.fp8.fp8_amax_history_len = recipe == model::fp8_recipe::delayed ? 4 : 1;
    check_same_on_device(c);  // (train_step's optimizer takes fp32 parameters)
  }
}

TEST_CASE("a hybrid Mamba chunk on the pseudo-device gives the host's loss and gradients bit for bit") {
  for (const auto type : {tensor::dtype::float32, tensor::dtype::bfloat16}) {
    auto c = test::hybrid_style("M*-M");
    c.params_dtype = type;
    c.hidden_dropout = 0.1f;
    check_same_on_device(c);
  }
}

TEST_CASE("Adam with fp16 moments on the pseudo-device gives the host's parameters bit for bit") {
  auto c = test::llama_style();
  c.hidden_dropout = 0.1f;
  check_same_on_device(c, true, model::state_dtype::fp16);
}

TEST_CASE("SGD with momentum on the pseudo-device gives the host's parameters bit for bit") {
  auto c = test::llama_style();
  c.hidden_dropout = 0.1f;
  check_same_on_device(c, true, model::state_dtype::fp32, model::optimizer_kind::sgd);
}

TEST_CASE("an fp16 optimizer state on a device keeps its scale through set and unscale as on the host") {
  test::pseudo_device device;
  const std::vector<float> values{0.5f, -3.25f, 1e-3f, 7.0f, -0.0f, 2e-5f, 1.5f, 100.0f};
  model::scaled_state host(model::state_dtype::fp16), on_device(model::state_dtype::fp16);
  host.set(values);
  on_device.zero(values.size(), device.where);
  CHECK(on_device.device_view().type == tensor::dtype::float16);
  on_device.set(values);
  std::vector<float> from_host(values.size()), from_device(values.size());
  host.unscale(from_host);
  on_device.unscale(from_device);
  CHECK(from_device == from_host);
  for (std::size_t i = 0; i < values.size(); ++i) CHECK(from_host[i] == Approx(values[i]).epsilon(1e-3).margin(1e-6));
}

TEST_CASE("fp8 optimizer states on a device are an error naming the flags while fp32 and bf16 states go there") {
  test::pseudo_device device;
  model::scaled_state fp8(model::state_dtype::fp8);
  CHECK_THROWS_WITH(fp8.zero(8, device.where), Catch::Contains("--exp-avg-dtype") && Catch::Contains("cuda:0"));
  model::scaled_state bf16(model::state_dtype::bf16);
  bf16.zero(8, device.where);
  CHECK(bf16.device_view().where == device.where);
  CHECK(bf16.device_view().type == tensor::dtype::bfloat16);
  CHECK(bf16.fp32_view().data == nullptr);
  const std::vector<float> exact{1, 2, 3, 4, 5, 6, 7, 8.5};  // bf16 holds these exactly
  bf16.set(exact);
  std::vector<float> got(8);
  bf16.unscale(got);
  CHECK(got == exact);
  model::scaled_state fp32;
  fp32.zero(8, device.where);
  CHECK(fp32.fp32_view().where == device.where);
  CHECK(fp32.fp32_data() == nullptr);  // no host pointer to device memory
  const std::vector<float> values{1, 2, 3, 4, 5, 6, 7, 8};
  fp32.set(values);
  std::vector<float> back(8);
  fp32.unscale(back);
  CHECK(back == values);
}

TEST_CASE("tensor parallelism with sequence parallelism on the pseudo-device gives the host's bits on each rank") {
  auto c = test::llama_style();
  c.sequence_parallel = true;
  c.seq_length = 6, c.max_position_embeddings = 6;
  c.hidden_dropout = 0.1f, c.attention_dropout = 0.1f;
  check_tensor_parallel_on_device(c);
}

TEST_CASE("tensor parallelism with recomputed layers on the pseudo-device gives the host's bits on each rank") {
  auto c = test::gpt2_style();
  c.recompute.granularity = model::recompute_granularity::full;
  c.recompute.distribute_saved_activations = true;
  c.hidden_dropout = 0.1f;
  check_tensor_parallel_on_device(c);
}

TEST_CASE("an MoE GPT chunk on the pseudo-device gives the host's loss and gradients bit for bit") {
  auto c = test::llama_style();
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 10;
  c.moe.aux_loss_coeff = 1e-2, c.moe.z_loss_coeff = 1e-3;
  c.moe.input_jitter_eps = 0.01;  // the noise goes up and the gradient through it comes down
  check_same_on_device(c);
}

TEST_CASE("a GPT chunk with multi-token prediction on the pseudo-device gives the host's bits") {
  auto c = test::llama_style();
  c.mtp_num_layers = 2, c.mtp_loss_scaling_factor = 0.3f;
  check_same_on_device(c);
}

TEST_CASE("a GPT chunk with multi-latent attention on the pseudo-device gives the host's bits") {
  auto c = test::llama_style();
  c.num_query_groups = 4;
  auto& m = c.mla;
  m.enabled = true, m.q_lora_rank = 8, m.kv_lora_rank = 10;
  m.qk_head_dim = 6, m.qk_pos_emb_head_dim = 4, m.v_head_dim = 7;
  c.attention_dropout = 0.1f;
  check_same_on_device(c);
}
