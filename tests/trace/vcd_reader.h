// A strict reader of the VCD files tpusim writes, for the tests: the header ($date, $version,
// $comment, $timescale, nested $scope/$var/$upscope, $enddefinitions), then #time stamps (strictly
// increasing), $dumpvars and value changes (scalars 0/1/x/z + id, vectors b... id) of declared ids
// no wider than declared. Anything else throws, naming the token.
#pragma once

#include <cstdint>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpusim::test {

struct Vcd {
  uint64_t period_ps = 0;  // from the "one cycle = N ps" comment
  uint64_t first_time = 0, end_time = 0;
  std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> changes;  // path -> (time, value)
  std::map<std::string, int> widths;                                             // path -> bits

  // The value of `path` at `time` (the last change at or before it).
  std::string at(const std::string& path, uint64_t time) const {
    const auto& c = changes.at(path);
    std::string v = "?";
    for (const auto& [t, value] : c) {
      if (t > time) break;
      v = value;
    }
    return v;
  }
};

inline std::string bits(uint64_t v) {
  std::string s;
  do {
    s.insert(s.begin(), char('0' + (v & 1)));
    v >>= 1;
  } while (v);
  return s;
}

inline int64_t signed_value(const std::string& b, int width) {
  uint64_t v = 0;
  for (char c : b) v = v << 1 | uint64_t(c == '1');
  if (b.size() == size_t(width) && b[0] == '1') return int64_t(v) - (int64_t{1} << width);
  return int64_t(v);
}

inline Vcd read_vcd(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> tokens;
  for (std::string t; in >> t;) tokens.push_back(t);
  size_t k = 0;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("VCD token " + std::to_string(k) + " '" +
                             (k < tokens.size() ? tokens[k] : "EOF") + "': " + why);
  };
  auto next = [&]() -> const std::string& {
    if (k >= tokens.size()) fail("unexpected end");
    return tokens[k++];
  };
  auto expect_end = [&] {
    if (next() != "$end") fail("expected $end");
  };
  Vcd vcd;
  std::vector<std::string> scope;
  std::map<std::string, std::string> id_path;
  bool timescale = false;
  for (;;) {
    const std::string t = next();
    if (t == "$date" || t == "$version" || t == "$comment") {
      for (std::string w; (w = next()) != "$end";)
        if (t == "$comment" && w == "=") vcd.period_ps = std::stoull(tokens[k]);
    } else if (t == "$timescale") {
      if (next() != "1ps") fail("expected 1ps");
      expect_end();
      timescale = true;
    } else if (t == "$scope") {
      if (next() != "module") fail("expected a module scope");
      scope.push_back(next());
      expect_end();
    } else if (t == "$upscope") {
      if (scope.empty()) fail("$upscope outside any scope");
      scope.pop_back();
      expect_end();
    } else if (t == "$var") {
      if (next() != "wire") fail("expected wire");
      const int width = std::stoi(next());
      const std::string id = next(), name = next();
      std::string path;
      for (const std::string& s : scope) path += s + ".";
      path += name;
      if (tokens[k] != "$end") {
        if (tokens[k] != "[" + std::to_string(width - 1) + ":0]") fail("range does not match the width");
        ++k;
      }
      expect_end();
      if (id_path.count(id) || vcd.widths.count(path)) fail("declared twice");
      if (scope.empty()) fail("$var outside any scope");
      id_path[id] = path;
      vcd.widths[path] = width;
      vcd.changes[path];
    } else if (t == "$enddefinitions") {
      expect_end();
      break;
    } else {
      fail("unexpected in the header");
    }
  }
  if (!scope.empty()) fail("unclosed $scope");
  if (!timescale) fail("no $timescale");
  bool have_time = false;
  uint64_t now = 0;
  while (k < tokens.size()) {
    const std::string t = next();
    if (t == "$dumpvars" || t == "$end") continue;
    if (t[0] == '#') {
      const uint64_t time = std::stoull(t.substr(1));
      if (have_time && time <= now) fail("time does not increase");
      if (!have_time) vcd.first_time = time;
      have_time = true;
      now = time;
      continue;
    }
    if (!have_time) fail("value before the first time stamp");
    std::string value, id;
    if (t[0] == 'b') {
      value = t.substr(1);
      id = next();
    } else {
      value = t.substr(0, 1);
      id = t.substr(1);
    }
    if (value.empty() || value.find_first_not_of("01xz") != std::string::npos) fail("bad value");
    const auto p = id_path.find(id);
    if (p == id_path.end()) fail("undeclared id " + id);
    if (int(value.size()) > vcd.widths[p->second]) fail("value wider than " + p->second);
    if (t[0] != 'b' && vcd.widths[p->second] != 1) fail("scalar value for a vector");
    vcd.changes[p->second].push_back({now, value});
  }
  vcd.end_time = now;
  return vcd;
}

}  // namespace tpusim::test
