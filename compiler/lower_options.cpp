#include "compiler/lower_options.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "isa/error.h"

namespace tpusim::compiler {
namespace {

std::string known_keys() {
  std::string s;
  for (const MapperSwitch& m : kMapperSwitches) s += fmt::format("{}{}", s.empty() ? "" : ", ", m.key);
  return s;
}

const MapperSwitch* find(std::string_view key) {
  for (const MapperSwitch& m : kMapperSwitches)
    if (m.key == key) return &m;
  return nullptr;
}

// Whether a switch given as `options` says it should be recorded (mapper_to_json, describe).
bool recorded(const LowerOptions& options, const MapperSwitch& m) {
  const std::optional<bool>& v = options.*(m.field);
  return v && (*v != m.default_on || m.arch_default);
}

}  // namespace

bool switch_on(const LowerOptions& options, const MapperSwitch& m, const sim::Arch& arch) {
  if (const std::optional<bool>& v = options.*(m.field)) return *v;
  return m.arch_default ? arch.*(m.arch_default) != 0 : m.default_on;
}

bool concat_inplace(const LowerOptions& options) {
  for (const MapperSwitch& m : kMapperSwitches)
    if (m.field == &LowerOptions::concat_inplace) return options.concat_inplace.value_or(m.default_on);
  return false;
}

LowerOptions resolve(const LowerOptions& options, const sim::Arch& arch) {
  LowerOptions r = options;  // (and what is not a switch)
  for (const MapperSwitch& m : kMapperSwitches) r.*(m.field) = switch_on(options, m, arch);
  return r;
}

void set_mapper_switch(LowerOptions& options, std::string_view key, std::string_view value, std::string_view where) {
  const MapperSwitch* m = find(key);
  if (!m)
    throw InputError(fmt::format("{}: '{}': unknown mapper switch; expected one of {}", where, key, known_keys()));
  if (value == "on" || value == "true" || value == "1") options.*(m->field) = true;
  else if (value == "off" || value == "false" || value == "0") options.*(m->field) = false;
  else
    throw InputError(fmt::format("{}: {}: '{}': expected on or off (true/false, 1/0)", where, key, value));
}

void set_mapper_switch(LowerOptions& options, std::string_view key_value, std::string_view where) {
  const size_t eq = key_value.find('=');
  if (eq == std::string_view::npos)
    throw InputError(fmt::format("{}: '{}': expected KEY=on|off with KEY one of {}", where, key_value, known_keys()));
  set_mapper_switch(options, key_value.substr(0, eq), key_value.substr(eq + 1), where);
}

nlohmann::json mapper_to_json(const LowerOptions& options) {
  nlohmann::json j = nlohmann::json::object();
  for (const MapperSwitch& m : kMapperSwitches)
    if (recorded(options, m)) j[std::string(m.key)] = *(options.*(m.field));
  return j;
}

LowerOptions mapper_from_json(const nlohmann::json& j, std::string_view where) {
  LowerOptions o;
  if (!j.is_object()) throw InputError(fmt::format("{}: expected an object of mapper switches", where));
  for (const auto& [key, value] : j.items()) {
    if (!value.is_boolean())
      throw InputError(fmt::format("{}: {}: {}: expected true or false", where, key, value.dump()));
    set_mapper_switch(o, key, value.get<bool>() ? "on" : "off", where);
  }
  return o;
}

namespace {

// "KEY=on|off, ..." for the switches `which` picks.
template <typename Pick>
std::string describe_if(const LowerOptions& options, Pick which) {
  std::string s;
  for (const MapperSwitch& m : kMapperSwitches)
    if (which(m)) s += fmt::format("{}{}={}", s.empty() ? "" : ", ", m.key, *(options.*(m.field)) ? "on" : "off");
  return s;
}

}  // namespace

std::string describe(const LowerOptions& options) {
  return describe_if(options, [&](const MapperSwitch& m) { return recorded(options, m); });
}

std::string describe_given(const LowerOptions& options) {
  return describe_if(options, [&](const MapperSwitch& m) { return (options.*(m.field)).has_value(); });
}

}  // namespace tpusim::compiler
