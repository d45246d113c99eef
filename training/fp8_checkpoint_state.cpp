// Each fp8 linear's delayed-scaling state as a whole 1-d checkpoint tensor named after its weight.
#include "training/fp8_checkpoint_state.hpp"

#include <stdexcept>

#include "checkpoint/checkpoint_error.hpp"
#include "model/fp8_linear.hpp"
#include "training/checkpoint_pieces.hpp"

namespace mactor::training {
namespace {

constexpr const char* suffix = "._fp8_state";

}  // namespace

std::string fp8_state_name(const std::string& weight) { return weight + suffix; }

bool is_fp8_state_name(const std::string& name) { return name.ends_with(suffix); }

std::vector<std::pair<std::string, std::vector<float>>> fp8_states(model::gpt_chunk& chunk) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  auto& store = chunk.store();
  for (std::size_t i = 0; i < store.fp8_linears().size(); ++i)
    if (auto s = store.fp8_linears()[i]->state(); !s.empty())
      out.emplace_back(fp8_state_name(store[store.fp8_weights()[i]].name), std::move(s));
  return out;
}

void restore_fp8_states(model::gpt_chunk& chunk,
                        const std::function<std::optional<std::vector<float>>(const std::string&)>& saved,
                        const std::string& where) {
  auto& store = chunk.store();
  for (std::size_t i = 0; i < store.fp8_linears().size(); ++i) {
    auto* linear = store.fp8_linears()[i];
    const auto name = fp8_state_name(store[store.fp8_weights()[i]].name);
    if (linear->state().empty()) continue;
    const auto values = saved(name);
    if (!values) continue;
    try {
      linear->set_state(*values);
    } catch (const std::invalid_argument& e) {
      throw checkpoint::checkpoint_error(where + " holds " + name + " with " + e.what() +
                                         "; resume with the --fp8-amax-history-len it was saved with");
    }
  }
}

void append_fp8_states(stage_engine& engine, const std::function<bool(const model::parameter&)>& saves,
                       checkpoint::rank_state& state) {
  for (auto& chunk : engine.chunks()) {
    auto& store = chunk.store();
    for (std::size_t i = 0; i < store.fp8_linears().size(); ++i) {
      const auto& weight = store[store.fp8_weights()[i]];
      if (!saves(weight)) continue;
      const auto s = store.fp8_linears()[i]->state();
      if (!s.empty()) state.pieces.push_back(buffer_piece(fp8_state_name(weight.name), s.size(), s.data()));
    }
  }
}

void restore_fp8_states(stage_engine& engine, const checkpoint::checkpoint_reader& reader, const std::string& where) {
  for (auto& chunk : engine.chunks())
    restore_fp8_states(chunk, [&](const std::string& name) -> std::optional<std::vector<float>> {
      if (!reader.has(name)) return std::nullopt;
      const auto shape = reader.global_shape(name);
      auto q = buffer_piece(name, std::size_t(shape.empty() ? 0 : shape[0]), nullptr);
      reader.read(q);
      return std::move(q.data);
    }, where);
}

}  // namespace mactor::training
