// validate_machine (machine_check.h).
#include "tools/machine_check.h"

#include <fmt/format.h>

#include "isa/error.h"
#include "nlohmann/json.hpp"

namespace tpusim::tools {

void validate_machine(const sim::Arch& arch, const std::vector<std::string>& sets, std::string_view option) {
  try {
    sim::validate(arch);
  } catch (const InputError& e) {
    if (sets.empty()) throw;
    std::string why = e.what();
    if (const std::string head = fmt::format("architecture '{}': ", arch.name); why.starts_with(head))
      why.erase(0, head.size());
    // The last --set of the key the message is about ("KEY = VALUE ..."): the value it names.
    for (auto s = sets.rbegin(); s != sets.rend(); ++s)
      if (const std::string key = s->substr(0, s->find('=')); why.starts_with(key + " = "))
        throw InputError(fmt::format("{} {}: {}", option, *s, why));
    throw InputError(fmt::format("{} made machine {}: {}", option, sim::machine_name(arch), why));
  }
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
