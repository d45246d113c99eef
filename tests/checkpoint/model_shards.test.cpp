// model/'s tensor-parallel shards (from model::copy_shard) saved as checkpoint pieces the way
// checkpoint/README.md describes, by two ranks, read back as the full tensors bitwise.
#include <catch2/catch.hpp>

#include <thread>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/save.hpp"
#include "checkpoint_test_util.hpp"
#include "model/gpt_model.hpp"
#include "model/local_group.hpp"

namespace ck = mactor::checkpoint;
namespace md = mactor::model;

TEST_CASE("model parameters saved as two tensor-parallel ranks' shards read back as the full tensors") {
  // Each rank's local tensor comes from model/'s own copy_shard; the pieces follow checkpoint/README.md
  // (rows, columns, replicated, and SwiGLU's row_halves as two pieces).
  md::gpt_model_config c;  // Llama style: row_halves fc1, GQA qkv rows, column-parallel proj
  c.num_layers = 2, c.hidden_size = 32, c.ffn_hidden_size = 48, c.num_attention_heads = 4;
  c.num_query_groups = 2, c.seq_length = 16, c.max_position_embeddings = 16;
  c.padded_vocab_size = 96, c.swiglu = true, c.add_bias_linear = false, c.add_qkv_bias = true;
  c.normalization = md::normalization_kind::rms_norm;
  c.position_embedding_type = md::position_embedding_kind::rope;
  c.untie_embeddings_and_output_weights = true;
  auto groups = md::make_local_groups(1);
  md::gpt_model model(c, *groups[0]);
  const int tp = 2;
  const auto dir = ck::test::scratch_dir("tp2").string();
  std::vector<std::thread> ranks;
  for (int t = 0; t < tp; ++t)
    ranks.emplace_back([&, t] {
      ck::rank_state s;
      for (const auto& p : model.parameters()) {
        const auto local_shape = md::shard_shape(p.full_shape, p.split, tp);
        std::vector<float> local(std::size_t(ck::numel(local_shape)));
        md::copy_shard(p.value_as<float>(), local.data(), p.full_shape, p.split, t, tp);
        auto piece = [&](std::vector<std::int64_t> offset, std::vector<std::int64_t> shape,
                         std::size_t from) {
          ck::tensor_piece q;
          q.name = p.name, q.global_shape = p.full_shape, q.offset = offset, q.shape = shape;
          q.data.assign(local.begin() + std::ptrdiff_t(from),
                        local.begin() + std::ptrdiff_t(from + std::size_t(ck::numel(shape))));
          s.pieces.push_back(std::move(q));
        };
        const auto& f = p.full_shape;
        switch (p.split) {
          case md::tp_split::replicated:
            if (t == 0) piece(std::vector<std::int64_t>(f.size(), 0), f, 0);
            break;
          case md::tp_split::rows: {
            auto off = std::vector<std::int64_t>(f.size(), 0);
            off[0] = t * local_shape[0];
            piece(off, local_shape, 0);
            break;
          }
          case md::tp_split::columns:
            piece({0, t * local_shape[1]}, local_shape, 0);
            break;
          case md::tp_split::row_halves: {
            const std::int64_t half = local_shape[0] / 2, cols = f.size() > 1 ? f[1] : 1;
            auto shape = local_shape;
            shape[0] = half;
            auto off = std::vector<std::int64_t>(f.size(), 0);
            off[0] = t * half;
            piece(off, shape, 0);
            off[0] = f[0] / 2 + t * half;
            piece(off, shape, std::size_t(half * cols));
            break;
          }
          case md::tp_split::row_segments:
            FAIL("these GPT models have no Mamba mixer (the only row_segments parameters)");
            break;
        }
      }
      if (t == 0) s.common = nlohmann::json{{"iteration", 1}};
      ck::save(dir, 1, t, tp, std::move(s));
    });
  for (auto& r : ranks) r.join();
  ck::checkpoint_reader reader(dir);
  for (const auto& p : model.parameters()) {
    INFO(p.name);
    CHECK(ck::test::bitwise_equal(reader.read_whole(p.name),
                                  std::vector<float>(p.value_as<float>(), p.value_as<float>() + p.numel)));
  }
}
