// validate_machine (machine_check.h).
#include "tools/machine_check.h"

#include <fmt/format.h>

#include "isa/error.h"
#include "nlohmann/json.hpp"

namespace tpusim::tools {

void validate_machine(const sim::Arch& arch, const std::vector<std::string>& sets, std::string_view option) {
  if (sets.empty()) return sim::validate(arch);
  const auto v = sim::arch_violation(arch);
  if (!v) return;
  // The last --set of the key the message is about: the value it names.
  for (auto s = sets.rbegin(); s != sets.rend(); ++s)
    if (s->substr(0, s->find('=')) == v->key) throw InputError(fmt::format("{} {}: {}", option, *s, v->text));
  throw InputError(fmt::format("{} made machine {}: {}", option, sim::machine_name(arch), v->text));
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
