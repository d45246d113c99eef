// The action vocabulary that every schedule yields and every port executes: compute on a model
// chunk, or move an activation / gradient to or from a pipeline neighbour. No transport here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mactor::schedules {

/// What an action does. Transfers name the direction of the pipeline they serve:
/// `*_forward` moves activations (toward higher virtual stages), `*_backward` moves gradients.
enum class op : std::uint8_t {
  forward,        ///< run the forward pass of (microbatch, chunk)
  backward,       ///< run the backward pass of (microbatch, chunk)
  recv_forward,   ///< post the receive of the activation that forward(microbatch, chunk) consumes
  send_forward,   ///< send the activation that forward(microbatch, chunk) produced
  recv_backward,  ///< post the receive of the gradient that backward(microbatch, chunk) consumes
  send_backward,  ///< send the input gradient that backward(microbatch, chunk) produced
  /// run the weight-gradient pass that backward(microbatch, chunk) left for later (zero-bubble
  /// schedules: their backward computes only the input gradient, the critical path)
  backward_weight,
};

/// One step of a schedule on one pipeline rank. `chunk` is the rank's local model chunk
/// (0 without interleaving); the virtual stage it runs is chunk * pp + rank.
/// A transfer carries the (microbatch, chunk) of the compute action on THIS rank that produces
/// (send) or consumes (recv) the tensor, so a port can match it with the peer's action.
struct action {
  op kind = op::forward;
  int microbatch = 0;
  int chunk = 0;

  friend bool operator==(const action&, const action&) = default;
};

/// True for forward, backward and backward_weight, false for the four transfers.
bool is_compute(op kind);

/// Short text of an action: `F3.1` (forward, microbatch 3, chunk 1), `B3.1`, and for transfers
/// `RF3.1` / `SF3.1` (recv / send for forward 3.1), `RB3.1` / `SB3.1`, and `W3.1` (weight gradients).
std::string to_string(const action& a);

/// Joins `to_string` of each action with single spaces.
std::string to_string(const std::vector<action>& actions);

/// Parses the text `to_string` writes: space-separated tokens such as `F0 B0 RF1.0`; a token
/// without `.chunk` means chunk 0. Throws std::invalid_argument naming the bad token.
std::vector<action> parse_actions(std::string_view text);

}  // namespace mactor::schedules
