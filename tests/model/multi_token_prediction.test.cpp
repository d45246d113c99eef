// Multi-token prediction (--mtp-num-layers) against an independent PyTorch implementation
// (mtp_reference.py) on the same weights: the LM loss, each depth's masked mean loss and every
// parameter gradient (the decoder's, each depth's and the shared embedding's and output layer's),
// for one and two depths, tied and untied.
#include <catch2/catch.hpp>
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kernels/convert.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;
namespace fs = std::filesystem;

#include "tests/model/pytorch_compare.hpp"

using namespace mactor::test::pytorch_compare;

namespace {

struct mtp_reference {
  double loss = 0;
  std::vector<double> depth_losses;
  std::vector<std::vector<double>> grads;
};

mtp_reference run_mtp_reference(const fs::path& dir, const our_run& run, const model::gpt_model_config& c,
                                bool per_token) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_config(dir / "config.txt", c, run.batch.micro_batch_size, run.scale);
  std::ofstream(dir / "config.txt", std::ios::app)
      << "mtp_num_layers=" << c.mtp_num_layers << "\nmtp_loss_scaling_factor=" << c.mtp_loss_scaling_factor
      << "\nper_token=" << (per_token ? 1 : 0) << "\n";
  std::ofstream list(dir / "params.txt");
  for (std::size_t i = 0; i < run.names.size(); ++i) {
    list << run.names[i] << "\n";
    write_bin(dir / ("param_" + std::to_string(i) + ".bin"), run.params[i].data(), run.params[i].size());
  }
  list.close();
  write_bin(dir / "tokens.bin", run.batch.tokens.data(), run.batch.tokens.size());
  write_bin(dir / "labels.bin", run.batch.labels.data(), run.batch.labels.size());
  write_bin(dir / "loss_mask.bin", run.batch.loss_mask.data(), run.batch.loss_mask.size());
  const std::string command = python() + " " + MACTOR_SOURCE_DIR + "/tests/model/mtp_reference.py " + dir.string();
  REQUIRE(std::system(command.c_str()) == 0);
  mtp_reference r;
  r.loss = read_doubles(dir / "ref_loss.bin", 1)[0];
  r.depth_losses = read_doubles(dir / "ref_mtp.bin", std::size_t(c.mtp_num_layers));
  for (std::size_t i = 0; i < run.names.size(); ++i)
    r.grads.push_back(read_doubles(dir / ("ref_grad_" + std::to_string(i) + ".bin"), run.params[i].size()));
  return r;
}

model::gpt_model_config small_llama(int depths, bool tied) {
  auto c = test::llama_style();
  c.hidden_size = 32, c.ffn_hidden_size = 48, c.seq_length = 16, c.max_position_embeddings = 16;
  c.padded_vocab_size = 64, c.init_method_std = 0.05f;
  c.untie_embeddings_and_output_weights = !tied;
  c.mtp_num_layers = depths, c.mtp_loss_scaling_factor = 0.3f;
  return c;
}

void compare_mtp(const model::gpt_model_config& c, const std::string& tag, bool per_token = false) {
  our_run run(c, per_token);
  const auto depth_losses = run.m.take_mtp_losses();
  REQUIRE(depth_losses.size() == std::size_t(c.mtp_num_layers));
  const auto ref = run_mtp_reference(fs::path(MACTOR_BINARY_DIR) / "tests/model/mtp_reference" / tag, run, c, per_token);
  CHECK(std::abs(run.loss.loss_sum - ref.loss) / std::abs(ref.loss) <= 1e-5);
  for (int k = 0; k < c.mtp_num_layers; ++k) {
    INFO("depth " << k << ": ours " << depth_losses[k] << ", torch " << ref.depth_losses[k]);
    CHECK(std::abs(depth_losses[k] - ref.depth_losses[k]) / ref.depth_losses[k] <= 1e-5);
  }
  double worst = 0;
  int mtp_params = 0;
  for (std::size_t i = 0; i < run.names.size(); ++i) {
    INFO(run.names[i]);
    const double e = test::relative_error(test::copy_of<float>(run.m.parameters()[i].grad), ref.grads[i]);
    CHECK(e <= 1e-4);
    worst = std::max(worst, e);
    if (run.names[i].rfind("mtp.layers.", 0) == 0) ++mtp_params;
  }
  CHECK(mtp_params >= 5 * c.mtp_num_layers);  // enorm, hnorm, eh_proj, a layer, final_layernorm
  std::printf("%s: LM loss %.8g (torch %.8g), depth losses", tag.c_str(), run.loss.loss_sum, ref.loss);
  for (int k = 0; k < c.mtp_num_layers; ++k) std::printf(" %.8g (torch %.8g)", depth_losses[k], ref.depth_losses[k]);
  std::printf(", worst gradient relative error %.3g\n", worst);
}

}  // namespace

TEST_CASE("one MTP depth (untied embeddings) matches PyTorch in the LM loss and the depth loss and every gradient") {
  compare_mtp(small_llama(1, false), "mtp1_untied");
}

TEST_CASE("two MTP depths (tied embeddings) match PyTorch in the LM loss and the depth losses and every gradient") {
  compare_mtp(small_llama(2, true), "mtp2_tied");
}

TEST_CASE("MTP depths with per-token loss (each depth's sum, scaled as the LM loss) match PyTorch in every gradient") {
  // The batch's masks leave each depth fewer tokens than the LM loss, so the depth sums over the
  // LM loss's tokens differ from the depth means: the mean-scaled gradients would fail here.
  compare_mtp(small_llama(2, true), "two_depths_per_token", true);
}

TEST_CASE("MTP parameters carry Megatron's names and the MTP loss changes the decoder's gradients") {
  auto c = small_llama(2, true);
  our_run with(c);
  for (const char* name : {"mtp.layers.0.enorm.weight", "mtp.layers.0.hnorm.weight", "mtp.layers.1.eh_proj.weight",
                           "mtp.layers.1.transformer_layer.self_attention.linear_qkv.weight",
                           "mtp.layers.1.transformer_layer.mlp.linear_fc2.weight", "mtp.layers.1.final_layernorm.weight"}) {
    INFO(name);
    CHECK(std::count(with.names.begin(), with.names.end(), std::string(name)) == 1);
  }
  c.mtp_num_layers = 0;
  our_run without(c);
  // Same decoder weights (registered first, by name), different gradients: the MTP loss reaches them.
  REQUIRE(without.params[1] == with.params[1]);
  CHECK(test::relative_error(test::copy_of<float>(with.m.parameters()[1].grad),
                             test::copy_of<float>(without.m.parameters()[1].grad)) > 1e-3);
  CHECK(with.loss.loss_sum == Approx(without.loss.loss_sum).epsilon(1e-6));  // the LM loss is the LM loss
}

TEST_CASE("MTP refuses learned absolute positions") {
  auto c = small_llama(1, false);
  REQUIRE(model::validate(c).empty());
  c.position_embedding_type = model::position_embedding_kind::learned_absolute;
  CHECK_FALSE(model::validate(c).empty());
}
