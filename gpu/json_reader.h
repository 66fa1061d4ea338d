// Reads the fields of one JSON object for the reference-data formats (results.h, reference.h),
// naming the file and the object's path in every error (InputError: the CLIs exit 2).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "isa/error.h"
#include "isa/text.h"

namespace tpusim::gpu {

// `text` parsed as JSON; an InputError "WHERE: invalid JSON: ..." (with the parser's line and column)
// when it is not.
inline nlohmann::ordered_json parse_json(const std::string& text, const std::string& where) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::parse_error& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", where, e.what()));
  }
}

class JsonReader {
 public:
  using json = nlohmann::ordered_json;
  // `source`: the file's text, for a reader of its top-level object (a hand-written file's keys): an
  // error about a key the file gives then names its line, "FILE:LINE: KEY: ...".
  JsonReader(const json& j, std::string where, std::string_view source = {})
      : j_(j), where_(std::move(where)), source_(source) {
    if (!j_.is_object()) fail("", "expected an object, got {}", j_.dump());
  }
  template <typename... A>
  [[noreturn]] void fail(const std::string& key, fmt::format_string<A...> f, A&&... a) const {
    const size_t line = key_line(key);
    throw InputError(fmt::format("{}{}{}{}: {}", where_, line ? fmt::format(":{}", line) : "",
                                 key.empty() ? "" : ": ", key, fmt::format(f, std::forward<A>(a)...)));
  }
  bool has(const std::string& key) const { return j_.contains(key); }
  const json& at(const std::string& key) const {
    if (!j_.contains(key)) fail(key, "missing");
    return j_.at(key);
  }
  std::string text(const std::string& key, bool required = true) const {
    if (!required && !j_.contains(key)) return {};
    const json& v = at(key);
    if (!v.is_string()) fail(key, "expected a string, got {}", v.dump());
    return v.get<std::string>();
  }
  // A number >= min (> min when `above`); `fallback` when absent and not required.
  double number(const std::string& key, double min = 0, bool above = false, bool required = true,
                double fallback = 0) const {
    if (!required && !j_.contains(key)) return fallback;
    const json& v = at(key);
    if (!v.is_number() || v.get<double>() < min || (above && v.get<double>() <= min))
      fail(key, "expected a number {} {}, got {}", above ? ">" : ">=", min, v.dump());
    return v.get<double>();
  }
  uint64_t count(const std::string& key, uint64_t min = 0, bool required = true) const {
    if (!required && !j_.contains(key)) return 0;
    const json& v = at(key);
    if (!v.is_number_unsigned() || v.get<uint64_t>() < min)
      fail(key, "expected an integer >= {}, got {}", min, v.dump());
    return v.get<uint64_t>();
  }
  bool flag(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_boolean()) fail(key, "expected true or false, got {}", v.dump());
    return v.get<bool>();
  }
  std::string choice(const std::string& key, std::initializer_list<const char*> allowed,
                     bool required = true) const {
    if (!required && !j_.contains(key)) return {};
    const std::string v = text(key);
    std::string names;
    for (const char* a : allowed) {
      if (v == a) return v;
      names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", a);
    }
    fail(key, "\"{}\" is not one of {}", v, names);
  }
  // Every key must be one of `known` (a misspelt optional key would otherwise be ignored).
  void only(const std::vector<std::string>& known) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool ok = false;
      for (const std::string& k : known) ok |= k == it.key();
      if (ok) continue;
      const auto [near, distance] = isa::nearest(it.key(), known);
      fail(it.key(), "unknown key{}",
           distance <= 3 ? fmt::format(" (did you mean \"{}\"?)", near) : std::string());
    }
  }
  const std::string& where() const { return where_; }

 private:
  // The 1-based line of `"key":` among the top-level object's own keys in the source (not a key
  // of a nested record such as results[i]), 0 when unknown. Strings are skipped whole, escapes
  // included, so braces and quotes inside values do not count.
  size_t key_line(const std::string& key) const {
    if (source_.empty() || key.empty()) return 0;
    int depth = 0;
    size_t line = 1;
    for (size_t i = 0; i < source_.size(); ++i) {
      const char c = source_[i];
      if (c == '\n') ++line;
      else if (c == '{' || c == '[') ++depth;
      else if (c == '}' || c == ']') --depth;
      else if (c == '"') {
        const size_t start = i + 1;
        for (++i; i < source_.size() && source_[i] != '"'; ++i)
          if (source_[i] == '\\') ++i;
          else if (source_[i] == '\n') ++line;
        if (i >= source_.size()) return 0;
        if (depth != 1 || source_.substr(start, i - start) != key) continue;
        const size_t next = source_.find_first_not_of(" \t\r\n", i + 1);
        if (next != std::string_view::npos && source_[next] == ':') return line;
      }
    }
    return 0;
  }
  const json& j_;
  std::string where_;
  std::string_view source_;
};

}  // namespace tpusim::gpu
