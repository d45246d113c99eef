// Recursive-descent evaluation of Megatron's layer-pattern expressions (no Python eval needed).
#include "config/list_expression.hpp"

#include <cctype>

namespace mactor::config {
namespace {

constexpr std::size_t max_list_length = 1 << 20;  // a pattern is one entry per layer

class evaluator {
 public:
  explicit evaluator(std::string_view text) : text_(text) {}

  std::optional<int_or_list_value> run() {
    auto v = expression();
    if (!v || pos_ != text_.size()) return std::nullopt;
    return v;
  }

 private:
  using value = int_or_list_value;

  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) { ++pos_; return true; }
    return false;
  }

  std::optional<value> expression() {
    auto left = term();
    while (left && eat('+')) left = add(*left, term());
    return left;
  }

  std::optional<value> term() {
    auto left = factor();
    while (left && eat('*')) left = multiply(*left, factor());
    return left;
  }

  std::optional<value> factor() {
    if (eat('(')) {
      auto inner = expression();
      if (!inner || !eat(')')) return std::nullopt;  // "(1,2)" would be a tuple: not a pattern
      return inner;
    }
    if (eat('[')) return list_literal();
    return integer();
  }

  std::optional<value> list_literal() {
    std::vector<std::int64_t> items;
    if (eat(']')) return items;
    while (true) {
      auto item = expression();
      if (!item || !std::holds_alternative<std::int64_t>(*item)) return std::nullopt;
      items.push_back(std::get<std::int64_t>(*item));
      if (eat(']')) return items;
      if (!eat(',')) return std::nullopt;
      if (eat(']')) return items;  // trailing comma
    }
  }

  std::optional<value> integer() {
    const std::size_t start = pos_;
    std::int64_t v = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (v > (INT64_MAX - 9) / 10) return std::nullopt;
      v = v * 10 + (text_[pos_++] - '0');
    }
    // Python 3 rejects leading zeros such as "01" (but allows "0" and "00").
    if (pos_ == start) return std::nullopt;
    if (text_[start] == '0' && v != 0) return std::nullopt;
    return v;
  }

  static std::optional<value> add(const value& a, const std::optional<value>& b) {
    if (!b || a.index() != b->index()) return std::nullopt;
    if (auto* x = std::get_if<std::int64_t>(&a)) return *x + std::get<std::int64_t>(*b);
    auto out = std::get<std::vector<std::int64_t>>(a);
    const auto& tail = std::get<std::vector<std::int64_t>>(*b);
    if (out.size() + tail.size() > max_list_length) return std::nullopt;
    out.insert(out.end(), tail.begin(), tail.end());
    return out;
  }

  static std::optional<value> multiply(const value& a, const std::optional<value>& b) {
    if (!b) return std::nullopt;
    const auto* ia = std::get_if<std::int64_t>(&a);
    const auto* ib = std::get_if<std::int64_t>(&*b);
    if (ia && ib) return *ia * *ib;
    if (!ia && !ib) return std::nullopt;  // list * list is a TypeError in Python
    const auto& list = ia ? std::get<std::vector<std::int64_t>>(*b) : std::get<std::vector<std::int64_t>>(a);
    const std::int64_t times = ia ? *ia : *ib;
    std::vector<std::int64_t> out;
    if (times <= 0 || list.empty()) return out;
    if (static_cast<std::uint64_t>(times) > max_list_length / list.size()) return std::nullopt;
    for (std::int64_t i = 0; i < times; ++i) out.insert(out.end(), list.begin(), list.end());
    return out;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

std::optional<int_or_list_value> evaluate_list_expression(std::string_view text) {
  for (char c : text)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == ',' || c == '[' || c == ']' || c == '(' ||
          c == ')' || c == '+' || c == '*'))
      return std::nullopt;
  return evaluator(text).run();
}

}  // namespace mactor::config
