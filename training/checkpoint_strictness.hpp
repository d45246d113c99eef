// Megatron's --dist-ckpt-strictness on load, in dist_checkpointing's terms: "unexpected" keys are
// tensors this model asks for that the checkpoint lacks; "missing" keys are model tensors the
// checkpoint holds that no rank asks for. assume_ok_unexpected (the default) leaves an absent
// tensor to fail the load; log_* and return_* warn and leave such tensors at their initial values
// (Megatron hands return_*'s lists to its caller, which goes on loading); raise_* refuse the
// checkpoint naming every key; ignore_all loads what is there.
#pragma once
#include <string>
#include <vector>

namespace mactor::comm {
class communicator;
}

namespace mactor::training {

struct checkpoint_keys {
  std::vector<std::string> unexpected;  ///< asked for here, not in the checkpoint
  std::vector<std::string> missing;     ///< in the checkpoint, asked for by no rank (*_all modes)
};

/// Whether `mode` looks at the checkpoint's keys no rank asks for (log_all, raise_all, return_all).
bool strictness_checks_missing(const std::string& mode);

/// The checkpoint's model tensors (not optimizer state) that no rank of `world` asks for: each
/// rank marks the names of `checkpoint_names` it asks for and the marks are summed over the world
/// (null: one process). Every rank must call it with the same checkpoint_names.
std::vector<std::string> unrequested_keys(const std::vector<std::string>& checkpoint_names,
                                          const std::vector<std::string>& requested,
                                          comm::communicator* world);

/// Applies `mode` to the keys: throws checkpoint::checkpoint_error naming them (raise_*, or an
/// unexpected key under assume_ok_unexpected), prints one warning per list on stderr (log_*,
/// return_*; missing keys from rank 0 only), or nothing. The messages name what chose the mode:
/// `chosen_by`, or "--dist-ckpt-strictness <mode>".
void apply_strictness(const std::string& mode, const checkpoint_keys& keys, const std::string& where,
                      int rank, const std::string& chosen_by = "");

}  // namespace mactor::training
