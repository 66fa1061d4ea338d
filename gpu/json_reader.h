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
  } catch (const nlohmann::ordered_json::exception& e) {  // parse_error, and out_of_range for a number such as 1e400
    throw InputError(fmt::format("{}: invalid JSON: {}", where, e.what()));
  }
}

// Where things are in a JSON text that nlohmann's parser has accepted (3.11 keeps no positions):
// the members of an object and the elements of an array, found by skipping whole values (strings
// with their escapes, nested objects and arrays), so that a key's name inside a string value or a
// nested record never counts. Every function returns npos when the text is not what it expects.
namespace json_text {

constexpr size_t npos = std::string_view::npos;

inline size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
  return i;
}
// Past the string that opens at s[i] ('"').
inline size_t skip_string(std::string_view s, size_t i) {
  for (++i; i < s.size() && s[i] != '"'; ++i)
    if (s[i] == '\\') ++i;
  return i < s.size() ? i + 1 : npos;
}
// Past the value that starts at s[i].
inline size_t skip_value(std::string_view s, size_t i) {
  if (i >= s.size()) return npos;
  if (s[i] == '"') return skip_string(s, i);
  if (s[i] == '{' || s[i] == '[') {
    int depth = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '"') {
        i = skip_string(s, i);
        if (i == npos) return npos;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
      ++i;
    }
    return npos;
  }
  while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
         s[i] != '\r' && s[i] != '\n')
    ++i;
  return i;
}
// The positions of the last member `key` of the object that opens at s[i] ('{'), the one the
// parser keeps when a key is given twice: its name's opening quote and its value's first character.
struct Member {
  size_t name = npos, value = npos;
};
inline Member find_member(std::string_view s, size_t i, std::string_view key) {
  if (i >= s.size() || s[i] != '{') return {};
  Member found;
  i = skip_space(s, i + 1);
  while (i < s.size() && s[i] == '"') {
    const size_t name = i, after = skip_string(s, i);
    if (after == npos) return found;
    i = skip_space(s, after);
    if (i >= s.size() || s[i] != ':') return found;
    const size_t value = skip_space(s, i + 1);
    if (s.substr(name + 1, after - name - 2) == key) found = {name, value};
    i = skip_value(s, value);
    if (i == npos) return found;
    i = skip_space(s, i);
    if (i >= s.size() || s[i] != ',') return found;
    i = skip_space(s, i + 1);
  }
  return found;
}
// The first character of element `n` of the array that opens at s[i] ('[').
inline size_t find_element(std::string_view s, size_t i, size_t n) {
  if (i >= s.size() || s[i] != '[') return npos;
  i = skip_space(s, i + 1);
  for (size_t k = 0; i < s.size() && s[i] != ']'; ++k) {
    if (k == n) return i;
    i = skip_value(s, i);
    if (i == npos) return npos;
    i = skip_space(s, i);
    if (i >= s.size() || s[i] != ',') return npos;
    i = skip_space(s, i + 1);
  }
  return npos;
}

}  // namespace json_text

class JsonReader {
 public:
  using json = nlohmann::ordered_json;
  // `source`: the file's text, for a reader of its top-level object (a hand-written file's keys): an
  // error about a key the file gives then names its line, "FILE:LINE: KEY: ...". Readers of the
  // records inside (child, element) name their own lines too: "FILE:LINE: results[2]: KEY: ...",
  // the key's line, else (a key missing, or the record as a whole) the record's first line.
  JsonReader(const json& j, std::string where, std::string_view source = {})
      : j_(j), where_(std::move(where)), source_(source) {
    if (!j_.is_object()) fail("", "expected an object, got {}", j_.dump());
  }
  // The object under `key` (e.g. "device"), named "KEY" in errors.
  JsonReader child(const std::string& key) const {
    return JsonReader(at(key), *this, key, value_offset(key));
  }
  // Element `i` of the array under `key` (e.g. results[2]), named "KEY[I]" in errors.
  JsonReader element(const std::string& key, size_t i) const {
    const json& array = at(key);
    if (!array.is_array() || i >= array.size()) fail(key, "expected an array with an element {}", i);
    const size_t value = value_offset(key);
    return JsonReader(array[i], *this, fmt::format("{}[{}]", key, i),
                      value == json_text::npos ? value : json_text::find_element(source_, value, i));
  }
  template <typename... A>
  [[noreturn]] void fail(const std::string& key, fmt::format_string<A...> f, A&&... a) const {
    size_t line = key_line(key);
    if (line == 0) line = own_line_;
    throw InputError(fmt::format("{}{}{}{}{}{}: {}", where_, line ? fmt::format(":{}", line) : "",
                                 context_.empty() ? "" : ": ", context_, key.empty() ? "" : ": ", key,
                                 fmt::format(f, std::forward<A>(a)...)));
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
  // The file, with the record's path inside it when this reads a record ("f.json: results[2]").
  std::string where() const { return context_.empty() ? where_ : fmt::format("{}: {}", where_, context_); }


 private:
  // A record inside `parent`'s object whose text starts at `offset` of the parent's source (npos:
  // unknown, then the record's errors name no line).
  JsonReader(const json& j, const JsonReader& parent, const std::string& name, size_t offset)
      : j_(j), where_(parent.where_), context_(parent.context_.empty() ? name : parent.context_ + ": " + name) {
    if (offset != json_text::npos && offset < parent.source_.size()) {
      const size_t end = json_text::skip_value(parent.source_, offset);
      if (end != json_text::npos) {
        source_ = parent.source_.substr(offset, end - offset);
        first_line_ = parent.line_at(offset);
        own_line_ = first_line_;
      }
    }
    if (!j_.is_object()) fail("", "expected an object, got {}", j_.dump());
  }
  // The 1-based line of source_[offset].
  size_t line_at(size_t offset) const {
    return first_line_ + size_t(std::count(source_.begin(), source_.begin() + std::ptrdiff_t(offset), '\n'));
  }
  // Where this object opens in source_ (after spaces and a UTF-8 byte order mark), npos if unknown.
  size_t object_start() const {
    size_t i = source_.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
    i = json_text::skip_space(source_, i);
    return i < source_.size() && source_[i] == '{' ? i : json_text::npos;
  }
  size_t value_offset(const std::string& key) const {
    const size_t start = object_start();
    return start == json_text::npos ? start : json_text::find_member(source_, start, key).value;
  }
  // The line of `"key":` among this object's own keys in the source (not a key of a nested record,
  // nor a key's name inside a string value), 0 when unknown.
  size_t key_line(const std::string& key) const {
    if (source_.empty() || key.empty()) return 0;
    const size_t start = object_start();
    if (start == json_text::npos) return 0;
    const size_t name = json_text::find_member(source_, start, key).name;
    return name == json_text::npos ? 0 : line_at(name);
  }
  const json& j_;
  std::string where_, context_;  // the file; the record's path in it ("results[2]", "device"), "" at the top
  std::string_view source_;      // this object's text (empty: unknown)
  size_t first_line_ = 1;        // the line source_ starts on
  size_t own_line_ = 0;          // a record's first line, named when no key's line is (0: the top level)
};

}  // namespace tpusim::gpu
