// fuzz_decode: the input is a sequence of 16-byte instruction words (a trailing partial word is
// ignored). Each word goes through isa::decode; a word it accepts must
//   - encode back to exactly the same 16 bytes, and
//   - print (format_instruction) as a line that assembles back to the same instruction.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "isa/assembler.h"
#include "isa/disassembler.h"
#include "isa/error.h"
#include "isa/instruction.h"
#include "tests/fuzz/fuzz_common.h"

using namespace tpusim;
using tpusim::fuzz::finding;
using tpusim::fuzz::hex;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::guarded("fuzz_decode", [&] {
    for (size_t at = 0; at + isa::kInstructionBytes <= size; at += isa::kInstructionBytes) {
      const std::span<const uint8_t, isa::kInstructionBytes> word(data + at, isa::kInstructionBytes);
      isa::Instruction inst;
      try {
        inst = isa::decode(word, "fuzz");
      } catch (const InputError&) {
        continue;  // rejected: the expected outcome for most words
      }
      isa::Word back;
      try {
        back = isa::encode(inst);
      } catch (const InputError& e) {
        finding("decode accepted %s but encode rejects it: %s", hex(word).c_str(), e.what());
      }
      if (!std::equal(back.begin(), back.end(), word.begin()))
        finding("encode(decode(w)) != w\n  w:    %s\n  back: %s", hex(word).c_str(), hex(back).c_str());

      const std::string line = isa::format_instruction(inst);
      isa::Program p;
      try {
        p = isa::assemble(line + "\n", "line.s", "/nonexistent/tpusim-fuzz");
      } catch (const InputError& e) {
        finding("format_instruction of %s gives '%s', which does not assemble: %s", hex(word).c_str(),
                line.c_str(), e.what());
      }
      if (p.code.size() != 1 || p.code[0] != inst)
        finding("'%s' (from %s) assembles to a different instruction", line.c_str(), hex(word).c_str());
    }
  });
}
