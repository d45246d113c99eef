// A stack machine over pickle opcodes. Values live behind shared pointers while unpickling so a
// memoized container that is filled later (EMPTY_DICT, BINPUT, ... SETITEMS) is the same object
// a BINGET returns; containers receive copies once their children are complete.
#include "checkpoint/pickle_reader.hpp"

#include <cstring>
#include <map>
#include <memory>

#include "checkpoint/checkpoint_error.hpp"

namespace mactor::checkpoint {
namespace {

using ptr = std::shared_ptr<pickle_value>;
using kind = pickle_value::kind;

// A kind::tensor value from a 1-d storage, viewed at offset with size and stride (elements).
pickle_value rebuild_tensor(const pickle_value& args, const std::string& where) {
  if (args.items.size() < 4 || !args.items[0].tensor)
    throw checkpoint_error(where + ": malformed _rebuild_tensor_v2 arguments");
  const torch_tensor& storage = *args.items[0].tensor;
  const std::int64_t offset = args.items[1].i;
  auto t = std::make_shared<torch_tensor>();
  t->dtype = storage.dtype;
  std::vector<std::int64_t> stride;
  for (const auto& v : args.items[2].items) t->shape.push_back(v.i);
  for (const auto& v : args.items[3].items) stride.push_back(v.i);
  std::int64_t n = 1;
  for (auto s : t->shape) n *= s;
  const std::size_t item = storage.dtype->item_size;
  t->bytes.resize(n * item);
  std::vector<std::int64_t> index(t->shape.size(), 0);
  const std::int64_t elements = static_cast<std::int64_t>(storage.bytes.size() / item);
  for (std::int64_t e = 0; e < n; ++e) {
    std::int64_t at = offset;
    for (std::size_t d = 0; d < index.size(); ++d) at += index[d] * stride[d];
    if (at < 0 || at >= elements) throw checkpoint_error(where + ": a tensor reaches past its storage; re-save it");
    std::memcpy(t->bytes.data() + e * item, storage.bytes.data() + at * item, item);
    for (std::size_t d = index.size(); d-- > 0;) {
      if (++index[d] < t->shape[d]) break;
      index[d] = 0;
    }
  }
  return pickle_value::of_tensor(std::move(t));
}

// Latin-1 text (as UTF-8) back to its bytes: how protocol 2 pickles a bytes object.
std::string latin1_bytes(const std::string& utf8) {
  std::string out;
  for (std::size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80 || i + 1 >= utf8.size()) out.push_back(static_cast<char>(c));
    else out.push_back(static_cast<char>(((c & 0x1f) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3f)));
  }
  return out;
}

pickle_value apply(const pickle_value& callable, const pickle_value& args, const std::string& where) {
  const std::string& f = callable.s;
  if (f == "torch._utils._rebuild_tensor_v2" || f == "torch._utils._rebuild_tensor") return rebuild_tensor(args, where);
  if (f == "torch._utils._rebuild_parameter" && !args.items.empty()) return args.items[0];
  if (f == "torch._tensor._rebuild_from_type_v2" && args.items.size() >= 3)
    return apply(args.items[0], args.items[2], where);
  if (f == "collections.OrderedDict") {
    auto d = pickle_value::dict(true);
    if (!args.items.empty())
      for (const auto& pair : args.items[0].items)
        if (pair.items.size() == 2) d.entries.emplace_back(pair.items[0], pair.items[1]);
    return d;
  }
  if (f == "_codecs.encode" && !args.items.empty()) {
    pickle_value b;
    b.k = kind::bytes;
    b.s = latin1_bytes(args.items[0].s);
    return b;
  }
  if (f == "builtins.float" && !args.items.empty()) return pickle_value::real(args.items[0].number(where + ": float()"));
  auto o = pickle_value::object(f);  // opaque: keep the arguments
  o.items = args.items;
  return o;
}

class machine {
 public:
  machine(std::string_view in, const persistent_loader& load, const std::string& where)
      : in_(in), load_(load), where_(where) {}

  pickle_value run() {
    for (;;) {
      const auto op = static_cast<unsigned char>(byte());
      if (op == '.') {
        if (stack_.empty()) fail("STOP on an empty stack");
        return *stack_.back();
      }
      step(op);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw checkpoint_error(where_ + ": cannot read its pickle (" + why + " at byte " + std::to_string(at_) +
                           "); is it a torch checkpoint?");
  }
  char byte() {
    if (at_ >= in_.size()) fail("unexpected end");
    return in_[at_++];
  }
  std::uint64_t uint(int n) {
    if (at_ + n > in_.size()) fail("unexpected end");
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(in_[at_ + i])) << (8 * i);
    at_ += n;
    return v;
  }
  std::string bytes(std::uint64_t n) {
    if (at_ + n > in_.size()) fail("unexpected end");
    std::string s(in_.substr(at_, n));
    at_ += n;
    return s;
  }
  std::string line() {
    const auto end = in_.find('\n', at_);
    if (end == std::string_view::npos) fail("unterminated line");
    std::string s(in_.substr(at_, end - at_));
    at_ = end + 1;
    return s;
  }
  void push(pickle_value v) { stack_.push_back(std::make_shared<pickle_value>(std::move(v))); }
  ptr pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("stack underflow");
    auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  ptr& top() {
    if (stack_.empty()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<ptr> pop_mark() {
    if (marks_.empty()) fail("no MARK");
    std::vector<ptr> items(stack_.begin() + marks_.back(), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  std::int64_t long_bytes(std::uint64_t n) {
    const std::string b = bytes(n);
    if (n > 8) fail("integer wider than 64 bits");
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(b[i])) << (8 * i);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(b[n - 1]) & 0x80)) v |= ~std::uint64_t(0) << (8 * n);
    return static_cast<std::int64_t>(v);
  }
  void memo_put(std::uint64_t i) { memo_[i] = top(); }
  void memo_get(std::uint64_t i) {
    const auto it = memo_.find(i);
    if (it == memo_.end()) fail("memo " + std::to_string(i) + " missing");
    stack_.push_back(it->second);
  }
  void tuple_of(std::size_t n) {
    std::vector<pickle_value> items(n);
    for (std::size_t i = n; i-- > 0;) items[i] = *pop();
    push(pickle_value::tuple(std::move(items)));
  }
  void set_items(std::vector<ptr> items) {
    auto& d = *top();
    for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
      if (d.k == kind::dict) d.entries.emplace_back(*items[i], *items[i + 1]);
      else fail("SETITEMS on a non-dict");
    }
  }
  void build(const pickle_value& state) {
    auto& o = *top();
    if (o.k == kind::object && state.k == kind::dict) o.entries = state.entries;
    else if (o.k == kind::object) o.items.push_back(state);
    // A dict's attributes (an OrderedDict's _metadata) carry nothing mactor reads.
  }
  void step(unsigned char op);
  bool step_scalar(unsigned char op);
  bool step_object(unsigned char op);

  std::string_view in_;
  const persistent_loader& load_;
  const std::string& where_;
  std::size_t at_ = 0;
  std::vector<ptr> stack_;
  std::vector<std::size_t> marks_;
  std::map<std::uint64_t, ptr> memo_;
};

// The opcodes that push one scalar (None, bools, integers, floats, strings, bytes); false for others.
bool machine::step_scalar(unsigned char op) {
  switch (op) {
    case 'N': push(pickle_value::none()); break;
    case 0x88: push(pickle_value::boolean(true)); break;
    case 0x89: push(pickle_value::boolean(false)); break;
    case 'K': push(pickle_value::integer(static_cast<std::int64_t>(uint(1)))); break;
    case 'M': push(pickle_value::integer(static_cast<std::int64_t>(uint(2)))); break;
    case 'J': push(pickle_value::integer(static_cast<std::int32_t>(uint(4)))); break;
    case 0x8a: push(pickle_value::integer(long_bytes(uint(1)))); break;
    case 0x8b: push(pickle_value::integer(long_bytes(uint(4)))); break;
    case 'G': {
      std::uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(byte());
      double d;
      std::memcpy(&d, &bits, 8);
      push(pickle_value::real(d));
      break;
    }
    case 'X': push(pickle_value::text(bytes(uint(4)))); break;
    case 0x8c: push(pickle_value::text(bytes(uint(1)))); break;
    case 0x8d: push(pickle_value::text(bytes(uint(8)))); break;
    case 'C': case 'B': case 0x8e: {
      pickle_value b;
      b.k = kind::bytes;
      b.s = bytes(uint(op == 'C' ? 1 : op == 'B' ? 4 : 8));
      push(std::move(b));
      break;
    }
    default: return false;
  }
  return true;
}

// The opcodes that name classes and build objects from them (GLOBAL, REDUCE, NEWOBJ, BUILD,
// persistent ids); false for others.
bool machine::step_object(unsigned char op) {
  switch (op) {
    case 'c': {
      pickle_value g;
      g.k = kind::global;
      g.s = line();
      g.s += '.';  // appended in two steps: GCC 12 warns (-Wrestrict) on "." + line()
      g.s += line();
      push(std::move(g));
      break;
    }
    case 0x93: {  // STACK_GLOBAL
      auto name = pop();
      auto module = pop();
      pickle_value g;
      g.k = kind::global;
      g.s = module->s + "." + name->s;
      push(std::move(g));
      break;
    }
    case 'R': {
      auto args = pop();
      auto callable = pop();
      push(apply(*callable, *args, where_));
      break;
    }
    case 0x81: {  // NEWOBJ
      auto args = pop();
      auto cls = pop();
      auto o = pickle_value::object(cls->s);
      o.items = args->items;
      push(std::move(o));
      break;
    }
    case 'b': {
      auto state = pop();
      build(*state);
      break;
    }
    case 'Q': {
      auto pid = pop();
      push(load_(*pid));
      break;
    }
    default: return false;
  }
  return true;
}

void machine::step(unsigned char op) {
  switch (op) {
    case 0x80: byte(); break;                  // PROTO
    case 0x95: uint(8); break;                 // FRAME
    case '(': marks_.push_back(stack_.size()); break;
    case '}': push(pickle_value::dict()); break;
    case ']': push(pickle_value::list()); break;
    case ')': push(pickle_value::tuple()); break;
    case 'q': memo_put(uint(1)); break;
    case 'r': memo_put(uint(4)); break;
    case 0x94: memo_put(memo_.size()); break;  // MEMOIZE
    case 'h': memo_get(uint(1)); break;
    case 'j': memo_get(uint(4)); break;
    case 't': {
      std::vector<pickle_value> items;
      for (auto& p : pop_mark()) items.push_back(*p);
      push(pickle_value::tuple(std::move(items)));
      break;
    }
    case 0x85: tuple_of(1); break;
    case 0x86: tuple_of(2); break;
    case 0x87: tuple_of(3); break;
    case 'l': {
      std::vector<pickle_value> items;
      for (auto& p : pop_mark()) items.push_back(*p);
      push(pickle_value::list(std::move(items)));
      break;
    }
    case 'd': {
      auto items = pop_mark();
      push(pickle_value::dict());
      set_items(std::move(items));
      break;
    }
    case 'a': {
      auto v = pop();
      top()->items.push_back(*v);
      break;
    }
    case 'e': {
      auto items = pop_mark();
      for (auto& p : items) top()->items.push_back(*p);
      break;
    }
    case 's': {
      auto v = pop();
      auto k = pop();
      set_items({k, v});
      break;
    }
    case 'u': set_items(pop_mark()); break;
    case '0': pop(); break;
    default:
      if (step_scalar(op) || step_object(op)) break;
      fail("unsupported opcode 0x" + [op] {
      char t[3];
      std::snprintf(t, sizeof t, "%02x", op);
      return std::string(t);
    }());
  }
}

}  // namespace

pickle_value unpickle(std::string_view bytes, const persistent_loader& load, const std::string& where) {
  return machine(bytes, load, where).run();
}

}  // namespace mactor::checkpoint
