// The machine a user described with --arch/--set (or Python's arch=/set=), validated with a message
// that names what the user gave: the --set that gave a value out of range or breaking a rule
// (`--set array_rows=0: array_rows = 0 must be at least 1`), else the machine as the sets made it
// (`--set made machine tpu-v1 array_rows=300: ub_bytes = 25165824 is not a multiple of ...`), not
// the preset it started from (sim::validate's "architecture 'tpu-v1': ..."). Shared by tpusim run,
// compile, debug, validate, compare and the Python module.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json_fwd.hpp"
#include "sim/arch.h"

namespace tpusim::tools {

// A value the user gave: KEY=VALUE and the option it came from ("--set"; the Python module's
// "arch" for a dict of parameters, "set" for its overrides).
struct GivenValue {
  std::string option, assignment;
};

// sim::validate(arch), its InputError rephrased as above when `given` (in the order applied) is not
// empty, naming the option of the value the message is about ("arch array_cols=5000: ..."), or, for
// a rule broken between parameters, every option that gave one ("arch and set made machine ...");
// without values it rethrows sim::validate's error as it is.
void validate_machine(const sim::Arch& arch, const std::vector<GivenValue>& given);
// The same with every value from `option` (tpusim's "--set").
void validate_machine(const sim::Arch& arch, const std::vector<std::string>& sets,
                      std::string_view option = "--set");

// The machine a program was compiled or written for, from its `.arch` (the preset it names, then
// every parameter it lists; tpu-v1 when it has none). A name that is not a preset is taken only
// with the parameters that differ from tpu-v1 (a compiled program lists them); a bare unknown name
// throws InputError naming `source` and asking for --arch FILE. Shared by tpusim run, sweeps of
// programs and the Python module, so each gives a program the same machine.
sim::Arch program_machine(const nlohmann::json& program_arch, const std::string& source);

}  // namespace tpusim::tools
