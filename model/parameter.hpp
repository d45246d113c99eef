// Named model parameters in two flat buffers (values, grads) of the model's dtype, with how each
// is split across tensor-parallel ranks and how Megatron initializes it. Names follow
// Megatron-Core's state dict.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/deferred_weight_grads.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class fp8_linear;

/// How a [rows, cols] tensor is divided over tp ranks (the full tensor is the tp=1 one).
enum class tp_split {
  replicated,  // every rank holds all of it (norm weights, row-parallel biases)
  rows,        // contiguous blocks of rows (column-parallel weights and biases, vocab shards)
  columns,     // contiguous blocks of columns (row-parallel weights)
  row_halves,  // [gate; up] SwiGLU fc1: each rank holds a block of each half
  row_segments,  // consecutive row segments (parameter::segments), each split in blocks of rows:
                 // the Mamba mixer's in_proj [z; x; B; C; dt] and conv1d [x; B; C]
};

enum class init_kind {
  normal,       // Megatron's init_method and output_layer_init_method: normal(0, std), or xavier
                // uniform when the store is set to it (--init-method-xavier-uniform)
  normal_only,  // normal(0, std) whatever the store's setting (an embedding with its own std)
  zeros,
  ones,
};

struct parameter {
  std::string name;
  std::vector<std::int64_t> shape;       // this rank's shape
  std::vector<std::int64_t> full_shape;  // the tp=1 shape
  tp_split split = tp_split::replicated;
  /// row_segments: each segment's rows in the full tensor (they sum to full_shape[0]).
  std::vector<std::int64_t> segments;
  bool no_weight_decay = false;  // Megatron's default: biases and 1-D tensors
  /// Replicated, but used on a sequence shard (Megatron's `sequence_parallel` attribute: norm
  /// weights and row-parallel biases under --sequence-parallel): each rank's gradient is a
  /// partial sum, all-reduced over the tensor-parallel group before the optimizer.
  bool sequence_parallel = false;
  /// Replicated, but each tensor-parallel rank uses it on its own attention heads (the
  /// --qk-layernorm weights): its gradient is summed over the tensor-parallel group too.
  bool partial_over_heads = false;
  bool summed_over_tp() const { return sequence_parallel || partial_over_heads; }
  /// One of this expert-parallel rank's MoE experts (Megatron's allreduce=False parameters):
  /// its gradient is reduced over the expert-data-parallel group, not the data-parallel one.
  /// The store places the experts after every other parameter, from expert_begin().
  bool expert = false;
  /// The weight of a linear whose GEMMs run in fp8 (its fp8 state), null otherwise: the weights
  /// --fp8-param-gather holds as fp8.
  fp8_linear* fp8_gemm = nullptr;
  std::size_t offset = 0;        // into the flat buffers
  std::size_t numel = 0;
  tensor::tensor_view value;  // this rank's shape, inside the store's flat buffers
  tensor::tensor_view grad;

  /// The elements as T* (throws tensor::tensor_error unless T is the store's dtype).
  template <class T>
  T* value_as() const { return value.host<T>().data(); }
  template <class T>
  T* grad_as() const { return grad.host<T>().data(); }
};

/// Flat elements [begin, end) of a store's layout, held at value_tensor()[at, at + end - begin).
struct held_range {
  std::size_t begin = 0, end = 0, at = 0;
  bool operator==(const held_range&) const = default;
};

class parameter_store {
 public:
  /// Values of `type`, gradients of `grad_type` (fp32 main gradients for a 16-bit model).
  explicit parameter_store(tensor::dtype type = tensor::dtype::float32,
                           tensor::dtype grad_type = tensor::dtype::float32)
      : type_(type), grad_type_(grad_type) {}
  tensor::dtype type() const { return type_; }
  tensor::dtype grad_type() const { return grad_type_; }
  /// Registers a parameter before allocate(); returns its id.
  int add(std::string name, std::vector<std::int64_t> full_shape, tp_split split, init_kind init,
          double std = 0.0);
  /// Allocates both buffers and initializes every parameter: the full tensor is drawn (in fp32)
  /// from a generator seeded by (seed, name), then this rank's shard is kept, so any tp size
  /// starts from the same model; a 16-bit store rounds those values (Megatron initializes in
  /// fp32 and casts the module to bf16/fp16).
  void allocate(std::uint64_t seed, int tp_rank, int tp_size);
  /// The flat layout alone (each parameter's shape, offset and numel; flat_numel()), with no
  /// memory: Megatron's model on the meta device. materialize_shard() follows.
  void lay_out(int tp_size);
  /// After lay_out(), Megatron FSDP's --init-model-with-meta-device: value_tensor() holds only
  /// `ranges` (as keep_values_shard() leaves it: value views unbound, no gradient buffer), and
  /// only the parameters they touch are drawn, one full tensor at a time, to the same values
  /// allocate() gives them.
  void materialize_shard(std::uint64_t seed, int tp_rank, int tp_size, std::vector<held_range> ranges,
                         std::size_t length);
  /// Writes parameter id's initial values (`local`: this rank's shard, any float dtype, p's
  /// numel) into whatever part of it the store holds: a layer's own initialization.
  void set_initial_values(int id, tensor::const_tensor_view local);
  /// Whether lay_out() ran and nothing holds the values yet.
  bool laid_out_only() const { return held_.empty() && flat_numel_ > 0; }
  /// The MoE experts split over a group other than the tensor-parallel one (an
  /// --expert-tensor-parallel-size other than 1 and tp): their shards are (rank, size)'s. Before
  /// allocate().
  void set_expert_split(int rank, int size) { expert_rank_ = rank, expert_size_ = size; }
  /// Megatron's --init-method-xavier-uniform: init_kind::normal weights draw uniform(-b, b),
  /// b = sqrt(6 / (fan_in + fan_out)) with the fans of the full [out, in] weight (Megatron's CPU
  /// initialization, which initializes the master weight before splitting it). Before allocate().
  void set_xavier_uniform(bool on) { xavier_uniform_ = on; }
  /// Megatron's --no-initialization (perform_initialization=False): the init_method draws
  /// (init_kind::normal and normal_only: linear, embedding, router and expert weights) are
  /// skipped and those values stay zero until a checkpoint fills them; ones and zeros (norms,
  /// biases) and layers' own initializations still run. Before allocate().
  void set_skip_weight_init(bool on) { skip_weight_init_ = on; }

  parameter& operator[](int id) { return params_[id]; }
  const parameter& operator[](int id) const { return params_[id]; }
  /// A parameter's value or gradient (an empty view for id -1, an absent optional parameter).
  tensor::tensor_view value(int id) const { return id < 0 ? tensor::tensor_view{} : params_[id].value; }
  tensor::tensor_view grad(int id) const { return id < 0 ? tensor::tensor_view{} : params_[id].grad; }
  std::vector<parameter>& all() { return params_; }
  const std::vector<parameter>& all() const { return params_; }
  /// The flat buffers' elements as T (throws tensor_error unless T is the store's dtype).
  template <class T>
  std::span<T> values() { return values_.template host<T>(); }
  template <class T>
  std::span<T> grads() { return grads_.template host<T>(); }
  /// The flat buffers as tensors, counted as parameters and gradients.
  tensor::tensor& value_tensor() { return values_; }
  tensor::tensor& grad_tensor() { return grads_; }
  void zero_grad();
  /// Where the experts start in the flat buffers (the end when there are none); after allocate().
  std::size_t expert_begin() const { return expert_begin_; }
  /// Elements of the flat layout (every parameter's).
  std::size_t flat_numel() const { return flat_numel_; }

  /// Fully sharded data parallelism (ZeRO-3): value_tensor() keeps only `length` elements: the
  /// flat elements of each of `ranges` at its place (a data-parallel shard of each region: the
  /// dense parameters' and, with expert parallelism, the experts'), zeros elsewhere (padding).
  /// The rest is freed and every parameter's value view is unbound (null) until bind_values().
  void keep_values_shard(std::vector<held_range> ranges, std::size_t length);
  /// --fp8-param-gather: frees the value slots of parameters `ids`, whose values are held
  /// elsewhere (as fp8 bytes). value_tensor() then holds every other parameter, packed in flat
  /// order, each value view at its new place; the dropped parameters' value views are null.
  /// Needs the whole layout held (not after keep_values_shard).
  void drop_values(const std::vector<int>& ids);
  /// The parts of flat elements [begin, end) that value_tensor() holds, each with its place
  /// there: all of them, at their own offsets, unless the values are sharded or dropped.
  std::vector<held_range> held(std::size_t begin, std::size_t end) const;
  /// Points each parameter's value at its place in `full`, a whole flat layout of the store's
  /// dtype (at least flat_numel() elements): the gathered parameters. unbind_values() undoes it.
  void bind_values(tensor::tensor_view full);
  void unbind_values();
  /// Points parameter id's value at `v` (its numel elements of the store's dtype, given p's shape):
  /// one FSDP unit's gathered parameters. unbind_value(id) undoes it.
  void bind_value(int id, tensor::tensor_view v);
  void unbind_value(int id) { params_[std::size_t(id)].value.data = nullptr; }
  /// ZeRO-2: frees the gradient buffer; backward() then needs bind_grads() with a whole flat
  /// layout of grad_type() (zero_grad() leaves it alone). unbind_grads() undoes it.
  void drop_grads();
  void bind_grads(tensor::tensor_view full);
  void unbind_grads();
  /// Points parameter id's gradient at `g` (its numel elements of grad_type()): one FSDP unit's
  /// gradient buffer. unbind_grad(id) undoes it.
  void bind_grad(int id, tensor::tensor_view g);
  void unbind_grad(int id) { params_[std::size_t(id)].grad.data = nullptr; }
  /// Where the layers' backward hands its weight-gradient work: run at once, or kept for a
  /// zero-bubble schedule's W pass (model/deferred_weight_grads.hpp).
  deferred_weight_grads& weight_grads() { return weight_grads_; }
  /// The fp8 linears of the layers built on this store, in the order they were built (the same
  /// on every rank of a pipeline stage): the delayed recipe's amax step reduces them together.
  /// `weight`: the id of the weight it multiplies (its name names the linear's state in checkpoints).
  void add_fp8_linear(fp8_linear* l, int weight) {
    fp8_linears_.push_back(l);
    fp8_weights_.push_back(weight);
  }
  const std::vector<fp8_linear*>& fp8_linears() const { return fp8_linears_; }
  /// The weight id of each of fp8_linears(), in the same order.
  const std::vector<int>& fp8_weights() const { return fp8_weights_; }

 private:
  struct init_spec {
    init_kind kind;
    double std;
  };
  /// Draws every parameter that the store holds any of (see allocate()).
  void initialize(std::uint64_t seed, int tp_rank, int tp_size);
  /// Fills `full` (the tp = 1 tensor) with its initial values from a generator seeded by seed.
  void draw(std::vector<float>& full, std::uint64_t seed, const std::vector<std::int64_t>& full_shape,
            init_spec init) const;
  /// p's elements in a whole flat layout, in p's shape.
  static tensor::tensor_view piece(tensor::tensor_view buffer, const parameter& p);
  /// Throws std::logic_error naming `what` when a range lies outside the layout or a shard of
  /// `length` elements.
  void check_ranges(const std::vector<held_range>& ranges, std::size_t length, const char* what) const;

  tensor::dtype type_, grad_type_;
  std::vector<parameter> params_;
  std::vector<init_spec> inits_;
  bool xavier_uniform_ = false;
  bool skip_weight_init_ = false;
  int expert_rank_ = 0, expert_size_ = 0;  // 0: the experts split like the rest
  std::size_t expert_begin_ = 0, flat_numel_ = 0;
  std::vector<held_range> held_;  // what values_ holds (the whole layout once allocated)
  // The data plane all-reduces the gradients and all-gathers the values (huge pages).
  tensor::tensor values_, grads_;
  deferred_weight_grads weight_grads_;
  std::vector<fp8_linear*> fp8_linears_;
  std::vector<int> fp8_weights_;
};

/// Local shape of a full [rows, cols] (or [n]) tensor under split.
std::vector<std::int64_t> shard_shape(const std::vector<std::int64_t>& full, tp_split split,
                                      int tp_size);
/// local = this rank's part of full (T: float or double).
/// segments: row_segments' segment rows (parameter::segments).
template <typename T>
void copy_shard(const T* full, T* local, const std::vector<std::int64_t>& full_shape,
                tp_split split, int tp_rank, int tp_size, const std::vector<std::int64_t>& segments = {});
/// full's part for this rank = local (the inverse of copy_shard).
template <typename T>
void place_shard(const T* local, T* full, const std::vector<std::int64_t>& full_shape,
                 tp_split split, int tp_rank, int tp_size, const std::vector<std::int64_t>& segments = {});

}  // namespace mactor::model
