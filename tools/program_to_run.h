// What `run` and `debug` simulate (tools/run.cpp): a program loaded from a .tpu or .s file, or
// compiled from a model (description, topology or ONNX) for the resolved architecture.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/compile.h"
#include "isa/program.h"
#include "sim/arch.h"

namespace tpusim::tools {

// A program to simulate: loaded (.tpu, .s) or compiled from a model (.toml, .csv) for the
// resolved architecture. `verb` names the subcommand in messages ("run", "debug").
struct ProgramToRun {
  std::optional<compiler::Compiled> compiled;  // models only
  isa::Program loaded;                         // programs only
  sim::Arch arch;
  const isa::Program& program() const { return compiled ? compiled->program : loaded; }
};
ProgramToRun load_program_or_model(std::string_view verb, const std::string& path, const std::string& arch_file,
                                   const std::vector<std::string>& sets, uint64_t batch);
ProgramToRun load_program_or_model(std::string_view verb, const std::string& path, const std::string& arch_file,
                                   const std::vector<std::string>& sets, const compiler::LoadOptions& options);
// The same into `r`; a model calls `quantized` (when given) before lowering, with r.compiled in
// place (compiler::compile_file_into): r must not move until what it started has finished.
void load_program_or_model(ProgramToRun& r, std::string_view verb, const std::string& path,
                           const std::string& arch_file, const std::vector<std::string>& sets,
                           const compiler::LoadOptions& options,
                           const std::function<void(const compiler::Compiled&)>& quantized);

// The files a command writes (FLAG, path), checked before any work against the files it reads
// (run, compile, debug, view: the program or model, with the .npy files a model's description
// names, the architecture file, debug's script, run's --input): one that names an input is refused with io::refuse_input_as_output's message ("FLAG PATH: is the input INPUT;
// choose another output (tpusim never overwrites its inputs)"). Empty paths and "-" are skipped.
void refuse_outputs_over_inputs(std::initializer_list<std::pair<std::string_view, const std::string*>> outputs,
                                const std::vector<std::string>& inputs);

// Tries to write `path` now, so that a long run does not end in "cannot write": a temporary file
// beside it, removed at once (io::OutputFile); throws "PATH: cannot write: REASON". Skips "",
// "-" and an existing FIFO or device: opening one is an event for its reader (a FIFO's reader
// would see the end). The real file is opened after the work, so that an interrupted run leaves
// no temporary file (run, debug: the traces; view: the page).
void try_output(const std::string& path);

}  // namespace tpusim::tools
