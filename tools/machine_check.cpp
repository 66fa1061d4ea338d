// validate_machine (machine_check.h).
#include "tools/machine_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "isa/error.h"
#include "nlohmann/json.hpp"

namespace tpusim::tools {

void validate_machine(const sim::Arch& arch, const std::vector<GivenValue>& given) {
  if (given.empty()) return sim::validate(arch);
  const auto v = sim::arch_violation(arch);
  if (!v) return;
  // The last value given for the key the message is about: the value it names.
  for (auto g = given.rbegin(); g != given.rend(); ++g)
    if (g->assignment.substr(0, g->assignment.find('=')) == v->key)
      throw InputError(fmt::format("{} {}: {}", g->option, g->assignment, v->text));
  std::vector<std::string_view> options;  // each option that gave a value, in order, once
  for (const GivenValue& g : given)
    if (std::find(options.begin(), options.end(), g.option) == options.end()) options.push_back(g.option);
  throw InputError(
      fmt::format("{} made machine {}: {}", fmt::join(options, " and "), sim::machine_name(arch), v->text));
}

void validate_machine(const sim::Arch& arch, const std::vector<std::string>& sets, std::string_view option) {
  std::vector<GivenValue> given;
  for (const std::string& s : sets) given.push_back({std::string(option), s});
  validate_machine(arch, given);
}

sim::Arch program_machine(const nlohmann::json& program_arch, const std::string& source) {
  sim::Arch arch;
  if (program_arch.empty()) return arch;
  const std::string name = program_arch.value("name", std::string("tpu-v1"));
  try {
    arch = sim::arch_preset(name);
  } catch (const InputError& e) {
    // A compiled program carries every parameter that differs from tpu-v1 when its architecture
    // is not a preset.
    if (program_arch.size() < 2)
      throw InputError(fmt::format("{}: the program was written for architecture '{}', which is not a preset ({}); "
                                   "describe it with --arch FILE",
                                   source, name, e.what()));
    arch.name = name;
  }
  for (const auto& [key, value] : program_arch.items()) {
    if (key == "name") continue;
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    sim::set_param(arch, key, text, fmt::format("{}: .arch", source));
  }
  return arch;
}

}  // namespace tpusim::tools
