// Artefacts generated from the ISA table: docs/isa.md and the SystemVerilog package
// hw/rtl/tpusim_isa_pkg.sv. Tests fail when the committed files differ from these outputs;
// regenerate with `build/tpusim isa --markdown > docs/isa.md` and `--sv`.
#pragma once

#include <string>

namespace tpusim::isa {

std::string isa_markdown();
std::string isa_sv_package();

}  // namespace tpusim::isa
