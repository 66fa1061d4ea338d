// tpusim run and tpusim arch: simulate a program, list the architecture parameters.
#include <fmt/format.h>

#include <filesystem>

#include "isa/assembler.h"
#include "isa/error.h"
#include "sim/arch.h"
#include "sim/machine.h"
#include "sim/reference.h"
#include "sim/report.h"
#include "tools/commands.h"

namespace fs = std::filesystem;

namespace tpusim::tools {

namespace {

// A .tpu container, or assembly source (.s) assembled on the fly.
isa::Program load_any(const std::string& path) {
  if (fs::path(path).extension() == ".s") return isa::assemble_file(path);
  if (fs::path(path).extension() != ".tpu")
    throw InputError(
        fmt::format("{}: expected a program (.tpu) or assembly source (.s); compiling model "
                    "descriptions needs the compiler, which is not built yet",
                    path));
  return isa::load_program(path);
}

// --arch FILE, else the architecture the program names (`.arch "NAME", key=value...`); then --set.
sim::Arch resolve_arch(const isa::Program& p, const RunArgs& r) {
  sim::Arch arch;
  if (!r.arch_file.empty()) {
    arch = sim::load_arch_file(r.arch_file);
  } else {
    const std::string name = p.arch.value("name", std::string("tpu-v1"));
    try {
      arch = sim::arch_preset(name);
    } catch (const InputError& e) {
      throw InputError(
          fmt::format("{}: the program was written for architecture '{}', which is not a preset ({}); "
                      "describe it with --arch FILE",
                      r.program, name, e.what()));
    }
    for (const auto& [key, value] : p.arch.items()) {
      if (key == "name") continue;
      const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
      sim::set_param(arch, key, text, fmt::format("{}: .arch", r.program));
    }
  }
  for (const std::string& s : r.sets) sim::apply_set(arch, s);
  sim::validate(arch);
  return arch;
}

}  // namespace

int cmd_run(const RunArgs& r) {
  if (r.report_schema) {
    write_text("-", sim::report_markdown());
    return 0;
  }
  if (r.program.empty()) throw InputError("run: a program is required (see tpusim run --help)");
  const isa::Program p = load_any(r.program);
  const sim::Arch arch = resolve_arch(p, r);
  sim::RunOptions opt;
  opt.engine = sim::parse_engine(r.engine);
  opt.max_cycles = r.max_cycles;
  sim::RunResult result;
  try {
    result = sim::simulate(p, arch, opt);
  } catch (const sim::SimError& e) {
    throw InputError(fmt::format("{}: {}", r.program, e.what()));
  }
  sim::ReportInput in{&p, &arch, opt.engine, &result, std::nullopt};
  std::string why;
  if (result.state && !r.no_check)
    in.output_matches_reference = sim::same_memories(*result.state, sim::run_reference(p, arch), &why);
  const nlohmann::ordered_json report = sim::make_report(in);
  if (!r.report.empty()) {
    write_text(r.report, report.dump(2) + "\n");
    fmt::print(stderr, "{}: {} cycles on {} ({} engine) -> {}\n", r.program, result.cycles, arch.name,
               r.engine, r.report);
  } else {
    write_text("-", sim::format_report(report));
  }
  if (in.output_matches_reference == false) {
    fmt::print(stderr, "{}: memories differ from the reference executor: {}\n", r.program, why);
    return 1;
  }
  return 0;
}

int cmd_arch(bool markdown, bool json) {
  if (markdown) write_text("-", sim::arch_markdown());
  else if (json) write_text("-", sim::arch_to_json(sim::Arch{}).dump(2) + "\n");
  else
    for (const sim::ParamInfo& p : sim::arch_params())
      fmt::print("{:<28}{:>14} {:<15}{}\n", p.name, p.default_text, p.unit, p.meaning);
  return 0;
}

}  // namespace tpusim::tools
