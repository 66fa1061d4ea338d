// fuzz_seeds OUT_DIR [SOURCE.s...]: writes the fuzzers' seed corpora and the assembler dictionary,
// derived at run time from the ISA table and the given assembly sources (scripts/fuzz.sh passes
// workloads/asm/*.s), so no binary seeds are committed and nothing repeats the table by hand:
//   OUT_DIR/decode/    one instruction word per opcode, and each program's code section
//   OUT_DIR/simulate/  each program's code section behind fuzz_simulate's two machine bytes
//   OUT_DIR/arch/      --arch files: the preset, a small machine, every parameter at an end of
//                      its range, and values beyond the ranges
//   OUT_DIR/program/   each source assembled (.tpu, when at most 64 KiB), a copy with the weight
//                      image and input data cut down, and a program with every opcode once
//   OUT_DIR/assemble/  each source, its disassembly, and one line per opcode
//   OUT_DIR/assemble.dict  libFuzzer dictionary: mnemonics, operands, values, directives
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "isa/assembler.h"
#include "isa/disassembler.h"
#include "isa/error.h"
#include "isa/program.h"

namespace fs = std::filesystem;
using namespace tpusim;

namespace {

// scripts/fuzz.sh runs fuzz_program with -max_len=65536; larger seeds would be cut short.
constexpr size_t kMaxProgramSeed = 65536;

void write(const fs::path& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw InputError(fmt::format("{}: cannot write", path.string()));
}

void write(const fs::path& path, const std::vector<uint8_t>& bytes) {
  write(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

// Every required operand at its minimum, the others at their defaults: a valid instruction.
isa::Instruction minimal(const isa::OpcodeSpec& s) {
  isa::Instruction inst = isa::make_instruction(s.opcode);
  for (const isa::Operand& o : s.operands)
    if (!o.default_value) inst[o.field] = o.min;
  return inst;
}

std::string dict_entry(std::string_view word) {
  std::string out = "\"";
  for (char c : word) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fuzz_seeds OUT_DIR [SOURCE.s...]\n");
    return 2;
  }
  try {
    const fs::path out = argv[1];
    for (const char* sub : {"decode", "program", "assemble", "simulate", "arch"})
      fs::create_directories(out / sub);
    // fuzz_arch: the preset and a small machine, as --arch files.
    write(out / "arch" / "tpu-v1.json", std::string(R"({"name": "tpu-v1", "base": "tpu-v1"})"));
    write(out / "arch" / "small.json",
          std::string(R"({"name": "small", "array_rows": 16, "array_cols": 8, "ub_bytes": "64KiB", )"
                      R"("acc_entries": 256, "weight_mem_gbps": 12.5, "host_latency_cycles": 0})"));
    // Every parameter at an end of its range (docs/arch.md), and one beyond.
    write(
        out / "arch" / "limits.json",
        std::string(
            R"({"name": "edge", "array_rows": 4096, "array_cols": 1, "clock_mhz": 1, "weight_mem_gbps": 0.001, )"
            R"("host_gbps": 1000000, "weight_mem_latency_cycles": 1000000000, "host_latency_cycles": 0, )"
            R"("activation_latency_cycles": 1000000000, "issue_cycles": 1000000, "acc_entries": 65536, )"
            R"("ub_bytes": "64GiB", "weight_fifo_tiles": 1024, "station_queue_depth": 1, "activation_lanes": 1})"));
    write(
        out / "arch" / "beyond.json",
        std::string(
            R"({"host_latency_cycles": 18446744073709551615, "weight_mem_gbps": 1e-12, "clock_mhz": 1e-300})"));

    // One of every opcode.
    isa::Program ops;
    ops.model = "every-opcode";
    std::string ops_text;
    for (const isa::OpcodeSpec& s : isa::kOpcodes) {
      const isa::Instruction inst = minimal(s);
      const isa::Word w = isa::encode(inst);
      write(out / "decode" / fmt::format("op-{}.bin", s.mnemonic), std::vector<uint8_t>(w.begin(), w.end()));
      ops.code.push_back(inst);
      ops_text += isa::format_instruction(inst) + "\n";
    }
    write(out / "program" / "every-opcode.tpu", isa::write_program(ops));
    write(out / "assemble" / "every-opcode.s", ops_text);

    for (int i = 2; i < argc; ++i) {
      const fs::path src = argv[i];
      const std::string stem = src.stem().string();
      std::ifstream f(src, std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      write(out / "assemble" / (stem + ".s"), text);
      isa::Program p;
      try {
        p = isa::assemble_file(src);
      } catch (const InputError& e) {  // the tests report broken sources; fuzzing goes on without
        std::fprintf(stderr, "fuzz_seeds: warning: %s does not assemble, only its text is a seed:\n%s\n",
                     src.string().c_str(), e.what());
        continue;
      }
      const std::vector<uint8_t> bytes = isa::write_program(p);
      if (bytes.size() <= kMaxProgramSeed) write(out / "program" / (stem + ".tpu"), bytes);
      std::vector<uint8_t> code;
      for (const isa::Instruction& inst : p.code) {
        const isa::Word w = isa::encode(inst);
        code.insert(code.end(), w.begin(), w.end());
      }
      write(out / "decode" / (stem + ".code.bin"), code);
      // fuzz_simulate: a shape byte, a depths byte, then the code (on its small machine).
      std::vector<uint8_t> sim_seed = {0x10, 0x05};
      sim_seed.insert(sim_seed.end(), code.begin(), code.end());
      write(out / "simulate" / (stem + ".bin"), sim_seed);
      sim_seed[1] = 0x35;  // the same on 1e9-cycle latencies and 1 MB/s memories (fuzz_simulate)
      write(out / "simulate" / (stem + ".slow.bin"), sim_seed);
      write(out / "assemble" / (stem + ".listing.s"), isa::disassemble(p));
      // A small variant, so that mutations land in the code and manifest rather than the data.
      if (p.weights.size() > 256) p.weights.resize(256);
      std::erase_if(p.symbols, [&](const isa::Symbol& s) {
        return s.space == "weights" && s.addr + s.size > p.weights.size();
      });
      for (isa::HostRegion& r : p.host_regions)
        if (r.init.size() > 256) r.init.clear();
      try {
        write(out / "program" / (stem + ".slim.tpu"), isa::write_program(p));
      } catch (const InputError& e) {
        std::fprintf(stderr, "fuzz_seeds: warning: no small variant of %s: %s\n", stem.c_str(), e.what());
      }
    }

    // The dictionary: words of the assembly language.
    std::set<std::string> words;
    for (const isa::OpcodeSpec& s : isa::kOpcodes) words.insert(std::string(s.mnemonic));
    for (const isa::FieldSpec& f : isa::kFields) {
      words.insert(std::string(f.name));
      if (f.kind != isa::FieldKind::flag) words.insert(std::string(f.name) + "=");
      for (const isa::EnumValue& v : f.values) words.insert(std::string(v.name));
    }
    for (std::string_view d : isa::kDirectives) words.insert(std::string(d));
    // Directive keywords and literal forms live in the assembler's parser (docs/assembly.md).
    for (const char* w :
         {"init=", "zero",  "random(", "file(\"", "json \"", "dtype=", "shape=",       "scale=",  "int8",
          "uint8", "int32", ".size",   ".end",    "0x",      "0b",     "<<",           ">>",      "e-",
          "E+",    ".5",    "-0.",     "null",    "true",    "\\\"",   "json \"{\\\"", "\"key\"="})
      words.insert(w);
    std::string dict = "# generated by fuzz_seeds from the ISA table; libFuzzer -dict= format\n";
    for (const std::string& w : words) dict += dict_entry(w);
    write(out / "assemble.dict", dict);
    std::printf("fuzz_seeds: wrote seeds for %d source(s) and %zu dictionary words to %s\n", argc - 2,
                words.size(), out.string().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
