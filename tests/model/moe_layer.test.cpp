// The MoE layer (router, local token dispatch, experts, auxiliary losses) against an independent
// PyTorch layer written from Megatron-Core's formulas (tests/model/moe_reference.py, float64):
// output, routing probabilities, the tracked losses and every gradient, the auxiliary losses'
// gradients entering at Megatron's MoEAuxLossAutoScaler scale.
#include <catch2/catch.hpp>

#include "tests/model/moe_reference_case.hpp"

TEST_CASE("MoE layer with SwiGLU experts, top-2 softmax routing, aux and z losses matches PyTorch") {
  moe_case k{mixtral_like()};
  k.config.moe.aux_loss_coeff = 0.1, k.config.moe.z_loss_coeff = 1e-2;
  k.aux_scale = 0.25;  // one of four micro-batches
  const auto with_aux = compare(k, "swiglu_top2_aux_z");
  // The auxiliary losses' gradient must show in the router's: without it the reference differs.
  moe_case plain = k;
  plain.config.moe.aux_loss_coeff = 0, plain.config.moe.z_loss_coeff.reset();
  const auto without = compare(plain, "swiglu_top2_plain");
  CHECK(test::relative_error(without, with_aux) > 1e-3);
}

TEST_CASE("MoE layer with --moe-router-pre-softmax, a top-k scaling factor and seq_aux_loss matches PyTorch") {
  moe_case k{mixtral_like()};
  k.config.swiglu = false;  // GeLU experts
  k.config.moe.num_experts = 6, k.config.moe.router_topk = 3;
  k.config.moe.router_pre_softmax = true, k.config.moe.router_topk_scaling_factor = 2.5;
  k.config.moe.load_balancing = model::moe_load_balancing::seq_aux_loss;
  k.config.moe.aux_loss_coeff = 0.1;
  k.seq = 5, k.batch = 3, k.aux_scale = 0.5;
  compare(k, "gelu_top3_pre_softmax_seq_aux");
}

TEST_CASE("MoE layer under --moe-grouped-gemm has TEGroupedMLP's names and the same numbers") {
  moe_case k{mixtral_like()};
  k.config.moe.grouped_gemm = true;
  k.config.moe.per_token_loss = true;  // --calculate-per-token-loss: the aux losses times the tokens
  compare(k, "grouped_gemm_per_token");
  moe_case sequential{mixtral_like()};
  sequential.config.moe.per_token_loss = true;
  layer_run a(k);
  const auto grouped_name = [&](const std::string& name) {
    for (int e = 0; e < k.config.moe.num_experts; ++e)
      for (int fc : {1, 2})
        if (name == expert_weight(sequential, e, fc)) return expert_weight(k, e, fc);
    return name;
  };
  layer_run b(sequential, &a, grouped_name);
  CHECK(a.out == b.out);
  CHECK(a.dx == b.dx);
}

TEST_CASE("MoE layer in evaluation has no auxiliary losses, and load balancing none adds none in training") {
  moe_case eval{mixtral_like()};
  eval.training = false;
  compare(eval, "eval");
  moe_case none{mixtral_like()};
  none.config.moe.load_balancing = model::moe_load_balancing::none;
  none.config.moe.z_loss_coeff.reset();
  compare(none, "balancing_none");
  layer_run run(eval);
  CHECK(run.layer.router().aux_losses().load_balancing_loss == 0);
  CHECK(run.layer.router().aux_losses().z_loss == 0);
}

TEST_CASE("MoE layer with sigmoid scores (--moe-router-score-function sigmoid) matches PyTorch, top-1 and top-2") {
  moe_case k{mixtral_like()};
  k.config.moe.score_function = model::moe_score_function::sigmoid;
  k.config.moe.router_topk_scaling_factor = 2.5;
  k.config.moe.aux_loss_coeff = 0.1;
  compare(k, "sigmoid_top2_aux");
  moe_case one = k;
  one.config.moe.router_topk = 1;
  one.config.moe.load_balancing = model::moe_load_balancing::seq_aux_loss;
  compare(one, "sigmoid_top1_seq_aux");
}

TEST_CASE("MoE layer with an expert bias (--moe-router-enable-expert-bias) routes by biased scores and matches PyTorch") {
  moe_case k{mixtral_like()};
  k.config.moe.score_function = model::moe_score_function::sigmoid;
  k.config.moe.aux_loss_coeff = 0;
  k.config.moe.enable_expert_bias = true, k.config.moe.bias_update_rate = 1e-3;
  k.expert_bias.assign(4, 0.0f);
  const auto plain = compare(k, "sigmoid_bias_zero");
  // A bias that favours expert 3 and shuns expert 0 changes the choice but not the scale of the
  // probabilities; the reference takes the same bias.
  k.expert_bias = {-0.3f, 0.0f, 0.05f, 0.3f};
  const auto biased = compare(k, "sigmoid_bias");
  CHECK(test::relative_error(plain, biased) > 1e-3);
  moe_case grouped = k;
  grouped.config.moe.router_num_groups = 2, grouped.config.moe.router_group_topk = 1;
  compare(grouped, "sigmoid_bias_groups");
}

TEST_CASE("MoE layer with group-limited routing (--moe-router-num-groups, --moe-router-group-topk) matches PyTorch") {
  moe_case k{mixtral_like()};
  k.config.moe.num_experts = 8, k.config.moe.router_topk = 4;
  k.config.moe.router_num_groups = 4, k.config.moe.router_group_topk = 2;
  k.seq = 8, k.batch = 2;
  compare(k, "softmax_groups");
  // The groups bind: unrestricted top-4 routing picks experts outside the chosen groups.
  moe_case free = k;
  free.config.moe.router_num_groups = 0, free.config.moe.router_group_topk = 0;
  layer_run grouped(k), plain(free);
  CHECK(grouped.layer.router().top() != plain.layer.router().top());
  moe_case sigmoid = k;
  sigmoid.config.moe.score_function = model::moe_score_function::sigmoid;
  sigmoid.config.moe.router_topk_scaling_factor = 2.5;
  compare(sigmoid, "sigmoid_groups");
}

TEST_CASE("MoE layer with a shared expert (--moe-shared-expert-intermediate-size) matches PyTorch") {
  moe_case k{mixtral_like()};
  k.config.moe.shared_expert_intermediate_size = 14;
  compare(k, "swiglu_shared_expert");
  moe_case gelu = k;
  gelu.config.swiglu = false;
  compare(gelu, "gelu_shared_expert");
}

TEST_CASE("MoE layer with --moe-expert-capacity-factor drops tokens by probability or position as Megatron") {
  moe_case k{mixtral_like()};
  k.config.moe.expert_capacity_factor = 0.6;  // capacity ceil(12 * 2 / 4 * 0.6) = 4 of ~6 routed
  k.seq = 6, k.batch = 2;
  compare(k, "capacity_probs");
  layer_run run(k);
  std::size_t dropped = 0;
  for (char c : run.layer.router().kept()) dropped += c ? 0 : 1;
  CHECK(dropped >= 4);
  moe_case position = k;
  position.config.moe.drop_by_position = true;
  compare(position, "capacity_position");
}

TEST_CASE("MoE token dispatcher orders the routed pairs by expert, then by token") {
  model::moe_token_dispatcher d(3, 2);
  d.plan({2, 0, 0, 1, 2, 1}, {1, 1, 1, 1, 1, 1}, 3);  // token 0 -> 2, 0; token 1 -> 0, 1; token 2 -> 2, 1
  CHECK(d.tokens_per_expert() == std::vector<std::int64_t>{2, 2, 2});
  CHECK(d.choice_of() == std::vector<std::int64_t>{1, 2, 3, 5, 0, 4});
  d.plan({2, 0, 0, 1, 2, 1}, {1, 1, 0, 1, 1, 0}, 3);  // token 1's expert 0 and token 2's expert 1 dropped
  CHECK(d.tokens_per_expert() == std::vector<std::int64_t>{1, 1, 2});
  CHECK(d.choice_of() == std::vector<std::int64_t>{1, 3, 0, 4});
}

TEST_CASE("the router dtype (--moe-router-dtype fp32) computes a bf16 layer's router logits and gradients in fp32") {
  const int seq = 6, batch = 2, rows = seq * batch;
  // One fp32 draw of inputs and output gradients, rounded through bf16 so every run sees the
  // same values.
  model::gpt_model_config base = mixtral_like();
  const int h = base.hidden_size;
  tensor::tensor x16({rows, h}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
  tensor::tensor dy16({rows, h}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
  std::vector<float> xs, dys;
  for (auto v : test::random_vector(std::size_t(rows) * h, 31)) xs.push_back(float(v));
  for (auto v : test::random_vector(std::size_t(rows) * h, 32)) dys.push_back(float(v));
  kernels::convert(x16, test::view(xs));
  kernels::convert(dy16, test::view(dys));
  struct routed {
    std::vector<double> logits;
    std::vector<float> router_grad;
  };
  // The bf16 layer's weights, kept for the fp32 one (exactly representable there).
  std::vector<float> bf16_weights;
  auto run = [&](tensor::dtype type, std::optional<tensor::dtype> router) {
    auto c = base;
    c.params_dtype = type;
    c.moe.router_dtype = router;
    model::single_group tp;
    model::parameter_store store(type, tensor::dtype::float32);
    model::moe_layer layer(store, "decoder.layers.0.mlp", c);
    store.allocate(c.seed, 0, 1);
    if (type == tensor::dtype::bfloat16 && bf16_weights.empty()) {
      bf16_weights.resize(std::size_t(store.value_tensor().numel()));
      kernels::convert(tensor::view_of(std::span<float>(bf16_weights)), store.value_tensor().view());
    } else if (type == tensor::dtype::float32) {
      kernels::convert(store.value_tensor().view(), tensor::view_of(std::span<const float>(bf16_weights)));
    }
    tensor::tensor x({rows, h}, type, tensor::memory_kind::activations), dy({rows, h}, type, tensor::memory_kind::activations);
    tensor::tensor out({rows, h}, type, tensor::memory_kind::activations), dx({rows, h}, type, tensor::memory_kind::activations);
    kernels::convert(x.view(), x16.view());
    kernels::convert(dy.view(), dy16.view());
    layer.forward(store, tp, x.view(), out.view(), seq, batch, true);
    store.zero_grad();
    layer.backward(store, tp, dy.view(), x.view(), dx.view());
    routed r{layer.router().logits(), {}};
    for (const auto& p : store.all())
      if (p.name == "decoder.layers.0.mlp.router.weight") r.router_grad = test::copy_of<float>(p.grad);
    return r;
  };
  const auto bf16 = run(tensor::dtype::bfloat16, std::nullopt);
  const auto fp32_router = run(tensor::dtype::bfloat16, tensor::dtype::float32);
  const auto fp32 = run(tensor::dtype::float32, std::nullopt);
  // The fp32 router multiplies the same values as the fp32 layer, in the same order: bitwise.
  CHECK(fp32_router.logits == fp32.logits);
  // The bf16 router rounds its logits to bf16: about 2^-8 relative.
  const double rounded = test::relative_error(bf16.logits, fp32.logits);
  CHECK(rounded > 1e-4);
  CHECK(rounded < 1e-2);
  // The gradients flow through bf16 experts either way (about 3e-3 from the fp32 layer's); the
  // widened path must still land the router's weight gradient there.
  const double wide = test::relative_error(fp32_router.router_grad, fp32.router_grad);
  WARN("router weight gradient, fp32 router in a bf16 layer vs the fp32 layer: " << wide);
  CHECK(wide < 2e-2);
}
