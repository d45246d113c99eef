// torch.save/torch.load's zip layout over pickle_reader and a protocol-2 pickler of pickle_value
// (no memo: every value is written where it occurs, which torch.load reads the same).
#include "checkpoint/torch_file.hpp"

#include <cstring>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/durable_file.hpp"
#include "checkpoint/pickle_reader.hpp"
#include "checkpoint/zip_archive.hpp"

namespace mactor::checkpoint {
namespace {

using kind = pickle_value::kind;

class pickler {
 public:
  std::string out;
  std::vector<const torch_tensor*> storages;

  void value(const pickle_value& v) {
    switch (v.k) {
      case kind::none: out += 'N'; break;
      case kind::boolean: out += v.b ? '\x88' : '\x89'; break;
      case kind::integer: integer(v.i); break;
      case kind::real: real(v.d); break;
      case kind::text: text(v.s); break;
      case kind::bytes: bytes(v.s); break;
      case kind::global: global(v.s); break;
      case kind::list:
        out += ']';
        if (!v.items.empty()) {
          out += '(';
          for (const auto& x : v.items) value(x);
          out += 'e';
        }
        break;
      case kind::tuple: tuple(v.items); break;
      case kind::dict: dict(v); break;
      case kind::tensor: tensor(*v.tensor); break;
      case kind::object:  // cls.__new__(cls) with its __dict__: argparse.Namespace as pickle does it
        global(v.s);
        out += ")\x81";
        dict_body(v, false);
        out += 'b';
        break;
    }
  }

 private:
  void integer(std::int64_t i) {
    if (i >= 0 && i < 256) {
      out += 'K';
      out += static_cast<char>(i);
    } else if (i >= INT32_MIN && i <= INT32_MAX) {
      out += 'J';
      put(static_cast<std::uint32_t>(i), 4);
    } else {
      out += '\x8a';
      out += '\x08';
      put(static_cast<std::uint64_t>(i), 8);
    }
  }
  void put(std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
  }
  void real(double d) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, 8);
    out += 'G';
    for (int k = 7; k >= 0; --k) out += static_cast<char>((bits >> (8 * k)) & 0xff);
  }
  void text(const std::string& s) {
    out += 'X';
    put(s.size(), 4);
    out += s;
  }
  void bytes(const std::string& b) {  // protocol 2: _codecs.encode(latin-1 text, 'latin1')
    std::string utf8;
    for (unsigned char c : b) {
      if (c < 0x80) utf8 += static_cast<char>(c);
      else {
        utf8 += static_cast<char>(0xc0 | (c >> 6));
        utf8 += static_cast<char>(0x80 | (c & 0x3f));
      }
    }
    global("_codecs.encode");
    text(utf8);
    text("latin1");
    out += "\x86R";
  }
  void global(const std::string& dotted) {
    const auto dot = dotted.rfind('.');
    out += 'c';
    out += dotted.substr(0, dot) + "\n" + dotted.substr(dot + 1) + "\n";
  }
  void tuple(const std::vector<pickle_value>& items) {
    if (items.empty()) {
      out += ')';
      return;
    }
    out += '(';
    for (const auto& x : items) value(x);
    out += 't';
  }
  void dict_body(const pickle_value& v, bool ordered) {
    if (ordered) out += "ccollections\nOrderedDict\n)R";
    else out += '}';
    if (v.entries.empty()) return;
    out += '(';
    for (const auto& [k, x] : v.entries) {
      value(k);
      value(x);
    }
    out += 'u';
  }
  void dict(const pickle_value& v) { dict_body(v, v.ordered); }
  void tensor(const torch_tensor& t) {
    const std::string key = std::to_string(storages.size());
    storages.push_back(&t);
    std::int64_t n = 1;
    for (auto s : t.shape) n *= s;
    global("torch._utils._rebuild_tensor_v2");
    out += '(';
    out += '(';  // persistent id ('storage', torch.<X>Storage, key, 'cpu', numel)
    text("storage");
    global(std::string("torch.") + t.dtype->storage);
    text(key);
    text("cpu");
    integer(n);
    out += "tQ";
    integer(0);
    std::vector<pickle_value> shape, stride(t.shape.size());
    std::int64_t step = 1;
    for (std::size_t d = t.shape.size(); d-- > 0;) {
      stride[d] = pickle_value::integer(step);
      step *= t.shape[d];
    }
    for (auto s : t.shape) shape.push_back(pickle_value::integer(s));
    tuple(shape);
    tuple(stride);
    out += '\x89';
    out += "ccollections\nOrderedDict\n)R";
    out += "tR";
  }
};

}  // namespace

std::string pickle_bytes(const pickle_value& root) {
  pickler p;
  p.out = "\x80\x02";
  p.value(root);
  p.out += '.';
  return p.out;
}

std::string torch_save_bytes(const pickle_value& root) {
  pickler p;
  p.out = "\x80\x02";
  p.value(root);
  p.out += '.';
  std::vector<std::string> names;
  for (std::size_t i = 0; i < p.storages.size(); ++i) names.push_back("archive/data/" + std::to_string(i));
  std::vector<zip_member> members{{"archive/data.pkl", p.out}, {"archive/byteorder", "little"}};
  for (std::size_t i = 0; i < p.storages.size(); ++i) members.push_back({names[i], p.storages[i]->bytes});
  members.push_back({"archive/version", "3\n"});
  return write_zip(members);
}

pickle_value torch_load(const std::filesystem::path& file) {
  const std::string where = file.string();
  zip_reader zip(read_whole_file(file), where);
  std::string prefix;
  for (const auto& n : zip.names())
    if (n.size() >= 8 && n.compare(n.size() - 8, 8, "data.pkl") == 0 &&
        (n.size() == 8 || n[n.size() - 9] == '/') && n.find('/') == n.rfind('/')) {
      prefix = n.substr(0, n.size() - 8);
      break;
    }
  if (!zip.has(prefix + "data.pkl"))
    throw checkpoint_error(where + " has no data.pkl; it is not a torch.save file (a legacy pre-1.6 tar file is not read)");
  if (zip.has(prefix + "byteorder") && zip.member(prefix + "byteorder") != "little")
    throw checkpoint_error(where + " was saved big-endian; only little-endian checkpoints are read");
  const persistent_loader load = [&](const pickle_value& pid) {
    if (pid.k != kind::tuple || pid.items.size() < 3 || pid.items[0].s != "storage")
      throw checkpoint_error(where + ": unknown persistent id in its pickle; is it a torch checkpoint?");
    const std::string& cls = pid.items[1].s;
    const torch_dtype* dtype = dtype_by_storage(cls.substr(cls.rfind('.') + 1));
    if (!dtype) throw checkpoint_error(where + " holds a " + cls + " tensor, which mactor does not read");
    auto t = std::make_shared<torch_tensor>();
    t->dtype = dtype;
    t->bytes = std::string(zip.member(prefix + "data/" + pid.items[2].s));
    t->shape = {static_cast<std::int64_t>(t->bytes.size() / dtype->item_size)};
    return pickle_value::of_tensor(std::move(t));
  };
  return unpickle(zip.member(prefix + "data.pkl"), load, where);
}

}  // namespace mactor::checkpoint
