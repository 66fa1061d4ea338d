// Machines named by what differs from their preset (sim/arch.h, machine_name).
#include <fmt/format.h>

#include "isa/error.h"
#include "sim/arch.h"

namespace tpusim::sim {

std::string machine_name(const Arch& arch) {
  Arch base;
  try {
    base = arch_preset(arch.name);
  } catch (const InputError&) {
    return arch.name;  // an --arch file's machine: its name is its own
  }
  const nlohmann::json mine = arch_to_json(arch), theirs = arch_to_json(base);
  std::string out = arch.name;
  for (const ParamInfo& p : arch_params()) {
    const std::string key(p.name);
    if (mine[key] == theirs[key]) continue;
    const nlohmann::json& v = mine[key];
    out += fmt::format(" {}={}", key, v.is_number_float() ? fmt::format("{}", v.get<double>()) : v.dump());
  }
  return out;
}

}  // namespace tpusim::sim
