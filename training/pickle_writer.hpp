// A streaming writer of Python pickles (protocol 2) for nested dicts, lists, tuples, strings,
// integers and booleans: enough to write what torch.cuda.memory._snapshot() returns, which the
// PyTorch memory viewer (pytorch.org/memory_viz) and pickle.load read.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace mactor::training {

class pickle_writer {
 public:
  pickle_writer();
  /// A dict: then key(), value, key(), value, ..., end_dict().
  pickle_writer& begin_dict();
  pickle_writer& end_dict();
  pickle_writer& begin_list();
  pickle_writer& end_list();
  pickle_writer& begin_tuple();
  pickle_writer& end_tuple();
  pickle_writer& key(std::string_view k) { return text(k); }
  pickle_writer& text(std::string_view s);
  pickle_writer& integer(std::int64_t v);
  pickle_writer& unsigned_integer(std::uint64_t v);
  pickle_writer& boolean(bool v);
  pickle_writer& none();
  /// The pickle's bytes, ended with STOP; the writer is done.
  std::string finish();

 private:
  void long1(const unsigned char* little_endian, int n);
  std::string out_;
};

}  // namespace mactor::training
