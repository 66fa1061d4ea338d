// validate_machine (machine_check.h).
#include "tools/machine_check.h"

#include <fmt/format.h>

#include "isa/error.h"

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

}  // namespace tpusim::tools
