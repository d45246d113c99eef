// distrib_optim.pt from the distributed optimizer's shards and back. mactor's shards are slices
// of each chunk's flat buffer in its own order (the parameters' offsets); the file's world tensors
// are in Megatron's buffer order, so the writer gathers the shards over the optimizer's shard group
// and moves each parameter's run to its place in Megatron's layout, and a load takes each of this
// rank's optimizer params from its place there. Every rank reads the file itself, which gives what
// Megatron's scatter from data-parallel rank 0 gives.
#include "training/distrib_optim_file.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>

#include "checkpoint/checkpoint_error.hpp"
#include "training/checkpoint_state.hpp"
#include "training/host_floats.hpp"
#include "training/torch_pickle_values.hpp"

namespace mactor::training {
namespace {

using checkpoint::checkpoint_error;
using checkpoint::pickle_value;
using kind = pickle_value::kind;

constexpr const char* state_keys[] = {"param", "exp_avg", "exp_avg_sq"};

std::size_t pad_to(std::size_t n, std::size_t divisor) { return (n + divisor - 1) / divisor * divisor; }

bool is_shared_embedding(const model::gpt_chunk& chunk, const model::parameter& p) {
  const auto& l = chunk.layout();
  return p.name == "embedding.word_embeddings.weight" && l.pre_process != l.post_process;
}

std::size_t chunk_numel(model::gpt_chunk& chunk) {
  std::size_t n = 0;
  for (const auto& p : chunk.parameters()) n = std::max(n, p.offset + p.numel);
  return n;
}

pickle_value global(const std::string& dotted) {
  pickle_value g;
  g.k = kind::global;
  g.s = dotted;
  return g;
}

// The buffer's key: (param dtype, grad dtype), as torch dtypes.
pickle_value dtype_key(const config::megatron_args& a) {
  const bool bf16 = a.mixed_precision.bf16, fp16 = a.mixed_precision.fp16;
  const std::string param = bf16 ? "torch.bfloat16" : fp16 ? "torch.float16" : "torch.float32";
  const bool fp32_grads = !(bf16 || fp16) || a.mixed_precision.accumulate_allreduce_grads_in_fp32;
  return pickle_value::tuple({global(param), global(fp32_grads ? "torch.float32" : param)});
}

pickle_value float_tensor(const std::vector<float>& v) {
  return pickle_value::of_tensor(
      make_tensor(v.data(), v.size(), {static_cast<std::int64_t>(v.size())}, tensor::dtype::float32));
}

std::vector<float> floats(const pickle_value* v, std::size_t numel, const std::string& what) {
  if (!v || v->k != kind::tensor || v->tensor->dtype->name != std::string("float32"))
    throw checkpoint_error(what + " is missing or not a float32 tensor");
  if (v->tensor->bytes.size() != numel * sizeof(float))
    throw checkpoint_error(what + " holds " + std::to_string(v->tensor->bytes.size() / 4) + " elements, not " +
                           std::to_string(numel));
  std::vector<float> out(numel);
  std::memcpy(out.data(), v->tensor->bytes.data(), v->tensor->bytes.size());
  return out;
}

bool shared_buckets(const config::megatron_args& a) {
  // Megatron's shared embedding (tied, or read by multi-token prediction) has a bucket of its own.
  return a.distributed.pipeline_model_parallel_size > 1 &&
         (!a.network_size.untie_embeddings_and_output_weights || a.network_size.mtp_num_layers.value_or(0) > 0);
}

// Chunk c's three flat buffers (mactor's order, the shard group's padding included), gathered
// from every rank's shard; each rank contributes the slots its optimizer owns. The shards are the
// distributed optimizer's: the flat buffer padded to a multiple of the shard group's size, split
// evenly in group order (grad_sync).
std::vector<std::vector<float>> gather_chunk(const config::megatron_args& a, parallel_context& ctx,
                                             stage_engine& engine, std::size_t c) {
  auto* group = a.distributed.use_distributed_optimizer ? ctx.optimizer_shard_group() : nullptr;
  const bool sharded = group && group->size() > 1;
  const std::size_t numel = chunk_numel(engine.chunks()[c]), ranks = sharded ? group->size() : 1;
  const std::size_t total = (numel + ranks - 1) / ranks * ranks, length = total / ranks;
  const std::size_t begin = sharded ? length * static_cast<std::size_t>(group->rank()) : 0;
  std::vector<std::vector<float>> local(3, std::vector<float>(length, 0.0f));
  auto& opt = engine.optimizer();
  const auto slots = optimizer_slots(engine);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].chunk != &engine.chunks()[c]) continue;
    const std::size_t at = slots[i].param->offset + slots[i].begin - begin, n = slots[i].end - slots[i].begin;
    if (slots[i].param->offset + slots[i].begin < begin || at + n > length)
      throw std::logic_error("distrib_optim.pt: optimizer param " + slots[i].param->name + " is outside this rank's shard");
    const host_floats main(opt.params()[i].where, opt.params()[i].value, 0, n);
    std::copy_n(main.local(), n, local[0].begin() + at);
    for (const auto& st : state_tensors(opt, i)) {
      if (st.empty()) continue;  // before the first step: zeros
      const auto v = st.values();
      std::copy(v.begin(), v.end(), local[st.kind == "exp_avg" ? 1 : 2].begin() + at);
    }
  }
  if (!sharded) return local;
  std::vector<std::vector<float>> full(3, std::vector<float>(total));
  for (int k = 0; k < 3; ++k) group->all_gather(std::span<const float>(local[k]), std::span<float>(full[k]));
  return full;
}

}  // namespace

megatron_buffer_layout buffer_layout_of(model::gpt_chunk& chunk, bool shared_embedding_buckets) {
  const auto& params = chunk.parameters();
  megatron_buffer_layout out;
  out.offsets.resize(params.size());
  // `base`: the world tensors' elements of the closed buckets; `at`: the position in the open one
  // (bucket starts are multiples of lcm(dp, 128), so padding `at` to 64 pads the buffer index).
  std::size_t base = 0, at = 0;
  bool open = false;
  for (std::size_t j = params.size(); j-- > 0;) {
    const bool own_bucket = shared_embedding_buckets && is_shared_embedding(chunk, params[j]);
    at = pad_to(at, 64);
    if (own_bucket && open) base += at, at = 0;
    out.offsets[j] = base + at;
    at += params[j].numel;
    open = true;
    if (own_bucket) base += at, at = 0, open = false;
  }
  out.numel_unpadded = base + (open ? at : 0);
  return out;
}

pickle_value distributed_optimizer_dict(const config::megatron_args& a, stage_engine& engine) {
  auto& opt = engine.optimizer();
  const auto step = pickle_value::integer(optimizer_steps(opt));
  auto groups = pickle_value::list();
  for (const auto& g : opt.param_groups()) {
    auto group = pickle_value::dict();
    group.set("lr", pickle_value::real(g.lr));
    group.set("weight_decay", pickle_value::real(g.weight_decay));
    group.set("betas", pickle_value::tuple({pickle_value::real(a.regularization.adam_beta1), pickle_value::real(a.regularization.adam_beta2)}));
    group.set("eps", pickle_value::real(a.regularization.adam_eps));
    group.set("wd_mult", pickle_value::real(g.wd_mult));
    group.set("lr_mult", pickle_value::real(g.lr_mult));
    group.set("is_decoupled_lr", pickle_value::boolean(g.decoupled_lr));
    group.set("max_lr", pickle_value::real(g.max_lr));
    group.set("min_lr", pickle_value::real(g.min_lr));
    group.set("step", step);
    groups.items.push_back(std::move(group));
  }
  auto inner = pickle_value::dict();
  inner.set("param_groups", std::move(groups));
  auto out = pickle_value::dict();
  out.set("optimizer", std::move(inner));
  if (engine.scaler()) {
    const auto s = engine.scaler()->state();
    auto scaler = pickle_value::dict();
    scaler.set("scale", pickle_value::real(s.scale));
    scaler.set("growth_tracker", pickle_value::integer(s.growth_tracker));
    scaler.set("hysteresis_tracker", pickle_value::integer(s.hysteresis_tracker));
    out.set("grad_scaler", std::move(scaler));
  }
  return out;
}

std::optional<pickle_value> distrib_optim_state(const config::megatron_args& a, parallel_context& ctx,
                                                stage_engine& engine) {
  const bool writer = ctx.dp_rank() == 0 && ctx.cp_rank() == 0;
  auto root = pickle_value::dict();
  root.set("buckets_coalesced", pickle_value::boolean(true));
  for (std::size_t c = 0; c < engine.chunks().size(); ++c) {
    const auto flat = gather_chunk(a, ctx, engine, c);  // collective: every rank takes part
    if (!writer) continue;
    auto& chunk = engine.chunks()[c];
    const auto layout = buffer_layout_of(chunk, shared_buckets(a));
    auto buffer = pickle_value::dict();
    for (int k = 0; k < 3; ++k) {
      std::vector<float> world(layout.numel_unpadded, 0.0f);
      for (std::size_t j = 0; j < chunk.parameters().size(); ++j) {
        const auto& p = chunk.parameters()[j];
        std::copy_n(flat[k].begin() + p.offset, p.numel, world.begin() + layout.offsets[j]);
      }
      buffer.set(state_keys[k], float_tensor(world));
    }
    buffer.set("numel_unpadded", pickle_value::integer(static_cast<std::int64_t>(layout.numel_unpadded)));
    auto by_dtype = pickle_value::dict();
    by_dtype.entries.emplace_back(dtype_key(a), std::move(buffer));
    root.set(static_cast<std::int64_t>(c), std::move(by_dtype));
  }
  if (!writer) return std::nullopt;
  return root;
}

void load_distrib_optim(const pickle_value& state, const pickle_value& model_optimizer, const config::megatron_args& a,
                        stage_engine& engine, const std::string& where) {
  std::int64_t steps = 0;
  const pickle_value* inner = model_optimizer.find("optimizer");
  const pickle_value* groups = inner ? inner->find("param_groups") : nullptr;
  if (groups && !groups->items.empty())
    if (const pickle_value* s = groups->items.front().find("step")) steps = static_cast<std::int64_t>(s->number(where + " step"));
  auto& opt = engine.optimizer();
  const auto slots = optimizer_slots(engine);
  for (std::size_t c = 0; c < engine.chunks().size(); ++c) {
    auto& chunk = engine.chunks()[c];
    const auto layout = buffer_layout_of(chunk, shared_buckets(a));
    const pickle_value* by_dtype = state.find(static_cast<std::int64_t>(c));
    if (!by_dtype || by_dtype->k != kind::dict || by_dtype->entries.size() != 1)
      throw checkpoint_error(where + " has no gradient buffer " + std::to_string(c) +
                             " (saved with another --num-layers-per-virtual-pipeline-stage?)");
    const pickle_value& buffer = by_dtype->entries.front().second;
    const pickle_value* n = buffer.find("numel_unpadded");
    if (!n || n->k != kind::integer || static_cast<std::size_t>(n->i) != layout.numel_unpadded)
      throw checkpoint_error(where + ": buffer " + std::to_string(c) + " holds " + (n ? std::to_string(n->i) : "?") +
                             " elements but this model's has " + std::to_string(layout.numel_unpadded) +
                             "; it was saved by a different model: use the flags it was saved with");
    std::vector<std::vector<float>> world;
    for (const char* key : state_keys)
      world.push_back(floats(buffer.find(key), layout.numel_unpadded, where + ": buffer " + std::to_string(c) + " '" + key + "'"));
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].chunk != &chunk) continue;
      const std::size_t j = static_cast<std::size_t>(slots[i].param - chunk.parameters().data());
      const std::size_t at = layout.offsets[j] + slots[i].begin, len = slots[i].end - slots[i].begin;
      write_floats(opt.params()[i].where, opt.params()[i].value, std::span<const float>(world[0].data() + at, len));
      if (steps == 0) continue;  // saved before the first step: the moments start anew
      for (auto& st : state_tensors(opt, i))
        st.assign(std::vector<float>(world[st.kind == "exp_avg" ? 1 : 2].begin() + at,
                                     world[st.kind == "exp_avg" ? 1 : 2].begin() + at + len));
    }
  }
  if (auto* adam = dynamic_cast<model::adam_optimizer*>(&opt))
    for (auto& st : adam->state()) st.step = st.exp_avg.empty() ? 0 : steps;
  if (auto* scaler = engine.scaler(); scaler && model_optimizer.find("grad_scaler")) {
    const pickle_value& g = *model_optimizer.find("grad_scaler");
    scaler->load({static_cast<float>(g.find("scale")->number(where + " scale")),
                  static_cast<std::int64_t>(g.find("growth_tracker")->number(where + " growth_tracker")),
                  static_cast<std::int64_t>(g.find("hysteresis_tracker")->number(where + " hysteresis_tracker"))});
  }
}

}  // namespace mactor::training
